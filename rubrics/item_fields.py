"""One row of a prediction file or one item of an HTTP request as an `Item`.

Here are the mapping of columns to fields, text checks, and the limit on a field's length. The bulk
runs (`jurybox.serving.runs.predictions`) and the scoring service's admission call the same
function, so a row means the same thing however it arrives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.item import PAIR_FIELDS, Item
from jurybox.rubrics.points import read_points
from jurybox.rubrics.rubric import Rubric

CORE_TEXT = ("question", "response", "reference", "context")
CORE_FIELDS = ("id", *CORE_TEXT, "images")
DEFAULT_MAX_FIELD_CHARS = 100_000


class FieldError(InputError):
    """A record field that cannot make an Item.

    ``field`` names it, ``message`` says what is wrong.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}", field=field)
        self.message = message


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
    A checklist rubric's ``checklist`` column (a list of points, or its JSON) is the item's
    checklist (`read_points`: HealthBench's rows as they are); the error names the point.
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
    if rubric.checklist is not None:  # a checklist column: the item's own points
        raw = values.pop("checklist", None)
        if raw is not None and not (isinstance(raw, float) and raw != raw):
            try:
                fields["checklist"] = read_points(raw, "checklist")
            except ValueError as exc:
                at, _, why = str(exc).partition(": ")
                raise FieldError(at, why) from None
            for k, point in enumerate(fields["checklist"]):
                if len(point.text) > max_field_chars:
                    raise FieldError(
                        f"checklist[{k}]",
                        f"{len(point.text):,} characters, more than the limit of "
                        f"{max_field_chars:,} (raise it with --max-field-chars)",
                    )
    extra = {k: v for k, v in values.items() if v is not None}
    for name in rubric.inputs:
        value = fields.get(name, extra.get(name))
        answer = name in ("response", *PAIR_FIELDS)
        if answer and allow_empty and isinstance(value, str):
            continue
        if _blank(value):
            what = "missing" if value is None else "empty"
            hint = " (judge empty answers with --allow-empty)" if answer else ""
            raise FieldError(name, f"{what}, but the rubric {rubric.name} needs it{hint}")
    for name, value in [*fields.items(), *extra.items()]:
        if isinstance(value, str) and len(value) > max_field_chars:
            raise FieldError(
                name,
                f"{len(value):,} characters, more than the limit of {max_field_chars:,} "
                "(raise it with --max-field-chars if the judges' context allows)",
            )
    return Item(id=item_id.strip(), images=images, extra=extra, **fields)
