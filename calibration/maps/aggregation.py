"""A jury aggregation that accounts for correlated judges, compared by cross-validation.

Judges that err together count as fewer than their number (``jurybox audit``'s effective
number). Averaging them gives their shared error the weight of several judges. The weights
that minimise the mean squared error of a weighted mean of the judges' scores against the
humans are ``w = argmin w' M w`` subject to ``w >= 0, sum w = 1``, with ``M`` the judges' error
second-moment matrix (error = score minus the human mean; bias included, since a weighted mean
keeps it): without the sign constraint the closed form ``M^-1 1 / (1' M^-1 1)``, the minimum-
variance combination of correlated estimates; the constraint keeps the result a weighted mean
(``aggregation: {method: weighted}`` with each judge's ``weight`` in a jury file).

`compare_aggregations` fits the weights on k-1 folds of the labelled items and compares
each held-out item's absolute error against the human mean: the plain mean, the weighted mean,
and Dawid-Skene's most probable scale point (fitted on the judges' answers alone, without the
human labels, so nothing leaks); the mean gain of the weights over the plain mean has a
percentile bootstrap CI over items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from ..errors import InputDataError

MIN_ITEMS = 10


def error_weights(errors: np.ndarray) -> np.ndarray:
    """The non-negative weights summing to 1 that minimise the weighted mean's squared error.

    ``errors`` is judges x items; the error is that of the weighted mean of the judges' scores.
    """
    k = errors.shape[0]
    second = errors @ errors.T / errors.shape[1]
    start = np.full(k, 1.0 / k)
    if k == 1:
        return start
    result = optimize.minimize(
        lambda w: float(w @ second @ w),
        start,
        jac=lambda w: 2 * second @ w,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * k,
        constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0}],
        options={"ftol": 1e-12, "maxiter": 500},
    )
    w = np.clip(result.x if result.success else start, 0.0, None)
    return w / w.sum()


@dataclass
class AggregationComparison:
    """A criterion's aggregations compared: held-out errors, weights, and the weights' gain.

    The held-out mean absolute error of each aggregation against the human mean, the weights
    fitted on every item, and the weights' gain over the plain mean.
    """

    criterion: str
    judges: list[str]
    n: int
    folds: int
    weights: dict[str, float]
    mae: dict[str, float | None]
    gain: float
    gain_ci: list[float]
    notes: list[str] = field(default_factory=list)

    @property
    def better(self) -> bool:
        """Whether the weights beat the plain mean (the gain's CI above 0)."""
        return self.gain_ci[0] > 0

    def words(self) -> str:
        """The comparison in plain words."""
        maes = ", ".join(f"{k} {v:.3f}" for k, v in self.mae.items() if v is not None)
        weights = ", ".join(f"{j} {w:.2f}" for j, w in self.weights.items())
        lo, hi = self.gain_ci
        verdict = (
            "the error-covariance weights beat the mean"
            if self.better
            else "the weights do not clearly beat the mean"
        )
        return (
            f"{self.criterion}: {self.folds}-fold CV on {self.n} items, mean absolute error "
            f"against the humans: {maes}; {verdict} (gain {self.gain:+.3f} [{lo:+.3f}, "
            f"{hi:+.3f}]); weights {weights}"
        )

    def to_dict(self) -> dict[str, Any]:
        """As plain data."""
        return {**self.__dict__, "better": self.better, "finding": self.words()}


def _dawid_skene_points(values: np.ndarray, scale: Sequence[float]) -> np.ndarray | None:
    from ..stats.dawid_skene import dawid_skene

    points = np.asarray(sorted(scale), dtype=float)
    codes = np.abs(values[..., None] - points).argmin(axis=-1)
    if not np.allclose(points[codes], values):  # expected scores: not class labels
        return None
    fit = dawid_skene(codes, len(points))
    return points[fit.labels]


def compare_aggregations(
    criterion: str,
    scores: Mapping[str, Any],
    human: Any,
    scale: Sequence[float] | None = None,
    *,
    folds: int = 5,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AggregationComparison:
    """The plain mean, the error-covariance weights and Dawid-Skene under k-fold cross-validation.

    Dawid-Skene is compared when the scores are scale points and ``scale`` is given; the
    cross-validation is the module text's. Items some judge or the humans lack are left out.
    """
    judges = list(scores)
    if len(judges) < 2:
        raise InputDataError(f"{criterion}: comparing aggregations needs at least 2 judges")
    values = np.vstack([np.asarray(scores[j], dtype=float) for j in judges])
    h = np.asarray(human, dtype=float)
    keep = ~np.isnan(values).any(axis=0) & ~np.isnan(h)
    values, h = values[:, keep], h[keep]
    n = int(h.size)
    if n < MIN_ITEMS:
        raise InputDataError(
            f"{criterion}: {n} item(s) every judge and the humans scored; "
            f"comparing aggregations needs {MIN_ITEMS}"
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    k = max(2, min(folds, n))
    mean_err = np.abs(values.mean(axis=0) - h)
    weighted_err = np.empty(n)
    for fold in np.array_split(order, k):
        train = np.setdiff1d(order, fold)
        w = error_weights(values[:, train] - h[train])
        weighted_err[fold] = np.abs(w @ values[:, fold] - h[fold])
    mae: dict[str, float | None] = {
        "mean": float(mean_err.mean()),
        "weighted": float(weighted_err.mean()),
    }
    notes = []
    ds = _dawid_skene_points(values, scale) if scale is not None else None
    if ds is not None:
        mae["dawid_skene"] = float(np.abs(ds - h).mean())
    else:
        notes.append(
            "Dawid-Skene not compared: the scores are not points of the scale (expected scores)"
            if scale is not None
            else "no scale given"
        )
    gain = mean_err - weighted_err
    draws = np.array([gain[rng.integers(0, n, n)].mean() for _ in range(n_resamples)])
    lo, hi = np.quantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2])
    weights = error_weights(values - h)
    return AggregationComparison(
        criterion,
        judges,
        n,
        k,
        {j: float(w) for j, w in zip(judges, weights)},
        mae,
        float(gain.mean()),
        [float(lo), float(hi)],
        notes,
    )
