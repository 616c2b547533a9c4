"""Fitting a cascaded jury's threshold on human labels.

Each stage's verdicts on the labelled items are recomputed from the votes exactly as a cascaded
run decides them (`jurybox.judges.cascade`), then the threshold is fitted with a guarantee
(`jurybox.calibration.estimates.cascade_threshold.fit_threshold`, which knows nothing of
juries). Here because it needs both: ``calibration`` imports nothing of ``judges`` (the stated
import direction), so the glue lives above both.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from jurybox.calibration import HumanLabels, JudgeOutput, join
from jurybox.calibration.errors import InputDataError
from jurybox.calibration.estimates.cascade_threshold import (
    DEFAULT_GRID,
    UNSCORED,
    CascadeFit,
    agreement_upper_bound,
    decided_stage,
    fit_threshold,
)
from jurybox.judges import JurySpec, provenance
from jurybox.judges.cascade import confidence_and_reason
from jurybox.judges.judging import decide
from jurybox.rubrics import Rubric


@dataclass
class CascadeData:
    """Labelled items judged by every judge of a cascaded jury, stage by stage.

    Per stage, its confidence (-1 where the stage's verdict is unscored: such a verdict never
    settles an item) and whether its verdict agrees with the humans; each item's group, when
    asked for.
    """

    ids: list[str]
    confidence: np.ndarray  # stages x items
    agrees: np.ndarray  # stages x items
    stage_judges: list[list[str]]  # the judges each stage adds
    criteria: list[str]
    excluded: dict[str, int]  # why labelled items were left out, with counts
    unmeasured: dict[str, int] = field(default_factory=dict)  # why a confidence is 0, counts
    groups: list[str] | None = None  # per item, its group (the labels' group column)

    def subset(self, keep: np.ndarray) -> CascadeData:
        """The items where ``keep`` is true."""
        return CascadeData(
            [i for i, k in zip(self.ids, keep) if k],
            self.confidence[:, keep],
            self.agrees[:, keep],
            self.stage_judges,
            self.criteria,
            self.excluded,
            self.unmeasured,
            None if self.groups is None else [g for g, k in zip(self.groups, keep) if k],
        )


@dataclass
class GroupResult:
    """One group of the labelled items at a fitted threshold.

    The numbers are in-sample: the guarantee is over the whole population, not per group.
    """

    group: str
    n: int
    agreement: float  # the cascade's agreement on the group's labelled items
    upper_bound: float  # Clopper-Pearson upper bound at 1 - risk on it
    decided_early: float  # share of the group's items an earlier stage decides
    below_target: bool  # the upper bound is below the target: shown to fall short

    def to_dict(self) -> dict[str, float | int | str | bool]:
        """The group's numbers as plain data."""
        return {
            "group": self.group,
            "n": self.n,
            "agreement": self.agreement,
            "upper_bound": self.upper_bound,
            "decided_early": self.decided_early,
            "below_target": self.below_target,
        }


