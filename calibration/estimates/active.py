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

The rooms, every name importable from here: `jurybox.calibration.estimates.active_design` (the
uncertainty, the inclusion probabilities, the weighted mean), `.active_estimate`
(`mean_estimates`), `.active_plan` (how many labels a goal needs: `plan_mean`, `mean_horizon`);
here the page's sequences (`mean_sequences`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..data.labels import labels_by_item
from ..errors import InputDataError
from .active_design import (
    FLOOR,
    GOAL,
    OVERSTATED_Z,
    QUANTILE,
    UNSCORED,
    Design,
    MeanEstimate,
    criterion_uncertainty,
    design_of,
    inclusion_probabilities,
    is_active,
    item_uncertainty,
    overstatement,
    pool_model,
    pool_probabilities,
    predictive,
    t_of,
    weighted_mean,
    z_of,
)
from .active_estimate import (
    _active_choices,
    _session_terms,
    _sure_allowance,
    _visiting_order,
    mean_estimates,
)
from .active_plan import (
    SEQUENCE_PLAN_BASIS,
    mean_horizon,
    plan_mean,
    sequence_labels_needed,
)
from .rectified import (
    NORMAL_DEPARTURES,
    Terms,
    asymptotic_bounds,
    betting_bounds,
    departures,
    rectifier_range,
    term_variance,
)

# re-exported: the rectifiers' module, and the rooms of active labelling (active_design,
# active_estimate, active_plan)
__all__ = [
    "FLOOR",
    "GOAL",
    "NORMAL_DEPARTURES",
    "OVERSTATED_Z",
    "QUANTILE",
    "SEQUENCES",
    "SEQUENCE_PLAN_BASIS",
    "UNSCORED",
    "Design",
    "MeanEstimate",
    "criterion_uncertainty",
    "design_of",
    "inclusion_probabilities",
    "is_active",
    "item_uncertainty",
    "mean_estimates",
    "mean_horizon",
    "mean_sequences",
    "overstatement",
    "plan_mean",
    "pool_model",
    "pool_probabilities",
    "predictive",
    "rectifier_range",
    "sequence_labels_needed",
    "t_of",
    "weighted_mean",
    "z_of",
]

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
