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
from .joined import join
from .labels import HumanLabels
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


# --------------------------------------------------------------------------- from a jury's verdicts


@dataclass
class CascadeData:
    """Labelled items judged by every judge of a cascaded jury: per stage, its confidence
    (-1 where the stage's verdict is unscored: such a verdict never settles an item) and
    whether its verdict agrees with the humans."""

    ids: list[str]
    confidence: np.ndarray           # stages x items
    agrees: np.ndarray               # stages x items
    stage_judges: list[list[str]]    # the judges each stage adds
    criteria: list[str]
    excluded: dict[str, int]         # why labelled items were left out, with counts


def cascade_data(human: HumanLabels | str | Any, output: JudgeOutput, rubric: Any,
                 jury: Any) -> CascadeData:
    """Each stage's verdict on each labelled item, recomputed from the votes of the stage's
    judges and every earlier stage's exactly as a cascaded run decides it, with its confidence
    and its agreement with the human consensus (within ``jury.confidence.tolerance`` on every
    criterion of ``jury.confidence.criteria``, default all)."""
    from jurybox.judges import decide
    from jurybox.judges.cascade import confidence

    if not jury.stages:
        raise InputDataError(f"jury {jury.name} has no stages: declare them (each with the "
                             "judges it adds) to fit a cascade")
    jury.check_rubric(rubric)
    unfitted = jury.unfitted()
    missing = [j.name for j in jury.judges if j.name not in output.judges]
    if missing:
        raise InputDataError(
            f"{output.source}: no votes from {missing}: a cascade is fitted on items every judge "
            f"of the jury judged (run `jurybox judge` with the jury's stages left without "
            "thresholds, which judges every item with every judge)")
    from jurybox.judges import provenance

    expected = provenance(rubric, unfitted)
    if output.provenance != expected:
        raise InputDataError(
            f"{output.source}: these verdicts come from another configuration (provenance "
            f"{output.provenance}) than the jury {jury.name} with the rubric {rubric.name} "
            f"without thresholds ({expected}): judge the labelled items with this jury "
            "and rubric", field="provenance")
    tolerance = jury.confidence.tolerance
    scales = {c.name: c.scale for c in rubric.criteria}
    names = list(jury.confidence.criteria or scales)
    joined = join(human, output, scales=rubric, criteria=names)
    lacking = [c for c in names if c not in joined.criteria]
    if lacking:
        raise InputDataError(f"the human labels have no {lacking}: the cascade's agreement is "
                             f"measured on {names} (the jury's confidence.criteria)")
    ids = joined.criteria[names[0]].ids
    reference = np.vstack([joined.criteria[c].human_reference for c in names])
    labelled = ~np.isnan(reference).any(axis=0)
    excluded = {"a criterion of the cascade has no human label": int((~labelled).sum()),
                "labelled but not in the verdicts": len(joined.summary.human_only)}
    ids = [i for i, keep in zip(ids, labelled) if keep]
    reference = reference[:, labelled]
    records = {r.id: r for r in output.records}
    n_stages = len(jury.stages)
    stage_juries = [unfitted.stage_jury(k) for k in range(n_stages - 1)] + [unfitted]
    conf = np.zeros((n_stages, len(ids)))
    agrees = np.zeros((n_stages, len(ids)), dtype=bool)
    for col, item in enumerate(ids):
        record = records[item]
        for k, stage_jury in enumerate(stage_juries):
            members = {j.name for j in stage_jury.judges}
            verdict = decide(rubric, stage_jury, record.provenance, item,
                             [v for v in record.votes if v.judge in members])
            values = np.array([np.nan if verdict.scores.get(c) is None
                               else float(scales[c].snap(verdict.scores[c])) for c in names])
            agrees[k, col] = bool(np.all(np.abs(values - reference[:, col]) <= tolerance + 1e-9))
            conf[k, col] = (confidence(verdict, scales, names, tolerance)
                            if verdict.status == "scored" else -1.0)
    return CascadeData(ids, conf, agrees, [list(s.judges) for s in jury.stages], names,
                       {k: v for k, v in excluded.items() if v})


def fit_cascade(human: HumanLabels | str | Any, output: JudgeOutput, rubric: Any, jury: Any, *,
                target_agreement: float, risk: float, grid: Iterable[float] = DEFAULT_GRID
                ) -> tuple[CascadeFit, CascadeData, Any]:
    """Fit a cascaded jury's threshold on human labels and its verdicts on the labelled items
    (every judge on every item). Returns the fit, the per-stage data and the jury with its
    stages' thresholds set (what ``jurybox judge`` then runs), or None for the jury when no
    early exit can be certified (the whole jury is what meets the target)."""
    data = cascade_data(human, output, rubric, jury)
    fit = fit_threshold(data.confidence, data.agrees, target_agreement=target_agreement,
                        risk=risk, stage_calls=[len(j) for j in data.stage_judges],
                        baseline_calls=len(jury.judges), grid=grid)
    if math.isinf(fit.threshold):
        return fit, data, None  # no early exit is certified: the cascade would save nothing
    reach = 1.0 - np.concatenate([[0.0], np.cumsum(fit.decided_share)[:-1]])
    fitted = jury.model_copy(update={"stages": [
        s.model_copy(update={"threshold": fit.threshold if k < len(jury.stages) - 1 else None,
                             "expected_reach": round(float(reach[k]), 4)})
        for k, s in enumerate(jury.stages)]})
    return fit, data, fitted


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
        lines.append(f"  stage {k} (adds {', '.join(judges)}): decides {share:.1%} of items")
    lines += [
        f"  agreement on the labelled items: cascade {fit.agreement:.3f} "
        f"(lower bound {fit.agreement_lower_bound:.3f}), whole jury on every item "
        f"{fit.full_agreement:.3f}",
        f"  judge calls per item: {fit.calls_per_item:.2f} of {fit.full_calls_per_item:g} "
        f"({fit.calls_saved:.1%} saved)",
    ]
    for why, count in data.excluded.items():
        lines.append(f"  left out: {count} labelled item(s): {why}")
    return "\n".join(lines)
