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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputDataError
from .joined import join
from .labels import HumanLabels, load_human_labels, scales_from
from .verdicts import JudgeOutput

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
    path: list[dict[str, float]] = field(default_factory=list)  # every threshold tested

    @property
    def calls_saved(self) -> float:
        """Share of the judge calls of the last stage alone on every item that the cascade saves
        (negative when escalated items cost more than the cheap stages save)."""
        return 1.0 - self.calls_per_item / self.full_calls_per_item

    def to_dict(self) -> dict[str, Any]:
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


# --------------------------------------------------------------------------- from verdict files


def record_confidence(record: Any, criterion: str, scale: Any, tolerance: float = 0.0) -> float:
    """One stage's confidence in its verdict on one criterion (defined in the module docstring)."""
    value = record.scores.get(criterion)
    if value is None:
        return 0.0
    verdict = float(scale.snap(value))
    pooled: dict[float, float] = {}
    votes = [v for v in record.votes if v.criterion == criterion and v.scored]
    if not votes:
        return 0.0
    for vote in votes:
        if not vote.distribution:
            return 0.0
        for answer, p in vote.distribution.items():
            point = scale.parse(answer)
            pooled[point] = pooled.get(point, 0.0) + p / len(votes)
    return float(sum(p for point, p in pooled.items() if abs(point - verdict) <= tolerance + 1e-9))


@dataclass
class CascadeData:
    """Labelled items judged by every stage: per stage, its confidence and its agreement."""

    ids: list[str]
    confidence: np.ndarray           # stages x items
    agrees: np.ndarray               # stages x items
    stage_judges: list[list[str]]    # each stage's judges
    stage_calls: list[int]           # judges each stage adds (not run by an earlier stage)
    criteria: list[str]
    excluded: dict[str, int]         # why labelled items were left out, with counts


def cascade_data(human: HumanLabels | str, stages: Sequence[JudgeOutput], *, scales: Any = None,
                 criteria: Iterable[str] | None = None, tolerance: float = 0.0) -> CascadeData:
    """Join human labels with each stage's verdicts (``jurybox judge`` output of each stage's
    jury on the same labelled items) and compute every stage's confidence and agreement."""
    if len(stages) < 2:
        raise InputDataError("a cascade needs the verdicts of at least two stages")
    if tolerance < 0:
        raise InputDataError(f"tolerance must be 0 or more; got {tolerance}")
    scale_map = scales_from(scales)
    wanted = list(criteria) if criteria else None
    joined = [join(human, out, scales=scales, criteria=wanted) for out in stages]
    common = [set(j.criteria) for j in joined]
    names = [c for c in joined[-1].criteria if all(c in s for s in common)]
    if not names:
        raise InputDataError("no criterion is labelled by the humans and judged by every stage")
    ids = [i for i in joined[0].criteria[names[0]].ids
           if all(i in set(j.criteria[names[0]].ids) for j in joined[1:])]
    excluded = {"not judged by every stage": len(set().union(
        *(set(j.criteria[names[0]].ids) for j in joined))) - len(ids)}
    # The human consensus per criterion (the same whichever stage it was joined with).
    first = joined[0].criteria
    reference = {}
    for c in names:
        pos = {k: n for n, k in enumerate(first[c].ids)}
        reference[c] = first[c].human_reference[[pos[i] for i in ids]]
    labelled = np.all([~np.isnan(reference[c]) for c in names], axis=0) if ids else np.array([])
    excluded["a chosen criterion has no human label"] = int((~labelled).sum()) if ids else 0
    ids = [i for i, keep in zip(ids, labelled) if keep]
    reference = {c: r[labelled] for c, r in reference.items()} if ids else reference
    conf = np.ones((len(stages), len(ids)))
    agrees = np.ones((len(stages), len(ids)), dtype=bool)
    for k, (out, jn) in enumerate(zip(stages, joined)):
        records = {r.id: r for r in out.records}
        for c in names:
            scale = scale_map.get(c) or jn.criteria[c].scale
            verdict = np.array([np.nan if records[i].scores.get(c) is None
                                else float(records[i].scores[c]) for i in ids])
            snapped = scale.snap(verdict) if ids else verdict
            agrees[k] &= ~np.isnan(snapped) & (np.abs(snapped - reference[c]) <= tolerance + 1e-9)
            conf[k] = np.minimum(conf[k], [record_confidence(records[i], c, scale, tolerance)
                                           for i in ids])
    judges = [out.judges for out in stages]
    seen: set[str] = set()
    calls = []
    for js in judges:
        calls.append(len(set(js) - seen))
        seen |= set(js)
    if any(c == 0 for c in calls[1:]):
        raise InputDataError("every stage after the first must add at least one judge "
                             f"(stages' judges: {judges})")
    return CascadeData(ids, conf, agrees, judges, calls, names,
                       {k: v for k, v in excluded.items() if v})


