"""Per-judge calibrators against scikit-learn and statsmodels."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from jurybox.calibration import (
    InputDataError,
    IsotonicCalibrator,
    NotFittedError,
    OrdinalCalibrator,
)
from jurybox.calibration.maps.calibrators import calibrator_from_dict

SCALE = [0, 1, 2, 3, 4]


def _judge_vs_human(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    human = rng.integers(0, 5, size=n).astype(float)
    judge = np.clip(0.5 * human + 1.8 + rng.normal(0, 0.5, size=n), 0, 4)  # compressed, biased
    return judge, human


def test_isotonic_matches_sklearn_predictions() -> None:
    x, y = _judge_vs_human()
    ours = IsotonicCalibrator(SCALE).fit(x, y)
    ref = IsotonicRegression(y_min=0, y_max=4, out_of_bounds="clip").fit(x, y)
    grid = np.linspace(-1, 5, 301)
    assert ours.predict(grid) == pytest.approx(ref.predict(grid), abs=1e-12)


def test_isotonic_round_and_nan_passthrough() -> None:
    x, y = _judge_vs_human()
    cal = IsotonicCalibrator(SCALE, output="round").fit(x, y)
    pred = cal.predict(np.array([0.0, 2.2, np.nan, 4.0]))
    assert np.isnan(pred[2])
    assert set(pred[~np.isnan(pred)]).issubset(SCALE)


def test_isotonic_reduces_error_of_biased_judge() -> None:
    x, y = _judge_vs_human(seed=1)
    xt, yt = _judge_vs_human(seed=2)
    cal = IsotonicCalibrator(SCALE).fit(x, y)
    assert np.mean(np.abs(cal.predict(xt) - yt)) < 0.8 * np.mean(np.abs(xt - yt))


def test_ordinal_matches_statsmodels_ordered_model() -> None:
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    x, y = _judge_vs_human(seed=3)
    ours = OrdinalCalibrator(SCALE, l2=0.0).fit(x, y)
    ref = OrderedModel(y.astype(int), x[:, None], distr="logit").fit(method="bfgs", disp=False)
    grid = np.linspace(0, 4, 9)
    ref_probs = np.asarray(ref.model.predict(ref.params, exog=grid[:, None]))
    assert ours.predict_proba(grid) == pytest.approx(ref_probs, abs=2e-4)
    assert ours.coef_ / ours.spread_ == pytest.approx(ref.params[0], rel=1e-3)


def test_ordinal_outputs_expected_or_mode() -> None:
    x, y = _judge_vs_human(seed=4)
    expected = OrdinalCalibrator(SCALE).fit(x, y).predict(np.array([1.0, 3.0]))
    mode = OrdinalCalibrator(SCALE, output="round").fit(x, y).predict(np.array([1.0, 3.0]))
    assert 0 <= expected[0] < expected[1] <= 4
    assert set(mode).issubset(SCALE)


def test_ordinal_unused_scale_point_stays_finite() -> None:
    x = np.array([0.0, 0.5, 1.0, 3.0, 3.5, 4.0])
    y = np.array([0.0, 0.0, 1.0, 3.0, 4.0, 4.0])  # 2 never used
    cal = OrdinalCalibrator(SCALE).fit(x, y)
    assert np.all(np.isfinite(cal.thresholds_))
    assert np.all(np.diff(cal.thresholds_) >= 0)


@pytest.mark.parametrize("cls", [IsotonicCalibrator, OrdinalCalibrator])
def test_roundtrip_through_plain_json(cls) -> None:
    x, y = _judge_vs_human(seed=5)
    cal = cls(SCALE).fit(x, y)
    restored = calibrator_from_dict(json.loads(json.dumps(cal.to_dict())))
    grid = np.linspace(0, 4, 17)
    assert restored.predict(grid) == pytest.approx(cal.predict(grid))


def test_unfitted_and_bad_input() -> None:
    with pytest.raises(NotFittedError):
        IsotonicCalibrator(SCALE).predict([1.0])
    with pytest.raises(NotFittedError):
        OrdinalCalibrator(SCALE).predict([1.0])
    with pytest.raises(InputDataError, match="at least 2"):
        IsotonicCalibrator(SCALE).fit([1.0, np.nan], [2.0, 3.0])
    with pytest.raises(InputDataError, match="on the scale"):
        OrdinalCalibrator(SCALE).fit([1.0, 2.0, 3.0], [0.5, 1.0, 2.0])
    with pytest.raises(InputDataError, match="output"):
        IsotonicCalibrator(SCALE, output="floor").fit([1.0, 2.0], [1.0, 2.0])  # type: ignore[arg-type]


def test_fit_returns_self_and_init_stores_hyperparameters_only() -> None:
    cal = IsotonicCalibrator(SCALE, output="round")
    assert not any(k.endswith("_") for k in vars(cal))
    x, y = _judge_vs_human()
    assert cal.fit(x, y) is cal
    assert any(k.endswith("_") for k in vars(cal))