def cascade_data(
    human: HumanLabels | str | Path,
    output: JudgeOutput,
    rubric: Rubric,
    jury: JurySpec,
    groups: Mapping[str, str] | None = None,
) -> CascadeData:
    """Each stage's verdict on each labelled item, with its confidence and agreement.

    The verdicts are recomputed from the votes of the stage's judges and every earlier stage's
    exactly as a cascaded run decides them; agreement with the human consensus is within
    ``jury.confidence.tolerance`` on every criterion of ``jury.confidence.criteria`` (default
    all).

    Args:
        human: The human labels (or their file).
        output: The jury's verdicts on the labelled items, every judge on every item.
        rubric: The rubric the items were judged with.
        jury: The cascaded jury (its stages, without thresholds).
        groups: Item id -> group: each item's group; an item without one is left out.

    Returns:
        The per-stage data.

    Raises:
        InputDataError: The jury has no stages, a judge has no votes, the verdicts come from
            another configuration, or the labels lack a criterion the cascade measures.
    """
    if not jury.stages:
        raise InputDataError(
            f"jury {jury.name} has no stages: declare them (each with the "
            "judges it adds) to fit a cascade"
        )
    jury.check_rubric(rubric)
    unfitted = jury.unfitted()
    missing = [j.name for j in jury.judges if j.name not in output.judges]
    if missing:
        raise InputDataError(
            f"{output.source}: no votes from {missing}: a cascade is fitted on items every judge "
            f"of the jury judged (run `jurybox judge` with the jury's stages left without "
            "thresholds, which judges every item with every judge)"
        )
    expected = provenance(rubric, unfitted)
    if output.provenance != expected:
        raise InputDataError(
            f"{output.source}: these verdicts come from another configuration (provenance "
            f"{output.provenance}) than the jury {jury.name} with the rubric {rubric.name} "
            f"without thresholds ({expected}): judge the labelled items with this jury "
            "and rubric",
            field="provenance",
        )
    tolerance = jury.confidence.tolerance
    scales = {c.name: c.scale for c in rubric.criteria}
    names = list(jury.confidence.criteria or scales)
    joined = join(human, output, scales=rubric, criteria=names)
    lacking = [c for c in names if c not in joined.criteria]
    if lacking:
        raise InputDataError(
            f"the human labels have no {lacking}: the cascade's agreement is "
            f"measured on {names} (the jury's confidence.criteria)"
        )
    ids = joined.criteria[names[0]].ids
    reference = np.vstack([joined.criteria[c].human_reference for c in names])
    labelled = ~np.isnan(reference).any(axis=0)
    excluded = {
        "a criterion of the cascade has no human label": int((~labelled).sum()),
        "labelled but not in the verdicts": len(joined.summary.human_only),
    }
    if groups is not None:
        grouped = np.array([i in groups for i in ids], dtype=bool)
        excluded["no value in the group column"] = int((labelled & ~grouped).sum())
        labelled &= grouped
    ids = [i for i, keep in zip(ids, labelled) if keep]
    reference = reference[:, labelled]
    records = {r.id: r for r in output.records}
    n_stages = len(jury.stages)
    stage_juries = [unfitted.stage_jury(k) for k in range(n_stages - 1)] + [unfitted]
    conf = np.zeros((n_stages, len(ids)))
    agrees = np.zeros((n_stages, len(ids)), dtype=bool)
    unmeasured: Counter[str] = Counter()
    for col, item in enumerate(ids):
        record = records[item]
        for k, stage_jury in enumerate(stage_juries):
            members = {j.name for j in stage_jury.judges}
            verdict = decide(
                rubric,
                stage_jury,
                record.provenance,
                item,
                [v for v in record.votes if v.judge in members],
            )
            values = np.array(
                [
                    np.nan
                    if verdict.scores.get(c) is None
                    else float(scales[c].snap(verdict.scores[c]))
                    for c in names
                ]
            )
            agrees[k, col] = bool(np.all(np.abs(values - reference[:, col]) <= tolerance + 1e-9))
            if verdict.status != "scored":
                conf[k, col] = UNSCORED
                continue
            conf[k, col], why = confidence_and_reason(verdict, scales, names, tolerance)
            if why is not None and k < n_stages - 1:
                unmeasured[f"stage {k + 1}: {why}"] += 1
    return CascadeData(
        ids,
        conf,
        agrees,
        [list(s.judges) for s in jury.stages],
        names,
        {k: v for k, v in excluded.items() if v},
        dict(unmeasured),
        None if groups is None else [groups[i] for i in ids],
    )


def fit_cascade(
    human: HumanLabels | str | Path,
    output: JudgeOutput,
    rubric: Rubric,
    jury: JurySpec,
    *,
    target_agreement: float,
    risk: float,
    grid: Iterable[float] = DEFAULT_GRID,
    groups: Mapping[str, str] | None = None,
    data: CascadeData | None = None,
) -> tuple[CascadeFit, CascadeData, JurySpec | None]:
    """Fit a cascaded jury's threshold on human labels and its verdicts on the labelled items.

    The verdicts are every judge's on every item.

    Args:
        human: The human labels (or their file).
        output: The jury's verdicts on the labelled items.
        rubric: The rubric the items were judged with.
        jury: The cascaded jury.
        target_agreement: The agreement with the humans the cascade must keep.
        risk: The probability allowed that the guarantee fails.
        grid: The thresholds tried.
        groups: Item id -> group: keeps each item's group in the data (see
            `group_results`).
        data: Items already gathered by `cascade_data` (a subset of them, for one
            group's fit).

    Returns:
        The fit, the per-stage data and the jury with its stages' thresholds set (what
            ``jurybox judge`` then runs), or None for the jury when no early exit is both
            certified and cheaper than the whole jury alone.
    """
    if data is None:
        data = cascade_data(human, output, rubric, jury, groups)
    fit = fit_threshold(
        data.confidence,
        data.agrees,
        target_agreement=target_agreement,
        risk=risk,
        stage_calls=[len(j) for j in data.stage_judges],
        baseline_calls=len(jury.judges),
        grid=grid,
    )
    if math.isinf(fit.threshold):
        return fit, data, None  # no early exit is certified: the cascade would save nothing
    reach = 1.0 - np.concatenate([[0.0], np.cumsum(fit.decided_share)[:-1]])
    fitted = jury.model_copy(
        update={
            "stages": [
                s.model_copy(
                    update={
                        "threshold": fit.threshold if k < len(jury.stages) - 1 else None,
                        "expected_reach": round(float(reach[k]), 4),
                    }
                )
                for k, s in enumerate(jury.stages)
            ]
        }
    )
    return fit, data, fitted


