"""Human labels per checklist point, joined with checklist verdicts (#63).

A checklist rubric judges each point of an item's own checklist met or not (its verdicts carry
``points``). Humans label the same points. Points are compared *pooled*: the unit is one
point of one item, its id ``<item id>::<key>``, all on one pseudo-criterion ``met`` (yes/no).
Point ``p1`` of one item is not ``p1`` of another, so a ``pK`` column is never joined across
items. Each item's score is compared too: the jury's (its verdict's score) and each judge's
(HealthBench's rule on that judge's votes on the points) against the human's.

Point labels file
-----------------
Any row file jurybox reads (as `jurybox.calibration.data.labels`), with columns:

* ``id`` and an optional ``rater``, as any labels file;
* ``p1``, ``p2`` ...: the point with that key met (``yes``/``no``, or 1/0; for a pitfall, met
  means the answer commits it, as the judges are asked). An empty cell leaves the point
  unlabelled: it stays missing, never counted as not met;
* ``score`` (optional): the rater's own score of the item, in [0, 1].

A rater's item score is their ``score`` where they gave one; otherwise it is computed from
their point labels by HealthBench's rule (`jurybox.rubrics.checklist.points_score`) where
they labelled every point the verdict holds, and missing where they did not.

Example (CSV)::

    id,rater,p1,p2,p3
    q1,alice,yes,no,yes
    q1,bob,yes,yes,
    q2,alice,no,no,yes
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jurybox.rubrics import Scale, VerdictRecord
from jurybox.rubrics.checklist import UNIT_SEP, points_score
from jurybox.rubrics.points import KEY, Point
from jurybox.rubrics.verdict import Vote

from ..errors import InputDataError
from ._rows import numbered_rows as _numbered_rows
from .joined import Joined, join
from .labels import HumanLabels, _human_labels
from .verdicts import JudgeOutput, ValueKind

#: The pseudo-criterion every pooled point is compared on.
MET = "met"
#: The item score's criterion.
SCORE = "score"
#: A point's scale: met (1) or not (0); given explicitly, not inferred from the values.
MET_SCALE = Scale(labels={"yes": 1.0, "no": 0.0})
#: The item score's scale for the statistics that need levels (exact, adjacent, weighted
#: kappa): tenths of [0, 1]. Correlations, the mean absolute error and alpha use the values.
SCORE_SCALE = Scale(explicit=[k / 10 for k in range(11)])


def point_judged(output: JudgeOutput) -> bool:
    """Whether ``output`` holds checklist verdicts whose points were judged one by one.

    That is, a record with ``points`` and votes on its point keys (``score: points``);
    ``score: implicit`` verdicts judge the whole checklist once and are compared on their own
    criteria, as any rubric's.
    """
    return any(record_point_judged(r) for r in output.records)


def record_point_judged(record: VerdictRecord) -> bool:
    """Whether a checklist verdict's points were judged one by one (votes on its point keys)."""
    return record.points is not None and any(v.criterion in record.points for v in record.votes)


def record_points(record: VerdictRecord) -> list[Point]:
    """A checklist verdict's points (key, text, points, tag) as the rule reads them."""
    return [
        Point(key=k, text=p.text, points=p.points, tag=p.tag)  # type: ignore[arg-type]
        for k, p in (record.points or {}).items()
    ]


def pooled_output(output: JudgeOutput) -> JudgeOutput:
    """Every judged point of every item as a record of its own, on the criterion ``met``.

    The record's id is ``<item>::<key>``, its jury score the point's met, its votes the judges'
    votes on the point; its provenance is the item's.
    """
    records = []
    for r in output.records:
        for key, point in (r.points or {}).items():
            met = r.scores.get(key, point.met)
            records.append(
                VerdictRecord(
                    id=f"{r.id}{UNIT_SEP}{key}",
                    status="scored" if met is not None else "unscored",
                    rubric=r.rubric,
                    jury=r.jury,
                    provenance=r.provenance,
                    scores={MET: met},
                    reasons=[point.reason] if point.reason else [],
                    votes=[
                        v.model_copy(update={"criterion": MET})
                        for v in r.votes
                        if v.criterion == key
                    ],
                )
            )
    return JudgeOutput(records, output.source)


def _judge_score(
    points: Sequence[Point], votes: Mapping[str, Vote], attr: str
) -> tuple[float | None, str | None]:
    met: dict[str, float | None] = {}
    for p in points:
        vote = votes.get(p.key)
        x = None if vote is None or not vote.scored else getattr(vote, attr)
        if x is None and vote is not None and vote.scored:
            x = vote.score  # no expected score read: its score
        met[p.key] = None if x is None else float(x)
    return points_score(points, met)


def item_output(output: JudgeOutput) -> JudgeOutput:
    """Per item, the jury's score and each judge's, on the criterion ``score``.

    A judge's score is HealthBench's rule on its own votes on the points (its ``score`` or,
    for the expected value, its ``expected``); a judge that left a point unscored has none.
    """
    records = []
    for r in output.records:
        if not r.points:
            continue
        points = record_points(r)
        name = next((k for k in r.scores if k not in r.points), SCORE)
        judges = list(dict.fromkeys(v.judge for v in r.votes if v.criterion in r.points))
        votes = []
        for judge in judges:
            mine: dict[str, Vote] = {}
            for v in r.votes:
                if v.judge == judge and v.criterion in r.points:
                    mine.setdefault(v.criterion, v)
            score, why = _judge_score(points, mine, "score")
            expected, _ = _judge_score(points, mine, "expected")
            votes.append(
                Vote(judge=judge, criterion=SCORE, score=score, expected=expected)
                if score is not None
                else Vote(judge=judge, criterion=SCORE, error=why or "unscored")
            )
        records.append(
            VerdictRecord(
                id=r.id,
                status=r.status,
                rubric=r.rubric,
                jury=r.jury,
                provenance=r.provenance,
                scores={SCORE: r.scores.get(name)},
                votes=votes,
            )
        )
    return JudgeOutput(records, output.source)


