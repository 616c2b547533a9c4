"""Human labels joined with judge verdicts on ``id``, per criterion.

Per criterion, the aligned human, judge and jury values that every agreement statistic and
calibration map starts from. Ids that do not join are counted and named, never silently
dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jurybox.rubrics import Scale

from ..errors import InputDataError, JoinError
from ._rows import EXAMPLES as _EXAMPLES
from .labels import HumanLabels, load_human_labels, scales_from
from .verdicts import JudgeOutput, ValueKind, load_judge_output


@dataclass
class JoinSummary:
    """How a join went: the ids joined, the ids only one side has, and the columns not used."""

    n_joined: int
    human_only: list[str]  # ids with human labels but no judge record
    judge_only: list[str]  # ids judged but never labelled
    ignored_columns: list[str]
    human_criteria_not_judged: list[str]

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain data, each list of unjoined ids as its count and first few ids."""
        return {
            "n_joined": self.n_joined,
            "human_only": {"count": len(self.human_only), "first": self.human_only[:_EXAMPLES]},
            "judge_only": {"count": len(self.judge_only), "first": self.judge_only[:_EXAMPLES]},
            "ignored_columns": self.ignored_columns,
            "human_criteria_not_judged": self.human_criteria_not_judged,
        }

    def warnings(self) -> list[str]:
        """Ids that did not join and columns that were not used."""
        return join_warnings(self.to_dict())

    def describe(self) -> str:
        """The summary as one line of text, with a few example ids."""
        parts = [f"{self.n_joined} items joined"]
        if self.human_only:
            parts.append(
                f"{len(self.human_only)} labelled ids have no judge record "
                f"(e.g. {', '.join(self.human_only[:5])})"
            )
        if self.judge_only:
            parts.append(
                f"{len(self.judge_only)} judged ids have no human label "
                f"(e.g. {', '.join(self.judge_only[:5])})"
            )
        if self.ignored_columns:
            parts.append(f"ignored columns: {', '.join(self.ignored_columns)}")
        if self.human_criteria_not_judged:
            parts.append(
                "human criteria not in judge output: " + ", ".join(self.human_criteria_not_judged)
            )
        return "; ".join(parts)


def join_warnings(summary: Mapping[str, Any]) -> list[str]:
    """Warnings from a join summary (`JoinSummary.to_dict`, as reports and maps keep it).

    Args:
        summary: The summary as `JoinSummary.to_dict` writes it.

    Returns:
        One line per kind of id that did not join (with its count and first ids), and one for the
        ignored label columns; empty when everything joined.
    """
    notes = []
    for key, one, many in (
        ("human_only", "labelled id has no verdict", "labelled ids have no verdict"),
        ("judge_only", "judged id has no human label", "judged ids have no human label"),
    ):
        part = summary.get(key) or {}
        if part.get("count"):
            more = ", ..." if part["count"] > len(part["first"]) else ""
            what = one if part["count"] == 1 else many
            notes.append(f"{part['count']} {what}: {', '.join(part['first'])}{more}")
    if summary.get("ignored_columns"):
        notes.append(
            f"ignored label columns (not judged criteria): {', '.join(summary['ignored_columns'])}"
        )
    return notes


@dataclass
class CriterionData:
    """Everything needed to compare judges with humans on one criterion, aligned by item.

    Attributes:
        criterion: The criterion's name.
        ids: The joined item ids, in the judge output's order (the columns below).
        human: Human raters x items (NaN missing).
        human_raters: The human raters' names, one per row of ``human``.
        judges: Judge -> its value per item (NaN missing).
        jury: The jury's aggregated score per item (NaN below quorum).
        scale: The criterion's scale (the rubric's, or inferred from the observed values).
        categorical: Whether the criterion is labelled (categories such as yes/no).
    """

    criterion: str
    ids: list[str]
    human: np.ndarray  # human raters x items (NaN missing)
    human_raters: list[str]
    judges: dict[str, np.ndarray]  # judge -> items
    jury: np.ndarray  # the jury's aggregated score (NaN below quorum)
    scale: Scale
    categorical: bool

    @property
    def human_mean(self) -> np.ndarray:
        """Per item, the mean of the human ratings (NaN where no human rated it)."""
        with np.errstate(invalid="ignore"):
            counts = (~np.isnan(self.human)).sum(axis=0)
            sums = np.nansum(self.human, axis=0)
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    @property
    def human_reference(self) -> np.ndarray:
        """Per-item human consensus on the scale: the mean snapped to the nearest scale value."""
        return self.scale.snap(self.human_mean)


@dataclass
class Joined:
    """The result of `join`: per-criterion data, the join summary, provenance and value.

    Attributes:
        criteria: Criterion -> its aligned data.
        summary: How the join went: ids joined, ids only one side has, columns not used.
        provenance: The verdicts' provenance (the jury and rubric configuration).
        value: Which vote value was used: ``score`` or ``expected``.
    """

    criteria: dict[str, CriterionData]
    summary: JoinSummary
    provenance: str | None
    value: ValueKind


