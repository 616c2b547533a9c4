"""bootstrap_ci: resamples units, shares one draw across arrays, handles undefined resamples."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from jurybox.calibration import (
    InputDataError,
    Stat,
    bootstrap_ci,
    krippendorff_alpha,
    mean_absolute_error,
    spearman,
)


def test_percentile_ci_matches_scipy_bootstrap_for_the_mean() -> None:
    # Independent check: scipy.stats.bootstrap (percentile method) on the same data.
    rng = np.random.default_rng(1)
    x = rng.exponential(size=200)
    ours = bootstrap_ci(lambda v: float(np.mean(v)), x, n_resamples=4000, seed=3)
    theirs = scipy.stats.bootstrap(
        (x,), np.mean, n_resamples=4000, method="percentile", random_state=3
    ).confidence_interval
    assert ours.ci[0] == pytest.approx(theirs.low, abs=0.02)
    assert ours.ci[1] == pytest.approx(theirs.high, abs=0.02)
    assert ours.value == pytest.approx(x.mean())


def test_ci_covers_truth_at_roughly_nominal_rate() -> None:
    rng = np.random.default_rng(7)
    hits = 0
    trials = 150
    for _ in range(trials):
        x = rng.normal(loc=1.0, size=80)
        stat = bootstrap_ci(lambda v: float(np.mean(v)), x, n_resamples=300, seed=None)
        hits += stat.ci[0] <= 1.0 <= stat.ci[1]
    assert 0.88 <= hits / trials <= 0.99


def test_same_draw_for_every_array_and_units_axis() -> None:
    # Perfectly agreeing raters stay perfectly agreeing in every resample only if rows are
    # resampled together (units along the last axis of the raters x units matrix).
    a = np.arange(30.0)
    data = np.vstack([a, a + 0.0])
    stat = bootstrap_ci(lambda m: krippendorff_alpha(m, "interval"), data, n_resamples=200)
    assert stat.value == pytest.approx(1.0)
    assert stat.ci == pytest.approx((1.0, 1.0))
    paired = bootstrap_ci(mean_absolute_error, a, a, n_resamples=100)
    assert paired.ci == (0.0, 0.0)


def test_mapping_statistics_get_their_own_cis() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=100)
    y = x + rng.normal(scale=0.3, size=100)
    out = bootstrap_ci(
        lambda a, b: {"rho": spearman(a, b), "mae": mean_absolute_error(a, b)},
        x,
        y,
        n_resamples=200,
    )
    assert set(out) == {"rho", "mae"}
    assert out["rho"].ci[0] < out["rho"].value < out["rho"].ci[1]
    assert out["mae"].details["n_resamples"] == 200


def test_undefined_resamples_are_counted_and_can_void_the_ci() -> None:
    # 2 distinct values among 12 units: many resamples are constant -> alpha undefined.
    data = np.vstack([np.r_[np.zeros(11), 1.0], np.r_[np.zeros(11), 1.0]])
    stat = bootstrap_ci(lambda m: krippendorff_alpha(m, "nominal"), data, n_resamples=300)
    assert stat.value == pytest.approx(1.0)
    undefined = stat.details["n_resamples_undefined"]
    assert 0 < undefined < 300
    assert (stat.ci is None) == (undefined > 150)


def test_undefined_point_estimate_keeps_reason() -> None:
    stat = bootstrap_ci(
        lambda m: krippendorff_alpha(m, "interval"), np.ones((2, 10)), n_resamples=20
    )
    assert isinstance(stat, Stat) and not stat.defined and stat.ci is None


def test_validation() -> None:
    with pytest.raises(InputDataError, match="number of units"):
        bootstrap_ci(mean_absolute_error, np.ones(3), np.ones(4))
    with pytest.raises(InputDataError, match="confidence"):
        bootstrap_ci(mean_absolute_error, np.ones(3), np.ones(3), confidence=1.5)
