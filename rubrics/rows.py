"""One reader for every row file jurybox takes.

Those are prediction files, human labels and judge output, as JSONL, a JSON list, CSV/TSV or
Parquet; one file, a directory of them (e.g. the shards of a bulk run) or a glob.

Rows stream: a file is never held in memory whole. A bad row never stops the file: it comes
back as a `RowError` naming the row (and field, where one is at fault) and saying what
was expected. Problems that make the whole file unreadable (unknown type, a directory, no rows,
a JSON list saved as .jsonl) raise `FileFormatError` saying what the file looks like.

Rows are numbered the way an editor shows them: by line for JSONL and CSV/TSV (blank lines
count; a multi-line CSV record by the line it starts on), by record for JSON lists and Parquet.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError, Picklable

FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
BOM = b"\xef\xbb\xbf"


class FileFormatError(InputError):
    """The file as a whole cannot be read as rows."""


@dataclass(frozen=True)
class RowError:
    """A row that could not be read, in place of its record.

    It holds the row number, the field at fault (if one is), what is wrong, its kind, and the
    file when rows come from several.
    """

    row: int  # 1-based line (JSONL, CSV) or record (JSON list, Parquet) number
    field: str | None
    message: str
    # What is wrong: "encoding" (not UTF-8), "syntax" (not JSON), "shape" (not an object, cells
    # not matching the header, a key twice) or "value" (a field's value, found by the caller).
    kind: str = "value"
    file: str | None = None  # set when rows come from several files

    def __str__(self) -> str:
        where = (f"{self.file}: " if self.file else "") + f"row {self.row}"
        where += f", field {self.field!r}" if self.field else ""
        return f"{where}: {self.message}"


# Parquet columns that hold JSON text (nested values such as a verdict's votes), named in the
# file's schema metadata under this key, are decoded back into values when read.
JSON_COLUMNS_KEY = b"jurybox.json_columns"


Row = tuple[int, "dict[str, Any] | RowError"]


def file_format(path: str | Path) -> str:
    """The format of a row file by its name; a clear error for other types."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise FileFormatError(
            f"{path}: unknown file type {path.suffix!r}; expected one of {sorted(FORMATS)}"
        )
    if not path.is_file():
        raise FileFormatError(f"{path}: no such file")
    return fmt


def row_files(source: str | Path) -> list[Path]:
    """The files behind ``source``.

    They are itself, the row files of a directory (sorted; hidden and temporary files aside), or
    the files a glob pattern matches.
    """
    path = Path(source)
    if path.is_dir():
        files = sorted(
            p
            for p in path.iterdir()
            if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in FORMATS
        )
        if not files:
            raise FileFormatError(
                f"{path} is a directory with no row files ({', '.join(sorted(FORMATS))})"
            )
        return files
    if any(ch in str(source) for ch in "*?[") and not path.exists():
        import glob

        files = sorted(Path(p) for p in glob.glob(str(source), recursive=True) if Path(p).is_file())
        if not files:
            raise FileFormatError(f"{source}: no file matches the pattern")
        return files
    return [path]


def read_rows(source: str | Path) -> Iterator[Row]:
    """Every row of a file, directory or glob, streamed.

    Rows of several files are numbered within their file, and their errors name the file.

    Args:
        source: A row file, a directory of them, or a glob pattern.

    Yields:
        ``(row number, record or RowError)`` for every row.

    Raises:
        FileFormatError: A file cannot be read as rows at all (no such file, an unknown type,
            no rows, a JSON list saved as .jsonl, ...).
    """
    for _, n, row in read_rows_from(source):
        yield n, row


