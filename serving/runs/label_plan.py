"""How many further human labels each criterion needs: what ``jurybox labels plan`` calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jurybox.serving.options import (
    SEQUENCE_HELP,
    Goal,
    SequenceKind,
    argument,
    command_line,
    option,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Goal", "LabelPlan", "SequenceKind", "plan_labels"]


@dataclass
class LabelPlan:
    """The labels each criterion still needs to reach an interval's half-width.

    Attributes:
        target_width: The interval half-width wanted per criterion.
        goal: The labelling goal planned for.
        items: How many items were judged (the pool the labels come from).
        criteria: Per criterion the plan: ``further`` and ``needed`` labels (None: not
            reachable), their ``range``, the ``basis`` it comes from; for goal benchmark-mean
            also the interval shown at that count, the confidence ``sequence``'s count and, before
            any label, the ``designs`` compared.
        notes: Warnings from reading the verdicts.
    """

    target_width: float
    goal: Goal
    items: int
    criteria: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The plan as ``jurybox labels plan --json`` prints it."""
        return {
            "target_width": self.target_width,
            "goal": self.goal,
            "items": self.items,
            "criteria": self.criteria,
        }


@command_line(
    human=argument(
        type=Path,
        help="The human labels file so far (need not exist yet: then the plan comes from the "
        "verdicts alone).",
        show_default=False,
    ),
    verdicts=argument(
        type=Path, help="What `jurybox judge` wrote for the items.", exists=True, show_default=False
    ),
    target_width=option(
        help="The 95% interval half-width wanted per criterion: of the jury's agreement with the "
        "humans (a share, e.g. 0.05), or for benchmark-mean of the mean score (in the scale's "
        "units, e.g. 0.1).",
        min=0.0,
    ),
    goal=option(
        help="The labelling goal (as for `jurybox label`): agreement and cascade plan the "
        "agreement's confidence sequence, benchmark-mean the mean's interval (review has "
        "nothing to plan: it is the routed items)."
    ),
    sequence=option(help=SEQUENCE_HELP),
    rubric=option(
        "--rubric",
        "-r",
        help="Rubric name or YAML file. Default: the rubric named in the verdicts.",
        show_default=False,
    ),
)
def plan_labels(
    human: str | Path,
    verdicts: str | Path,
    target_width: float,
    *,
    goal: Goal = "agreement",
    sequence: SequenceKind = "asymptotic",
    rubric: str | None = None,
) -> LabelPlan:
    """How many further labels each criterion needs to reach ``target_width``.

    The labels file is read as it is on disk, without the writer's lock: a labelling page may
    be open on it.

    Args:
        human: The human labels file so far (need not exist yet: then the plan comes from the
            verdicts alone).
        verdicts: What ``jurybox judge`` wrote for the items.
        target_width: The 95% interval half-width wanted per criterion: of the jury's agreement
            with the humans (a share, between 0 and 0.5), or for benchmark-mean of the mean
            score (in the scale's units).
        goal: The labelling goal (as for ``jurybox label``): agreement and cascade plan the
            agreement's confidence sequence, benchmark-mean the mean's interval.
        sequence: Goal benchmark-mean: the confidence sequence shown for the mean.
        rubric: A rubric name or YAML file (default: the verdicts').

    Returns:
        The plan per criterion.

    Raises:
        InputError: No rubric jurybox knows, goal review (nothing to plan), a target width
            an agreement rate cannot have, or checklist verdicts judged point by point (not
            built for them yet).
    """
    from jurybox.calibration.data.label_store import read_latest
    from jurybox.calibration.estimates.selection import plan
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.agree import refuse_points
    from jurybox.serving.runs.inputs import load_inputs

    verdicts, human = Path(verdicts), Path(human)
    output, rubric_def, notes = load_inputs(verdicts, rubric, None)
    # it would plan on the rubric's criterion (met) while the votes sit under p1..pN
    refuse_points(output, "`jurybox labels plan`")
    if rubric_def is None:
        raise InputError("the verdicts name no rubric jurybox knows: give --rubric")
    latest = read_latest(human) if human.exists() else {}
    scales = {c.name: c.scale for c in rubric_def.criteria}
    scores = {r.id: r.scores for r in output.records}
    if goal == "review":
        raise InputError(
            "goal review has nothing to plan: its labels are the routed items, "
            f"{sum(r.route is not None for r in output.records)} in "
            f"{verdicts}",
            field="goal",
        )
    if goal == "benchmark-mean":
        result = _plan_mean(output.records, latest, scales, target_width, sequence)
    else:
        if not 0 < target_width < 0.5:
            raise InputError(
                f"--target-width {target_width}: for goal {goal} it is a "
                "half-width of an agreement rate, between 0 and 0.5",
                field="target_width",
            )
        votes: dict[str, dict[str, list[float]]] = {}
        for r in output.records:
            for v in r.votes:
                if v.score is not None:
                    votes.setdefault(r.id, {}).setdefault(v.criterion, []).append(v.score)
        result = plan(latest, scores, votes, scales, target_width)
    return LabelPlan(target_width, goal, len(scores), result, notes)


def _plan_mean(
    records: list[Any],
    latest: Mapping[tuple[str, str], dict[str, Any]],
    scales: dict[str, Any],
    width: float,
    sequence: str = "asymptotic",
) -> dict[str, dict[str, Any]]:
    """Goal benchmark-mean: the labels each criterion needs.

    The plan uses each item's inclusion probability as a session would give it, and the jury's
    predictive distribution per item and criterion; before any label, the active choice is
    compared with a uniform order (which the page's --design auto picks).
    """
    from jurybox.calibration.estimates.active import (
        design_of,
        plan_mean,
        pool_model,
        pool_probabilities,
    )
    from jurybox.calibration.estimates.selection import labelled

    lines = [line for line in latest.values() if labelled(line)]
    active = design_of(lines) == "active" or not lines
    return plan_mean(
        lines,
        {r.id: r.scores for r in records},
        pool_model(records, scales),
        scales,
        width,
        pool_probabilities(records, scales) if active else None,
        sequence=True,
        method=sequence,
        compare=not lines,
    )
