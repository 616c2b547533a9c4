"""Paired differences, Holm's correction, rank intervals and letter groups
(jurybox.calibration.stats.paired): against scipy and statsmodels, against a one-resample-at-a-
time bootstrap, and by simulation (coverage, false discoveries, what pairing buys)."""

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from jurybox.calibration.errors import InputDataError
from jurybox.calibration.stats.paired import (
    holm,
    letter_groups,
    paired_difference,
    rank_intervals,
    ranks_of,
)
from jurybox.calibration.stats.stat import mean_ci


def test_the_paired_difference_is_scipy_s_paired_t_test_on_the_shared_items():
    rng = np.random.default_rng(3)
    a = rng.normal(2.0, 1.0, 60)
    b = a + rng.normal(-0.25, 0.6, 60)
    a[[4, 9]] = np.nan
    b[[9, 20, 33]] = np.nan
    got = paired_difference(a, b, confidence=0.9)
    both = ~np.isnan(a) & ~np.isnan(b)
    ref = stats.ttest_rel(a[both], b[both])
    assert got.shared == 56 and got.only_a == 2 and got.only_b == 1
    assert got.difference == pytest.approx(float(np.mean(a[both] - b[both])))
    assert got.p == pytest.approx(ref.pvalue, rel=1e-9)
    assert got.ci == pytest.approx(tuple(ref.confidence_interval(0.9)), rel=1e-9)


def test_degenerate_pairs_say_so_instead_of_inventing_a_p_value():
    one = paired_difference([1.0, np.nan], [0.0, 2.0])
    assert (one.difference, one.ci, one.p, one.shared) == (1.0, None, None, 1)
    same = paired_difference([3, 2, 4], [3, 2, 4])
    assert same.difference == 0.0 and same.p == 1.0 and same.ci == (0.0, 0.0)
    # Every item one point apart: the t test is undefined; the exact sign test's p-value.
    shifted = paired_difference([3, 2, 4, 1, 2], [2, 1, 3, 0, 1])
    assert shifted.p == pytest.approx(stats.binomtest(5, 5).pvalue)
    none = paired_difference([np.nan, 1.0], [1.0, np.nan])
    assert none.difference is None and none.shared == 0
    with pytest.raises(InputDataError, match="aligned"):
        paired_difference([1, 2], [1, 2, 3])


def test_holm_is_statsmodels_holm_and_skips_undefined_p_values():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = list(rng.uniform(0, 0.2, rng.integers(1, 12)))
        want = multipletests(p, method="holm")[1]
        assert holm(p) == pytest.approx(list(want))
    assert holm([0.01, None, 0.04]) == pytest.approx([0.02, None, 0.04])
    assert holm([]) == [] and holm([None]) == [None]


def test_ranks_share_the_best_rank_on_ties_and_skip_undefined_means():
    assert list(ranks_of([0.2, 0.9, 0.5, 0.9])) == [4, 1, 3, 1]
    got = ranks_of([0.2, np.nan, 0.5])
    assert got[0] == 2 and math.isnan(got[1]) and got[2] == 1


def test_rank_intervals_are_the_one_resample_at_a_time_bootstrap():
    rng = np.random.default_rng(5)
    scores = rng.normal(size=(4, 30)) + np.array([[0.0], [0.2], [0.25], [1.0]])
    scores[1, [2, 7]] = np.nan
    resamples, seed = 300, 9
    ranks, intervals = rank_intervals(scores, resamples=resamples, seed=seed, batch=resamples)
    draws = np.random.default_rng(seed).integers(0, 30, size=(resamples, 30))
    got = []
    for pick in draws:
        got.append(ranks_of(np.nanmean(scores[:, pick], axis=1)))
    got = np.array(got)
    assert list(ranks) == list(ranks_of(np.nanmean(scores, axis=1)))
    assert np.array_equal(intervals[:, 0], np.floor(np.quantile(got, 0.025, axis=0)))
    assert np.array_equal(intervals[:, 1], np.ceil(np.quantile(got, 0.975, axis=0)))
    assert intervals[3].tolist() == [1, 1]  # far ahead: first in every resample


def test_letters_group_the_systems_no_test_separates():
    # Ordered a > b > c > d; a-b and c-d not separated, every other pair is.
    diff = np.ones((4, 4), dtype=bool)
    np.fill_diagonal(diff, False)
    diff[0, 1] = diff[1, 0] = diff[2, 3] = diff[3, 2] = False
    assert letter_groups([0.9, 0.8, 0.3, 0.2], diff) == ["a", "a", "b", "b"]
    # A middle system that neither end is separated from: it shares both letters.
    diff = np.zeros((3, 3), dtype=bool)
    diff[0, 2] = diff[2, 0] = True
    assert letter_groups([0.9, 0.5, 0.1], diff) == ["a", "ab", "b"]
    assert letter_groups([0.5, np.nan], np.zeros((2, 2), bool)) == ["a", ""]
    assert letter_groups([0.3, 0.3], np.zeros((2, 2), bool)) == ["a", "a"]


