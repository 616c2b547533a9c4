"""Labels chosen actively for a benchmark's mean, and the weighted PPI++ estimate over them.

The labels are those of ``jurybox label --goal benchmark-mean``; the weighted estimate stays
unbiased under that choice.

The design (active inference, Zrnic and Candes 2024, arXiv 2403.03208; sampling probability
proportional to the square root of the predictor's uncertainty, arXiv 2506.07949):

- every judged item gets an *uncertainty* ``u``: per criterion, the variance of the jury's
  predictive distribution (the judges' score distributions mixed with equal weight, so the
  judges' disagreement counts too; the spread of their scores where no judge has a
  distribution), divided by the squared range of the scale, averaged over the criteria; an
  item the jury left unscored is as uncertain as a score can be (0.25);
- its *inclusion probability* ``pi = min(1, FLOOR + (1 - FLOOR) * sqrt(u) / q)``, ``q`` the
  90th percentile of ``sqrt(u)`` over the items: the most uncertain tenth is always labelled,
  and no item falls below ``FLOOR`` (which bounds the weights ``1 / pi``);
- the items are *visited* in a uniform random order fixed by the seed, and each visited item is
  labelled with probability ``pi`` (a coin, also fixed by the seed). The page offers the items
  whose coins came up, in that order; a label line records the item's ``pi`` and its position
  in the order.

The estimate, for the mean of the human label over the pool of N judged items, after the first
M items of the order are visited (M: one past the furthest labelled position)::

    theta = lam * mean_N(f) + (1/M) * sum_{visited} xi/pi * (Y - lam * f)

(``f`` the jury's score, ``xi`` 1 when labelled). Whatever ``lam`` and the jury's bias, it is
unbiased: the visited items are a simple random sample of the pool and, given them, the coins
are independent with known probabilities. Its variance (sampling of the visited items with the
finite-population correction, plus the coins)::

    V = (1 - M/N) s_d^2 / M + (1/N) * (1/M) * sum xi (1 - pi)/pi^2 (Y - lam f)^2

with ``s_d^2`` the sample variance of ``d = xi/pi (Y - lam f)`` over the visited items. The CI is
``theta +- t sqrt(max(V, V_jury))`` (``t`` Student's quantile with the labels less one degrees
of freedom: the variance is estimated; with the normal quantile an underconfident jury's
intervals covered 94.8% at 50-200 labels, #52; widened on the skewed side and replaced by the
betting interval while few labels depart from the jury: ``rectified``), where ``V_jury``
is the same variance as the jury's own distributions predict it (each item's label drawn from
its predictive distribution: mean ``m``,
variance ``v``; ``E d = m - lam f`` and ``E d^2 = (v + (m - lam f)^2) / pi`` over the whole pool):
a calibrated jury's labels are as variable as that on average, and few labels
often have not yet seen the jury's rare large errors (simulated, the empirical variance alone
covered 82% of the time where the jury is sharp on every item, 95% with the floor;
perf/RESULTS.md). An overconfident jury's empirical variance is the larger, and rules. An
underconfident one (broad distributions, accurate means) would pay for labels it does not need
(4.4 times as many, #43), so the floor is dropped once the labels show the distributions
overstate the jury's errors: `overstatement`, a one-sided 5% test whose variance is
bounded so that a sharp jury's unseen rare errors cannot trigger it.
``lam`` minimises ``s_d^2`` (PPI++'s power tuning, clipped to [0, 1]).
Labels from a uniform order (goals agreement and cascade, or a spreadsheet) are the same
estimate with every visited item labelled (``pi = 1``, M the labelled items).

Skipped items and chosen items not labelled yet count as not chosen (their count is reported):
exact only when the reason for a skip has nothing to do with the label.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from ..data.labels import labels_by_item
from ..data.verdicts import mixed_distribution
from ..errors import InputDataError
from .rectified import (
    NORMAL_DEPARTURES,
    SURE_SD,
    Terms,
    asymptotic_bounds,
    betting_bounds,
    departures,
    no_spread,
    rectifier_range,
    skew_allowance,
    step_of,
    sure_allowance,
    term_variance,
    wilson_bounds,
)

__all__ = ["NORMAL_DEPARTURES", "rectifier_range"]  # re-exported: the rectifiers' module

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


def mean_estimates(
    lines: Sequence[Mapping[str, Any]],
    pool: Mapping[str, Mapping[str, Any]],
    scales: Mapping[str, Any],
    *,
    confidence: float = 0.95,
    criteria: Sequence[str] | None = None,
    model: Mapping[str, Mapping[str, tuple[float, float] | None]] | None = None,
    probabilities: Mapping[str, float] | None = None,
) -> dict[str, MeanEstimate | str]:
    """Per criterion, the mean label over ``pool`` from label ``lines``, or why there is none.

    ``pool`` is item id -> the jury's score per criterion; ``lines`` the latest line per item and
    rater, labels only. The labels are weighted by the recorded inclusion probabilities when the
    items were chosen actively, else a simple random sample. ``model`` (`pool_model`) and,
    for an active design, every item's inclusion probability (`pool_probabilities`) give the
    variance its floor (module text). A criterion that cannot be estimated gets the reason
    instead.
    """
    active = design_of(lines) == "active"
    if active and any(
        not is_active(line) and (line.get("selection") or {}).get("strategy") != "overlap"
        for line in lines
    ):
        raise InputDataError(
            "the labels mix items chosen for the benchmark mean (goal benchmark-mean) with items "
            "chosen another way; the weighted estimate needs one design: label each goal into "
            "its own file"
        )
    positions, probability, sessions, seeds = (
        _active_choices(lines) if active else ({}, {}, set(), set())
    )
    stray = sorted(sessions - {len(pool)})
    order = (
        _visiting_order(pool, positions, probabilities, seeds)
        if active and positions and not stray
        else None
    )
    out: dict[str, MeanEstimate | str] = {}
    for criterion in criteria or list(scales):
        notes: list[str] = []
        if stray:
            notes.append(
                f"the labelling session offered {stray[0]} items, the verdicts hold "
                f"{len(pool)}: the estimate is exact only for the session's items"
            )
        human = labels_by_item(lines, criterion, scales.get(criterion), pool)
        scored = {i: s[criterion] for i, s in pool.items() if s.get(criterion) is not None}
        unscored = len(pool) - len(scored)
        if unscored:
            notes.append(
                f"{unscored} item(s) the jury left unscored are not in the pool: the "
                f"estimate is the mean label over the {len(scored)} items it scored"
            )
        ids = [i for i in human if i in scored]
        if len(human) > len(ids):
            notes.append(
                f"{len(human) - len(ids)} labelled item(s) left out: the jury left them unscored"
            )
        if len(ids) < 2:
            out[criterion] = f"{len(ids)} labelled item(s) with a jury score; need 2"
            continue
        f = np.array([scored[i] for i in ids])
        y = np.array([np.mean(human[i]) for i in ids])
        if active:
            pi = np.array([probability[i] for i in ids])
            # M counts the visited items of the pool: the scored ones (an unscored item visited
            # is not in it; counting it biases the estimate towards the jury's mean).
            reach = max(positions.values()) + 1
            if order is not None:
                visited = sum(i in scored for i in order[:reach])
            else:
                visited = round(reach * len(scored) / len(pool))
                if unscored:
                    notes.append(
                        "the visiting order could not be rebuilt from the labels' seed "
                        "and these verdicts: the scored items among the visited are "
                        "counted as their share of the pool"
                    )
            visited = min(max(visited, len(ids)), len(scored))
        else:
            pi, visited = np.ones(len(ids)), len(ids)
        if visited >= len(scored) and not active:
            notes.append("every item is labelled: the mean is exact")
        floor = None
        if model is not None and (probabilities is not None or not active):
            jury = [model.get(i, {}).get(criterion) or (scored[i], 0.0) for i in scored]
            floor = (
                [m for m, _ in jury],
                [v for _, v in jury],
                [probabilities.get(i, 1.0) if active and probabilities else 1.0 for i in scored],
            )
            scale = scales.get(criterion)
            own = [model.get(i, {}).get(criterion) or (scored[i], 0.0) for i in ids]
            if (
                scale is not None
                and overstatement(
                    y, [m for m, _ in own], [v for _, v in own], float(scale.low), float(scale.high)
                )[-1]
                < -OVERSTATED_Z
            ):
                floor = None
                notes.append(
                    "the labels show the jury's distributions overstate its errors: "
                    "the variance is the labels' own, without the floor from those "
                    "distributions"
                )
        estimate, se, lam, s2, coins = weighted_mean(
            list(scored.values()), f, y, pi, visited, model=floor
        )
        q = t_of(confidence, len(ids) - 1)
        visits = np.zeros(visited)  # the visited items' terms (the unlabelled ones 0)
        visits[: len(ids)] = (y - lam * f) / pi
        down, up = skew_allowance(visits, q)
        ci, kind = (estimate - (q + down) * se, estimate + (q + up) * se), "normal"
        scale = scales.get(criterion)
        departed = departures(y, f, scale) if scale is not None else len(ids)
        if departed < NORMAL_DEPARTURES and scale is not None:
            terms = _session_terms(
                scored,
                dict(zip(ids, y)),
                scale,
                dict(zip(ids, pi)) if active else None,
                probabilities,
                order,
                positions,
                visited,
            )
            lo, hi = betting_bounds(terms, 1.0 - confidence, terms.d.size)
            ci, kind = (min(lo, estimate), max(hi, estimate)), "betting"
            notes.append(
                f"{departed} of the {len(ids)} labelled items depart from the "
                f"jury's score (another level): fewer than {NORMAL_DEPARTURES}, so the "
                "labels cannot show the jury's rare errors yet and the interval is the "
                "betting interval at this count (valid for any jury, wide while the "
                "labels are few), not the normal one"
            )
        elif scale is not None:
            pi_pool = _pi_pool(scored, probabilities, active)
            ci = _guarded(ci, visits, lam, scored, pi_pool, q, scale, notes)
            if model is not None:
                down, up = _sure_allowance(
                    model, criterion, scale, scored, ids, y, 1.0 - confidence
                )
                if down or up:
                    ci = (ci[0] - down, ci[1] + up)
                    notes.append(
                        f"the jury is sure of some items and fewer than {NORMAL_DEPARTURES} "
                        "labels on them depart from it: the interval keeps an allowance for "
                        f"errors on them the labels have not seen (-{down:.3f}, +{up:.3f})"
                    )
        hw = (ci[1] - ci[0]) / 2
        out[criterion] = MeanEstimate(
            criterion,
            estimate,
            ci,
            hw,
            lam,
            len(ids),
            visited,
            len(scored),
            float(np.mean(list(scored.values()))),
            "active (weighted by inclusion probabilities)" if active else "simple random sample",
            confidence,
            tuple(notes),
            s2,
            coins,
            kind,
            departed,
        )
    return out


def _guarded(
    ci: tuple[float, float],
    visits: np.ndarray,
    lam: float,
    scored: Mapping[str, float],
    pi_pool: np.ndarray,
    q: float,
    scale: Any,
    notes: list[str],
) -> tuple[float, float]:
    """The normal interval ``ci``, widened to the bounded score interval if ``visits`` are alike.

    ``visits``: the terms over the visited items, all one value or not; their range is what
    the design allows with ``lam`` (`jurybox.calibration.estimates.rectified.wilson_bounds`);
    a note in ``notes`` says so.
    """
    if not no_spread(visits):
        return ci
    f_pool = np.array(list(scored.values()), dtype=float)
    t_low, t_high = rectifier_range(lam * f_pool, pi_pool, float(scale.low), float(scale.high))
    lo, hi = wilson_bounds(float(visits.mean()), visits.size, t_low, t_high, q)
    shift = lam * float(f_pool.mean())
    notes.append(
        "the labelled terms take one value (their variance estimates nothing): the "
        "interval is at least the bounded score interval of that many labels"
    )
    return min(ci[0], float(lo) + shift), max(ci[1], float(hi) + shift)


def _sure_allowance(
    model: Mapping[str, Mapping[str, tuple[float, float] | None]],
    criterion: str,
    scale: Any,
    scored: Mapping[str, float],
    labelled: Sequence[str],
    y: Any,
    alpha: float,
) -> tuple[float, float]:
    """The rare-error allowance for the items the jury is sure of, after the labels ``y``.

    `jurybox.calibration.estimates.rectified.sure_allowance`, from the jury's predictive
    variances (``model``; an item without one counts as sure, as the variance floor takes it).
    """
    step = step_of(scale)
    var = {i: (model.get(i, {}).get(criterion) or (scored[i], 0.0))[1] for i in scored}
    sure = [var[i] <= (SURE_SD * step) ** 2 + 1e-15 for i in labelled]
    away = np.abs(np.asarray(y, dtype=float) - [scored[i] for i in labelled]) >= step / 2 - 1e-12
    down, up = sure_allowance(
        list(scored.values()),
        list(var.values()),
        int(np.sum(sure)),
        int(np.sum(away & np.array(sure, dtype=bool))),
        (float(scale.low), float(scale.high)),
        step,
        alpha,
    )
    return float(down), float(up)


def _pi_pool(
    scored: Mapping[str, float], probabilities: Mapping[str, float] | None, active: bool
) -> np.ndarray:
    """The inclusion probability of every scored item (1 in a uniform design)."""
    if not active or probabilities is None:
        return np.ones(len(scored))
    return np.array([probabilities.get(i, 1.0) for i in scored], dtype=float)


def _session_terms(
    scored: Mapping[str, float],
    y: Mapping[str, float],
    scale: Any,
    recorded: Mapping[str, float] | None,
    probabilities: Mapping[str, float] | None,
    order: Sequence[str] | None,
    positions: Mapping[str, int],
    visited: int,
) -> Terms:
    """The rectifier terms of a session (`jurybox.calibration.estimates.rectified.Terms`).

    ``scored`` the pool's jury scores, ``y`` the labelled items' labels. A uniform design
    (``recorded`` None): the labelled items in the order they were labelled. An active one
    (``recorded``: each labelled item's inclusion probability): the visited items of the
    session's ``order`` (rebuilt from its seed) or, where it cannot be rebuilt, the labelled
    items at their recorded ``positions`` with the visits between them as 0, over ``visited``
    visits of the pool's scored items.
    """
    f_pool = np.array(list(scored.values()), dtype=float)
    if recorded is None:
        d = np.array([y[i] - scored[i] for i in y])
        return Terms(d, f_pool, np.ones(f_pool.size), float(scale.low), float(scale.high))
    pi_pool = np.array([recorded.get(i, (probabilities or {}).get(i, 1.0)) for i in scored])
    if order is not None:
        reach = max(positions.values()) + 1
        seen = [i for i in order[:reach] if i in scored]
        d = np.array([(y[i] - scored[i]) / recorded[i] if i in y else 0.0 for i in seen])
    else:  # the labelled items in their visiting order, spread evenly over the visits
        d = np.zeros(max(visited, len(y)))
        ranked = sorted(y, key=lambda i: positions[i])
        spots = np.linspace(0, d.size - 1, len(ranked)).round().astype(int)
        d[spots] = [(y[i] - scored[i]) / recorded[i] for i in ranked]
    return Terms(d, f_pool, pi_pool, float(scale.low), float(scale.high))


def _active_choices(
    lines: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, int], dict[str, float], set[int], set[Any]]:
    """Each item's position and inclusion probability, the session sizes and seeds recorded.

    From the actively chosen label lines: each item's position in the visiting order and its
    inclusion probability, the session sizes and the seeds they record.
    """
    positions: dict[str, int] = {}
    probability: dict[str, float] = {}
    sessions: set[int] = set()
    seeds: set[Any] = set()
    for line in lines:
        if is_active(line):
            sel = line["selection"]
            try:
                positions[str(line["id"])] = int(sel["position"])
                probability[str(line["id"])] = float(sel["probability"])
                if isinstance(sel.get("pool"), int):
                    sessions.add(sel["pool"])
                seeds.add(sel.get("seed"))
            except (KeyError, TypeError, ValueError):
                raise InputDataError(
                    f"label line for item {line.get('id')!r}: its selection "
                    f"{sel!r} lacks the position or probability of an active "
                    "choice",
                    field="selection",
                ) from None
    return positions, probability, sessions, seeds


#: The sequences the page can show for the mean (`mean_sequences`).
SEQUENCES = ("betting", "asymptotic")


def mean_sequences(
    lines: Sequence[Mapping[str, Any]],
    pool: Mapping[str, Mapping[str, Any]],
    scales: Mapping[str, Any],
    probabilities: Mapping[str, float] | None,
    alpha: float = 0.05,
    horizon: float | None = None,
    *,
    method: str = "betting",
    model: Mapping[str, Mapping[str, tuple[float, float] | None]] | None = None,
) -> dict[str, dict[str, Any] | str]:
    """Per criterion, a ``1 - alpha`` confidence sequence for the mean label over the scored items.

    The items are those the jury scored (`jurybox.calibration.stats.sequences`); the
    sequence is valid at every number of labels at once. The mean is the jury's mean over the pool
    (known) plus the mean of the rectifier ``Y - f``; the sequence is over the visited items in
    the visiting order, of ``D = xi / pi * (Y - f)`` (0 for an item visited but not chosen; each
    has the item's rectifier as its mean; `jurybox.calibration.estimates.rectified`).
    ``method``:

    - ``betting`` (finite-sample): the betting sequence of the terms scaled by the range the
      design allows (``(low - f) / pi`` to ``(high - f) / pi`` over the pool). Where every item
      is labelled with probability 1 (a uniform order) the values are the pool's own
      rectifiers, drawn without replacement; otherwise they are treated as drawn with
      replacement (exact for a pool much larger than the visits; checked by simulation on
      pools of 2,000). ``horizon``: the visits the bets are tuned for (None: every count).
    - ``asymptotic``: the betting sequence until the labels hold ``NORMAL_DEPARTURES`` items
      another level than the jury's, then the asymptotic sequence (Waudby-Smith et al. 2024)
      of the terms, tuned for ``horizon`` visits (None: a tenth of the pool, at least 30), its
      variance floored by what the jury's distributions (``model``, `pool_model`)
      predict unless the labels show they overstate it. Valid as the number of labels grows
      (not in finite samples); the price of stopping at will is about 2.4 times the labels of
      a fixed-sample interval instead of the betting sequence's 2.8-11 (perf/RESULTS.md).

    A criterion without a sequence gets the reason instead.
    """
    if method not in SEQUENCES:
        raise InputDataError(f"the sequence must be one of {list(SEQUENCES)}; got {method!r}")
    active = design_of(lines) == "active"
    positions, probability, _, seeds = _active_choices(lines) if active else ({}, {}, set(), set())
    order = _visiting_order(pool, positions, probabilities, seeds) if active and positions else None
    out: dict[str, dict[str, Any] | str] = {}
    for criterion, scale in scales.items():
        scored = {i: float(s[criterion]) for i, s in pool.items() if s.get(criterion) is not None}
        y = {
            i: float(np.mean(v)) for i, v in labels_by_item(lines, criterion, scale, scored).items()
        }
        if not y:
            out[criterion] = "no label yet"
            continue
        if active and (order is None or probabilities is None):
            out[criterion] = (
                "the visiting order cannot be rebuilt from the labels' seed and "
                "these verdicts: no confidence sequence"
            )
            continue
        recorded = (
            {i: probability.get(i, (probabilities or {})[i]) for i in scored} if active else None
        )
        terms = _session_terms(scored, y, scale, recorded, probabilities, order, positions, 0)
        departed = departures([y[i] for i in y], [scored[i] for i in y], scale)
        shown = "betting"
        if method == "asymptotic" and departed >= NORMAL_DEPARTURES:
            shown = "asymptotic"
            floor = _term_floor(model, criterion, scale, scored, y, terms)
            lo, hi = asymptotic_bounds(terms, alpha, horizon or max(30.0, len(scored) / 10), floor)
            if model is not None:
                down, up = _sure_allowance(
                    model, criterion, scale, scored, list(y), list(y.values()), alpha
                )
                lo, hi = max(float(scale.low), lo - down), min(float(scale.high), hi + up)
        else:
            lo, hi = betting_bounds(terms, alpha, horizon if method == "betting" else None)
        out[criterion] = {
            "low": lo,
            "high": hi,
            "half_width": (hi - lo) / 2,
            "labelled": len(y),
            "visited": int(terms.d.size),
            "level": 1 - alpha,
            "method": shown,
            "departures": departed,
        }
    return out


def _term_floor(
    model: Mapping[str, Mapping[str, tuple[float, float] | None]] | None,
    criterion: str,
    scale: Any,
    scored: Mapping[str, float],
    y: Mapping[str, float],
    terms: Terms,
) -> float:
    """The asymptotic sequence's floor on the terms' variance: the jury's predicted one.

    As `jurybox.calibration.estimates.rectified.term_variance` predicts it from the jury's
    distributions, unless there is no model or the labels show the distributions overstate the
    jury's errors (`overstatement`, as the fixed-sample estimate drops its floor).
    """
    if model is None:
        return 0.0
    jury = [model.get(i, {}).get(criterion) or (scored[i], 0.0) for i in scored]
    own = [model.get(i, {}).get(criterion) or (scored[i], 0.0) for i in y]
    if (
        overstatement(
            [y[i] for i in y],
            [m for m, _ in own],
            [v for _, v in own],
            float(scale.low),
            float(scale.high),
        )[-1]
        < -OVERSTATED_Z
    ):
        return 0.0
    return max(
        0.0, term_variance([m for m, _ in jury], [v for _, v in jury], terms.f_pool, terms.pi_pool)
    )


def _visiting_order(
    pool: Mapping[str, Any],
    positions: Mapping[str, int],
    probabilities: Mapping[str, float] | None,
    seeds: set[Any],
) -> list[str] | None:
    """The session's visiting order over ``pool``, rebuilt as the labelling page drew it.

    ``pool`` holds the items in the verdicts' order; the order is drawn from the recorded seed and
    the items' inclusion probabilities. None unless one seed is recorded and every labelled item
    sits at its recorded position.
    """
    if probabilities is None or len(seeds) != 1 or not isinstance(next(iter(seeds)), int):
        return None
    ids = list(pool)
    if any(i not in probabilities for i in ids):
        return None
    design = Design.draw(
        np.array([probabilities[i] for i in ids]), np.random.default_rng(next(iter(seeds)))
    )
    order = [ids[k] for k in design.order]
    ok = all(0 <= k < len(order) and order[k] == i for i, k in positions.items())
    return order if ok else None


def _visits_needed(s2: float, coins: float, pool: int, width: float, z: float) -> int | None:
    """The fewest visited items M with z * sqrt((1 - M/N) s2 / M + coins / N) <= width.

    None when even the whole pool is not enough.
    """
    room = (width / z) ** 2 - coins / pool + s2 / pool
    if room <= 0 or (width / z) ** 2 < coins / pool:
        return None
    return max(2, min(pool, math.ceil(s2 / room))) if s2 > 0 else 2


def _labels_needed(
    s2: float, coins: float, pool: int, width: float, confidence: float, rate: float
) -> int | None:
    """The labels among the visits `_visits_needed` finds (``rate``: labelled per visit).

    With Student's quantile at that count (as the interval has it; two refinements from the
    normal quantile's count settle it).
    """
    z, labels = z_of(confidence), None
    for _ in range(3):
        visits = _visits_needed(s2, coins, pool, width, z)
        if visits is None:
            return None
        labels = math.ceil(visits * rate)
        z = t_of(confidence, labels - 1)
    return labels


def plan_mean(
    lines: Sequence[Mapping[str, Any]],
    pool: Mapping[str, Mapping[str, Any]],
    model: Mapping[str, Mapping[str, tuple[float, float] | None]],
    scales: Mapping[str, Any],
    width: float,
    pi: Mapping[str, float] | None = None,
    *,
    confidence: float = 0.95,
    sequence: bool = False,
    method: str = "asymptotic",
    compare: bool = False,
) -> dict[str, dict[str, Any]]:
    """How many labels each criterion's mean needs for a CI half-width of at most ``width``.

    The width is in the scale's units, for the interval ``jurybox agree --ppi`` shows (``needed``:
    the normal interval once enough labels depart from the jury, else the betting interval at that
    count; `jurybox.calibration.estimates.rectified`, `_shown_count`). The normal
    interval's count (``normal``) comes from the labels so far (their variance, with the range
    over its 95% chi-square interval), or, before any label, from the verdicts alone (``model``:
    per item and criterion, the jury's predictive mean and variance, `pool_model`, the
    variance taken as the squared error of the jury's score: the count if the jury is calibrated,
    the range from a jury exactly right on every item to labels as spread as the scale allows,
    since only labels can show how calibrated it is); the labels' variance floored as the
    estimate floors it (module text). ``pi``: each item's inclusion probability (None: every
    visited item is labelled, a uniform order); labels are counted as the visited items times
    the mean ``pi``. With ``sequence``, beside it what the page's confidence sequence
    (``method``, `mean_sequences`) needs (`sequence_labels_needed`: simulated, about
    a second per criterion); with ``compare`` too, that for an active and a uniform order and
    which needs fewer (``designs``).
    """
    from scipy.stats import chi2

    if width <= 0:
        raise InputDataError(f"the target width must be positive; got {width}")
    now = (
        mean_estimates(lines, pool, scales, confidence=confidence, model=model, probabilities=pi)
        if lines
        else {}
    )
    out: dict[str, dict[str, Any]] = {}
    for criterion, scale in scales.items():
        scored = [i for i, s in pool.items() if s.get(criterion) is not None]
        big_n = len(scored)
        if not big_n:
            out[criterion] = {
                "labelled": 0,
                "visited": 0,
                "needed": None,
                "range": [None, None],
                "interval": None,
                "normal": None,
                "departure_rate": None,
                "further": None,
                "pool": 0,
                "basis": "no item the jury scored on this criterion",
            }
            continue
        p = np.array([1.0 if pi is None else pi[i] for i in scored])
        rate = float(p.mean())
        f = np.array([float(pool[i][criterion]) for i in scored])
        jury = [model.get(i, {}).get(criterion) or (pool[i][criterion], 0.0) for i in scored]
        mean, var = np.array([mv[0] for mv in jury]), np.array([mv[1] for mv in jury])
        e = now.get(criterion)
        if isinstance(e, MeanEstimate):
            n, m = e.labelled, e.visited
            low_q, high_q = chi2.ppf([0.025, 0.975], max(1, n - 1)) / max(1, n - 1)
            variances = [(e.s2 * k, e.coins * k) for k in (1.0, 1 / high_q, 1 / low_q)]
            basis = (
                f"{n} label(s) so far (mean {e.estimate:.3f}, half-width "
                f"{e.half_width:.3f}); the range over the 95% interval of their variance"
            )
            departing = [e.departures / max(1, e.labelled)] * len(variances)
        else:
            n, m = 0, 0
            widest = float(scale.high - scale.low) ** 2 / 4  # the most a label can vary
            variances = [
                (float(np.mean(var / p)), float(np.mean((1 - p) / p * var))),
                (0.0, 0.0),
                (widest * float(np.mean(1 / p)), widest * float(np.mean((1 - p) / p))),
                (0.0, 0.0),
            ]
            basis = (
                "the verdicts alone (no label yet): the count if the jury's distributions "
                "are calibrated, which only labels can show; the range runs from a jury "
                "better than it says, through labels as spread as the scale allows (a "
                "jury worse than it says), to labels that never depart from the jury's "
                "score (a jury sure and right, or sure and not yet seen wrong: then only "
                "the betting interval can be shown)"
            )
            # Labels that depart as the jury's distributions say (its count, and a jury better
            # than it says); every one (labels as spread as the scale allows); none.
            model_rate = _departure_rate(mean, var, f, p, scale)
            departing = [model_rate, model_rate, 1.0, 0.0]
        normal = [_labels_needed(a, b, big_n, width, confidence, rate) for a, b in variances]
        betting = functools.cache(
            lambda f=f, p=p, scale=scale: _betting_count(f, p, scale, width, confidence)
        )  # computed only where it is shown
        (needed, kind), *others = [
            _shown_count(c, share, betting) for c, share in zip(normal, departing)
        ]
        counts = sorted(
            [needed] + [c for c, _ in others], key=lambda c: math.inf if c is None else c
        )
        out[criterion] = {
            "labelled": n,
            "visited": m,
            "needed": needed,
            "range": [counts[0], counts[-1]],
            "interval": kind,
            "normal": normal[0],
            "departure_rate": departing[0],
            "further": None if needed is None else max(0, needed - n),
            "basis": basis,
            "pool": big_n,
        }
        if sequence:
            out[criterion]["sequence"] = {
                "needed": sequence_labels_needed(f, mean, var, p, scale, width, method=method),
                "method": method,
                "basis": SEQUENCE_PLAN_BASIS,
            }
            if compare and pi is not None:
                out[criterion]["designs"] = _compare_designs(
                    out[criterion]["sequence"]["needed"], f, mean, var, p, scale, width, method
                )
    return out


def _departure_rate(
    mean: np.ndarray,
    var: np.ndarray,
    f: np.ndarray,
    p: np.ndarray,
    scale: Any,
    draws: int = 20,
    seed: int = 0,
) -> float:
    """The share of labels another level than the jury's score, were they drawn from it.

    The labels drawn from the jury's own distributions (`_draw_labels`), items weighted by
    how likely each is to be labelled (``p``).
    """
    from .rectified import step_of

    rng = np.random.default_rng(seed)
    half = step_of(scale) / 2 - 1e-12
    away = np.mean(
        [
            np.abs(_draw_labels(rng, mean, var, float(scale.low), float(scale.high)) - f) >= half
            for _ in range(draws)
        ],
        axis=0,
    )
    return float(np.sum(p * away) / np.sum(p))


def _betting_count(
    f: np.ndarray, p: np.ndarray, scale: Any, width: float, confidence: float, seed: int = 0
) -> int | None:
    """The labels at which the fixed-count betting interval has half-width at most ``width``.

    That interval is what is shown while too few labels depart from the jury; every label is the
    level nearest the jury's score (the best case for it: labels that depart bring the normal
    interval sooner); found by doubling, then bisection, on one seeded session of the design, on a
    grid of 250 candidate means (rounded outwards: a little above the page's count). None when
    even every item labelled is not enough.
    """
    low, high = float(scale.low), float(scale.high)
    design = Design.draw(p, np.random.default_rng(seed))
    fo = f[design.order]
    agree = np.clip(np.asarray(scale.snap(fo), dtype=float), low, high)
    d = np.where(design.chosen, (agree - fo) / design.pi, 0.0)
    at = np.flatnonzero(design.chosen)

    def half(n: int) -> float:
        visits = int(at[n - 1]) + 1
        lo, hi = betting_bounds(
            Terms(d[:visits], f, p, low, high), 1.0 - confidence, visits, grid=250
        )
        return (hi - lo) / 2

    if at.size < 2:
        return None
    lo_n, hi_n = 2, 32  # doubling, then bisection: the cost follows the count found
    while half(min(hi_n, int(at.size))) > width:
        if hi_n >= at.size:
            return None
        lo_n, hi_n = hi_n + 1, 2 * hi_n
    hi_n = min(hi_n, int(at.size))
    while lo_n < hi_n:
        mid = (lo_n + hi_n) // 2
        lo_n, hi_n = (lo_n, mid) if half(mid) <= width else (mid + 1, hi_n)
    return lo_n


def _shown_count(
    normal: int | None, departing: float, betting: Callable[[], int | None]
) -> tuple[int | None, str]:
    """The labels at which the interval shown reaches the width, and which interval it is.

    The normal interval's count where ``NORMAL_DEPARTURES`` labels are expected to depart from the
    jury by then (at the share ``departing``); else the betting interval's count (``betting()``),
    or the count at which those departures are expected (the normal interval then), whichever is
    sooner.
    """
    expected = math.inf if departing <= 0 else math.ceil(NORMAL_DEPARTURES / departing)
    if normal is not None and normal >= expected:
        return normal, "normal"
    later = None if normal is None or math.isinf(expected) else max(normal, int(expected))
    options = [(c, k) for c, k in ((later, "normal"), (betting(), "betting")) if c is not None]
    return min(options) if options else (None, "betting")


def _compare_designs(
    active: int | None,
    f: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    p: np.ndarray,
    scale: Any,
    width: float,
    method: str,
) -> dict[str, Any]:
    """Labels the page's sequence needs with the active choice and with a uniform order, and which.

    The active choice's count (``active``) is already planned. Never the active choice where it
    costs more (under the betting sequence its weights ``1 / pi`` widen the range the bets must
    allow).
    """
    uniform = sequence_labels_needed(f, mean, var, np.ones(f.size), scale, width, method=method)
    cheaper_uniform = uniform is not None and (active is None or uniform < active)
    pick = "uniform" if cheaper_uniform else "active"

    def shown(n: int | None) -> str:
        return "more than the pool holds" if n is None else f"about {n}"

    why = (
        f"under the page's {method} sequence a uniform order needs {shown(uniform)} labels "
        f"and the active choice {shown(active)}: {pick} needs fewer"
        + (
            " (the active choice's weights 1/pi, up to "
            f"{1 / float(p.min()):.0f}, widen the range the betting sequence must allow)"
            if pick == "uniform" and method == "betting"
            else ""
        )
    )
    return {"active": active, "uniform": uniform, "pick": pick, "why": why}


#: What `sequence_labels_needed` assumes, as ``labels plan`` says it.
SEQUENCE_PLAN_BASIS = (
    "the page's confidence sequence, in sessions simulated with labels "
    "drawn from the jury's own distributions: the count if they are "
    "calibrated (an overconfident jury needs more)"
)


def mean_horizon(
    f: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    pi: np.ndarray,
    width: float,
    confidence: float = 0.95,
) -> float:
    """The visits the asymptotic sequence is tuned for, fixed before the first label.

    What a fixed-sample interval needs for half-width ``width`` were the labels drawn from the
    jury's own distributions (at least 30).
    """
    from .rectified import term_variance

    v = term_variance(mean, var, f, pi)
    return max(30.0, z_of(confidence) ** 2 * max(v, 0.0) / width**2)


def sequence_labels_needed(
    f: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    pi: np.ndarray,
    scale: Any,
    width: float,
    *,
    runs: int = 15,
    seed: int = 0,
    alpha: float = 0.05,
    method: str = "betting",
) -> int | None:
    """The median labels at which the page's sequence for the mean reaches half-width ``width``.

    The sequence is `mean_sequences`' (``method``), over ``runs`` simulated sessions of the
    design (a visiting order, coins with probabilities ``pi``), each item's label drawn with the
    jury's predictive ``mean`` and ``var`` (`_draw_labels`), the asymptotic sequence with the
    rare-error allowance for the items the jury is sure of; None when the median session
    does not get there within the pool.
    """
    from ..stats.sequences import asymptotic_cs, betting_cs

    low, high = float(scale.low), float(scale.high)
    d_low, d_high = rectifier_range(f, pi, low, high)
    uniform = bool(np.all(pi == 1.0))
    horizon = mean_horizon(f, mean, var, pi, width, 1.0 - alpha)
    floor = max(0.0, term_variance(mean, var, f, pi))
    rng = np.random.default_rng(seed)
    needs = []
    for _ in range(runs):
        order = rng.permutation(f.size)
        coins = rng.random(f.size) < pi[order]
        y = _draw_labels(rng, mean[order], var[order], low, high)
        d = np.where(coins, (y - f[order]) / pi[order], 0.0)
        lo, hi = betting_cs((d - d_low) / (d_high - d_low), alpha, f.size if uniform else None)
        half = (hi - lo) * (d_high - d_low) / 2
        if method == "asymptotic":
            away = np.cumsum(coins & (np.abs(y - f[order]) >= step_of(scale) / 2 - 1e-12))
            gate = (
                int(np.argmax(away >= NORMAL_DEPARTURES))
                if away[-1] >= NORMAL_DEPARTURES
                else f.size
            )
            a_lo, a_hi = asymptotic_cs(d, alpha, horizon, floor)
            step = step_of(scale)
            sure = (var[order] <= (SURE_SD * step) ** 2 + 1e-15) & coins
            away_sure = sure & (np.abs(y - f[order]) >= step / 2 - 1e-12)
            down, up = sure_allowance(
                f, var, np.cumsum(sure), np.cumsum(away_sure), (low, high), step, alpha
            )
            half[gate:] = (a_hi[gate:] - a_lo[gate:] + down[gate:] + up[gate:]) / 2
        met = np.flatnonzero(half[coins] <= width)
        needs.append(float(met[0] + 1) if met.size else math.inf)
    median = float(np.median(needs))
    return None if math.isinf(median) else int(median)


def _draw_labels(
    rng: np.random.Generator, mean: np.ndarray, var: np.ndarray, low: float, high: float
) -> np.ndarray:
    """Labels on a scale of whole levels with the given means and variances.

    On the level nearest the mean and its two neighbours where three points can hold them (a
    sharp jury's rare errors a whole level off, as real labels are), else a normal rounded to the
    levels.
    """
    k = np.clip(np.round(mean), low, high)
    dm = mean - k
    spread = np.maximum(var, 0.0) + dm**2
    below, above = (spread - dm) / 2, (spread + dm) / 2
    fits = (
        (below >= -1e-12)
        & (above >= -1e-12)
        & (below + above <= 1)
        & ((k - 1 >= low) | (below <= 1e-12))
        & ((k + 1 <= high) | (above <= 1e-12))
    )
    u = rng.random(mean.size)
    three = np.where(u < below, k - 1, np.where(u < below + above, k + 1, k))
    rounded = np.clip(np.round(rng.normal(mean, np.sqrt(np.maximum(var, 0.0)))), low, high)
    return np.where(fits, three, rounded)
