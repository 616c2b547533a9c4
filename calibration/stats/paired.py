"""Comparing systems scored on the same items: paired differences, Holm, ranks and groups.

Paired differences, Holm's correction, rank intervals and the groups of systems the data cannot
separate.

Two systems judged on the same items differ far more precisely than their two separate intervals
suggest: most of an item's score is the item (its difficulty), which the difference cancels.

- `paired_difference`: the mean difference on the items both systems scored, with its
  Student-t interval and the paired t test's two-sided p-value (``scipy.stats.ttest_rel``'s).
  Items only one system scored are left out and counted, never filled in.
- `wilson_ci`: a share's mean (0/1 values: accuracies, yes/no criteria) with Wilson's
  interval, inside [0, 1] even on few items.
- `holm`: Holm's step-down adjusted p-values (Holm 1979), which control the family-wise
  error over all pairs of a criterion.
- `rank_intervals`: each system's rank (1 = best; ties share the best rank) and a
  percentile bootstrap interval of its rank over resampled items, as Chatbot Arena's rank
  intervals.
- `letter_groups`: the systems in order of their means, each with letters; systems that
  share a letter are not shown to differ (the "lines" display of ordered means).
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputDataError
from .stat import mean_ci


@dataclass(frozen=True)
class PairedDifference:
    """The mean of ``a - b`` over the items both scored."""

    difference: float | None
    ci: tuple[float, float] | None
    p: float | None
    shared: int
    #: Items one system scored and the other did not (left out of the comparison).
    only_a: int = 0
    only_b: int = 0


def paired_difference(a: Any, b: Any, confidence: float = 0.95) -> PairedDifference:
    """The mean difference ``a - b`` on the items both scored, its t interval and p-value.

    ``a`` and ``b`` are aligned per item, NaN where a system has no score; the p-value is the
    paired t test's. Fewer than two shared items: no interval and no p-value. Differences all
    equal: a zero-width interval, and the exact two-sided sign test's p-value ``2 * 0.5**n`` (1
    when they are all 0), where the t test is undefined.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise InputDataError(f"a and b must be aligned per item ({x.shape} vs {y.shape})")
    both = ~np.isnan(x) & ~np.isnan(y)
    only_a = int((~np.isnan(x) & np.isnan(y)).sum())
    only_b = int((np.isnan(x) & ~np.isnan(y)).sum())
    d = x[both] - y[both]
    n = int(d.size)
    mean, ci = mean_ci(d, confidence)
    if n < 2 or mean is None:
        return PairedDifference(mean, None, None, n, only_a, only_b)
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        p = 1.0 if mean == 0.0 else min(1.0, 2.0 * 0.5**n)
    else:
        from scipy import stats

        t = mean / (sd / math.sqrt(n))
        p = float(2.0 * stats.t.sf(abs(t), n - 1))
    return PairedDifference(mean, ci, p, n, only_a, only_b)


def wilson_ci(
    values: Any, confidence: float = 0.95
) -> tuple[float | None, tuple[float, float] | None]:
    """The mean of 0/1 values (a share) with Wilson's score interval (Wilson 1927).

    The interval stays inside [0, 1] where a t interval on few items does not; no interval without
    a value.
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None, None
    from scipy import stats

    n, k = int(x.size), round(float(x.sum()))
    got = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return k / n, (float(got.low), float(got.high))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values, in the order given.

    None stays None and does not count towards the family.
    """
    index = [k for k, p in enumerate(pvalues) if p is not None]
    p = np.array([pvalues[k] for k in index], dtype=float)
    m = p.size
    out: list[float | None] = [None] * len(pvalues)
    if m == 0:
        return out
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    for rank, k in enumerate(order):
        out[index[k]] = float(adjusted[rank])
    return out


def ranks_of(means: Any) -> np.ndarray:
    """Rank of each mean, 1 for the highest; equal means share the best rank; NaN unranked."""
    m = np.asarray(means, dtype=float)
    valid = ~np.isnan(m)
    higher = (m[None, :] > m[:, None]) & valid[None, :]
    return np.where(valid, 1.0 + higher.sum(axis=1), np.nan)


def rank_intervals(
    scores: Any, *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0, batch: int = 500
) -> tuple[np.ndarray, np.ndarray]:
    """``(ranks, intervals)`` of systems: each mean's rank and its bootstrap interval over items.

    Systems are the rows of ``scores``, items its columns, NaN where a system has no score: the
    rank of each system's mean over its scored items, and the percentile bootstrap interval of
    that rank over items resampled with replacement (a resample where a system has no score
    leaves it out of that resample's ranks).
    """
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2:
        raise InputDataError("scores must be a systems x items matrix")
    mask = ~np.isnan(x)
    filled = np.where(mask, x, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ranks = ranks_of(filled.sum(axis=1) / mask.sum(axis=1))
    n_items = x.shape[1]
    rng = np.random.default_rng(seed)
    draws = []
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        picks = rng.integers(0, n_items, size=(size, n_items))
        # counts[r, i]: how often item i is in resample r
        counts = np.zeros((size, n_items))
        np.add.at(counts, (np.arange(size)[:, None], picks), 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (counts @ filled.T) / (counts @ mask.T)  # resamples x systems
        valid = ~np.isnan(means)
        higher = (means[:, None, :] > means[:, :, None]) & valid[:, None, :]
        draws.append(np.where(valid, 1.0 + higher.sum(axis=2), np.nan))
    all_draws = np.vstack(draws)
    alpha = (1.0 - confidence) / 2.0
    intervals = np.full((x.shape[0], 2), np.nan)
    ranked = ~np.isnan(all_draws).all(axis=0)  # a system with no score is never ranked
    if ranked.any():
        got = all_draws[:, ranked]
        intervals[ranked, 0] = np.floor(np.nanquantile(got, alpha, axis=0))
        intervals[ranked, 1] = np.ceil(np.nanquantile(got, 1.0 - alpha, axis=0))
    return ranks, intervals


def letter_groups(means: Sequence[float], different: Any) -> list[str]:
    """Letters per system (in the order given): systems sharing a letter are not shown to differ.

    ``different[i][j]`` says whether systems i and j differ significantly. Each letter is a
    maximal run of systems, in order of their means, no two of which differ; a system whose mean
    is undefined (NaN) gets no letter.
    """
    m = np.asarray(means, dtype=float)
    diff = np.asarray(different, dtype=bool)
    order = [
        int(k)
        for k in np.argsort(-np.where(np.isnan(m), -np.inf, m), kind="stable")
        if not np.isnan(m[k])
    ]
    runs: list[tuple[int, int]] = []
    for start in range(len(order)):
        end = start
        while end + 1 < len(order) and not any(
            diff[order[end + 1], order[k]] for k in range(start, end + 1)
        ):
            end += 1
        if not runs or end > runs[-1][1]:
            runs.append((start, end))
    letters = [""] * m.size
    alphabet = string.ascii_lowercase + string.ascii_uppercase
    for k, (start, end) in enumerate(runs):
        letter = alphabet[k] if k < len(alphabet) else f"[{k}]"
        for position in range(start, end + 1):
            letters[order[position]] += letter
    return letters