def _benchmark(rng, reps, items, shift, noise=0.6, spread=1.0):
    """``reps`` pairs of systems on ``items`` items: a shared item difficulty (sd ``spread``),
    each system's own noise, b ahead of a by ``shift``."""
    difficulty = rng.normal(0, spread, (reps, items))
    a = difficulty + rng.normal(0, noise, (reps, items))
    b = difficulty + shift + rng.normal(0, noise, (reps, items))
    return a, b


def test_paired_intervals_cover_the_true_difference_at_the_nominal_rate():
    # 1000 repetitions: the coverage's standard error is 0.0069, so 0.95 - 3 se = 0.929 still
    # passes while an interval that covered 92% would fail.
    rng = np.random.default_rng(11)
    a, b = _benchmark(rng, 1000, 40, shift=0.3)
    covered = 0
    for x, y in zip(a, b):
        lo, hi = paired_difference(y, x).ci
        covered += lo <= 0.3 <= hi
    assert covered / 1000 >= 0.929


def test_two_equal_systems_are_called_different_no_more_often_than_the_level():
    # 1000 repetitions of equal systems: at most 5% + 3 se (0.0715) rejections.
    rng = np.random.default_rng(12)
    a, b = _benchmark(rng, 1000, 40, shift=0.0)
    rejected = sum(paired_difference(x, y).p < 0.05 for x, y in zip(a, b))
    assert rejected / 1000 <= 0.0715
    # Four equal systems, six pairs: Holm keeps the chance of any false call at 5% (500
    # repetitions: 0.05 + 3 * 0.0097 = 0.079), where six uncorrected tests call one far more
    # often (about 20%).
    calls = uncorrected = 0
    for _ in range(500):
        difficulty = rng.normal(0, 1, 40)
        systems = [difficulty + rng.normal(0, 0.6, 40) for _ in range(4)]
        p = [paired_difference(systems[i], systems[j]).p for i in range(4) for j in range(i + 1, 4)]
        calls += any(q < 0.05 for q in holm(p))
        uncorrected += any(q < 0.05 for q in p)
    assert calls / 500 <= 0.079
    assert uncorrected / 500 > 0.1


def test_pairing_separates_systems_whose_separate_intervals_overlap():
    # Item difficulty dominates: the systems' separate 95% intervals overlap in most
    # repetitions, while the paired difference is significant in most.
    rng = np.random.default_rng(13)
    a, b = _benchmark(rng, 300, 50, shift=0.25, noise=0.3, spread=1.0)
    overlap = significant = 0
    for x, y in zip(a, b):
        _, ci_a = mean_ci(x)
        _, ci_b = mean_ci(y)
        overlap += ci_a[1] >= ci_b[0]
        significant += paired_difference(y, x).p < 0.05
    assert overlap / 300 > 0.9 and significant / 300 > 0.9


def test_rank_intervals_cover_the_true_ranks():
    # Four systems 0.3 apart on 60 items (noise 1): each system's 95% rank interval holds its
    # true rank in at least 90% of 200 repetitions (3 se below 0.95 is 0.904; measured: all of
    # them), and the intervals still tell the ends apart: the best system's excludes the last
    # two ranks and the worst's the first two in at least 80% of them (measured: 87.5%; an
    # interval of every rank would cover too, and never tell them apart).
    rng = np.random.default_rng(14)
    truth = np.array([0.0, 0.3, 0.6, 0.9])
    true_rank = np.array([4, 3, 2, 1])
    covered = np.zeros(4)
    apart = 0
    for _ in range(200):
        scores = truth[:, None] + rng.normal(0, 1, (4, 60))
        _, intervals = rank_intervals(scores, resamples=400, seed=int(rng.integers(1 << 30)))
        covered += (intervals[:, 0] <= true_rank) & (true_rank <= intervals[:, 1])
        apart += intervals[3, 1] <= 2 and intervals[0, 0] >= 3
    assert (covered / 200 >= 0.904).all(), covered / 200
    assert apart / 200 >= 0.8, apart / 200


def test_a_share_s_interval_is_statsmodels_wilson_interval():
    from statsmodels.stats.proportion import proportion_confint

    from jurybox.calibration.stats.paired import wilson_ci

    for values in ([1, 1, 1, 1, 0, 1], [0, 0, 0], [1], [1, 0] * 40):
        mean, ci = wilson_ci(values, 0.9)
        want = proportion_confint(sum(values), len(values), alpha=0.1, method="wilson")
        assert mean == pytest.approx(np.mean(values)) and ci == pytest.approx(want)
        assert 0.0 <= ci[0] <= ci[1] <= 1.0
    assert wilson_ci([]) == (None, None)