def fit_by_group(
    human: HumanLabels | str | Path,
    output: JudgeOutput,
    rubric: Rubric,
    jury: JurySpec,
    groups: Mapping[str, str],
    *,
    target_agreement: float,
    risk: float,
    grid: Iterable[float] = DEFAULT_GRID,
) -> dict[str, tuple[CascadeFit | None, CascadeData, JurySpec | None, str | None]]:
    """One threshold per group, each fitted on the group's labelled items alone.

    Each is fitted at ``risk`` split in equal parts among the groups (Bonferroni), so that with
    probability at least 1 - ``risk`` every group's cascade meets the target at once.

    Returns:
        Per group: its fit (None when refused), data, fitted jury (None without an early exit)
            and the refusal's reason.
    """
    data = cascade_data(human, output, rubric, jury, groups)
    assert data.groups is not None
    names = sorted(set(data.groups))
    share = risk / len(names)
    out: dict[str, tuple[CascadeFit | None, CascadeData, JurySpec | None, str | None]] = {}
    for name in names:
        part = data.subset(np.array([g == name for g in data.groups]))
        part.groups = None  # one group: its guarantee is its own
        try:
            fit, part, fitted = fit_cascade(
                human,
                output,
                rubric,
                jury,
                target_agreement=target_agreement,
                risk=share,
                grid=grid,
                data=part,
            )
        except InputDataError as exc:  # CascadeTargetError: this group cannot be certified
            out[name] = (None, part, None, str(exc))
            continue
        out[name] = (fit, part, fitted, None)
    return out


def group_results(fit: CascadeFit, data: CascadeData) -> list[GroupResult]:
    """Each group's in-sample agreement at the fitted threshold, with an upper bound.

    The bound is Clopper-Pearson's at 1 - risk: a group whose bound is below the target is shown
    to fall short of it (the guarantee is over the population of items, not per group).
    """
    if data.groups is None:
        return []
    stage = decided_stage(data.confidence, fit.threshold)
    right = data.agrees[stage, np.arange(len(data.ids))]
    early = stage < data.confidence.shape[0] - 1
    groups = np.array(data.groups)
    results = []
    for name in sorted(set(data.groups)):
        mask = groups == name
        n, agreed = int(mask.sum()), int(right[mask].sum())
        upper = agreement_upper_bound(agreed, n, fit.risk)
        results.append(
            GroupResult(
                name, n, agreed / n, upper, float(early[mask].mean()), upper < fit.target_agreement
            )
        )
    return results


def describe(
    fit: CascadeFit,
    data: CascadeData,
    title: str | None = None,
    population: str = "over the whole population, not per group",
) -> str:
    """Human-readable report of a fitted cascade.

    It says what is certified (``population``: over which items), then in-sample numbers
    (labelled as such), each group's when the data has groups, and what was left out.
    """
    t = (
        "none (the whole jury decides every item)"
        if math.isinf(fit.threshold)
        else f"{fit.threshold:g}"
    )
    criteria = ", ".join(data.criteria)
    lines = [
        title or f"cascade of {len(data.stage_judges)} stages on {fit.n} labelled items",
        f"  threshold: {t}",
        f"  certified: {fit.certified} (agreement: the verdict equals the human consensus on "
        f"{criteria}, within the jury's tolerance; {population})",
        "  on the labelled items (in-sample, the same labels chose the threshold; not a bound):",
    ]
    for k, (judges, share) in enumerate(zip(data.stage_judges, fit.decided_share), start=1):
        lines.append(f"    stage {k} (adds {', '.join(judges)}): decides {share:.1%}")
    lines += [
        f"    agreement: cascade {fit.in_sample_agreement:.3f}, whole jury on every item "
        f"{fit.full_in_sample_agreement:.3f}",
        f"    judge calls per item: {fit.calls_per_item:.2f} of {fit.full_calls_per_item:g} "
        f"({fit.calls_saved:.1%} saved)",
    ]
    groups = group_results(fit, data)
    if groups:
        lines.append(
            f"  by group (in-sample agreement at this threshold; upper bound at {1 - fit.risk:g}):"
        )
        for g in groups:
            flag = "  BELOW THE TARGET" if g.below_target else ""
            lines.append(
                f"    {g.group}: {g.agreement:.3f} on {g.n} items (at most "
                f"{g.upper_bound:.3f}); earlier stages decide {g.decided_early:.1%}"
                f"{flag}"
            )
    for why, count in data.unmeasured.items():
        lines.append(f"  confidence 0 on {count} item(s): {why}")
    for why, count in data.excluded.items():
        lines.append(f"  left out: {count} labelled item(s): {why}")
    return "\n".join(lines)
