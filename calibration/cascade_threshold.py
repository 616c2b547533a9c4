"""Cascade thresholds with a guarantee: trust a cheap stage where it is sure, escalate the rest.

A cascade is a sequence of stages (e.g. stage 1: one small judge; stage 2: the full panel). An item
leaves at the first stage whose **confidence** reaches the threshold ``t``; the last stage decides
whatever reaches it. This module chooses ``t`` on human-labelled items, judged by every stage, so
that (Jung et al., 2024, "Trust or Escalate", arXiv 2407.18370; Angelopoulos et al., 2021, "Learn
then Test", arXiv 2110.01052)::

    P( agreement of cascade verdicts with humans >= target ) >= 1 - risk

on items drawn like the labelled ones (i.i.d.), where agreement is the population share of items
whose cascade verdict equals the human consensus (within ``tolerance``) on every chosen criterion.

**Confidence** of a stage on an item, for one criterion: the stage's votes for that criterion are
pooled (the mean of the judges' score distributions, read from the logprobs at the score token),
and the confidence is the pooled probability of the stage's verdict, snapped to the scale, within
``tolerance``. It is high only when each judge is sure *and* the judges agree. A stage whose verdict
is unscored, or one of whose scored votes has no distribution (an API without logprobs), has
confidence 0 for that criterion: it cannot be trusted on what it cannot measure. An item's
confidence is the minimum over the chosen criteria.

**The test** (fixed-sequence testing): thresholds are tried from a grid fixed in advance, from
"nobody leaves early" (``t = inf``: the last stage decides everything) downwards. For each ``t`` the
null hypothesis "disagreement rate > 1 - target" is tested with the exact binomial p-value
``P(Binomial(n, 1 - target) <= k)``, ``k`` the disagreements of the cascade at ``t`` on the ``n``
labelled items. The walk stops at the first ``t`` whose p-value exceeds ``risk``; the chosen
threshold is the last one rejected. Testing a fixed sequence at level ``risk`` each controls the
probability of certifying any threshold whose true agreement is below target at ``risk``, whatever
the shape of the agreement curve. If the first hypothesis (the last stage on every item) cannot be
rejected, the data do not support the target: :class:`CascadeTargetError` says why and by how much,
and nothing is weakened. All stages share one threshold: a one-parameter path is what makes a
fixed sequence (a path chosen before seeing labels) possible without splitting ``risk``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputDataError

#: Thresholds tried, in this order after ``inf``: fixed before any data is seen (a requirement of
#: fixed-sequence testing). Dense near 1, where a cheap judge's trustworthy items are.
DEFAULT_GRID: tuple[float, ...] = (
    1.0, 0.9999, 0.999, 0.998, 0.995, 0.99, 0.985, 0.98, 0.975, 0.97, 0.96, 0.95, 0.94, 0.93,
    0.92, 0.91, 0.9, 0.875, 0.85, 0.825, 0.8, 0.775, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5, 0.45,
    0.4, 0.35, 0.3, 0.25, 0.2, 0.1, 0.0,
)


class CascadeTargetError(InputDataError):
    """The labelled data cannot certify the requested agreement at the requested risk."""


def binomial_p_value(disagreements: int, n: int, alpha: float) -> float:
    """Exact p-value of "disagreement rate > alpha" given ``disagreements`` out of ``n``:
    ``P(Binomial(n, alpha) <= disagreements)`` (small when there are few disagreements)."""
    from scipy.stats import binom

    return float(binom.cdf(disagreements, n, alpha))


def agreement_lower_bound(agreements: int, n: int, risk: float) -> float:
    """One-sided Clopper-Pearson lower bound on the agreement rate at confidence 1 - risk."""
    from scipy.stats import beta

    if agreements <= 0:
        return 0.0
    return float(beta.ppf(risk, agreements, n - agreements + 1))


@dataclass
class CascadeFit:
    """The chosen threshold and what it means on the labelled items."""

    threshold: float                 # inf: no stage before the last may decide
    target_agreement: float
    risk: float
    n: int                           # labelled items the threshold was fitted on
    decided_share: list[float]       # per stage: share of items it decides
    agreement: float                 # cascade agreement with humans on the labelled items
    agreement_lower_bound: float     # Clopper-Pearson bound at 1 - risk, at the chosen threshold
    full_agreement: float            # last stage on every item
    calls_per_item: float            # judge calls per item (one per judge run on it)
    full_calls_per_item: float       # the last stage alone on every item (no cascade)
    path: list[dict[str, float | None]] = field(default_factory=list)  # every threshold tested

    @property
    def calls_saved(self) -> float:
        """Share of the judge calls of the last stage alone on every item that the cascade saves
        (negative when escalated items cost more than the cheap stages save)."""
        return 1.0 - self.calls_per_item / self.full_calls_per_item

    def to_dict(self) -> dict[str, Any]:
        """The fit as plain data, with :attr:`calls_saved`; an infinite threshold is None."""
        return {
            "threshold": None if math.isinf(self.threshold) else self.threshold,
            "target_agreement": self.target_agreement, "risk": self.risk, "n": self.n,
            "decided_share": self.decided_share, "agreement": self.agreement,
            "agreement_lower_bound": self.agreement_lower_bound,
            "full_agreement": self.full_agreement, "calls_per_item": self.calls_per_item,
            "full_calls_per_item": self.full_calls_per_item, "calls_saved": self.calls_saved,
            "path": self.path,
        }


def decided_stage(confidence: np.ndarray, threshold: float) -> np.ndarray:
    """Per item, the stage that decides it: the first stage before the last whose confidence
    reaches ``threshold``, else the last. ``confidence`` is stages x items (the last row unused)."""
    n_stages = confidence.shape[0]
    early = confidence[:-1] >= threshold
    first = np.argmax(early, axis=0)
    return np.where(early.any(axis=0), first, n_stages - 1)


def fit_threshold(confidence: np.ndarray, agrees: np.ndarray, *, target_agreement: float,
                  risk: float, stage_calls: Sequence[float] | None = None,
                  baseline_calls: float | None = None,
                  grid: Iterable[float] = DEFAULT_GRID) -> CascadeFit:
    """Choose the cascade threshold by fixed-sequence testing (see the module docstring).

    ``confidence`` and ``agrees`` are stages x items: each stage's confidence on each labelled
    item, and whether each stage's verdict agrees with the humans. ``stage_calls[k]`` is the number
    of judge calls stage ``k`` adds for an item that reaches it (default 1 each);
    ``baseline_calls`` those of the last stage alone on an item (default: every stage's). Raises
    :class:`CascadeTargetError` when even the last stage on every item cannot be certified.
    """
    confidence = np.asarray(confidence, dtype=float)
    agrees = np.asarray(agrees, dtype=bool)
    if confidence.ndim != 2 or confidence.shape != agrees.shape:
        raise InputDataError(f"confidence {confidence.shape} and agreement {agrees.shape} must "
                             "both be stages x items")
    n_stages, n = confidence.shape
    if n_stages < 2:
        raise InputDataError("a cascade needs at least two stages")
    if not 0.0 < target_agreement < 1.0:
        raise InputDataError(f"target agreement must be between 0 and 1; got {target_agreement}")
    if not 0.0 < risk < 1.0:
        raise InputDataError(f"risk must be between 0 and 1; got {risk}")
    if n == 0:
        raise InputDataError("no labelled item is judged by every stage")
    calls = np.ones(n_stages) if stage_calls is None else np.asarray(stage_calls, dtype=float)
    if calls.shape != (n_stages,):
        raise InputDataError(f"stage_calls needs one number per stage ({n_stages})")
    cumulative = np.cumsum(calls)
    alpha = 1.0 - target_agreement
    items = np.arange(n)

    def evaluate(t: float) -> tuple[np.ndarray, int]:
        stage = decided_stage(confidence, t)
        return stage, int((~agrees[stage, items]).sum())

    path: list[dict[str, float]] = []
    chosen: tuple[float, np.ndarray, int] | None = None
    for t in (math.inf, *grid):
        stage, k = evaluate(t)
        p = binomial_p_value(k, n, alpha)
        path.append({"threshold": t, "disagreements": k, "p_value": p})
        if p > risk:
            break
        chosen = (t, stage, k)
    full_k = path[0]["disagreements"]
    if chosen is None:
        bound = agreement_lower_bound(n - int(full_k), n, risk)
        raise CascadeTargetError(
            f"the data cannot support agreement {target_agreement:g} at risk {risk:g}: the last "
            f"stage alone agrees with the humans on {n - int(full_k)} of {n} labelled items "
            f"({(n - full_k) / n:.3f}); with probability 1 - {risk:g} its agreement is only known "
            f"to be at least {bound:.3f}. Lower the target, accept more risk, label more items, "
            "or strengthen the last stage"
        )
    t, stage, k = chosen
    shares = np.bincount(stage, minlength=n_stages) / n
    return CascadeFit(
        threshold=t, target_agreement=target_agreement, risk=risk, n=n,
        decided_share=[float(s) for s in shares], agreement=1.0 - k / n,
        agreement_lower_bound=agreement_lower_bound(n - k, n, risk),
        full_agreement=1.0 - full_k / n,
        calls_per_item=float(cumulative[stage].mean()),
        full_calls_per_item=float(cumulative[-1] if baseline_calls is None else baseline_calls),
        path=[{**row, "threshold": None if math.isinf(row["threshold"]) else row["threshold"]}
              for row in path],
    )
