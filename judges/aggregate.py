"""How a jury decides one criterion from its judges' votes, and how much they disagreed.

Each rule is a small function of the scored values (and judge weights). Unscored votes never
enter as numbers: they only count against the quorum.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from jurybox.rubrics import CriterionResult, Vote

from .spec import Aggregation, JurySpec

Rule = Callable[[np.ndarray, np.ndarray, Aggregation], tuple[float | None, str | None]]


def _mean(
    values: np.ndarray, weights: np.ndarray, agg: Aggregation
) -> tuple[float | None, str | None]:
    return float(values.mean()), None


def _median(
    values: np.ndarray, weights: np.ndarray, agg: Aggregation
) -> tuple[float | None, str | None]:
    return float(np.median(values)), None


def _trimmed(
    values: np.ndarray, weights: np.ndarray, agg: Aggregation
) -> tuple[float | None, str | None]:
    from scipy import stats  # here: importing scipy.stats takes half a second

    return float(stats.trim_mean(values, agg.trim)), None


def _weighted(
    values: np.ndarray, weights: np.ndarray, agg: Aggregation
) -> tuple[float | None, str | None]:
    return float(np.average(values, weights=weights)), None


def _majority(
    values: np.ndarray, weights: np.ndarray, agg: Aggregation
) -> tuple[float | None, str | None]:
    counts = Counter(values.tolist()).most_common()
    top = [v for v, n in counts if n == counts[0][1]]
    if len(top) > 1:
        tied = ", ".join(f"{v:g}" for v in sorted(top))
        return None, f"no majority (tie between {tied})"
    return float(top[0]), None


RULES: dict[str, Rule] = {
    "mean": _mean,
    "median": _median,
    "trimmed": _trimmed,
    "weighted": _weighted,
    "majority": _majority,
}


def vote_value(vote: Vote, agg: Aggregation) -> float | None:
    """The number a vote adds to its criterion.

    That is its expected score when the jury combines expected scores and the vote has one, else
    its score; None for an unscored vote.
    """
    if not vote.scored:
        return None
    if agg.use == "expected" and vote.expected is not None:
        return vote.expected
    return vote.score


def _small(values: list[float]) -> tuple[float, float, float] | None:
    """Mean, standard deviation and range of one or two finite values, as numpy computes them.

    They are computed with exactly the floating-point operations numpy does for them (sum from 0.0,
    divide, squared deviations summed, divide, square root), so the results are identical to the
    last bit; None for other counts or non-finite values (numpy then). Juries of one or two judges
    are common, and numpy's per-call overhead on such tiny arrays was ~20 us per criterion, most of
    deciding.
    """
    if not 1 <= len(values) <= 2 or not all(math.isfinite(v) for v in values):
        return None
    n = len(values)
    total = 0.0
    for v in values:
        total += v
    mean = total / n
    squares = 0.0
    for v in values:
        d = v - mean
        squares += d * d
    return mean, math.sqrt(squares / n), max(values) - min(values)


def aggregate_criterion(criterion: str, votes: Sequence[Vote], jury: JurySpec) -> CriterionResult:
    """Combine the votes of all judges on one criterion of one item."""
    agg = jury.aggregation
    weight_of = {j.name: j.weight for j in jury.judges}
    # A scored vote always has a value (vote_value is None only for unscored votes).
    scored = [(cast(float, vote_value(v, agg)), weight_of[v.judge]) for v in votes if v.scored]
    n = len(scored)
    small = _small([v for v, _ in scored])
    mean: float | None
    std: float | None
    range_: float | None
    if small is not None:
        mean, std, range_ = small
    else:
        mean = None
        values = np.array([v for v, _ in scored], dtype=float)
        std = float(values.std(ddof=0)) if n else None
        range_ = float(values.max() - values.min()) if n else None
    need = jury.quorum_count()
    if n < need:
        return CriterionResult(
            score=None,
            n_votes=len(votes),
            n_scored=n,
            std=std,
            range=range_,
            reason=f"below quorum: {n} of {len(votes)} judges scored {criterion}, {need} needed",
        )
    method = agg.methods.get(criterion, agg.method)
    score: float | None
    if method == "mean" and mean is not None:
        score, reason = mean, None
    else:
        values = np.array([v for v, _ in scored], dtype=float)
        weights = np.array([w for _, w in scored], dtype=float)
        score, reason = RULES[method](values, weights, agg)
    return CriterionResult(
        score=score, n_votes=len(votes), n_scored=n, std=std, range=range_, reason=reason
    )