def read_rows_from(
    source: str | Path,
) -> Iterator[tuple[str | None, int, dict[str, Any] | RowError]]:
    """`read_rows` with the file each row comes from (None when ``source`` is one file).

    This is for callers that find row errors of their own.
    """
    files = row_files(source)
    count = 0
    for path in files:
        label = path.name if len(files) > 1 else None
        fmt = file_format(path)
        reader = {"jsonl": _jsonl, "json": _json, "csv": _csv, "tsv": _csv, "parquet": _parquet}[
            fmt
        ]
        for n, row in reader(path, fmt):
            count += 1
            if label is not None and isinstance(row, RowError):
                row = RowError(row.row, row.field, row.message, row.kind, label)
            yield label, n, row
    if count == 0:
        what = "the file is empty" if len(files) == 1 else "the files are empty"
        raise FileFormatError(f"{source}: {what} (no rows)")


def count_rows(source: str | Path) -> int | None:
    """About how many rows ``source`` holds, cheaply, for progress bars.

    It counts lines of text files and reads Parquet metadata; None where only reading everything
    would tell (a JSON list).
    """
    total = 0
    for path in row_files(source):
        fmt = file_format(path)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            total += pq.ParquetFile(path).metadata.num_rows
        elif fmt == "json":
            return None
        else:
            with path.open("rb") as fh:
                lines = sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))
            total += max(0, lines - (fmt in ("csv", "tsv")))
    return total


# ------------------------------------------------------------------------------------ JSON


class _Object(dict):
    """A JSON object that remembers keys it saw twice (json keeps only the last value)."""

    duplicates: list[str]


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    dupes = []
    for key, value in pairs:
        if key in obj and key not in dupes:
            dupes.append(key)
        obj[key] = value
        if isinstance(value, _Object) and value.duplicates:
            dupes += [f"{key}.{d}" for d in value.duplicates]
    obj.duplicates = dupes
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_object)


def _record(n: int, value: Any) -> Row:
    if not isinstance(value, dict):
        return n, RowError(n, None, f"expected a JSON object, got {_json_type(value)}", "shape")
    if isinstance(value, _Object) and value.duplicates:
        key = value.duplicates[0]
        return n, RowError(
            n,
            key,
            f"the key {key!r} appears more than once in this object; "
            "which value is meant is unclear",
            "shape",
        )
    return n, _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _json_type(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "true/false",
        type(None): "null",
    }.get(type(value), "a number")


def _bad_utf8(exc: UnicodeDecodeError) -> str:
    return f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at position {exc.start})"


def _jsonl(path: Path, fmt: str) -> Iterator[Row]:
    first = True
    with path.open("rb") as fh:
        for n, line in enumerate(fh, start=1):
            if n == 1:
                line = line.removeprefix(BOM)
            if not line.strip():
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield n, RowError(n, None, _bad_utf8(exc), "encoding")
                first = False
                continue
            try:
                value = _DECODER.decode(text)
            except json.JSONDecodeError as exc:
                if first:
                    _not_jsonl(path, text.strip())
                yield (
                    n,
                    RowError(n, None, f"invalid JSON: {exc.msg} at column {exc.colno}", "syntax"),
                )
                first = False
                continue
            first = False
            yield _record(n, value)


def _not_jsonl(path: Path, first_line: str) -> None:
    """Refuse a first line that is not a JSON value but starts a JSON document.

    The whole file is then one pretty-printed document, not JSON Lines.
    """
    if first_line.startswith("["):
        raise FileFormatError(
            f"{path}: this looks like a JSON list (it starts with '['), not JSON Lines (one "
            "object per line, which .jsonl means); name it .json, or write one object per line"
        )
    if first_line == "{" or (first_line.startswith("{") and first_line.endswith((",", "{", "["))):
        raise FileFormatError(
            f"{path}: line 1 is not a whole JSON object; this looks like pretty-printed JSON. "
            "A .jsonl file needs one complete object per line (name a JSON list .json)"
        )


