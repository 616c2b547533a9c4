"""Active labelling's design: each item's uncertainty, its inclusion probability, the weights.

The pieces `jurybox.calibration.estimates.active` (which re-exports every name here, and whose
module docstring describes the design) builds its estimates of a benchmark's mean on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from ..data.verdicts import mixed_distribution
from ..errors import InputDataError

GOAL = "benchmark-mean"
FLOOR = 0.1
QUANTILE = 0.9
#: An unscored item's uncertainty: the largest variance of a score on a range scaled to [0, 1].
UNSCORED = 0.25


def predictive(votes: Sequence[Any], scale: Any) -> tuple[float, float] | None:
    """The mean and variance (in the scale's units) of the jury's predictive distribution.

    On one criterion (`jurybox.calibration.data.verdicts.mixed_distribution`); None without
    a scored vote.
    """
    points = mixed_distribution(votes, scale)
    if points is None:
        return None
    values, weights = np.array(list(points)), np.array(list(points.values()))
    mean = float(np.sum(values * weights))
    return mean, float(np.sum(weights * (values - mean) ** 2))


def criterion_uncertainty(votes: Sequence[Any], scale: Any) -> float | None:
    """The variance of the jury's predictive distribution on one criterion over the squared range.

    The range is ``scale``'s; the distribution `predictive`'s. None without a scored vote or
    range.
    """
    got, span = predictive(votes, scale), float(scale.high - scale.low)
    return None if got is None or span <= 0 else got[1] / span**2


def pool_model(
    records: Sequence[Any], scales: Mapping[str, Any]
) -> dict[str, dict[str, tuple[float, float] | None]]:
    """Per item and criterion, the jury's predictive mean and variance (`predictive`)."""
    return {
        r.id: {
            c: predictive([v for v in r.votes if v.criterion == c], scale)
            for c, scale in scales.items()
        }
        for r in records
    }


def pool_probabilities(records: Sequence[Any], scales: Mapping[str, Any]) -> dict[str, float]:
    """Each item's inclusion probability, as a benchmark-mean session over ``records`` gives it."""
    pi = inclusion_probabilities([item_uncertainty(r, scales) for r in records])
    return {r.id: float(p) for r, p in zip(records, pi)}


def item_uncertainty(record: Any, scales: Mapping[str, Any]) -> float:
    """An item's uncertainty (see the module's text) from its verdict record."""
    per = []
    for criterion, scale in scales.items():
        u = criterion_uncertainty([v for v in record.votes if v.criterion == criterion], scale)
        per.append(UNSCORED if u is None or record.scores.get(criterion) is None else u)
    return float(np.mean(per)) if per else UNSCORED


def inclusion_probabilities(uncertainty: Any, floor: float = FLOOR) -> np.ndarray:
    """``pi`` per item from its uncertainty (see the module's text)."""
    a = np.sqrt(np.clip(np.asarray(uncertainty, dtype=float), 0.0, None))
    if a.size == 0:
        raise InputDataError("no item to choose from")
    q = float(np.quantile(a, QUANTILE))
    if q <= 0:  # (nearly) every item certain: nothing to be active about
        return np.ones_like(a)
    return np.minimum(1.0, floor + (1.0 - floor) * a / q)


@dataclass(frozen=True)
class Design:
    """The visiting order and the coins of a session (fixed by its seed).

    ``order`` lists item indices; ``chosen[k]`` whether the k-th visited item is labelled;
    ``pi[k]`` its probability.
    """

    order: np.ndarray
    pi: np.ndarray
    chosen: np.ndarray

    @classmethod
    def draw(cls, pi: Any, rng: np.random.Generator) -> Design:
        """A fresh order and coins for items with inclusion probabilities ``pi``."""
        p = np.asarray(pi, dtype=float)
        order = rng.permutation(p.size)
        return cls(order, p[order], rng.random(p.size) < p[order])


@dataclass(frozen=True)
class MeanEstimate:
    """The weighted PPI++ mean of a criterion's human label over the pool, with its CI."""

    criterion: str
    estimate: float
    ci: tuple[float, float]
    half_width: float
    lam: float
    labelled: int
    visited: int
    pool: int
    judge_only_mean: float
    design: str
    confidence: float = 0.95
    notes: tuple[str, ...] = field(default=())
    #: The variance's two parts (module text): s_d^2 and the coins' mean term, for planning.
    s2: float = math.nan
    coins: float = math.nan
    #: Which interval ``ci`` is (`jurybox.calibration.estimates.rectified`): ``normal``
    #: (PPI++'s), or ``betting`` (finite-sample, while too few labels depart from the jury).
    interval: str = "normal"
    #: The labelled items whose label is another level than the jury's score.
    departures: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The estimate as plain data."""
        return {
            "criterion": self.criterion,
            "estimate": self.estimate,
            "ci": list(self.ci),
            "half_width": self.half_width,
            "interval": self.interval,
            "departures": self.departures,
            "lambda": self.lam,
            "labelled": self.labelled,
            "visited": self.visited,
            "pool": self.pool,
            "judge_only_mean": self.judge_only_mean,
            "design": self.design,
            "confidence": self.confidence,
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        c = round(self.confidence * 100)
        kind = "PPI++" if self.interval == "normal" else "betting interval, PPI++"
        return (
            f"{self.criterion}: mean {self.estimate:.4f} [{self.ci[0]:.4f}, "
            f"{self.ci[1]:.4f}] ({c}% CI, half-width {self.half_width:.4f}; {kind} lambda "
            f"{self.lam:.2f}; {self.labelled} labelled of {self.visited} visited, pool "
            f"{self.pool}, {self.design}); the jury alone: {self.judge_only_mean:.4f}"
        )


def weighted_mean(
    f_pool: Any,
    f: Any,
    y: Any,
    pi: Any,
    visited: int,
    *,
    lam: float | None = None,
    model: tuple[Any, Any, Any] | None = None,
) -> tuple[float, float, float, float, float]:
    """(estimate, standard error, lambda, s_d^2, coins' term) of the pool's mean label.

    The formulas are in the module's text. ``f_pool``: the jury's score on every item of the pool;
    ``f``, ``y``, ``pi``: the labelled items' score, label and inclusion probability; ``visited``:
    M, the visited items (labelled or not), at least as many as labelled. ``model``: the jury's
    predictive mean, variance and the inclusion probability of every item of the pool (aligned
    with ``f_pool``), for the floor ``V_jury`` on the variance (None: no floor).
    """
    fp, f_, y_, p = (np.asarray(a, dtype=float) for a in (f_pool, f, y, pi))
    n, m, big_n = y_.size, int(visited), fp.size
    if n < 2:
        raise InputDataError(f"need at least 2 labelled items; got {n}")
    if not n <= m <= big_n:
        raise InputDataError(
            f"the visited items ({m}) must be between the labelled ({n}) and the pool ({big_n})"
        )
    if np.any((p <= 0) | (p > 1)) or np.isnan(p).any():
        raise InputDataError("inclusion probabilities must be in (0, 1]")

    def d(lam_: float) -> np.ndarray:  # the visited items' terms; the unlabelled ones are 0
        out = np.zeros(m)
        out[:n] = (y_ - lam_ * f_) / p
        return out

    if lam is None:
        a, b = d(0.0), d(0.0) - d(1.0)  # d(lam) = a - lam * b
        var_b = float(np.var(b, ddof=1))
        lam = 0.0 if var_b <= 0 else float(np.clip(np.cov(a, b, ddof=1)[0, 1] / var_b, 0, 1))
    terms = d(lam)
    estimate = lam * float(fp.mean()) + float(terms.mean())
    coins = float(np.sum((1.0 - p) / p**2 * (y_ - lam * f_) ** 2)) / m
    s2 = float(np.var(terms, ddof=1))
    if model is not None:
        mean, var, pi_pool = (np.asarray(a, dtype=float) for a in model)
        bias = mean - lam * fp
        second = var + bias**2
        s2 = max(s2, float(np.mean(second / pi_pool) - np.mean(bias) ** 2))
        coins = max(coins, float(np.mean((1.0 - pi_pool) / pi_pool * second)))
    variance = (1.0 - m / big_n) * s2 / m + coins / big_n
    return estimate, math.sqrt(max(variance, 0.0)), float(lam), s2, coins


def overstatement(y: Any, mean: Any, var: Any, low: float, high: float) -> np.ndarray:
    """After each label, the z statistic of "the jury's distributions overstate its errors".

    After each label means over prefixes of the labelled items, in order. The statistic is the
    labels' squared distances from the jury's predictive means against the sum of its predictive
    variances, over a bound on that sum's standard deviation were the jury calibrated (each
    item's label drawn from its distribution on [low, high]: ``Var (Y - m)^2 <= c v - v^2``,
    ``c`` the farthest end's squared distance from ``m``; a bound, so rare large errors not seen
    yet do not make a sharp jury look overstated). Below ``-OVERSTATED_Z``: the labels show the
    jury is better than it says, and the floor is dropped (module text). NaN where the jury
    claims no variance.
    """
    y_, m, v = (np.asarray(a, dtype=float) for a in (y, mean, var))
    far = np.maximum(m - low, high - m) ** 2
    excess = np.cumsum((y_ - m) ** 2 - v)
    spread = np.sqrt(np.cumsum(np.maximum(far * v - v**2, 0.0)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(spread > 0, excess / spread, np.nan)


#: One-sided 5%: how far below 0 `overstatement` must fall to drop the floor.
OVERSTATED_Z = 1.6448536269514722


def z_of(confidence: float) -> float:
    """The two-sided normal quantile for ``confidence``."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def t_of(confidence: float, df: int) -> float:
    """The two-sided Student quantile for ``confidence`` with ``df`` degrees of freedom."""
    from scipy.special import stdtrit

    return float(stdtrit(max(1, df), 0.5 + confidence / 2.0))


def design_of(lines: Sequence[Mapping[str, Any]]) -> str:
    """``active`` when any label line was chosen for the benchmark mean, else ``uniform``."""
    return "active" if any(is_active(line) for line in lines) else "uniform"


def is_active(line: Mapping[str, Any]) -> bool:
    """A label line whose item was chosen actively (goal benchmark-mean)."""
    selection = line.get("selection")
    return isinstance(selection, Mapping) and selection.get("strategy") == GOAL
