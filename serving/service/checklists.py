"""Checklist rubrics on the service (#63): their bounds, and where a checklist comes in.

A checklist rubric judges each item on its own checklist (`jurybox.rubrics.checklist`): the
service expands a request's items into unit groups (`Units`, rendered by
`jurybox.serving.service.admission.prepare`), judges each group as any rubric's items
(`jurybox.serving.service.scoring.ScoringService.judge`) and assembles one verdict per item.
Here: the bounds counted before anything is rendered or judged (points per item, judge calls
per point) for ``/v1/score`` (`check_points`) and the group route (`group_calls`), where a
unit's prompt comes from in the client's terms (`unit_field`), and OpenRLHF's label read as a
checklist (`label_checklist`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jurybox.judges.judging import Requests
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.checklist import UnitGroup, checklist_calls
from jurybox.rubrics.points import read_points
from jurybox.serving.errors import Invalid, TooLarge
from jurybox.serving.service.config import Limits
from jurybox.serving.service.groups_protocol import GroupRequest


@dataclass(frozen=True)
class Units:
    """A checklist rubric's units (`jurybox.rubrics.checklist.units`) and each group's calls.

    Attributes:
        groups: The unit groups, each an ordinary rubric with its units.
        requests: Per group, its units' judge calls, rendered.
    """

    groups: list[UnitGroup]
    requests: list[Requests]


def _bound(rubric: Rubric, limits: Limits) -> tuple[int, str]:
    """The most points an item may have, and the words that say whose bound it is."""
    assert rubric.checklist is not None
    if limits.max_points <= rubric.checklist.max_points:
        return limits.max_points, f"this service takes at most {limits.max_points} (max_points)"
    n = rubric.checklist.max_points
    return n, f"rubric {rubric.name} takes at most {n} (checklist: max_points)"


def _too_many(rubric: Rubric, limits: Limits, n: int, where: str, what: str) -> None:
    """413 naming the first point over the bound, when ``what`` has more than it (``n``)."""
    bound, whose = _bound(rubric, limits)
    if n > bound:
        at = f"{where}[{bound}]"
        raise TooLarge(f"{at}: {what} has {n} points; {whose} per item", at)


def check_points(rubric: Rubric, items: Sequence[Item], limits: Limits) -> None:
    """A checklist rubric's items within the bounds on points and judge calls; 413 otherwise.

    Counted before anything is rendered or judged: every item's points against ``max_points``
    (the service's, or the rubric's ``checklist: max_points`` where smaller), and the judge calls
    of every item's points (`checklist_calls`: one per point with ``calls: per_point``, one per
    item otherwise; per judge, as every request's) against ``max_judge_calls``. The 413 names
    the first point over the bound, ``items[i].checklist[k]``. (A point's text is a field:
    longer than ``max_field_chars`` it is a 422 naming it, from `to_item`.)
    """
    assert rubric.checklist is not None
    rule = rubric.checklist
    for i, item in enumerate(items):
        if item.checklist is None:
            raise Invalid(
                f"items[{i}].checklist: missing, but the rubric {rubric.name} judges each "
                "item's own checklist (a list of points: criterion, points, tag)",
                f"items[{i}].checklist",
            )
        _too_many(rubric, limits, len(item.checklist), f"items[{i}].checklist", f"item {item.id!r}")
    per_item = [checklist_calls(rubric, [item]) for item in items]
    total = sum(per_item)
    if total <= limits.max_judge_calls:
        return
    seen = 0
    for i, calls in enumerate(per_item):
        if seen + calls > limits.max_judge_calls:
            over = limits.max_judge_calls - seen  # the first call beyond the bound
            per_point = rule.score == "points" and rule.calls == "per_point"
            where = f"items[{i}].checklist[{over}]" if per_point else f"items[{i}]"
            raise TooLarge(
                f"{where}: the request's {len(items)} items ask {total} judge calls "
                f"({'one per point' if per_point else 'one per item'} and judge, rubric "
                f"{rubric.name}); this service takes at most {limits.max_judge_calls} per "
                "request (max_judge_calls), and the calls pass it here: send fewer items",
                where,
            )
        seen += calls


def unit_field(items: list[Item], group: UnitGroup) -> Callable[[int], str]:
    """Where a unit's prompt comes from, as the client sent it: its item, and its point."""

    def where(unit: int) -> str:
        i, key = group.owner[unit]
        keys = [p.key for p in items[i].checklist or ()]
        return f"items[{i}].checklist[{keys.index(key)}]" if key in keys else f"items[{i}]"

    return where


