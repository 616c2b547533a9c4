"""How a pack asks a jury, and how it reads the verdicts back as per-item values.

A pack never runs models itself: it hands a `Judge` the rubric and the items to judge and
gets verdict records back. `jury_judge` judges in memory with a loaded
`jurybox.judges.Jury`; the ``jurybox bench`` command passes one that goes through the
resumable bulk runner instead, so a killed run resumes (``jurybox.serving.runs.bench``). Either
way a verdict means what it means everywhere in jurybox.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jurybox.rubrics import Item, Rubric, VerdictRecord

from .report import UNANSWERED, UNSCORED, Missing


@dataclass
class Judged:
    """Verdict records by item id; ``failed`` says why an item has none.

    Attributes:
        records: The verdict records, by item id.
        failed: Why an item has no verdict record, by item id.
    """

    records: dict[str, VerdictRecord]
    failed: dict[str, str] = field(default_factory=dict)

    def judges(self) -> list[str]:
        """Judge names in the order their votes appear."""
        names: dict[str, None] = {}
        for record in self.records.values():
            names.update(dict.fromkeys(v.judge for v in record.votes))
        return list(names)


class Judge(Protocol):
    """How a pack asks a jury: judges ``items`` with ``rubric``.

    ``task`` names the set (e.g. ``mirage-id``), which a file-backed judge uses to name its output.
    """

    def __call__(self, task: str, rubric: Rubric, items: Sequence[Item]) -> Judged:
        """Judge ``items`` with ``rubric``.

        Args:
            task: Names the set (e.g. ``mirage-id``).
            rubric: The rubric to judge with.
            items: The items to judge.

        Returns:
            The verdict records by item id, and why an item has none.
        """
        ...


class _Scores(Protocol):
    def score(self, rubric: Rubric, items: Sequence[Item]) -> Sequence[Any]: ...


def jury_judge(
    jury: _Scores, chunk_size: int = 16, progress: Callable[[str, int, int], Any] | None = None
) -> Judge:
    """A `Judge` that scores in memory with ``jury``; nothing is written, so nothing resumes.

    Args:
        jury: A `jurybox.judges.Jury` (anything with its ``score``).
        chunk_size: Items judged at a time.
        progress: Called as ``progress(task, items done, items)`` after each chunk.

    Returns:
        The judge.
    """

    def judge(task: str, rubric: Rubric, items: Sequence[Item]) -> Judged:
        records: dict[str, VerdictRecord] = {}
        for start in range(0, len(items), chunk_size):
            for verdict in jury.score(rubric, list(items[start : start + chunk_size])):
                records[verdict.id] = verdict.verdict_record()
            if progress is not None:
                progress(task, min(start + chunk_size, len(items)), len(items))
        return Judged(records)

    return judge


def item_values(
    ids: Sequence[str],
    unanswered: set[str],
    judged: Judged,
    criterion: str,
    *,
    judge: str | None = None,
    rubric: Rubric | None = None,
) -> list[float | Missing]:
    """Per item: the jury's score on ``criterion``, UNANSWERED, or UNSCORED.

    The jury's score (or one ``judge``'s vote; a formula's value from that judge's votes when
    ``criterion`` is the rubric's formula), UNANSWERED, or UNSCORED when there is no verdict or no
    score.
    """
    out: list[float | Missing] = []
    formula = (
        rubric.formula
        if rubric is not None and rubric.formula is not None and rubric.formula.name == criterion
        else None
    )
    for i in ids:
        if i in unanswered:
            out.append(UNANSWERED)
            continue
        record = judged.records.get(i)
        if record is None:
            out.append(UNSCORED)
            continue
        if judge is None:
            value = record.scores.get(criterion)
        elif formula is not None:
            votes = {v.criterion: v.score for v in record.votes if v.judge == judge}
            value = formula.evaluate(votes)
        else:
            value = next(
                (v.score for v in record.votes if v.judge == judge and v.criterion == criterion),
                None,
            )
        out.append(UNSCORED if value is None else float(value))
    return out


def unscored_reasons(
    ids: Sequence[str], unanswered: set[str], judged: Judged, limit: int = 3
) -> list[str]:
    """A few reasons why items have no verdict, for the notes."""
    reasons: list[str] = []
    for i in ids:
        if i in unanswered:
            continue
        record = judged.records.get(i)
        why = (
            judged.failed.get(i)
            if record is None
            else ("; ".join(record.reasons) if record.status == "unscored" else None)
        )
        if why:
            reasons.append(f"{i}: {why if record is not None else 'no verdict: ' + why}")
        if len(reasons) >= limit:
            break
    return reasons
