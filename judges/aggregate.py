"""How a jury decides one criterion from its judges' votes, and how much they disagreed.

Each rule is a small function of the scored values (and judge weights). Unscored votes never
enter as numbers: they only count against the quorum.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

from jurybox.rubrics import CriterionResult, Vote

from .spec import Aggregation, JurySpec

Rule = Callable[[np.ndarray, np.ndarray, Aggregation], tuple[float | None, str | None]]


def _mean(values: np.ndarray, weights: np.ndarray, agg: Aggregation) -> tuple[float | None, str | None]:
    return float(values.mean()), None


def _median(values: np.ndarray, weights: np.ndarray, agg: Aggregation) -> tuple[float | None, str | None]:
    return float(np.median(values)), None


def _trimmed(values: np.ndarray, weights: np.ndarray, agg: Aggregation) -> tuple[float | None, str | None]:
    return float(stats.trim_mean(values, agg.trim)), None


def _weighted(values: np.ndarray, weights: np.ndarray, agg: Aggregation) -> tuple[float | None, str | None]:
    return float(np.average(values, weights=weights)), None


def _majority(values: np.ndarray, weights: np.ndarray, agg: Aggregation) -> tuple[float | None, str | None]:
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
    if not vote.scored:
        return None
    if agg.use == "expected" and vote.expected is not None:
        return vote.expected
    return vote.score


def aggregate_criterion(criterion: str, votes: Sequence[Vote], jury: JurySpec) -> CriterionResult:
    """Combine the votes of all judges on one criterion of one item."""
    agg = jury.aggregation
    weight_of = {j.name: j.weight for j in jury.judges}
    scored = [(vote_value(v, agg), weight_of[v.judge]) for v in votes if v.scored]
    values = np.array([v for v, _ in scored], dtype=float)
    weights = np.array([w for _, w in scored], dtype=float)
    n = len(values)
    spread = {
        "std": float(values.std(ddof=0)) if n else None,
        "range": float(values.max() - values.min()) if n else None,
    }
    need = jury.quorum_count()
    if n < need:
        return CriterionResult(
            score=None,
            n_votes=len(votes),
            n_scored=n,
            reason=f"below quorum: {n} of {len(votes)} judges scored {criterion}, {need} needed",
            **spread,
        )
    method = agg.methods.get(criterion, agg.method)
    score, reason = RULES[method](values, weights, agg)
    return CriterionResult(score=score, n_votes=len(votes), n_scored=n, reason=reason, **spread)