def group_calls(
    request: GroupRequest, rubric: Rubric, pointwise: Rubric | None, limits: Limits
) -> list[int]:
    """Each group's judge calls per judge, where the rubric is a checklist rubric; its bounds.

    A checklist rubric rewards each completion pointwise on its group's checklist (the
    group's ``checklist`` field, shared by every completion): the design is ``pointwise``, the
    rubric the checklist rubric. Each completion costs `checklist_calls` (one per point with
    ``calls: per_point``). Every group's points are read and bounded here, before any judge
    runs: 422 naming ``groups[g].checklist[k]`` for a point that is not one or whose text is
    longer than ``max_field_chars``, 413 for points beyond ``max_points`` (or the rubric's
    ``checklist: max_points``).
    """
    if request.design.design != "pointwise" or pointwise is not None:
        where = "pointwise" if pointwise is not None and pointwise.checklist else "rubric"
        raise _invalid(
            where,
            "a checklist rubric rewards each completion on its group's checklist, pointwise: "
            "send it as rubric with design pointwise (and no pointwise rubric)",
        )
    calls = []
    for g, group in enumerate(request.groups):
        where = f"groups[{g}].checklist"
        raw = group.checklist
        if raw is None:
            raise _invalid(
                where,
                f"missing, but the rubric {rubric.name} judges each group's "
                "own checklist (a list of points: criterion, points, tag)",
            )
        try:
            points = read_points(raw, where)
        except ValueError as exc:
            at, _, why = str(exc).partition(": ")
            raise _invalid(at, why) from None
        for k, point in enumerate(points):
            if len(point.text) > limits.max_field_chars:
                raise _invalid(
                    f"{where}[{k}]",
                    f"{len(point.text):,} characters, more than this service's limit of "
                    f"{limits.max_field_chars:,} (max_field_chars)",
                )
        _too_many(rubric, limits, len(points), where, f"group {g}")
        one = Item(id="probe", checklist=points)
        calls.append(len(group.completions) * checklist_calls(rubric, [one]))
    return calls


def _invalid(where: str, why: str) -> Invalid:
    return Invalid(f"{where}: {why}", where)


def label_checklist(label: str, k: int) -> dict[str, Any]:
    """A checklist rubric's sample fields from its label: the checklist, and any reference.

    The label is JSON: a list of points (``[{"criterion": ..., "points": 5}, ...]``, HealthBench's
    rubric entries as they are), or ``{"checklist": [...], "reference": "..."}``. Its points are
    read as a score item's are (a 422 naming the point, ``labels[k].checklist[j]``).
    """
    where = f"labels[{k}]"
    try:
        given = json.loads(label)
    except ValueError as exc:
        raise Invalid(
            f"{where}: not JSON ({exc}); the rubric judges each sample's own checklist, which "
            'OpenRLHF\'s label carries: a JSON list of points, or {"checklist": [...], '
            '"reference": "..."}',
            where,
        ) from None
    if isinstance(given, list):
        return {"checklist": given}
    if not isinstance(given, dict) or "checklist" not in given:
        raise Invalid(
            f"{where}: a JSON list of points, or an object with checklist (and reference), "
            f"for this checklist rubric; got {type(given).__name__}"
            + (f" with {sorted(given)[:5]}" if isinstance(given, dict) else ""),
            where,
        )
    unknown = sorted(set(given) - {"checklist", "reference"})
    if unknown:
        raise Invalid(
            f"{where}: {unknown[0]!r} is not a field of a checklist label (checklist, reference)",
            where,
        )
    reference = given.get("reference")
    if reference is not None and not isinstance(reference, str):
        raise Invalid(f"{where}.reference: a string, got {type(reference).__name__}", where)
    return {k: v for k, v in given.items() if v is not None}