def join(
    human: HumanLabels | str | Path,
    judged: JudgeOutput | str | Path,
    *,
    scales: Any = None,
    value: ValueKind = "score",
    criteria: Iterable[str] | None = None,
) -> Joined:
    """Join human labels with judge output on ``id``; unjoined ids are counted, not dropped.

    Args:
        human: Human labels, or the path of a labels file (read with the judge output's criteria
            and, without a rubric, the labels the judges' votes used).
        judged: Judge output, or the path of a ``jurybox judge`` output file.
        scales: A rubric or {criterion: scale} to validate the human labels with; otherwise each
            criterion's scale is inferred from the observed values.
        value: Which value of each vote: its ``score`` (the answer on the scale) or ``expected``
            (logprob-expected, continuous).
        criteria: The criteria to join (default: all the judge output has).

    Returns:
        The joined data per criterion, with the join summary.

    Raises:
        InputDataError: ``value`` is neither ``score`` nor ``expected``, a criterion asked for is
            not in the judge output, or a file cannot be read.
        JoinError: No id or no criterion is in both.
    """
    if value not in ("score", "expected"):
        raise InputDataError(f"value must be 'score' or 'expected'; got {value!r}")
    if not isinstance(judged, JudgeOutput):
        judged = load_judge_output(judged)
    judged_criteria = judged.criteria
    wanted = list(criteria) if criteria is not None else judged_criteria
    unknown = [c for c in wanted if c not in judged_criteria]
    if unknown:
        raise InputDataError(
            f"criteria {unknown} are not in the judge output (it has {judged_criteria})"
        )
    scale_map = scales_from(scales)
    inconsistent = getattr(scales, "inconsistent", "tie")
    if judged.pairwise:  # a, b or tie: the judges' own labels are positions, not A or B
        from jurybox.rubrics.pairwise import PREFERENCE

        for crit in judged_criteria:
            scale_map.setdefault(crit, Scale(labels=PREFERENCE))
    if not isinstance(human, HumanLabels):
        # Without a rubric, labelled criteria still map "yes"/"no" the way the judges' votes did.
        for crit, labels in judged.label_maps().items():
            if crit not in scale_map and len(labels) >= 2:
                scale_map[crit] = Scale(labels=labels)
        human = load_human_labels(human, scales=scale_map, criteria=judged_criteria)

    human_ids = list(dict.fromkeys(human.ids))
    judge_ids = judged.ids
    human_set, judge_set = set(human_ids), set(judge_ids)
    joined_ids = [i for i in judge_ids if i in human_set]
    summary = JoinSummary(
        n_joined=len(joined_ids),
        human_only=[i for i in human_ids if i not in judge_set],
        judge_only=[i for i in judge_ids if i not in human_set],
        ignored_columns=list(human.extra_columns),
        human_criteria_not_judged=[c for c in human.criteria if c not in judged_criteria],
    )
    if not joined_ids:
        raise JoinError(
            f"no ids in common between {human.source} ({len(human_ids)} ids, e.g. "
            f"{human_ids[:3]}) and {judged.source} ({len(judge_ids)} ids, e.g. {judge_ids[:3]})"
        )
    position = {i: k for k, i in enumerate(judge_ids)}
    cols = [position[i] for i in joined_ids] if len(joined_ids) != len(judge_ids) else None
    categorical = judged.categorical_criteria()
    out: dict[str, CriterionData] = {}
    for c in wanted:
        if c not in human.criteria:
            continue
        mat, raters = human.matrix(c, joined_ids)
        is_categorical = c in categorical or (c in scale_map and scale_map[c].is_labelled)
        # A labelled criterion has no meaningful expected score: its votes are the labels.
        judges = judged.judge_values(c, "score" if is_categorical else value, inconsistent)
        jury = judged.jury_values(c)
        if cols is not None:
            judges = {j: v[cols] for j, v in judges.items()}
            jury = jury[cols]
        scale = scale_map.get(c) or _infer_scale(mat, judges, value)
        out[c] = CriterionData(
            c, joined_ids, mat, raters, judges, jury, scale, is_categorical or scale.is_labelled
        )
    if not out:
        raise JoinError(
            f"no criterion is in both files: humans have {human.criteria}, "
            f"judges have {judged_criteria}"
        )
    return Joined(out, summary, judged.provenance, value)


def _infer_scale(human: np.ndarray, judges: dict[str, np.ndarray], value: str) -> Scale:
    """Without a rubric, the scale is the set of observed human (and judge score) values."""
    observed = [human[~np.isnan(human)]]
    if value == "score":
        observed += [v[~np.isnan(v)] for v in judges.values()]
    vals = np.unique(np.concatenate(observed))
    if vals.size < 2:
        vals = np.unique(np.concatenate([vals, vals + 1.0]))  # degenerate: keep a 2-point scale
    return Scale(explicit=[float(v) for v in vals])