def _json(path: Path, fmt: str) -> Iterator[Row]:
    data = path.read_bytes().removeprefix(BOM)
    if not data.strip():
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise FileFormatError(f"{path}: line {line}: {_bad_utf8(exc)}") from None
    try:
        records = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        first = text.lstrip().split("\n", 1)[0]
        if exc.msg == "Extra data" and _is_object(first):
            raise FileFormatError(
                f"{path}: this looks like JSON Lines (one object per line), not one JSON "
                "document (which .json means); name it .jsonl"
            ) from None
        raise FileFormatError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    if (
        isinstance(records, dict)
        and len(records) == 1
        and isinstance(next(iter(records.values())), list)
    ):
        records = next(iter(records.values()))  # {"data": [...]}
    if not isinstance(records, list):
        raise FileFormatError(
            f"{path}: expected a JSON list of objects, got {_json_type(records)}"
            " (for one object per line, name the file .jsonl)"
        )
    for n, record in enumerate(records, start=1):
        yield _record(n, record)


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


# ------------------------------------------------------------------------------------- CSV


def _csv(path: Path, fmt: str) -> Iterator[Row]:
    # Long answers are normal here; callers limit field length, not the csv module's 128 KiB.
    csv.field_size_limit(sys.maxsize)
    # surrogateescape keeps undecodable bytes visible per field instead of failing the file.
    with path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t" if fmt == "tsv" else ",")
        try:
            header = next(reader, None)
            if header is None:
                return
            dupes = sorted({h for h in header if header.count(h) > 1})
            if dupes:
                raise FileFormatError(f"{path}: the header names {dupes} more than once")
            start = reader.line_num + 1
            for cells in reader:
                n, start = start, reader.line_num + 1  # a record by the line it starts on
                if not cells:
                    continue  # a blank line
                if len(cells) > len(header):
                    yield (
                        n,
                        RowError(
                            n,
                            None,
                            f"{len(cells) - len(header)} more value(s) than "
                            f"the {len(header)} header columns",
                            "shape",
                        ),
                    )
                    continue
                if len(cells) < len(header):
                    missing = header[len(cells) :]
                    yield (
                        n,
                        RowError(
                            n,
                            missing[0],
                            f"the row has {len(cells)} of the "
                            f"{len(header)} header columns (no value "
                            f"for {', '.join(missing[:5])})",
                            "shape",
                        ),
                    )
                    continue
                bad = next((h for h, v in zip(header, cells) if _has_surrogates(v)), None)
                if bad is not None:
                    yield n, RowError(n, bad, "not valid UTF-8", "encoding")
                    continue
                yield n, {h: (v if v != "" else None) for h, v in zip(header, cells)}
        except csv.Error as exc:
            raise FileFormatError(
                f"{path}: CSV error in the record starting at line {reader.line_num}: {exc}"
            ) from None


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# --------------------------------------------------------------------------------- Parquet


def _parquet(path: Path, fmt: str) -> Iterator[Row]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise FileFormatError(f"{path}: cannot read as Parquet: {exc}") from None
    metadata = parquet.schema_arrow.metadata or {}
    json_columns = [c for c in metadata.get(JSON_COLUMNS_KEY, b"").decode().split(",") if c]
    n = 0
    for batch in parquet.iter_batches(batch_size=4096):
        for record in batch.to_pylist():
            n += 1
            try:
                row = {k: _text_bytes(v, k) for k, v in record.items()}
            except _BadBytes as exc:
                yield n, RowError(n, exc.field, exc.message, "encoding")
                continue
            try:
                for column in json_columns:
                    if isinstance(row.get(column), str):
                        row[column] = json.loads(row[column])
            except json.JSONDecodeError as exc:
                yield n, RowError(n, column, f"invalid JSON in a JSON column: {exc.msg}", "syntax")
                continue
            yield n, row


class _BadBytes(Picklable, Exception):
    def __init__(self, field: str, message: str) -> None:
        self.field, self.message = field, message


def _text_bytes(value: Any, field: str) -> Any:
    """Binary cells hold text in most Parquet writers: decode them, or say which is not UTF-8."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _BadBytes(field, _bad_utf8(exc)) from None
    if isinstance(value, list):
        return [_text_bytes(v, field) for v in value]
    if isinstance(value, dict):
        return {k: _text_bytes(v, f"{field}.{k}") for k, v in value.items()}
    return value
