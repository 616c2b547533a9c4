"""``jurybox judge`` output as data for statistics, one configuration at a time.

Every record is read through the one record model (`jurybox.rubrics.VerdictRecord`).

Judge output
------------
The JSONL written by ``jurybox judge``: one verdict per line with ``id``, ``status``,
``provenance``, ``scores`` (criterion -> aggregated score or null below quorum) and ``votes``
(judge, criterion, score, label, expected, error).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from jurybox.rubrics import Rubric, VerdictRecord
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.points import KEY

from ..errors import InputDataError
from ._rows import EXAMPLES as _EXAMPLES
from ._rows import numbered_rows as _numbered_rows

ValueKind = Literal["score", "expected"]


@dataclass
class JudgeOutput:
    """Verdict records from ``jurybox judge``, one per id, all from a single provenance.

    Attributes:
        records: The verdict records, in the file's order.
        source: Where the records came from (the file's path, or ``<memory>``).
    """

    records: list[VerdictRecord]
    source: str = "<memory>"

    @property
    def ids(self) -> list[str]:
        """The records' ids, in order."""
        return [r.id for r in self.records]

    @property
    def provenance(self) -> str | None:
        """The first record's provenance, which loading makes every record's.

        None without records.
        """
        return self.records[0].provenance if self.records else None

    @property
    def judges(self) -> list[str]:
        """The judges that voted, sorted."""
        return sorted({v.judge for r in self.records for v in r.votes})

    @property
    def criteria(self) -> list[str]:
        """The criteria voted on, in order of first appearance."""
        return list(dict.fromkeys(v.criterion for r in self.records for v in r.votes))

    def categorical_criteria(self) -> set[str]:
        """Criteria whose votes carry a ``label`` (labelled scales such as yes/no).

        Returns:
            The criteria's names.
        """
        return {v.criterion for r in self.records for v in r.votes if v.label is not None}

    def label_maps(self) -> dict[str, dict[str, float]]:
        """Criterion -> {label: value} as the judges' votes used them (e.g. yes -> 1).

        Returns:
            The labelled criteria's maps.
        """
        out: dict[str, dict[str, float]] = {}
        for r in self.records:
            for v in r.votes:
                if v.label is not None and v.score is not None:
                    out.setdefault(v.criterion, {})[v.label] = float(v.score)
        return out

    @property
    def pairwise(self) -> bool:
        """Whether the records are pairwise verdicts (they carry a winner)."""
        return bool(self.records) and "winner" in self.records[0].model_fields_set

    def judge_values(
        self, criterion: str, value: ValueKind = "score", inconsistent: str = "tie"
    ) -> dict[str, np.ndarray]:
        """Judge -> per-record value (NaN where the vote is missing, unscored or lacks it).

        A pairwise judge's two votes (both orders) count as one, combined as the jury combined them.

        Args:
            criterion: The criterion.
            value: Which value of each vote: ``score`` or ``expected`` (logprob-expected).
            inconsistent: The rubric's rule for a pairwise judge's orders that disagree.

        Returns:
            Judge -> its value per record.
        """
        from jurybox.rubrics.pairwise import combine_orders

        index = {j: i for i, j in enumerate(self.judges)}
        out = np.full((len(index), len(self.records)), np.nan)
        for col, rec in enumerate(self.records):
            votes = rec.votes
            if self.pairwise:
                votes = combine_orders(
                    criterion, [v for v in votes if v.criterion == criterion], inconsistent
                )
            for v in votes:
                if v.criterion != criterion or not v.scored:
                    continue
                x = getattr(v, value)
                if x is not None:
                    out[index[v.judge], col] = float(x)
        return {j: out[i] for j, i in index.items()}

    def jury_values(self, criterion: str) -> np.ndarray:
        """The jury's aggregated score on ``criterion`` per record (NaN where it has none).

        Args:
            criterion: The criterion.

        Returns:
            One score per record.
        """
        vals = [r.scores.get(criterion) for r in self.records]
        return np.array([np.nan if v is None else float(v) for v in vals])


def mixed_distribution(votes: Sequence[Any], scale: Any) -> dict[float, float] | None:
    """The jury's predictive distribution on one criterion (scale value -> probability).

    It is the scored votes' score distributions mixed with equal weight (a vote without one is a
    point mass on its score); None without a scored vote.
    """
    texts = scale.answer_texts()
    points: dict[float, float] = {}
    scored = [v for v in votes if v.score is not None]
    if not scored:
        return None
    for vote in scored:
        dist = {float(texts[a]): p for a, p in (vote.distribution or {}).items() if a in texts}
        total = sum(dist.values())
        if not dist or total <= 0:
            dist, total = {float(vote.score): 1.0}, 1.0
        for value, p in dist.items():
            points[value] = points.get(value, 0.0) + p / total / len(scored)
    return points


def load_judge_output(path: str | Path, provenance: str | None = None) -> JudgeOutput:
    """Read ``jurybox judge`` output. Mixed provenances are an error unless one is chosen.

    Args:
        path: The JSONL file ``jurybox judge`` wrote (its ``--out``).
        provenance: The configuration to keep when the file holds several.

    Returns:
        The records, all of one provenance.

    Raises:
        InputDataError: The file cannot be read or is not judge output (a record named by line
            and field), its records come from several configurations and none was chosen, no record
            has the provenance chosen, or an id appears more than once.
    """
    path = Path(path)
    rows = _numbered_rows(path)
    return _judge_output([(f"line {n}", row) for n, row in rows], provenance, str(path))


def judge_output_from_records(
    records: Sequence[Mapping[str, Any] | VerdictRecord],
    provenance: str | None = None,
    source: str = "<memory>",
) -> JudgeOutput:
    """As `load_judge_output`, for records in memory (mappings or VerdictRecords).

    Args:
        records: The verdict records, as mappings or `VerdictRecord`.
        provenance: The configuration to keep when the records hold several.
        source: What messages and the output's ``source`` call the records.

    Returns:
        The records, all of one provenance.

    Raises:
        InputDataError: The records are not judge output (one named by number and field), come
            from several configurations and none was chosen, no record has the provenance chosen,
            or an id appears more than once.
    """
    return _judge_output(
        [(f"record {n}", r) for n, r in enumerate(records, start=1)], provenance, source
    )


def _judge_output(
    rows: Sequence[tuple[str, Any]], provenance: str | None, source: str
) -> JudgeOutput:
    """Every record read through the one record model, a malformed one named by line and field.

    Named so rather than failing later as a bare KeyError deep inside a statistic.
    """
    if (
        rows
        and isinstance(rows[0][1], Mapping)
        and not {"scores", "votes", "provenance"} & set(rows[0][1])
    ):
        raise InputDataError(
            f"{source} is not jurybox judge output: its first row has no scores, votes or "
            f"provenance (its fields: {sorted(rows[0][1])[:12]}); pass the file `jurybox judge` "
            "wrote (its --out), and the human labels as the other file"
        )
    recs: list[VerdictRecord] = []
    problems: list[str] = []
    for where, row in rows:
        try:
            recs.append(VerdictRecord.from_record(row, where))
        except InputError as exc:
            problems.append(str(exc))
            if len(problems) >= _EXAMPLES:
                break
    if problems:
        raise InputDataError(f"{source}: not jurybox judge output: " + "; ".join(problems))
    provs = Counter(r.provenance for r in recs)
    if provenance is not None:
        recs = [r for r in recs if r.provenance == provenance]
        if not recs:
            raise InputDataError(
                f"{source}: no records with provenance {provenance!r} (found {dict(provs)})"
            )
    elif len(provs) > 1:
        raise InputDataError(
            f"{source}: records come from {len(provs)} configurations (provenance counts "
            f"{dict(provs)}); choose one with the provenance option (--provenance HASH)",
            field="provenance",
        )
    dup = [k for k, n in Counter(r.id for r in recs).items() if n > 1]
    if dup:
        raise InputDataError(
            f"{source}: {len(dup)} ids appear more than once, e.g. {dup[:_EXAMPLES]}"
        )
    return JudgeOutput(recs, source)


def rubric_for(
    output: JudgeOutput, rubric: str | Path | None = None
) -> tuple[Rubric | None, list[str]]:
    """The rubric whose scales validate human labels for these verdicts, and warnings.

    The rubric is the one given, else the one the verdicts name; the warnings say when there is
    none or it does not fit.

    Args:
        output: The judge output.
        rubric: A shipped rubric's name or a rubric file; default: the one the verdicts name.

    Returns:
        The rubric (``None`` when there is none to load) and the warnings.

    Raises:
        DefinitionError: The rubric given cannot be loaded.
    """
    from jurybox.rubrics import DefinitionError, load_rubric

    notes: list[str] = []
    named = sorted({r.rubric for r in output.records})
    rubric_def: Rubric | None = None
    if rubric is not None:
        rubric_def = load_rubric(rubric)
        if named and rubric_def.name not in named:
            notes.append(
                f"the rubric {rubric_def.name} given differs from the rubric the "
                f"verdicts name ({', '.join(named)}); its scales are used"
            )
    else:
        reason = (
            "the verdicts name no rubric"
            if not named
            else f"the verdicts name several rubrics ({', '.join(named)})"
            if len(named) > 1
            else None
        )
        if reason is None:
            try:
                rubric_def = load_rubric(named[0])
            except DefinitionError:
                reason = (
                    f"rubric {named[0]!r} named in {output.source} is neither shipped nor a file"
                )
        if rubric_def is None:
            notes.append(
                f"{reason}: scales are inferred from the observed values, so labels "
                f"off the scale go unnoticed; name the rubric (--rubric NAME_OR_FILE)"
            )
    if rubric_def is not None:
        # A checklist rubric's verdicts vote on each item's points (p1, p2 ...): their scale is
        # the rubric's met.
        points = rubric_def.checklist is not None
        unscaled = [
            c
            for c in output.criteria
            if c not in rubric_def.criterion_names and not (points and KEY.match(c))
        ]
        if unscaled:
            notes.append(
                f"criteria {unscaled} are not in rubric {rubric_def.name}; their scales "
                f"are inferred from the observed values"
            )
    return rubric_def, notes
