"""Checklist verdict records built in tests: items with checklists judged by made-up votes.

The records are what `jurybox judge` writes for a checklist rubric: `units` expands the items
into one unit per point, each unit gets a verdict from its judges' votes, and `assemble` makes
one verdict per item (`jurybox.rubrics.checklist`); only the votes are made up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from jurybox.rubrics import Item, load_rubric
from jurybox.rubrics.checklist import assemble, units
from jurybox.rubrics.verdict import CriterionResult, Verdict, Vote


def checklist_item(id: str, points: Sequence[float], **kw) -> Item:
    """An item whose checklist has a point per weight (negative: a pitfall)."""
    return Item(
        id=id,
        question=f"Question {id}?",
        response=f"Answer {id}.",
        checklist=[
            {
                "criterion": f"point {k + 1} of {id}",
                "points": w,
                **({"tag": "essential"} if k == 0 else {}),
            }
            for k, w in enumerate(points)
        ],
        **kw,
    )


def judged_records(
    items: Sequence[Item], votes: Mapping[str, Mapping[str, Sequence[float | None]]]
) -> list[dict]:
    """The checklist rubric's verdict records on ``items``.

    Args:
        items: The items.
        votes: Per judge, per item id, its vote (1 met, 0 not, None unscored) on each point.
    """
    rubric = load_rubric("checklist")
    (group,) = units(rubric, items)
    unit_verdicts = []
    for unit, (i, key) in zip(group.items, group.owner):
        k = int(key[1:]) - 1
        cast = []
        for judge, per_item in votes.items():
            met = per_item[items[i].id][k]
            cast.append(
                Vote(judge=judge, criterion="met", score=met, label="yes" if met else "no")
                if met is not None
                else Vote(judge=judge, criterion="met", error="unparseable")
            )
        scored = [v.score for v in cast if v.score is not None]
        jury = sum(scored) / len(scored) if scored else None
        unit_verdicts.append(
            Verdict(
                id=unit.id,
                status="scored" if jury is not None else "unscored",
                rubric=group.rubric.name,
                jury="j",
                provenance="unit",
                scores={"met": jury},
                criteria={
                    "met": CriterionResult(
                        score=jury,
                        n_votes=len(cast),
                        n_scored=len(scored),
                        reason=None if scored else "below quorum (0 of 2)",
                    )
                },
                votes=cast,
            )
        )
    verdicts = assemble(rubric, items, [group], [unit_verdicts], "j", "checklist-prov")
    return [v.to_record() for v in verdicts]


def write_jsonl(path: Path, rows: Sequence[Mapping]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
