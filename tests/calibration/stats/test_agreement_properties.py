"""Property tests: our statistics against independent libraries on random small data.

krippendorff (alpha, all levels), scikit-learn (cohen_kappa_score), statsmodels
(fleiss_kappa), scipy.stats (pearson/spearman/kendall).
"""

from __future__ import annotations

import warnings

import krippendorff
import numpy as np
import pytest
import scipy.stats
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from jurybox.calibration import (
    cohen_kappa,
    fleiss_kappa,
    kendall,
    krippendorff_alpha,
    pearson,
    spearman,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@st.composite
def sparse_matrix(draw: st.DrawFn, continuous: bool) -> np.ndarray:
    raters = draw(st.integers(2, 6))
    units = draw(st.integers(2, 25))
    if continuous:
        elems = st.one_of(
            st.floats(0.0, 1e3, allow_nan=False, allow_subnormal=False),
            st.just(0.0),
            st.just(np.nan),
        )
    else:
        elems = st.one_of(st.integers(0, 4).map(float), st.just(np.nan))
    return draw(arrays(np.float64, (raters, units), elements=elems))


def _pairable_variation(data: np.ndarray) -> bool:
    """Alpha is defined: two or more pairable units (the package returns 0 for one) and
    some variation among their values."""
    m = (~np.isnan(data)).sum(axis=0)
    pairable = data[:, m >= 2]
    vals = pairable[~np.isnan(pairable)]
    return pairable.shape[1] >= 2 and np.ptp(vals) > 0


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
@pytest.mark.parametrize("continuous", [False, True])
def test_alpha_matches_krippendorff_package(level: str, continuous: bool) -> None:
    @SETTINGS
    @given(sparse_matrix(continuous))
    def check(data: np.ndarray) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # ours must not warn (no silent NaN arithmetic)
            ours = krippendorff_alpha(data, level)
        if not _pairable_variation(data):
            assert not ours.defined and ours.reason
            return
        with np.errstate(all="ignore"):
            # Alpha does not change when every value is scaled alike: the package is asked
            # about values scaled (exactly, by a power of two) to at most 1, where its own
            # squares of tiny values (1e-160) do not underflow.
            top = np.nanmax(np.abs(data))
            scaled = np.ldexp(data, -int(np.frexp(top)[1])) if top > 0 else data
            theirs = krippendorff.alpha(reliability_data=scaled, level_of_measurement=level)
        assume(np.isfinite(theirs))
        assert ours.defined
        assert ours.value == pytest.approx(theirs, rel=1e-9, abs=1e-9)

    check()


@pytest.mark.parametrize("offset", [1e3, 1e6, 1e9, 1e12])
def test_ratio_alpha_with_a_large_common_offset_matches_package(offset: float) -> None:
    # Ratio delta on scores sharing a large offset is tiny ((1/2e9)^2 at 1e9); the expected
    # disagreement used to be n(n-1) minus a sum of terms near 1, which cancelled.
    @SETTINGS
    @given(sparse_matrix(continuous=True), st.booleans())
    def check(data: np.ndarray, discrete: bool) -> None:
        data = (np.round(data / 250.0) if discrete else data) + offset
        assume(_pairable_variation(data))
        theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="ratio")
        ours = krippendorff_alpha(data, "ratio")
        assert ours.value == pytest.approx(theirs, rel=1e-8, abs=1e-8)

    check()


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e6, 1e9, 1e12])
def test_ratio_many_raters_with_offset_matches_package(offset: float) -> None:
    # > 24 raters: within-unit sums come from the per-unit quadrature, centred per unit.
    rng = np.random.default_rng(int(offset) % 97)
    for _ in range(5):
        data = np.round(rng.gamma(2.0, 2.0, size=(30, 10)), 1) + offset
        data[rng.random(data.shape) < 0.3] = np.nan
        theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="ratio")
        assert krippendorff_alpha(data, "ratio").value == pytest.approx(theirs, rel=1e-8, abs=1e-8)


def test_ratio_many_raters_quadrature_path_matches_package() -> None:
    # > 24 raters switches within-unit ratio sums from direct pairs to the quadrature identity.
    rng = np.random.default_rng(3)
    data = rng.gamma(1.5, 2.0, size=(30, 12))
    data[rng.random(data.shape) < 0.3] = np.nan
    data[rng.random(data.shape) < 0.05] = 0.0
    theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="ratio")
    assert krippendorff_alpha(data, "ratio").value == pytest.approx(theirs, rel=1e-10)


