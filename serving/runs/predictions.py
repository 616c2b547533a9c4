"""Prediction files (JSONL, JSON list, CSV/TSV, Parquet) as Items to judge.

Rows come from the one row reader (:mod:`jurybox.rubrics.rows`). A bad row never stops the file:
it becomes a RowError that names the row and field and says what was expected, and the other
rows are judged. Problems that make the whole file unusable (no rows, a column the rubric needs
that no row has, a --map naming a field nothing reads) raise PredictionsError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.rows import FileFormatError, RowError, read_rows_from

CORE_TEXT = ("question", "response", "reference", "context")
CORE_FIELDS = ("id", *CORE_TEXT, "images")
DEFAULT_MAX_FIELD_CHARS = 100_000


class PredictionsError(InputError):
    """The file as a whole cannot be judged."""


class FieldError(InputError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field)
        self.message = message


@dataclass
class ReadResult:
    items: list[Item]
    errors: list[RowError] = field(default_factory=list)
    rows: int = 0
    columns: list[str] = field(default_factory=list)
    empty_responses: int = 0


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value != value:  # NaN from Parquet/pandas
        return None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"expected text, got {type(value).__name__}")


def _images(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError:
                raise ValueError("expected a list of image paths") from None
        else:
            return [stripped]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError("expected a list of image paths")


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def to_item(
    record: Mapping[str, Any],
    mapping: Mapping[str, str],
    rubric: Rubric,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    allow_empty: bool = False,
) -> Item:
    """One record as an Item; raises FieldError naming the first field at fault.

    Every input the rubric needs must hold text: a missing, null, empty or whitespace-only value
    is rejected. An empty ``response`` is what a model may really have produced: with
    ``allow_empty`` it is judged (and counted), otherwise rejected like any other empty field.
    """
    values = dict(record)
    for target, column in mapping.items():
        values[target] = record.get(column)
    for column in set(mapping.values()) - set(mapping):
        values.pop(column, None)

    raw_id = values.pop("id", None)
    try:
        item_id = _text(raw_id)
    except ValueError as exc:
        raise FieldError("id", str(exc)) from None
    if item_id is None or not item_id.strip():
        raise FieldError("id", "missing item id")
    fields: dict[str, Any] = {}
    for name in CORE_TEXT:
        try:
            fields[name] = _text(values.pop(name, None))
        except ValueError as exc:
            raise FieldError(name, str(exc)) from None
    try:
        images = _images(values.pop("images", None))
    except ValueError as exc:
        raise FieldError("images", str(exc)) from None
    extra = {k: v for k, v in values.items() if v is not None}
    for name in rubric.inputs:
        value = fields.get(name, extra.get(name))
        if name == "response" and allow_empty and isinstance(value, str):
            continue
        if _blank(value):
            what = "missing" if value is None else "empty"
            hint = " (judge empty answers with --allow-empty)" if name == "response" else ""
            raise FieldError(name, f"{what}, but the rubric {rubric.name} needs it{hint}")
    for name, value in [*fields.items(), *extra.items()]:
        if isinstance(value, str) and len(value) > max_field_chars:
            raise FieldError(
                name,
                f"{len(value):,} characters, more than the limit of {max_field_chars:,} "
                "(raise it with --max-field-chars if the judges' context allows)",
            )
    return Item(id=item_id.strip(), images=images, extra=extra, **fields)


def check_mapping(mapping: Mapping[str, str], rubric: Rubric) -> None:
    """A --map target must be a field something reads: a core field or a rubric input."""
    known = [*CORE_FIELDS, *rubric.inputs, *rubric.optional_inputs]
    for target, column in mapping.items():
        if target not in known:
            raise PredictionsError(
                f"--map {target}={column}: no part of the rubric {rubric.name} reads a field "
                f"{target!r}; map one of {sorted(set(known))}",
                field=target,
            )


class IdIndex:
    """Every valid id read so far and where it was first seen, kept small: one dict from the
    id to an int (the file's number and the row), since a run over a million rows keeps a
    million of them (a location string per id, or a second set, would double that). Positions
    grow in reading order, so "among the first N items" is one comparison (see ``mark``)."""

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
        file, row = self._files[position >> self.ROW_BITS], position & ((1 << self.ROW_BITS) - 1)
        return f"{file}: row {row}" if file else f"row {row}"

    def mark(self, item_id: str | None) -> None:
        """Note ``item_id`` as the last one a run takes (``--limit``; None: it takes none): later
        ids are read (for duplicates) but are not the run's (``in`` says False)."""
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
) -> Iterator[tuple[int, Item | RowError]]:
    """``(row number, Item or RowError)`` per row. Duplicate ids are row errors (the first
    wins), so the ids seen so far are kept in memory (in ``ids``, when the caller wants them
    afterwards)."""
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
            yield n, RowError(n, "id", f"duplicate id {item.id!r} (first seen at {first})",
                              file=file)
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
                if not (row.response or "").strip():
                    result.empty_responses += 1
    except FileFormatError as exc:
        raise PredictionsError(str(exc)) from None
    return result


def _check_columns(path: Path, columns: Mapping[str, Any], mapping: Mapping[str, str],
                   rubric: Rubric) -> None:
    """A field the rubric needs, or a column a --map names, that no row has is a file-level
    mistake (a wrong column name), not a row-level one: say so once, with the columns that do
    exist."""
    present = set(columns)
    for name in ("id", *rubric.inputs, *mapping):
        column = mapping.get(name, name)
        if column not in present:
            hint = f"--map {name}=COLUMN" if name not in mapping else f"check --map {name}={column}"
            what = f"the rubric {rubric.name} needs {name!r}" if name not in mapping else \
                f"--map {name}={column} names it"
            raise PredictionsError(
                f"{path}: no column {column!r} ({what}); columns are {sorted(present)}; "
                f"use {hint}", field=name,
            )