def fit_cascade(human: HumanLabels | str, stages: Sequence[JudgeOutput], *, target_agreement: float,
                risk: float, scales: Any = None, criteria: Iterable[str] | None = None,
                tolerance: float = 0.0, grid: Iterable[float] = DEFAULT_GRID
                ) -> tuple[CascadeFit, CascadeData]:
    """Fit the cascade threshold from human labels and each stage's verdicts on the same items."""
    if not isinstance(human, HumanLabels):
        scale_map = scales_from(scales)
        for out in stages:  # labelled criteria map "yes"/"no" as the judges' votes did
            for crit, labels in out.label_maps().items():
                if crit not in scale_map and len(labels) >= 2:
                    from jurybox.rubrics import Scale

                    scale_map[crit] = Scale(labels=labels)
        human = load_human_labels(human, scales=scale_map or None,
                                  criteria={c for out in stages for c in out.criteria})
    data = cascade_data(human, stages, scales=scales, criteria=criteria, tolerance=tolerance)
    fit = fit_threshold(data.confidence, data.agrees, target_agreement=target_agreement,
                        risk=risk, stage_calls=data.stage_calls,
                        baseline_calls=len(data.stage_judges[-1]), grid=grid)
    return fit, data


def cascade_document(fit: CascadeFit, data: CascadeData, stages: Sequence[JudgeOutput],
                     tolerance: float, sources: Mapping[str, str]) -> dict[str, Any]:
    """What ``jurybox calibrate --cascade`` writes: the thresholds and their evidence."""
    threshold = None if math.isinf(fit.threshold) else fit.threshold
    return {
        "kind": "cascade",
        "stages": [
            {"jury": out.records[0].jury if out.records else None,
             "provenance": out.provenance, "judges": judges, "adds_calls": calls,
             "threshold": threshold if k < len(stages) - 1 else None,
             "decided_share": share, "verdicts": out.source}
            for k, (out, judges, calls, share) in enumerate(
                zip(stages, data.stage_judges, data.stage_calls, fit.decided_share))
        ],
        "criteria": data.criteria, "tolerance": tolerance,
        "confidence": "pooled score-distribution mass of the stage's verdict within tolerance, "
                      "minimum over criteria",
        "guarantee": {"target_agreement": fit.target_agreement, "risk": fit.risk,
                      "method": "fixed-sequence exact binomial test (Learn then Test)"},
        "fitted_on": {"n": fit.n, "excluded": data.excluded, **sources},
        "expected": {k: v for k, v in fit.to_dict().items()
                     if k not in ("threshold", "target_agreement", "risk", "path")},
        "path": fit.path,
    }


def describe(fit: CascadeFit, data: CascadeData) -> str:
    """Human-readable report of a fitted cascade."""
    t = "none (the last stage decides every item)" if math.isinf(fit.threshold) \
        else f"{fit.threshold:g}"
    lines = [
        f"cascade of {len(data.stage_judges)} stages on {fit.n} labelled items "
        f"(criteria: {', '.join(data.criteria)})",
        f"  threshold: {t}",
        f"  guarantee: agreement >= {fit.target_agreement:g} with probability >= "
        f"{1 - fit.risk:g} (on items like these)",
    ]
    for k, (judges, share) in enumerate(zip(data.stage_judges, fit.decided_share), start=1):
        lines.append(f"  stage {k} ({', '.join(judges)}): decides {share:.1%} of items")
    lines += [
        f"  agreement on the labelled items: cascade {fit.agreement:.3f} "
        f"(lower bound {fit.agreement_lower_bound:.3f}), last stage on every item "
        f"{fit.full_agreement:.3f}",
        f"  judge calls per item: {fit.calls_per_item:.2f} of {fit.full_calls_per_item:g} "
        f"({fit.calls_saved:.1%} saved)",
    ]
    for why, count in data.excluded.items():
        lines.append(f"  left out: {count} labelled item(s): {why}")
    return "\n".join(lines)
