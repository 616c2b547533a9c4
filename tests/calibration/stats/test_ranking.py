"""Group rankings against human rankings (jurybox.calibration.stats.ranking): Kendall's tau-b
against scipy's, the pair agreement against a direct count."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from jurybox.calibration.stats.ranking import kendall_tau_b, pair_agreement_counts


def test_kendall_tau_b_is_scipy_s_with_ties_in_either_ranking():
    rng = np.random.default_rng(0)
    for _ in range(300):
        k = int(rng.integers(2, 10))
        x = rng.integers(0, 4, size=k).astype(float)  # coarse: ties
        y = rng.integers(0, 4, size=k).astype(float)
        ours = kendall_tau_b(x, y)
        theirs = stats.kendalltau(x, y).statistic
        if np.isnan(theirs):
            assert ours is None
        else:
            assert ours == pytest.approx(theirs, abs=1e-12)
    assert kendall_tau_b([1.0], [2.0]) is None
    assert kendall_tau_b([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None


def test_pair_agreement_counts_what_a_direct_count_does():
    rng = np.random.default_rng(1)
    for _ in range(200):
        k = int(rng.integers(2, 7))
        rewards = [None if rng.random() < 0.15 else float(rng.integers(0, 3)) for _ in range(k)]
        pairs = [
            (i, j, float(rng.choice([0.0, 0.5, 1.0])))
            for i, j in itertools.combinations(range(k), 2)
            if rng.random() < 0.7
        ]
        agree = n = ties = 0.0
        for i, j, share in pairs:
            if rewards[i] is None or rewards[j] is None:
                continue
            if share == 0.5:
                ties += 1
            else:
                n += 1
                better, worse = (i, j) if share == 1.0 else (j, i)
                agree += (
                    1.0
                    if rewards[better] > rewards[worse]
                    else 0.5
                    if rewards[better] == rewards[worse]
                    else 0.0
                )
        assert pair_agreement_counts(rewards, pairs) == (agree, n, ties)