@SETTINGS
@given(st.data())
def test_cohen_kappa_matches_sklearn(data: st.DataObject) -> None:
    n = data.draw(st.integers(2, 60))
    labels = [0.0, 1.0, 2.0, 3.0, 4.0]
    a = np.array(data.draw(st.lists(st.sampled_from(labels), min_size=n, max_size=n)))
    b = np.array(data.draw(st.lists(st.sampled_from(labels), min_size=n, max_size=n)))
    weights = data.draw(st.sampled_from([None, "linear", "quadratic"]))
    ours = cohen_kappa(a, b, weights=weights, labels=labels)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns (and returns nan) where kappa is undefined
        theirs = cohen_kappa_score(a, b, weights=weights, labels=labels)
    if not np.isfinite(theirs):
        assert not ours.defined
        return
    assert ours.defined
    assert ours.value == pytest.approx(theirs, abs=1e-9)


@SETTINGS
@given(st.data())
def test_fleiss_kappa_matches_statsmodels(data: st.DataObject) -> None:
    subjects = data.draw(st.integers(1, 30))
    categories = data.draw(st.integers(2, 5))
    raters = data.draw(st.integers(2, 8))
    rows = [
        np.bincount(
            data.draw(st.lists(st.integers(0, categories - 1), min_size=raters, max_size=raters)),
            minlength=categories,
        )
        for _ in range(subjects)
    ]
    table = np.array(rows)
    ours = fleiss_kappa(table)
    with np.errstate(all="ignore"):
        theirs = sm_fleiss_kappa(table)
    if not np.isfinite(theirs):
        assert not ours.defined
        return
    assert ours.value == pytest.approx(theirs, abs=1e-9)


@SETTINGS
@given(st.data())
def test_correlations_match_scipy(data: st.DataObject) -> None:
    n = data.draw(st.integers(3, 40))
    elems = st.one_of(st.integers(0, 4).map(float), st.floats(-10, 10, allow_nan=False))
    a = np.array(data.draw(st.lists(elems, min_size=n, max_size=n)))
    b = np.array(data.draw(st.lists(elems, min_size=n, max_size=n)))
    assume(np.ptp(a) > 1e-6 and np.ptp(b) > 1e-6)
    assert pearson(a, b).value == pytest.approx(scipy.stats.pearsonr(a, b).statistic, abs=1e-9)
    assert spearman(a, b).value == pytest.approx(scipy.stats.spearmanr(a, b).statistic, abs=1e-9)
    assert kendall(a, b).value == pytest.approx(_kendall_tau_b_bruteforce(a, b), abs=1e-9)


def _kendall_tau_b_bruteforce(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b from its O(n^2) definition (Kendall 1945), independent of scipy."""
    da = np.sign(a[:, None] - a[None, :])
    db = np.sign(b[:, None] - b[None, :])
    iu = np.triu_indices(a.size, 1)
    s = float(np.sum(da[iu] * db[iu]))
    n0 = iu[0].size
    ties_a = float(np.sum(da[iu] == 0))
    ties_b = float(np.sum(db[iu] == 0))
    return s / np.sqrt((n0 - ties_a) * (n0 - ties_b))


@pytest.mark.parametrize("level", ["interval", "ratio"])
def test_alpha_of_tiny_values_does_not_underflow(level: str) -> None:
    # Found by the property test above: squares of 1.5e-158 are subnormal, and alpha came out
    # -4.2e-8 instead of 0 (the package, on these values as given, errs too: -0.5000028 for
    # the second matrix, whose alpha is -0.5). Alpha does not change when all values scale
    # alike, so the package is asked about the values scaled to about 1.
    for tiny, other in [(1.5269518981006657e-158, 0.0), (8.16305574e-160, None)]:
        data = (
            np.array([[0.0, tiny], [tiny, tiny]])
            if other is not None
            else np.array([[0.0, 0.0], [tiny, tiny]])
        )
        unit = np.ldexp(data, -int(np.frexp(tiny)[1]))  # the same values, scaled exactly
        theirs = krippendorff.alpha(reliability_data=unit, level_of_measurement=level)
        assert krippendorff_alpha(data, level).value == pytest.approx(theirs, abs=1e-12)
