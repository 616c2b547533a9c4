"""Fitting a cascaded jury on human labels: each stage's verdicts on the labelled items,
recomputed from the votes exactly as a cascaded run decides them (:mod:`jurybox.judges.cascade`),
then the threshold with a guarantee (:func:`jurybox.calibration.cascade_threshold.fit_threshold`, which
knows nothing of juries). Here because it needs both: ``calibration`` imports nothing of
``judges`` (the stated import direction), so the glue lives above both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jurybox.calibration import HumanLabels, JudgeOutput, join
from jurybox.calibration.cascade_threshold import DEFAULT_GRID, CascadeFit, fit_threshold
from jurybox.calibration.errors import InputDataError
from jurybox.judges import JurySpec, decide, provenance
from jurybox.judges.cascade import confidence
from jurybox.rubrics import Rubric


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


def cascade_data(human: HumanLabels | str | Path, output: JudgeOutput, rubric: Rubric,
                 jury: JurySpec) -> CascadeData:
    """Each stage's verdict on each labelled item, recomputed from the votes of the stage's
    judges and every earlier stage's exactly as a cascaded run decides it, with its confidence
    and its agreement with the human consensus (within ``jury.confidence.tolerance`` on every
    criterion of ``jury.confidence.criteria``, default all)."""
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


def fit_cascade(human: HumanLabels | str | Path, output: JudgeOutput, rubric: Rubric, jury: JurySpec,
                *, target_agreement: float, risk: float, grid: Iterable[float] = DEFAULT_GRID
                ) -> tuple[CascadeFit, CascadeData, JurySpec | None]:
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
