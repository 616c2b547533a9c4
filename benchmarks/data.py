"""Reading a benchmark's data file and a model's predictions, strictly.

Both go through the one row reader (`jurybox.rubrics.rows`: JSONL, a JSON list, CSV/TSV,
Parquet). A benchmark's numbers are only as good as its denominator, so a bad row, a missing
field, a duplicate id or a prediction for an id the data does not have is an InputError naming
the file, row and field, never a skipped row. A data item without a prediction (or with an empty
response) is *unanswered*: it stays in the denominator, counted as wrong, and is listed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.rows import RowError, read_rows

EXAMPLES = 5  # problems shown in one message

Row = tuple[int, dict[str, Any]]


def read_records(path: str | Path, what: str) -> list[Row]:
    """``(row number, record)`` for every row of ``path``; InputError naming the bad rows."""
    path = Path(path)
    rows: list[Row] = []
    errors: list[RowError] = []
    for n, record in read_rows(path):
        if isinstance(record, RowError):
            errors.append(record)
        else:
            rows.append((n, record))
    if errors:
        shown = "; ".join(str(e) for e in errors[:EXAMPLES])
        raise InputError(
            f"{path} ({what}): {plural(len(errors), 'unreadable row')}: {shown}",
            field=errors[0].field,
        )
    return rows


def require(
    path: str | Path, n: int, record: Mapping[str, Any], names: Iterable[str], what: str
) -> None:
    """Every field in ``names`` is present and not null, or an InputError naming the first."""
    for name in names:
        if record.get(name) is None:
            present = ", ".join(sorted(record)[:12])
            raise InputError(
                f"{path} row {n}: no field {name!r} (the {what} needs it; this row has {present})",
                field=name,
            )


def text_id(path: str | Path, n: int, value: Any, name: str = "id") -> str:
    """An id as text: strings and integers; anything else names the row."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        raise InputError(
            f"{path} row {n}: {name} must be text or an integer, got {value!r:.40}", field=name
        )
    text = str(value).strip()
    if not text:
        raise InputError(f"{path} row {n}: empty {name}", field=name)
    return text


def unique_ids(path: str | Path, ids: Sequence[tuple[int, str]], name: str = "id") -> None:
    """InputError for ids that repeat, naming the rows."""
    first: dict[str, int] = {}
    repeats = []
    for n, i in ids:
        if i in first:
            repeats.append(f"{i!r} (rows {first[i]} and {n})")
        else:
            first[i] = n
    if repeats:
        raise InputError(
            f"{path}: {plural(len(repeats), 'duplicate ' + name)}: "
            + ", ".join(repeats[:EXAMPLES]),
            field=name,
        )


@dataclass(frozen=True)
class Prediction:
    """A model's answer to one item; ``response`` None when the row had none."""

    id: str
    response: str | None
    row: int
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        """Whether the response has any text besides whitespace."""
        return bool(self.response and self.response.strip())


@dataclass
class Predictions:
    """Predictions joined to the data's ids."""

    path: Path
    by_id: dict[str, Prediction]

    def get(self, item_id: str) -> Prediction | None:
        """The prediction for an item if it answered, else None (unanswered)."""
        p = self.by_id.get(item_id)
        return p if p is not None and p.answered else None

    def unanswered(self, ids: Iterable[str]) -> list[str]:
        """The ids among ``ids`` with no answered prediction, in their order."""
        return [i for i in ids if self.get(i) is None]


def read_model_answers(
    path: str | Path,
    data_ids: Collection[str],
    *,
    data_path: str | Path,
    response: str = "response",
) -> Predictions:
    """Prediction rows (``id``, ``response``, any other fields) for the data's ids.

    A null or empty response is unanswered; a response that is not text (a list, an object)
    is an error, as are rows without ``id`` or ``response``, duplicate ids and ids the data does
    not have.
    """
    path = Path(path)
    known = set(data_ids)
    by_id: dict[str, Prediction] = {}
    ids: list[tuple[int, str]] = []
    unknown: list[str] = []
    for n, record in read_records(path, "predictions"):
        if "id" not in record or record["id"] is None:
            raise InputError(
                f"{path} row {n}: no field 'id' (each prediction needs the id of "
                f"the item it answers; fields here: {', '.join(sorted(record)[:12])})",
                field="id",
            )
        if response not in record:
            raise InputError(
                f"{path} row {n}: no field {response!r} (the model's answer; use "
                'null or "" for an item it did not answer)',
                field=response,
            )
        item_id = text_id(path, n, record["id"])
        text = record[response]
        if isinstance(text, bool) or not (text is None or isinstance(text, (str, int, float))):
            raise InputError(
                f"{path} row {n}: {response} must be text, got {type(text).__name__}",
                field=response,
            )
        ids.append((n, item_id))
        if item_id not in known:
            unknown.append(f"{item_id!r} (row {n})")
        by_id.setdefault(
            item_id, Prediction(item_id, None if text is None else str(text), n, dict(record))
        )
    unique_ids(path, ids)
    if unknown:
        raise InputError(
            f"{path}: {plural(len(unknown), 'prediction')} for ids that {data_path} "
            f"does not have: {', '.join(unknown[:EXAMPLES])} (wrong data file, or "
            "ids written differently?)",
            field="id",
        )
    return Predictions(path, by_id)


def limited(items: Sequence[Any], limit: int | None) -> list[Any]:
    """The first ``limit`` items (all of them when ``limit`` is None).

    An InputError for a limit below 1.
    """
    if limit is not None and limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}", field="limit")
    return list(items[:limit] if limit is not None else items)


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun``, with an ``s`` unless ``n`` is 1: ``plural(2, "row")`` is ``"2 rows"``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def image_paths(data: str | Path, images: Any) -> list[str]:
    """A row's images (a path or a list of them) as references a judge can read.

    A relative path is relative to the data file's folder (as the benchmarks ship them), a URL or an
    absolute path as given.
    """
    if images in (None, ""):
        return []
    if isinstance(images, str) and images.strip().startswith("["):
        import json

        images = json.loads(images)  # a list kept as JSON text (CSV)
    if not isinstance(images, (str, list)) or not all(
        isinstance(i, str) for i in ([images] if isinstance(images, str) else images)
    ):
        raise InputError(
            f"{data}: images must be a path or a list of paths, got {images!r:.60}", field="images"
        )
    listed = [images] if isinstance(images, str) else list(images)
    base = Path(data).parent
    out = []
    for ref in map(str, listed):
        if "://" in ref or ref.startswith("data:") or Path(ref).is_absolute():
            out.append(ref)
        else:
            out.append(str(base / ref))
    return out
