"""Human labels: loading, validation against each criterion's scale.

Human labels file
-----------------
Any row file jurybox reads (`jurybox.rubrics.rows`, chosen by extension): JSONL (one
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

A file written by ``jurybox label`` (`jurybox.calibration.data.label_store`) has the same
columns plus ``labelled_at``, ``selection`` and, on undo and skip lines, ``undone`` or
``skipped``; there a relabel is a newer line for the same (id, rater), and the latest wins.
Labels chosen for the benchmark mean (``selection.strategy`` ``benchmark-mean``) are refused
here, with the reason: only the weighted estimate of `jurybox.calibration.estimates.active` is
unbiased over them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jurybox.rubrics import Scale

from ..errors import InputDataError
from ._rows import EXAMPLES as _EXAMPLES
from ._rows import count as _count
from ._rows import numbered_rows as _numbered_rows

# Not criteria: the item, the rater, and what a labelling session records beside the labels.
_RESERVED = {"id", "rater", "labelled_at", "selection", "skipped", "undone"}


def scales_from(spec: Any) -> dict[str, Scale]:
    """Scales per criterion from a rubric or a mapping of criterion to scale.

    Args:
        spec: A rubric (anything with ``.criteria``), or a mapping of criterion -> Scale, list of
            values, or scale fields (``{"labels": {"yes": 1, "no": 0}}``); ``None`` for none.

    Returns:
        Criterion -> its scale (a pairwise rubric's criteria: the humans' a, b or tie).

    Raises:
        InputDataError: A mapping's value is not a scale.
    """
    if spec is None:
        return {}
    if hasattr(spec, "criteria"):
        if getattr(spec, "pairwise", False):  # humans say a, b or tie, not the judges' positions
            from jurybox.rubrics.pairwise import human_scale

            return {c.name: human_scale(c) for c in spec.criteria}
        return {c.name: c.scale for c in spec.criteria}
    try:
        return {str(k): Scale.coerce(v) for k, v in dict(spec).items()}
    except (ValueError, TypeError) as exc:
        raise InputDataError(f"not a scale: {exc}") from None


@dataclass
class HumanLabels:
    """Human ratings, one entry per (id, rater) row; ``values[c]`` is NaN where unlabelled.

    Attributes:
        ids: The item id of each row.
        raters: The rater of each row.
        values: Criterion -> its value on each row (NaN where unlabelled).
        source: Where the labels came from (the file's path, or ``<memory>``).
        extra_columns: Columns that are not criteria (ignored, and listed in the join summary).
    """

    ids: list[str]
    raters: list[str]
    values: dict[str, np.ndarray]
    source: str = "<memory>"
    extra_columns: list[str] = field(default_factory=list)

    @property
    def criteria(self) -> list[str]:
        """The labelled criteria."""
        return list(self.values)

    def matrix(self, criterion: str, ids: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """Raters x items matrix for ``ids`` (NaN missing) and the rater names (rows).

        Args:
            criterion: The labelled criterion.
            ids: The items, in the order of the matrix's columns.

        Returns:
            The matrix and its raters; raters who labelled none of ``ids`` are left out.
        """
        raters = sorted(set(self.raters))
        r_index = {r: i for i, r in enumerate(raters)}
        i_index = {k: j for j, k in enumerate(ids)}
        out = np.full((len(raters), len(ids)), np.nan)
        col = self.values[criterion]
        rows = [
            (r_index[r], i_index[i], v)
            for i, r, v in zip(self.ids, self.raters, col)
            if i in i_index
        ]
        if rows:
            ri, ii, vv = (np.array(x) for x in zip(*rows))
            out[ri.astype(int), ii.astype(int)] = vv.astype(float)
        keep = ~np.isnan(out).all(axis=1)  # drop raters who labelled none of these items
        return out[keep], [r for r, k in zip(raters, keep) if k]


def load_human_labels(
    path: str | Path, scales: Any = None, criteria: Iterable[str] | None = None
) -> HumanLabels:
    """Read a human labels file (JSONL or CSV; format in this module's docstring).

    Args:
        path: The labels file (any row file jurybox reads, by extension).
        scales: A rubric or {criterion: values} that validates values and maps label names.
        criteria: Which columns are read as criteria (others are ignored and listed); default:
            every column but ``id``, ``rater`` and what a labelling session records.

    Returns:
        The labels, a labelling session's relabels, undos and skips applied (the latest line per
        id and rater wins).

    Raises:
        InputDataError: The file cannot be read or has a bad row, or there is no ``id`` column
            or no criterion column, a value is off its scale or not a number, an (id, rater) row
            is duplicated, or labels were chosen for review or for the benchmark mean.
    """
    path = Path(path)
    return _human_labels(_numbered_rows(path), scales, criteria, str(path))


def label_groups(path: str | Path, column: str) -> dict[str, str]:
    """Each labelled item's group, from the labels file's ``column``: item id -> group.

    A group is e.g. a benchmark's task or scenario, or a domain. Rows without a value are left out.

    Args:
        path: The labels file.
        column: The column that names each item's group.

    Returns:
        Item id -> its group.

    Raises:
        InputDataError: The file cannot be read or has no ``column``, or an item's rows name two
            groups.
    """
    rows = _numbered_rows(Path(path))
    if rows and not any(column in row for _, row in rows):
        columns = sorted({k for _, row in rows for k in row})
        raise InputDataError(
            f"{path}: no {column!r} column to group by (columns: {columns})", field=column
        )
    groups: dict[str, str] = {}
    for number, row in rows:
        value = row.get(column)
        if (
            value is None
            or (isinstance(value, str) and not value.strip())
            or (isinstance(value, float) and math.isnan(value))
        ):
            continue
        item, group = str(row.get("id")), str(value).strip()
        if groups.setdefault(item, group) != group:
            raise InputDataError(
                f"{path}, row {number}: item {item!r} is in group {group!r} "
                f"here and {groups[item]!r} on an earlier row",
                field=column,
            )
    return groups


def human_labels_from_rows(
    rows: Sequence[Mapping[str, Any]],
    scales: Any = None,
    criteria: Iterable[str] | None = None,
    source: str = "<memory>",
) -> HumanLabels:
    """Human labels from in-memory rows (row numbers in messages count from 1).

    Args:
        rows: The rows, as a labels file's (format in this module's docstring).
        scales: A rubric or {criterion: values} that validates values and maps label names.
        criteria: Which columns are read as criteria (others are ignored and listed).
        source: What messages and the labels' ``source`` call the rows.

    Returns:
        The labels, as `load_human_labels` reads them.

    Raises:
        InputDataError: There are no rows, no ``id`` column or no criterion column, a value is off
            its scale or not a number, an (id, rater) row is duplicated, or labels were chosen for
            review or for the benchmark mean.
    """
    return _human_labels(list(enumerate(rows, start=1)), scales, criteria, source)


def _latest_labels(
    rows: Sequence[tuple[int, Mapping[str, Any]]],
) -> Sequence[tuple[int, Mapping[str, Any]]]:
    """The rows of a labelling session's file as the session meant them.

    Those are its lines with ``labelled_at`` (see `jurybox.calibration.data.label_store`): the
    latest line per (id, rater) wins (a relabel appends one), and an undo or skip line leaves no
    label. Rows without ``labelled_at`` (a spreadsheet) are taken as they are.
    """
    if not any("labelled_at" in row for _, row in rows):
        return rows

    def key(row: Mapping[str, Any]) -> tuple[str, str]:
        return str(row.get("id")), str(row.get("rater") or "")

    last = {key(row): i for i, (_, row) in enumerate(rows) if "labelled_at" in row}
    return [
        (n, row)
        for i, (n, row) in enumerate(rows)
        if "labelled_at" not in row
        or (last[key(row)] == i and not row.get("undone") and row.get("skipped") is None)
    ]


def labels_by_item(
    lines: Sequence[Mapping[str, Any]], criterion: str, scale: Any, items: Container[str]
) -> dict[str, list[float]]:
    """The human labels of ``criterion`` per item of ``items`` (none where a line has none).

    A value off the scale is an error naming the item and criterion.
    """
    human: dict[str, list[float]] = {}
    for line in lines:
        item = str(line.get("id"))
        if item not in items:
            continue
        try:
            value = _parse_value(line.get(criterion), scale)
        except ValueError as exc:
            raise InputDataError(f"item {item!r}, {criterion}: {exc}", field=criterion) from None
        if not math.isnan(value):
            human.setdefault(item, []).append(value)
    return human


def label_rows(path: str | Path, *, active: bool = True) -> list[dict[str, Any]]:
    """The rows of a human labels file as its labelling session meant them.

    That is, the latest line per item and rater, no undo or skip line, for the benchmark-mean
    estimate (`jurybox.calibration.estimates.active.mean_estimates`) and conformal maps;
    labels of items routed for review are refused (`_chosen_for_review`), and with
    ``active`` False labels chosen actively for the benchmark mean too (`_chosen_actively`:
    what treats every labelled item alike, as a conformal map does).
    """
    rows = _latest_labels(_numbered_rows(Path(path)))
    (_chosen_for_review if active else _chosen_actively)(rows, str(path))
    return [dict(row) for _, row in rows]


def chosen_actively(lines: Sequence[Mapping[str, Any]]) -> list[str]:
    """The items of label ``lines`` chosen actively for the benchmark mean.

    Those are the lines whose ``selection`` strategy is ``benchmark-mean``: their inclusion
    probabilities differ, so they are not a sample of the items alike.
    """
    return [
        str(line.get("id"))
        for line in lines
        if isinstance(line.get("selection"), Mapping)
        and line["selection"].get("strategy") == "benchmark-mean"
    ]


#: The strategies of a session that chooses its items alike (a uniform order, or strata in
#: proportion): the designs an ``overlap`` line's item may come from and be a sample alike.
ALIKE = ("uniform", "stratified")


def undesigned_overlap(lines: Sequence[Mapping[str, Any]]) -> list[str]:
    """The items of ``overlap`` lines whose session's design the lines do not show.

    An ``overlap`` line's item was chosen for another rater, by the session's design, which the
    line does not record: beside lines of a design that chooses items alike (`ALIKE`) it is
    one of those; alone (or beside lines that record no choice) it may be an active or review
    session's, as unequally chosen as that session's own lines. Empty when no such line.
    """
    strategies = [_strategy(line) for line in lines]
    if any(s in ALIKE for s in strategies):
        return []
    return [str(line.get("id")) for line, s in zip(lines, strategies) if s == "overlap"]


def _strategy(line: Mapping[str, Any]) -> Any:
    selection = line.get("selection")
    return selection.get("strategy") if isinstance(selection, Mapping) else None


def _rows_chosen(rows: Sequence[tuple[int, Mapping[str, Any]]], strategy: str) -> list[int]:
    """The row numbers of the label lines whose item was chosen by ``strategy``."""
    return [
        n
        for n, row in rows
        if isinstance(row.get("selection"), Mapping)
        and row["selection"].get("strategy") == strategy
    ]


def _chosen_for_review(rows: Sequence[tuple[int, Mapping[str, Any]]], source: str) -> None:
    """Refuse labels of items routed to a human for review.

    They are the items the jury is least sure of, so every statistic over them (agreement,
    calibration and conformal maps, cascades, means) would be biased.
    """
    review = _rows_chosen(rows, "review")
    if review:
        raise InputDataError(
            f"{source} holds {_count(len(review), 'label')} (the first on row {review[0]}) of "
            "items routed to a human for review (jurybox label --goal review): they are the "
            "items the jury is least sure of, so agreement, calibration, cascades and means "
            "over them would be biased. Use them for those items' verdicts, and label with "
            "--goal agreement, cascade or benchmark-mean (into another file) for statistics",
            field="selection",
        )


def _chosen_actively(rows: Sequence[tuple[int, Mapping[str, Any]]], source: str) -> None:
    """Refuse labels chosen for the benchmark mean, for review, or by an unshown design.

    The last: `overlap` lines whose session's design no line shows (`undesigned_overlap`).
    Statistics that weight every item alike (agreement, calibration maps, cascades) would be
    biased towards the items the jury is unsure of.
    """
    _chosen_for_review(rows, source)
    active = _rows_chosen(rows, "benchmark-mean")
    if active:
        raise InputDataError(
            f"{source} holds {_count(len(active), 'label')} (the first on row {active[0]}) "
            "chosen actively for the benchmark's mean (jurybox label --goal benchmark-mean): the items "
            "the jury is unsure of are over-represented and those it is sure of (where a "
            "confidently wrong jury errs) under-represented, so agreement, calibration and "
            "conformal maps and cascades over them would be biased. Estimate the mean with "
            "`jurybox agree --ppi` (it weights each label by its inclusion probability), and "
            "label with --goal agreement or cascade (into another file) for these",
            field="selection",
        )
    alone = bool(undesigned_overlap([row for _, row in rows]))
    routed = [n for n, row in rows if alone and _strategy(row) == "overlap"]
    if routed:
        raise InputDataError(
            f"{source} holds {_count(len(routed), 'label')} (the first on row {routed[0]}) "
            "routed to a second rater (overlap) and no line of the session's own choice: "
            "their items were chosen for another rater by a design these lines do not "
            "record, and an active session's (--goal benchmark-mean) are as unequally chosen "
            "as its own lines, so agreement, calibration and conformal maps and cascades over "
            "them could be biased. Give the session's whole file (its uniform or stratified "
            "lines show the design), or label with --goal agreement or cascade",
            field="selection",
        )


def _human_labels(
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    scales: Any,
    criteria: Iterable[str] | None,
    source: str,
) -> HumanLabels:
    rows = _latest_labels(rows)
    if not rows:
        raise InputDataError(f"{source}: no rows")
    _chosen_actively(rows, source)
    scale_map = scales_from(scales)
    columns: list[str] = []
    for _, row in rows:
        for k in row:
            if k not in columns:
                columns.append(k)
    if "id" not in columns:
        raise InputDataError(f"{source}: no 'id' column (columns: {columns})")
    wanted = list(criteria) if criteria is not None else [c for c in columns if c not in _RESERVED]
    crit_cols = [c for c in columns if c in wanted and c not in _RESERVED]
    extra = [c for c in columns if c not in _RESERVED and c not in crit_cols]
    if not crit_cols:
        raise InputDataError(
            f"{source}: no criterion columns (columns: {columns}; "
            f"expected some of {sorted(wanted)})"
        )

    ids: list[str] = []
    raters: list[str] = []
    per_id: Counter[str] = Counter()
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
        raise InputDataError(
            f"{source}: {_count(n_problems, 'bad value')}; first: " + "; ".join(problems)
        )
    values = {c: v[: len(ids)] for c, v in values.items()}
    dup = [k for k, n in Counter(zip(ids, raters)).items() if n > 1]
    if dup:
        raise InputDataError(
            f"{source}: {len(dup)} duplicate (id, rater) rows, e.g. {dup[:_EXAMPLES]}"
        )
    return HumanLabels(ids, raters, values, source, extra)


def _parse_value(raw: Any, scale: Scale | None) -> float:
    """A human label as a number: empty and null are missing (NaN).

    Otherwise the scale's own parser (the one judges' answers go through), or any finite number
    without a scale.
    """
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
