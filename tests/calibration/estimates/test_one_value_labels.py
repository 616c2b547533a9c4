"""#60 item 2: labels that all take one value give the interval no variance to estimate.

With every label one value and a jury whose scores vary, PPI++'s lambda is 0 and the labels'
variance 0: the normal interval was a point (`ppi_mean` printed ``[4.0000, 4.0000]``, the
leaderboard's human-corrected difference ``[0.0, 0.0]``). Now an interval whose terms take one
value is at least the score interval a bounded variable supports at that count
(`rectified.wilson_bounds`: Wilson's interval on ``{0, 1}``, checked against statsmodels).

Coverage: 300 sessions per count; the standard error of a 95% coverage is 1.3 points, and the
test asks for 93% (as tests/calibration/estimates/test_small_sample.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from jurybox.calibration.estimates.active import mean_estimates, mean_sequences
from jurybox.calibration.estimates.ppi import ppi_mean
from jurybox.calibration.estimates.rectified import wilson_bounds
from jurybox.rubrics import Scale

Z = 1.959963984540054
SCALE = Scale.coerce([0, 1, 2, 3, 4])


@pytest.mark.parametrize(("k", "n"), [(0, 20), (3, 20), (20, 20), (7, 13), (1, 200)])
def test_the_bounded_score_interval_on_zero_and_one_is_wilson_s(k, n):
    """On {0, 1} the bounded variable's score interval is Wilson's (statsmodels); on [0, 4]
    the same interval scaled."""
    lo, hi = wilson_bounds(k / n, n, 0.0, 1.0, Z)
    assert (lo, hi) == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)
    assert wilson_bounds(4 * k / n, n, 0.0, 4.0, Z) == pytest.approx((4 * lo, 4 * hi))


def _jury(rng, y):
    """A jury whose scores vary around the labels (departing from them on most items)."""
    return np.clip(y + rng.normal(0.0, 0.8, y.size), 0.0, 4.0)


def test_ppi_mean_of_labels_all_one_value_is_not_a_point():
    """The reproduction: 20 labels all 4, a jury whose scores vary (more than 5 depart from
    them): the interval reaches down to Wilson's bound for 20 values on the scale, not [4, 4]."""
    rng = np.random.default_rng(1)
    y = np.full(20, 4.0)
    f = 4.0 - rng.integers(0, 3, 400)  # two thirds of the scores a level or two below
    got = ppi_mean(y, f[:20], f[20:], bounds=(0.0, 4.0))
    assert got.interval == "normal" and got.lam == 0.0
    floor = wilson_bounds(4.0, 20, 0.0, 4.0, Z)
    assert got.ci[0] == pytest.approx(float(floor[0])) and got.ci[0] < 3.8
    assert got.ci[1] == pytest.approx(4.0)
    assert any("one value" in note for note in got.notes)


def test_without_bounds_labels_all_one_value_give_no_interval_not_the_data_s_range():
    """Without ``bounds`` nothing says how far a label could lie: the data's own range made a
    point of it (a jury scoring 3.9 or 4 beside 30 labels of 4 gave [3.989, 4.0], covering an
    easy benchmark's mean in 0 of 200 such sessions). The interval is unbounded, saying why."""
    rng = np.random.default_rng(2)
    f = rng.choice([3.9, 4.0], 400)
    got = ppi_mean(np.full(30, 4.0), f[:30], f[30:])
    assert got.ci == (-math.inf, math.inf)
    assert any("no bounds were given" in note and "bounds=" in note for note in got.notes)


def test_the_leaderboard_s_pair_difference_of_equal_labels_is_not_a_point():
    """The leaderboard's human-corrected pair difference is ppi_mean on the per-item
    differences, bounded by the scale's range either way: the humans' differences all 0 give
    the bounded interval around 0, not [0, 0]."""
    rng = np.random.default_rng(2)
    d = rng.integers(-2, 3, 300).astype(float)
    got = ppi_mean(np.zeros(30), d[:30], d[30:], bounds=(-4.0, 4.0))
    lo, hi = wilson_bounds(0.0, 30, -4.0, 4.0, Z)
    assert got.ci == pytest.approx((float(lo), float(hi))) and got.ci[1] > 1.0


def test_agree_ppi_without_the_jury_s_distributions_is_not_a_point():
    """mean_estimates (agree --ppi, the leaderboard's human-corrected means) without the
    jury's distributions: labels all 4 over 30 items, the jury's scores varying: the bounded
    floor at Student's quantile."""
    from jurybox.calibration.estimates.active import t_of

    rng = np.random.default_rng(3)
    f = 4.0 - rng.integers(0, 3, 300)
    pool = {f"i{k}": {"accuracy": float(s)} for k, s in enumerate(f)}
    lines = [{"id": f"i{k}", "rater": "r", "accuracy": 4} for k in range(30)]
    got = mean_estimates(lines, pool, {"accuracy": SCALE})["accuracy"]
    assert got.interval == "normal"
    assert got.ci[0] == pytest.approx(float(wilson_bounds(4.0, 30, 0.0, 4.0, t_of(0.95, 29))[0]))


def test_the_asymptotic_sequence_of_terms_all_one_value_is_not_a_point():
    """mean_sequences(method='asymptotic'): a jury exactly one level above every label (each
    label departs; the rectifiers all -1, their variance 0) gives the sequence the bounded
    floor, not a point at the jury's mean less one."""
    rng = np.random.default_rng(4)
    y = rng.integers(0, 4, 300).astype(float)
    pool = {f"i{k}": {"accuracy": float(v + 1)} for k, v in enumerate(y)}
    lines = [{"id": f"i{k}", "rater": "r", "accuracy": int(y[k])} for k in range(40)]
    got = mean_sequences(lines, pool, {"accuracy": SCALE}, None, method="asymptotic")["accuracy"]
    assert got["method"] == "asymptotic" and got["half_width"] > 0.2, got


def _easy(rng, n_items=2000):
    """Humans give the top level to 97% of items, the level below to the rest."""
    return np.where(rng.random(n_items) < 0.97, 4.0, 3.0)


@pytest.mark.parametrize("count", [20, 30, 60])
def test_an_easy_benchmark_s_mean_is_covered_at_every_count(count):
    """The easy benchmark of #60 (the normal interval covered 0.443 at 20 labels, 0.607 at 30,
    0.850 at 60): ppi_mean with the scale's ends over 300 sessions covers at least 93%."""
    rng = np.random.default_rng(count)
    covered = 0
    for _ in range(300):
        y = _easy(rng)
        f = _jury(rng, y)
        got = ppi_mean(y[:count], f[:count], f[count:], bounds=(0.0, 4.0))
        covered += got.ci[0] <= y.mean() <= got.ci[1]
    assert covered / 300 >= 0.93, covered
