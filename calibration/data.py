"""Human labels and ``jurybox judge`` output: loading, validation, and the join on ``id``.

Human labels file
-----------------
Any row file jurybox reads (:mod:`jurybox.rubrics.rows`, chosen by extension): JSONL (one
object per line), a JSON list, CSV/TSV with a header row (a UTF-8 byte order mark, as Excel
writes, is fine) or Parquet. Rows are numbered as an editor shows them. Columns:

* ``id`` (required): the item id, matching ``id`` in the judge output.
* ``rater`` (optional): who labelled the row. Several rows with the same id are several human
  raters; without a ``rater`` column the n-th row of an id counts as rater ``r<n>``.
* one column per criterion (e.g. ``accuracy``), holding a numeric value on the criterion's
  scale, or a label of a labelled scale (``yes``/``no``, mapped through the scale). An empty
  cell / ``null`` means "not labelled for this criterion" and stays missing.

Example (CSV)::

    id,rater,accuracy,relevance
    q1,alice,3,4
    q1,bob,2,4
    q2,alice,4,

Columns that are not criteria of the judge output (notes, timestamps) are ignored and listed
in the join summary. Values off the scale, non-numeric values, duplicate (id, rater) rows and
ids that do not join are reported with counts and examples, never silently dropped.

Judge output
------------
The JSONL written by ``jurybox judge``: one verdict per line with ``id``, ``status``,
``provenance``, ``scores`` (criterion -> aggregated score or null below quorum) and ``votes``
(judge, criterion, score, label, expected, error).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from jurybox.rubrics import Rubric, Scale, VerdictRecord
from jurybox.rubrics.errors import InputError

from .errors import InputDataError, JoinError

ValueKind = Literal["score", "expected"]
_RESERVED = {"id", "rater"}
_EXAMPLES = 10


# --------------------------------------------------------------------------- scales


def scales_from(spec: Any) -> dict[str, Scale]:
    """Scales per criterion from a rubric (anything with ``.criteria``) or a mapping of
    criterion -> Scale, list of values, or scale fields (``{"labels": {"yes": 1, "no": 0}}``)."""
    if spec is None:
        return {}
    if hasattr(spec, "criteria"):
        return {c.name: c.scale for c in spec.criteria}
    try:
        return {str(k): Scale.coerce(v) for k, v in dict(spec).items()}
    except (ValueError, TypeError) as exc:
        raise InputDataError(f"not a scale: {exc}") from None


# --------------------------------------------------------------------------- human labels


@dataclass
class HumanLabels:
    """Human ratings, one entry per (id, rater) row; ``values[c]`` is NaN where unlabelled."""

    ids: list[str]
    raters: list[str]
    values: dict[str, np.ndarray]
    source: str = "<memory>"
    extra_columns: list[str] = field(default_factory=list)

    @property
    def criteria(self) -> list[str]:
        return list(self.values)

    def matrix(self, criterion: str, ids: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """raters x items matrix for ``ids`` (NaN missing) and the rater names (rows)."""
        raters = sorted(set(self.raters))
        r_index = {r: i for i, r in enumerate(raters)}
        i_index = {k: j for j, k in enumerate(ids)}
        out = np.full((len(raters), len(ids)), np.nan)
        col = self.values[criterion]
        rows = [(r_index[r], i_index[i], v) for i, r, v in zip(self.ids, self.raters, col)
                if i in i_index]
        if rows:
            ri, ii, vv = (np.array(x) for x in zip(*rows))
            out[ri.astype(int), ii.astype(int)] = vv.astype(float)
        keep = ~np.isnan(out).all(axis=1)  # drop raters who labelled none of these items
        return out[keep], [r for r, k in zip(raters, keep) if k]


def load_human_labels(path: str | Path, scales: Any = None,
                      criteria: Iterable[str] | None = None) -> HumanLabels:
    """Read a human labels file (JSONL or CSV; format in this module's docstring).

    ``scales`` (a rubric or {criterion: values}) validates values and maps label names;
    ``criteria`` restricts which columns are read as criteria (others are ignored and listed).
    """
    path = Path(path)
    return _human_labels(_numbered_rows(path), scales, criteria, str(path))


def human_labels_from_rows(rows: Sequence[Mapping[str, Any]], scales: Any = None,
                           criteria: Iterable[str] | None = None,
                           source: str = "<memory>") -> HumanLabels:
    """Human labels from in-memory rows (row numbers in messages count from 1)."""
    return _human_labels(list(enumerate(rows, start=1)), scales, criteria, source)


def _numbered_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every row of a labels or verdicts file through the one row reader; a bad row is an error
    naming its row, since statistics on a silently shortened file would mislead."""
    from jurybox.rubrics.rows import RowError, read_rows

    rows, errors = [], []
    try:
        for n, row in read_rows(path):
            if isinstance(row, RowError):
                errors.append(row)
            else:
                rows.append((n, row))
    except InputError as exc:
        raise InputDataError(str(exc)) from None
    if errors:
        first = errors[0]
        if first.kind == "encoding":
            raise InputDataError(f"{path}: not UTF-8 text (row {first.row}: {first.message})")
        if first.kind == "syntax":
            raise InputDataError(f"{path}: line {first.row} is not JSON ({first.message})")
        raise InputDataError(f"{path}: {_count(len(errors), 'bad row')}; first: "
                             + "; ".join(str(e) for e in errors[:_EXAMPLES]))
    return rows


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _human_labels(rows: Sequence[tuple[int, Mapping[str, Any]]], scales: Any,
                  criteria: Iterable[str] | None, source: str) -> HumanLabels:
    if not rows:
        raise InputDataError(f"{source}: no rows")
    scale_map = scales_from(scales)
    columns: list[str] = []
    for _, row in rows:
        for k in row:
            if k not in columns:
                columns.append(k)
    if "id" not in columns:
        raise InputDataError(f"{source}: no 'id' column (columns: {columns})")
    wanted = list(criteria) if criteria is not None else [c for c in columns
                                                          if c not in _RESERVED]
    crit_cols = [c for c in columns if c in wanted and c not in _RESERVED]
    extra = [c for c in columns if c not in _RESERVED and c not in crit_cols]
    if not crit_cols:
        raise InputDataError(f"{source}: no criterion columns (columns: {columns}; "
                             f"expected some of {sorted(wanted)})")

    ids: list[str] = []
    raters: list[str] = []
    per_id = Counter()
    problems: list[str] = []
    n_problems = 0
    values = {c: np.full(len(rows), np.nan) for c in crit_cols}
    for line, row in rows:
        item = row.get("id")
        if item is None or str(item).strip() == "":
            n_problems += 1
            if len(problems) < _EXAMPLES:
                problems.append(f"row {line}: empty id")
            continue
        item = str(item).strip()
        per_id[item] += 1
        rater = row.get("rater")
        rater = f"r{per_id[item]}" if rater is None or str(rater).strip() == "" else str(rater)
        ids.append(item)
        raters.append(rater.strip())
        for c in crit_cols:
            try:
                values[c][len(ids) - 1] = _parse_value(row.get(c), scale_map.get(c))
            except ValueError as exc:
                n_problems += 1
                if len(problems) < _EXAMPLES:
                    problems.append(f"row {line} (id {item!r}) column {c!r}: {exc}")
    if n_problems:
        raise InputDataError(f"{source}: {_count(n_problems, 'bad value')}; first: "
                             + "; ".join(problems))
    values = {c: v[: len(ids)] for c, v in values.items()}
    dup = [k for k, n in Counter(zip(ids, raters)).items() if n > 1]
    if dup:
        raise InputDataError(f"{source}: {len(dup)} duplicate (id, rater) rows, e.g. "
                             f"{dup[:_EXAMPLES]}")
    return HumanLabels(ids, raters, values, source, extra)


def _parse_value(raw: Any, scale: Scale | None) -> float:
    """A human label as a number: empty and null are missing (NaN); otherwise the scale's own
    parser (the one judges' answers go through), or any finite number without a scale."""
    if raw is None or (isinstance(raw, str) and raw.strip() == ""):
        return math.nan
    if isinstance(raw, float) and math.isnan(raw):
        return raw
    if scale is not None:
        return scale.parse(raw)
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is a boolean; write the scale value (e.g. 1/0) or label")
    try:
        value = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise ValueError(f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not finite")
    return value


# --------------------------------------------------------------------------- judge output


@dataclass
class JudgeOutput:
    """Verdict records from ``jurybox judge``, one per id, all from a single provenance."""

    records: list[VerdictRecord]
    source: str = "<memory>"

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.records]

    @property
    def provenance(self) -> str | None:
        return self.records[0].provenance if self.records else None

    @property
    def judges(self) -> list[str]:
        return sorted({v.judge for r in self.records for v in r.votes})

    @property
    def criteria(self) -> list[str]:
        return list(dict.fromkeys(v.criterion for r in self.records for v in r.votes))

    def categorical_criteria(self) -> set[str]:
        """Criteria whose votes carry a ``label`` (labelled scales such as yes/no)."""
        return {v.criterion for r in self.records for v in r.votes if v.label is not None}

    def label_maps(self) -> dict[str, dict[str, float]]:
        """criterion -> {label: value} as the judges' votes used them (e.g. yes -> 1)."""
        out: dict[str, dict[str, float]] = {}
        for r in self.records:
            for v in r.votes:
                if v.label is not None and v.score is not None:
                    out.setdefault(v.criterion, {})[v.label] = float(v.score)
        return out

    def judge_values(self, criterion: str, value: ValueKind = "score") -> dict[str, np.ndarray]:
        """judge -> per-record value (NaN where the vote is missing, unscored or lacks it)."""
        index = {j: i for i, j in enumerate(self.judges)}
        out = np.full((len(index), len(self.records)), np.nan)
        for col, rec in enumerate(self.records):
            for v in rec.votes:
                if v.criterion != criterion or not v.scored:
                    continue
                x = getattr(v, value)
                if x is not None:
                    out[index[v.judge], col] = float(x)
        return {j: out[i] for j, i in index.items()}

    def jury_values(self, criterion: str) -> np.ndarray:
        vals = [r.scores.get(criterion) for r in self.records]
        return np.array([np.nan if v is None else float(v) for v in vals])


def load_judge_output(path: str | Path, provenance: str | None = None) -> JudgeOutput:
    """Read ``jurybox judge`` output. Mixed provenances are an error unless one is chosen."""
    path = Path(path)
    rows = _numbered_rows(path)
    return _judge_output([(f"line {n}", row) for n, row in rows], provenance, str(path))


def judge_output_from_records(records: Sequence[Mapping[str, Any] | VerdictRecord],
                              provenance: str | None = None,
                              source: str = "<memory>") -> JudgeOutput:
    return _judge_output([(f"record {n}", r) for n, r in enumerate(records, start=1)],
                         provenance, source)


def _judge_output(rows: Sequence[tuple[str, Any]], provenance: str | None,
                  source: str) -> JudgeOutput:
    """Every record read through the one record model, so a malformed file is named by line and
    field rather than failing later as a bare KeyError deep inside a statistic."""
    if rows and isinstance(rows[0][1], Mapping) and not {"scores", "votes", "provenance"} & set(rows[0][1]):
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
            raise InputDataError(f"{source}: no records with provenance {provenance!r} "
                                 f"(found {dict(provs)})")
    elif len(provs) > 1:
        raise InputDataError(
            f"{source}: records come from {len(provs)} configurations (provenance counts "
            f"{dict(provs)}); choose one with the provenance option (--provenance HASH)",
            field="provenance",
        )
    dup = [k for k, n in Counter(r.id for r in recs).items() if n > 1]
    if dup:
        raise InputDataError(f"{source}: {len(dup)} ids appear more than once, e.g. "
                             f"{dup[:_EXAMPLES]}")
    return JudgeOutput(recs, source)


def rubric_for(output: JudgeOutput, rubric: str | Path | None = None
               ) -> tuple[Rubric | None, list[str]]:
    """The rubric whose scales validate human labels for these verdicts: the one given, else the
    one the verdicts name; and warnings when there is none or it does not fit."""
    from jurybox.rubrics import DefinitionError, load_rubric

    notes: list[str] = []
    named = sorted({r.rubric for r in output.records})
    rubric_def: Rubric | None = None
    if rubric is not None:
        rubric_def = load_rubric(rubric)
        if named and rubric_def.name not in named:
            notes.append(f"the rubric {rubric_def.name} given differs from the rubric the "
                         f"verdicts name ({', '.join(named)}); its scales are used")
    else:
        reason = ("the verdicts name no rubric" if not named else
                  f"the verdicts name several rubrics ({', '.join(named)})" if len(named) > 1
                  else None)
        if reason is None:
            try:
                rubric_def = load_rubric(named[0])
            except DefinitionError:
                reason = (f"rubric {named[0]!r} named in {output.source} is neither shipped nor "
                          "a file")
        if rubric_def is None:
            notes.append(f"{reason}: scales are inferred from the observed values, so labels "
                         f"off the scale go unnoticed; name the rubric (--rubric NAME_OR_FILE)")
    if rubric_def is not None:
        unscaled = [c for c in output.criteria if c not in rubric_def.criterion_names]
        if unscaled:
            notes.append(f"criteria {unscaled} are not in rubric {rubric_def.name}; their scales "
                         f"are inferred from the observed values")
    return rubric_def, notes


# --------------------------------------------------------------------------- join


@dataclass
class JoinSummary:
    n_joined: int
    human_only: list[str]      # ids with human labels but no judge record
    judge_only: list[str]      # ids judged but never labelled
    ignored_columns: list[str]
    human_criteria_not_judged: list[str]

    def to_dict(self) -> dict[str, Any]:
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
        parts = [f"{self.n_joined} items joined"]
        if self.human_only:
            parts.append(f"{len(self.human_only)} labelled ids have no judge record "
                         f"(e.g. {', '.join(self.human_only[:5])})")
        if self.judge_only:
            parts.append(f"{len(self.judge_only)} judged ids have no human label "
                         f"(e.g. {', '.join(self.judge_only[:5])})")
        if self.ignored_columns:
            parts.append(f"ignored columns: {', '.join(self.ignored_columns)}")
        if self.human_criteria_not_judged:
            parts.append("human criteria not in judge output: "
                         + ", ".join(self.human_criteria_not_judged))
        return "; ".join(parts)


def join_warnings(summary: Mapping[str, Any]) -> list[str]:
    """Warnings from a join summary (:meth:`JoinSummary.to_dict`, as reports and maps keep it)."""
    notes = []
    for key, one, many in (
            ("human_only", "labelled id has no verdict", "labelled ids have no verdict"),
            ("judge_only", "judged id has no human label", "judged ids have no human label")):
        part = summary.get(key) or {}
        if part.get("count"):
            more = ", ..." if part["count"] > len(part["first"]) else ""
            what = one if part["count"] == 1 else many
            notes.append(f"{part['count']} {what}: {', '.join(part['first'])}{more}")
    if summary.get("ignored_columns"):
        notes.append(f"ignored label columns (not judged criteria): "
                     f"{', '.join(summary['ignored_columns'])}")
    return notes


@dataclass
class CriterionData:
    """Everything needed to compare judges with humans on one criterion, aligned by item."""

    criterion: str
    ids: list[str]
    human: np.ndarray                 # human raters x items (NaN missing)
    human_raters: list[str]
    judges: dict[str, np.ndarray]     # judge -> items
    jury: np.ndarray                  # the jury's aggregated score (NaN below quorum)
    scale: Scale
    categorical: bool

    @property
    def human_mean(self) -> np.ndarray:
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
    criteria: dict[str, CriterionData]
    summary: JoinSummary
    provenance: str | None
    value: ValueKind


def join(human: HumanLabels | str | Path, judged: JudgeOutput | str | Path, *,
         scales: Any = None, value: ValueKind = "score",
         criteria: Iterable[str] | None = None) -> Joined:
    """Join human labels with judge output on ``id``; unjoined ids are counted, not dropped.

    ``value`` picks each vote's ``score`` (the answer on the scale) or ``expected``
    (logprob-expected, continuous). Raises :class:`JoinError` when nothing joins.
    """
    if value not in ("score", "expected"):
        raise InputDataError(f"value must be 'score' or 'expected'; got {value!r}")
    if not isinstance(judged, JudgeOutput):
        judged = load_judge_output(judged)
    judged_criteria = judged.criteria
    wanted = list(criteria) if criteria is not None else judged_criteria
    unknown = [c for c in wanted if c not in judged_criteria]
    if unknown:
        raise InputDataError(f"criteria {unknown} are not in the judge output "
                             f"(it has {judged_criteria})")
    scale_map = scales_from(scales)
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
        judges = judged.judge_values(c, "score" if is_categorical else value)
        jury = judged.jury_values(c)
        if cols is not None:
            judges = {j: v[cols] for j, v in judges.items()}
            jury = jury[cols]
        scale = scale_map.get(c) or _infer_scale(mat, judges, value)
        out[c] = CriterionData(c, joined_ids, mat, raters, judges, jury, scale,
                               is_categorical or scale.is_labelled)
    if not out:
        raise JoinError(f"no criterion is in both files: humans have {human.criteria}, "
                        f"judges have {judged_criteria}")
    return Joined(out, summary, judged.provenance, value)


def _infer_scale(human: np.ndarray, judges: dict[str, np.ndarray], value: str) -> Scale:
    """Without a rubric, the scale is the set of observed human (and judge score) values."""
    observed = [human[~np.isnan(human)]]
    if value == "score":
        observed += [v[~np.isnan(v)] for v in judges.values()]
    vals = np.unique(np.concatenate(observed))
    if vals.size < 2:
        vals = np.unique(np.concatenate([vals, vals + 1.0]))  # degenerate: keep a 2-point scale
    return Scale(values=[float(v) for v in vals])