@dataclass
class PointLabels:
    """Human point labels, pooled as units, and each rater's item score.

    Attributes:
        met: One row per labelled point of an item and rater: id ``<item>::<key>``, the
            criterion ``met`` (1 or 0). Unlabelled points have no row.
        score: One row per item and rater: the criterion ``score`` (NaN where the rater gave
            no score and left a point unlabelled).
        from_points: How many item scores were computed from point labels.
        from_column: How many came from the ``score`` column.
        notes: What to tell the user.
    """

    met: HumanLabels
    score: HumanLabels
    from_points: int = 0
    from_column: int = 0
    notes: list[str] = field(default_factory=list)


def load_point_labels(path: str | Path, output: JudgeOutput) -> PointLabels:
    """Read a point labels file (format in this module's docstring) for checklist verdicts.

    Args:
        path: The labels file (what the labelling page writes, or any row file).
        output: The checklist verdicts (their points give each item's score rule).

    Returns:
        The pooled point labels and the item scores.

    Raises:
        InputDataError: The file cannot be read, has no ``pK`` column, or a value is not
            yes/no (a point) or in [0, 1] (a score), as `load_human_labels` refuses.
    """
    path = Path(path)
    return point_labels(_numbered_rows(path), output, str(path))


def point_labels(
    rows: Sequence[tuple[int, Mapping[str, Any]]], output: JudgeOutput, source: str = "<memory>"
) -> PointLabels:
    """`load_point_labels` for numbered rows in memory (``(row number, row)``)."""
    columns = list(dict.fromkeys(k for _, row in rows for k in row))
    keys = [c for c in columns if KEY.match(c)]
    if rows and not keys:
        raise InputDataError(
            f"{source}: no point columns (p1, p2, ...) for checklist verdicts; "
            f"its columns: {columns[:12]}",
            field="p1",
        )
    scales: dict[str, Scale] = dict.fromkeys(keys, MET_SCALE)
    wanted = keys + ([SCORE] if SCORE in columns else [])
    wide = _human_labels(rows, scales, wanted, source)
    points_of = {r.id: record_points(r) for r in output.records if r.points}
    ids, raters, met = [], [], []
    score_values = np.full(len(wide.ids), np.nan)
    from_points = from_column = 0
    problems = []
    for i, (item, rater) in enumerate(zip(wide.ids, wide.raters)):
        mine: dict[str, float | None] = {}
        for key in keys:
            value = float(wide.values[key][i])
            if math.isnan(value):
                continue
            mine[key] = value
            ids.append(f"{item}{UNIT_SEP}{key}")
            raters.append(rater)
            met.append(value)
        given = float(wide.values[SCORE][i]) if SCORE in wide.values else math.nan
        if not math.isnan(given):
            if not 0.0 <= given <= 1.0:
                problems.append(f"item {item!r}, rater {rater!r}: score {given:g} not in [0, 1]")
            score_values[i] = given
            from_column += 1
        elif item in points_of:
            score, _ = points_score(points_of[item], mine)
            if score is not None:
                score_values[i] = score
                from_points += 1
    if problems:
        raise InputDataError(f"{source}: " + "; ".join(problems[:5]), field=SCORE)
    notes = []
    if not ids:
        notes.append(f"{source}: no point is labelled (every p1, p2 ... cell is empty)")
    return PointLabels(
        HumanLabels(ids, raters, {MET: np.array(met, dtype=float)}, source, wide.extra_columns),
        HumanLabels(list(wide.ids), list(wide.raters), {SCORE: score_values}, source),
        from_points,
        from_column,
        notes,
    )


def point_join(labels: PointLabels, output: JudgeOutput, value: ValueKind = "score") -> Joined:
    """Human point labels joined with checklist verdicts: ``met`` pooled, and ``score``.

    Args:
        labels: The point labels (`load_point_labels`).
        output: The checklist verdicts.
        value: Each vote's ``score`` or ``expected`` (``met`` is labelled: its votes' scores).

    Returns:
        The join: ``met`` over the labelled points of every item, and ``score`` over the items
        with a human score (left out when none has one). The summary is the points'.

    Raises:
        JoinError: No labelled point is judged.
    """
    met = join(labels.met, pooled_output(output), scales={MET: MET_SCALE}, value=value)
    criteria = dict(met.criteria)
    if has_scores(labels):
        scored = join(labels.score, item_output(output), scales={SCORE: SCORE_SCALE}, value=value)
        criteria.update(scored.criteria)
    return Joined(criteria, met.summary, output.provenance, value)


def has_scores(labels: PointLabels) -> bool:
    """Whether any rater has an item score (given, or from every point labelled)."""
    return bool((~np.isnan(labels.score.values[SCORE])).any())
