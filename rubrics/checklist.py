"""Judging items on their own checklists: units, assembly, HealthBench's score, dropout.

A checklist rubric (`Rubric.checklist`) does not judge an item directly. `units` expands a batch
of items into unit groups, each an ordinary rubric (`Rubric.unit_rubric`) with ordinary items,
which every engine judges as it judges any rubric (render, votes, quorum, cascades, cache,
replay); `assemble` then makes one verdict per item from its units' verdicts. No model or
backend imports: only the client wheel's dependencies (the client's wheel holds it).

* ``calls: per_point``: a unit per point, ``<id>::<key>``, the item with ``point``,
  ``point_points`` and ``point_tag`` among its extra fields and no checklist, judged on ``met``.
  Each point is cached on its own, keyed by its unit item (the item's fields, the unit id, i.e.
  the point's position, and the point's text, points and tag): editing a point's text re-judges
  that point only, inserting or removing one renumbers and re-judges the points after it, and a
  dropout subset re-judges nothing.
* ``calls: all_points``: the item itself, judged on ``p1`` .. ``p<n>``; items are grouped by n.
* ``score: implicit``: the item itself, on the rubric's own criteria; its verdict echoes the
  points.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import InputError
from .item import Item
from .points import ChecklistRule, Point
from .rubric import Rubric
from .verdict import CriterionResult, PointResult, Verdict, Vote

#: The extra field in which `dropout` lists the keys it left out of an item's checklist.
DROPPED = "checklist_dropped"
#: What joins an item's id and a point's key in a unit's id.
UNIT_SEP = "::"


@dataclass(frozen=True)
class UnitGroup:
    """Units judged together by one ordinary rubric.

    Attributes:
        rubric: The rubric they are judged by (`Rubric.unit_rubric`).
        items: The units.
        owner: Per unit: the index of its item in the batch, and its point's key (``""``: the
            unit is the whole item).
    """

    rubric: Rubric
    items: tuple[Item, ...]
    owner: tuple[tuple[int, str], ...]


def _rule(rubric: Rubric) -> ChecklistRule:
    if rubric.checklist is None:
        raise InputError(f"rubric {rubric.name} is not a checklist rubric", field="rubric")
    return rubric.checklist


def check_items(rubric: Rubric, items: Sequence[Item]) -> None:
    """Check that every item has a checklist within the rubric's ``max_points``.

    Raises:
        InputError: An item lacks a checklist or has too many points (naming it).
    """
    rule = _rule(rubric)
    for k, item in enumerate(items):
        if item.checklist is None:
            raise InputError(
                f"item {item.id!r} has no checklist; rubric {rubric.name} judges each item's "
                "own checklist",
                field=f"items[{k}].checklist",
            )
        if len(item.checklist) > rule.max_points:
            raise InputError(
                f"item {item.id!r} has {len(item.checklist)} points; rubric {rubric.name} takes "
                f"at most {rule.max_points} (checklist: max_points)",
                field=f"items[{k}].checklist",
            )


def units(rubric: Rubric, items: Sequence[Item]) -> list[UnitGroup]:
    """The unit groups of a checklist rubric for ``items``.

    Args:
        rubric: A checklist rubric.
        items: The items, each with its checklist (load their images first: units share them).

    Returns:
        ``per_point``: one group, a unit per point of every item; ``all_points``: a group per
        number of points, in order of first appearance; ``score: implicit``: one group, the
        rubric itself with the items.

    Raises:
        InputError: The rubric is no checklist rubric, or an item has no checklist or too many
            points.
    """
    rule = _rule(rubric)
    check_items(rubric, items)
    if rule.score == "implicit":
        return [UnitGroup(rubric, tuple(items), tuple((i, "") for i in range(len(items))))]
    if rule.calls == "per_point":
        made: list[Item] = []
        owner: list[tuple[int, str]] = []
        for i, item in enumerate(items):
            extra = {k: v for k, v in item.extra.items() if k != DROPPED}
            for p in item.checklist or ():
                made.append(
                    item.model_copy(
                        update={
                            "id": f"{item.id}{UNIT_SEP}{p.key}",
                            "checklist": None,
                            "extra": {
                                **extra,
                                "point": p.text,
                                "point_points": p.points,
                                "point_tag": p.tag,
                            },
                        }
                    )
                )
                owner.append((i, p.key))
        return [UnitGroup(rubric.unit_rubric(), tuple(made), tuple(owner))]
    by_n: dict[int, tuple[list[Item], list[tuple[int, str]]]] = {}
    for i, item in enumerate(items):
        points = item.checklist or []
        # The unit shows its points as p1..p<n>, as its criteria are named.
        keyed = [p.model_copy(update={"key": f"p{k + 1}"}) for k, p in enumerate(points)]
        unit = item.model_copy(
            update={
                "checklist": keyed,
                "extra": {k: v for k, v in item.extra.items() if k != DROPPED},
            }
        )
        group = by_n.setdefault(len(points), ([], []))
        group[0].append(unit)
        group[1].append((i, ""))
    return [UnitGroup(rubric.unit_rubric(n), tuple(us), tuple(ow)) for n, (us, ow) in by_n.items()]


def checklist_calls(rubric: Rubric, items: Sequence[Item]) -> int:
    """Judge calls per judge for ``items`` (per_point: one per point; otherwise one per item).

    Any other rubric: the items times its ``judge_calls``.
    """
    rule = rubric.checklist
    if rule is None or rule.score == "implicit" or rule.calls == "all_points":
        return len(items) * rubric.judge_calls
    return sum(len(it.checklist or ()) for it in items)


def points_score(
    points: Sequence[Point], met: Mapping[str, float | None]
) -> tuple[float | None, str | None]:
    """HealthBench's score: the points earned over the positive points possible, in [0, 1].

    A met pitfall (negative points) takes its points off; the sum is clipped to [0, 1].

    Args:
        points: The points judged.
        met: Each point's met value by key (None: unscored).

    Returns:
        The score and None; or None and why (an unscored point, or no positive points).
    """
    unscored = [p.key for p in points if met.get(p.key) is None]
    if unscored:
        return None, f"point(s) {', '.join(unscored)} unscored"
    possible = sum(p.points for p in points if p.points > 0)
    if possible <= 0:
        return None, "no positive points to earn"
    earned = sum(p.points * float(met[p.key] or 0.0) for p in points)
    return min(1.0, max(0.0, earned / possible)), None


def assemble(
    rubric: Rubric,
    items: Sequence[Item],
    groups: Sequence[UnitGroup],
    verdicts: Sequence[Sequence[Verdict]],
    jury: str,
    provenance: str,
) -> list[Verdict]:
    """One verdict per item from its units' verdicts.

    Args:
        rubric: The checklist rubric.
        items: The items `units` was given, in order.
        groups: What `units` returned.
        verdicts: Per group, the verdict of each unit, in order.
        jury: The jury's name.
        provenance: The item verdicts' provenance (the jury's with the checklist rubric).

    Returns:
        A verdict per item: ``criteria`` and ``votes`` per point key, ``scores`` each point's
        met value and the item's score (under the rule's name), ``points`` each point's
        decision, ``dropped`` the keys dropout left out. Any unscored point makes the item
        unscored, the reason listed.
    """
    rule = _rule(rubric)
    if len(verdicts) != len(groups) or any(
        len(v) != len(g.items) for g, v in zip(groups, verdicts)
    ):
        raise ValueError("assemble: a verdict per unit of every group, in order")
    parts: list[list[tuple[str, Verdict]]] = [[] for _ in items]
    for group, got in zip(groups, verdicts):
        for (i, key), verdict in zip(group.owner, got):
            parts[i].append((key, verdict))
    out = []
    for item, mine in zip(items, parts):
        points = item.checklist or []
        dropped = list(item.extra.get(DROPPED, []))
        if rule.score == "implicit":
            (_, verdict), *_ = mine
            out.append(
                verdict.model_copy(
                    update={
                        "id": item.id,
                        "rubric": rubric.name,
                        "jury": jury,
                        "provenance": provenance,
                        "points": {
                            p.key: PointResult(text=p.text, points=p.points, tag=p.tag, met=None)
                            for p in points
                        },
                        "dropped": dropped,
                    }
                )
            )
            continue
        out.append(_item_verdict(rubric, item, points, mine, dropped, jury, provenance))
    return out


def _item_verdict(
    rubric: Rubric,
    item: Item,
    points: Sequence[Point],
    mine: Sequence[tuple[str, Verdict]],
    dropped: list[str],
    jury: str,
    provenance: str,
) -> Verdict:
    assert rubric.checklist is not None
    # Each point's result and votes: a per_point unit's "met", or an all_points unit's "pk".
    results: dict[str, CriterionResult] = {}
    votes: list[Vote] = []
    if rubric.checklist.calls == "per_point":
        by_key = dict(mine)
        sources = [(p.key, by_key[p.key], "met") for p in points]
    else:
        (_, whole), *_ = mine
        sources = [(p.key, whole, f"p{k + 1}") for k, p in enumerate(points)]
    left_out: list[str] = []
    flagged: list[str] = []
    for key, verdict, name in sources:
        results[key] = verdict.criteria[name]
        votes.extend(
            v.model_copy(update={"criterion": key}) for v in verdict.votes if v.criterion == name
        )
        left_out.extend(x for x in verdict.left_out if x not in left_out)
        flagged.extend(x for x in verdict.flagged if x not in flagged)
    met = {key: results[key].score for key in results}
    score, why = points_score(points, met)
    reasons = [f"{key}: {r.reason or 'unscored'}" for key, r in results.items() if r.score is None]
    name = rubric.checklist.name
    if score is None:
        reasons.append(f"{name}: {why}")
    stages = {verdict.stage for _, verdict, _ in sources}
    return Verdict(
        id=item.id,
        status="scored" if score is not None and not reasons else "unscored",
        rubric=rubric.name,
        jury=jury,
        provenance=provenance,
        scores={**met, name: score},
        criteria=results,
        votes=votes,
        reasons=reasons,
        stage=stages.pop() if len(stages) == 1 else None,
        left_out=left_out,
        flagged=flagged,
        points={
            p.key: PointResult(
                text=p.text,
                points=p.points,
                tag=p.tag,
                met=met[p.key],
                reason=results[p.key].reason,
            )
            for p in points
        },
        dropped=dropped,
    )


def dropout(item: Item, rate: float, seed: int, step: int) -> Item:
    """The item with a seeded random subset of its checklist's points (rubric dropout).

    Each point is left out with probability ``rate``, drawn from a generator seeded by the
    SHA-256 of the seed, the step and the item's id (the same three give the same subset, in
    any process). At least one positive point is kept; keys are kept, and the keys left out
    are listed in the item's extra field `DROPPED` (a verdict's ``dropped``).

    Args:
        item: The item (not changed).
        rate: The probability of leaving a point out, in [0, 1); 0 keeps them all.
        seed: The run's seed.
        step: The training step.

    Returns:
        The item with the points kept (``item`` itself when none was left out, or it has no
        checklist).

    Raises:
        ValueError: ``rate`` is outside [0, 1).
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate {rate} must be in [0, 1)")
    if rate == 0.0 or not item.checklist:
        return item
    digest = hashlib.sha256(f"{seed}\x00{step}\x00{item.id}".encode()).digest()
    draw = random.Random(int.from_bytes(digest[:8], "big"))
    keep = [draw.random() >= rate for _ in item.checklist]
    positives = [k for k, p in enumerate(item.checklist) if p.points > 0]
    if positives and not any(keep[k] for k in positives):
        keep[draw.choice(positives)] = True
    if all(keep):
        return item
    kept = [p for p, k in zip(item.checklist, keep) if k]
    left = [p.key for p, k in zip(item.checklist, keep) if not k]
    before = list(item.extra.get(DROPPED, []))
    return item.model_copy(
        update={"checklist": kept, "extra": {**item.extra, DROPPED: before + left}}
    )
