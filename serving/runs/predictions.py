"""Prediction files (JSONL, JSON list, CSV/TSV, Parquet) as Items to judge.

Rows come from the one row reader (`jurybox.rubrics.rows`). A bad row never stops the file:
it becomes a RowError that names the row and field and says what was expected, and the other
rows are judged. Problems that make the whole file unusable (no rows, a column the rubric needs
that no row has, a --map naming a field nothing reads) raise PredictionsError.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.item_fields import CORE_FIELDS, DEFAULT_MAX_FIELD_CHARS, FieldError, to_item
from jurybox.rubrics.rows import FileFormatError, RowError, read_rows_from


class PredictionsError(InputError):
    """The file as a whole cannot be judged."""


@dataclass
class ReadResult:
    """What `read_predictions` read.

    The Items, a RowError per rejected row, how many rows there were, and how many items have an
    empty response.
    """

    items: list[Item]
    errors: list[RowError] = field(default_factory=list)
    rows: int = 0
    empty_responses: int = 0


def check_mapping(mapping: Mapping[str, str], rubric: Rubric) -> None:
    """A --map target must be a field something reads: a core field or a rubric input.

    Raises:
        PredictionsError: A target no part of the rubric reads, naming it.
    """
    known = [*CORE_FIELDS, *rubric.inputs, *rubric.optional_inputs]
    for target, column in mapping.items():
        if target not in known:
            raise PredictionsError(
                f"--map {target}={column}: no part of the rubric {rubric.name} reads a field "
                f"{target!r}; map one of {sorted(set(known))}",
                field=target,
            )


class IdIndex:
    """Every valid id read so far and where it was first seen, kept small.

    One dict from the id to an int (the file's number and the row), since a run over a million
    rows keeps a million of them (a location string per id, or a second set, would double
    that). Positions grow in reading order, so "among the first N items" is one comparison (see
    ``mark``).
    """

    ROW_BITS = 40

    def __init__(self) -> None:
        self._at: dict[str, int] = {}
        self._files: list[str | None] = []
        self._bound: int | None = None

    def add(self, item_id: str, file: str | None, row: int) -> str | None:
        """Record ``item_id``; if it was seen before, return where (and record nothing)."""
        first = self._at.get(item_id)
        if first is not None:
            return self.where(first)
        if not self._files or self._files[-1] != file:
            self._files.append(file)
        self._at[item_id] = ((len(self._files) - 1) << self.ROW_BITS) | row
        return None

    def where(self, position: int) -> str:
        """Where the id at ``position`` (a value of the index) was first seen.

        Returns:
            ``FILE: row N``, or ``row N`` when rows come from no named file.
        """
        file, row = self._files[position >> self.ROW_BITS], position & ((1 << self.ROW_BITS) - 1)
        return f"{file}: row {row}" if file else f"row {row}"

    def mark(self, item_id: str | None) -> None:
        """Note ``item_id`` as the last one a run takes (``--limit``; None: it takes none).

        Later ids are read (for duplicates) but are not the run's (``in`` says False).
        """
        self._bound = -1 if item_id is None else self._at[item_id]

    def __contains__(self, item_id: object) -> bool:
        position = self._at.get(item_id)  # type: ignore[call-overload]
        return position is not None and (self._bound is None or position <= self._bound)


def iter_predictions(
    path: str | Path,
    rubric: Rubric,
    mapping: Mapping[str, str] | None = None,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    allow_empty: bool = False,
    ids: IdIndex | None = None,
) -> Generator[tuple[int, Item | RowError]]:
    """``(row number, Item or RowError)`` per row of a prediction file.

    Duplicate ids are row errors (the first wins), so the ids seen so far are kept in memory (in
    ``ids``, when the caller wants them afterwards).

    Raises:
        PredictionsError: A --map naming a field nothing reads, or a column the rubric or a
            --map needs that no row has (said once the rows are read).
    """
    mapping = dict(mapping or {})
    check_mapping(mapping, rubric)
    seen = IdIndex() if ids is None else ids
    columns: dict[str, None] = {}
    for file, n, record in read_rows_from(path):
        if isinstance(record, RowError):
            yield n, record
            continue
        columns.update(dict.fromkeys(record))
        try:
            item = to_item(record, mapping, rubric, max_field_chars, allow_empty)
        except FieldError as exc:
            yield n, RowError(n, exc.field, exc.message, file=file)
            continue
        first = seen.add(item.id, file, n)
        if first is not None:
            yield (
                n,
                RowError(n, "id", f"duplicate id {item.id!r} (first seen at {first})", file=file),
            )
            continue
        yield n, item
    if columns:
        _check_columns(Path(path), columns, mapping, rubric)


def read_predictions(
    path: str | Path,
    rubric: Rubric,
    mapping: Mapping[str, str] | None = None,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    allow_empty: bool = False,
) -> ReadResult:
    """Every row of a prediction file, as Items and RowErrors."""
    result = ReadResult(items=[])
    try:
        for _, row in iter_predictions(path, rubric, mapping, max_field_chars, allow_empty):
            result.rows += 1
            if isinstance(row, RowError):
                result.errors.append(row)
            else:
                result.items.append(row)
                if row.empty_answer:
                    result.empty_responses += 1
    except FileFormatError as exc:
        raise PredictionsError(str(exc)) from None
    return result


def _check_columns(
    path: Path, columns: Mapping[str, Any], mapping: Mapping[str, str], rubric: Rubric
) -> None:
    """Refuse the file when a field the rubric needs, or a column a --map names, is in no row.

    That is a file-level mistake (a wrong column name), not a row-level one: say so once, with
    the columns that do exist.
    """
    present = set(columns)
    for name in ("id", *rubric.inputs, *mapping):
        column = mapping.get(name, name)
        if column not in present:
            hint = f"--map {name}=COLUMN" if name not in mapping else f"check --map {name}={column}"
            what = (
                f"the rubric {rubric.name} needs {name!r}"
                if name not in mapping
                else f"--map {name}={column} names it"
            )
            raise PredictionsError(
                f"{path}: no column {column!r} ({what}); columns are {sorted(present)}; use {hint}",
                field=name,
            )
