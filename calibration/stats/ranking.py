"""Agreement of a jury's group rankings with human rankings of the same groups.

How well a ranking of each group's completions (a jury's group rewards) agrees with human
rankings of the same groups: Kendall's tau-b per group, averaged over groups, and the share of
human pairwise preferences the jury's order agrees with, each with a percentile bootstrap
interval over groups (a group's completions are judged together, so the group is the unit).

* `kendall_tau_b`: tau-b of one group (ties in either ranking corrected for, as
  ``scipy.stats.kendalltau`` computes it, which the tests check it against); undefined
  (None) with fewer than two completions or a ranking that ties them all.
* `pair_agreement_counts`: per human preference (completion i over j, or a tie), 1 when
  the jury's rewards order them the same way, 0.5 when the jury ties them, 0 otherwise; human
  ties are left out and counted.
* `group_agreement`: both over groups, with their intervals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .bootstrap import bootstrap_ci
from .stat import Stat, defined, undefined


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two rankings of the same items (higher is better in both)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 2:
        return None
    da = np.sign(a[:, None] - a[None, :])
    db = np.sign(b[:, None] - b[None, :])
    upper = np.triu_indices(a.size, 1)
    sa, sb = da[upper], db[upper]
    n_a, n_b = np.count_nonzero(sa), np.count_nonzero(sb)
    if n_a == 0 or n_b == 0:
        return None
    return float((sa * sb).sum() / np.sqrt(float(n_a) * float(n_b)))


def pair_agreement_counts(
    rewards: Sequence[float | None], pairs: Sequence[tuple[int, int, float]]
) -> tuple[float, int, int]:
    """How far a group's rewards agree with human pairwise preferences.

    The preferences are ``(i, j, share)`` (share 1: i is better, 0: j is, 0.5: a tie).

    Returns:
        The agreement summed over the preferences both of whose completions have a reward, how
        many those are, and how many human ties were left out.
    """
    agree, n, ties = 0.0, 0, 0
    for i, j, share in pairs:
        ri, rj = rewards[i], rewards[j]
        if ri is None or rj is None:
            continue
        if share == 0.5:
            ties += 1
            continue
        n += 1
        human = 1.0 if share > 0.5 else -1.0
        jury = float(np.sign(ri - rj))
        agree += 0.5 if jury == 0 else float(jury == human)
    return agree, n, ties


def _statistic(taus: np.ndarray, agree: np.ndarray, n: np.ndarray) -> dict[str, Stat]:
    known = taus[~np.isnan(taus)]
    tau = (
        defined("kendall_tau_b", float(known.mean()), int(known.size))
        if known.size
        else undefined(
            "kendall_tau_b", 0, "no group has two ranked completions that neither ranking ties all"
        )
    )
    total = int(n.sum())
    pairs = (
        defined("pair_agreement", float(agree.sum() / total), total)
        if total
        else undefined(
            "pair_agreement", 0, "no human preference between two completions with rewards"
        )
    )
    return {"kendall_tau_b": tau, "pair_agreement": pairs}


def _batched(taus: np.ndarray, agree: np.ndarray, n: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "kendall_tau_b": np.nanmean(taus, axis=1) if taus.size else np.full(len(taus), np.nan),
            "pair_agreement": agree.sum(axis=1)
            / np.where(n.sum(axis=1) > 0, n.sum(axis=1), np.nan),
        }


def group_agreement(
    taus: Sequence[float | None],
    agree: Sequence[float],
    n: Sequence[int],
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> dict[str, Stat]:
    """The mean tau and the pair agreement over groups, with bootstrap intervals.

    The mean of the groups' taus (None: undefined, left out) and the agreement over all their
    human preferences, each with a percentile bootstrap interval over groups.
    """
    t = np.array([np.nan if v is None else v for v in taus], dtype=float)
    a, m = np.asarray(agree, dtype=float), np.asarray(n, dtype=float)
    import warnings

    with warnings.catch_warnings():  # a resample of undefined taus only: NaN, left out
        warnings.simplefilter("ignore", RuntimeWarning)
        return bootstrap_ci(
            _statistic,
            t,
            a,
            m,
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
            batched=_batched,
        )
