"""Reading prediction files (JSONL, JSON list, CSV/TSV, Parquet) into Items.

A bad row never stops the file: it becomes a RowError that names the row and field and says what
was expected, and the other rows are judged. Problems that make the whole file unusable (no
rows, a column the rubric needs that no row has) raise PredictionsError.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jurybox.rubrics import Item, Rubric

CORE_TEXT = ("question", "response", "reference", "context")
FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
DEFAULT_MAX_FIELD_CHARS = 100_000


class PredictionsError(ValueError):
    """The file as a whole cannot be judged."""


class FieldError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class RowError:
    row: int  # 1-based line (JSONL, CSV) or record (JSON list, Parquet) number
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"row {self.row}" + (f", field {self.field!r}" if self.field else "")
        return f"{where}: {self.message}"


@dataclass
class ReadResult:
    items: list[Item]
    errors: list[RowError] = field(default_factory=list)
    rows: int = 0
    columns: list[str] = field(default_factory=list)


def _bad_utf8(exc: UnicodeDecodeError) -> str:
    return f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at position {exc.start})"


def _jsonl(data: bytes) -> Iterator[tuple[int, dict | RowError]]:
    for n, line in enumerate(data.removeprefix(b"\xef\xbb\xbf").split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield n, RowError(n, None, _bad_utf8(exc))
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            yield n, RowError(n, None, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(record, dict):
            yield n, RowError(n, None, f"expected a JSON object, got {type(record).__name__}")
            continue
        yield n, record


def _json(data: bytes, path: Path) -> Iterator[tuple[int, dict | RowError]]:
    try:
        records = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PredictionsError(f"{path}: line {line}: {_bad_utf8(exc)}") from None
    except json.JSONDecodeError as exc:
        raise PredictionsError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if isinstance(records, dict) and len(records) == 1 and isinstance(next(iter(records.values())), list):
        records = next(iter(records.values()))  # {"data": [...]}
    if not isinstance(records, list):
        raise PredictionsError(f"{path}: expected a JSON list of objects (or use .jsonl)")
    for n, record in enumerate(records, start=1):
        if isinstance(record, dict):
            yield n, record
        else:
            yield n, RowError(n, None, f"expected a JSON object, got {type(record).__name__}")


def _csv(data: bytes, delimiter: str) -> Iterator[tuple[int, dict | RowError]]:
    # surrogateescape keeps undecodable bytes visible per field instead of failing the file.
    text = data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    # Long answers are normal here; --max-field-chars, not the csv module's 128 KiB, limits them.
    csv.field_size_limit(sys.maxsize)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        reader.fieldnames  # reads the header, so line_num counts from it
        while True:
            n = reader.line_num + 1  # a record is numbered by the line it starts on
            try:
                record = next(reader)
            except StopIteration:
                break
            if None in record:
                yield n, RowError(n, None, f"{len(record[None])} more value(s) than header columns")
                continue
            bad = next((k for k, v in record.items() if v is not None and _has_surrogates(v)), None)
            if bad is not None:
                yield n, RowError(n, bad, "not valid UTF-8")
                continue
            yield n, {k: (None if v in ("", None) else v) for k, v in record.items()}
    except csv.Error as exc:
        raise PredictionsError(f"CSV error in the record starting at line {n}: {exc}") from None


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _parquet(path: Path) -> Iterator[tuple[int, dict | RowError]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise PredictionsError(f"{path}: cannot read as Parquet: {exc}") from None
    for n, record in enumerate(table.to_pylist(), start=1):
        yield n, record


def raw_records(path: Path) -> tuple[str, Iterator[tuple[int, dict | RowError]]]:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise PredictionsError(
            f"{path}: unknown file type {path.suffix!r}; expected one of {sorted(FORMATS)}"
        )
    if not path.is_file():
        raise PredictionsError(f"{path}: no such file")
    if fmt == "parquet":
        return fmt, _parquet(path)
    data = path.read_bytes()
    if not data.strip():
        raise PredictionsError(f"{path}: the file is empty; there is nothing to judge")
    if fmt == "jsonl":
        return fmt, _jsonl(data)
    if fmt == "json":
        return fmt, _json(data, path)
    return fmt, _csv(data, "\t" if fmt == "tsv" else ",")


def _text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value != value:  # NaN from Parquet/pandas
        return None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(_bad_utf8(exc)) from None
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


def to_item(
    record: Mapping[str, Any],
    mapping: Mapping[str, str],
    rubric: Rubric,
    max_field_chars: int,
) -> Item:
    """One record as an Item; raises FieldError naming the first field at fault."""
    values = dict(record)
    for target, column in mapping.items():
        values[target] = record.get(column)
    for column in set(mapping.values()) - set(mapping):
        values.pop(column, None)

    raw_id = values.pop("id", None)
    try:
        item_id = _text(raw_id, "id")
    except ValueError as exc:
        raise FieldError("id", str(exc)) from None
    if item_id is None or not item_id.strip():
        raise FieldError("id", "missing item id")
    fields: dict[str, Any] = {}
    for name in CORE_TEXT:
        try:
            fields[name] = _text(values.pop(name, None), name)
        except ValueError as exc:
            raise FieldError(name, str(exc)) from None
    if fields["response"] is None and "response" in rubric.inputs:
        # The column exists (checked per file) but this model gave no answer: judge it as empty
        # rather than drop the item, which would quietly raise the benchmark mean.
        fields["response"] = ""
    try:
        images = _images(values.pop("images", None))
    except ValueError as exc:
        raise FieldError("images", str(exc)) from None
    extra = {k: v for k, v in values.items() if v is not None}
    for name, value in [*fields.items(), *extra.items()]:
        if isinstance(value, str) and len(value) > max_field_chars:
            raise FieldError(
                name,
                f"{len(value):,} characters, more than the limit of {max_field_chars:,} "
                "(raise it with --max-field-chars if the judges' context allows)",
            )
    item = Item(id=item_id.strip(), images=images, extra=extra, **fields)
    missing = item.missing(rubric)
    if missing:
        raise FieldError(missing[0], f"empty, but the rubric {rubric.name} needs it")
    return item


def read_predictions(
    path: str | Path,
    rubric: Rubric,
    mapping: Mapping[str, str] | None = None,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
) -> ReadResult:
    path = Path(path)
    mapping = dict(mapping or {})
    _, records = raw_records(path)
    result = ReadResult(items=[])
    seen: dict[str, int] = {}
    columns: dict[str, None] = {}
    for n, record in records:
        result.rows += 1
        if isinstance(record, RowError):
            result.errors.append(record)
            continue
        columns.update(dict.fromkeys(record))
        try:
            item = to_item(record, mapping, rubric, max_field_chars)
        except FieldError as exc:
            result.errors.append(RowError(n, exc.field, exc.message))
            continue
        if item.id in seen:
            result.errors.append(
                RowError(n, "id", f"duplicate id {item.id!r} (first seen at row {seen[item.id]})")
            )
            continue
        seen[item.id] = n
        result.items.append(item)
    result.columns = list(columns)
    if result.rows == 0:
        raise PredictionsError(f"{path}: no rows; there is nothing to judge")
    _check_columns(path, result, mapping, rubric)
    return result


def _check_columns(path: Path, result: ReadResult, mapping: Mapping[str, str], rubric: Rubric) -> None:
    """A field the rubric needs that no row has is a file-level mistake (wrong column name), not
    a row-level one: say so once, with the columns that do exist."""
    if not result.columns:
        return
    present = set(result.columns)
    for name in ("id", *rubric.inputs):
        column = mapping.get(name, name)
        if column not in present:
            hint = f"--map {name}=COLUMN" if name not in mapping else f"check --map {name}={column}"
            raise PredictionsError(
                f"{path}: no column {column!r} (the rubric {rubric.name} needs {name!r}); "
                f"columns are {sorted(present)}; use {hint}"
            )
