"""Checklists drafted by a judge model, and HealthBench's files imported: files a user reviews.

`draft_file` asks one judge of a jury (its first, or the one named) to write a checklist for
each item of a file from the item's question and reference answer (never from the response
that will be judged), with a shipped prompt (``checklist-draft.yaml`` beside this module, or
the user's own: `load_draft_prompt`) and under a JSON schema built from the prompt's settings
(how many points, their weights, the tags). It writes the items again with a ``checklist``
field: a draft for a person to read, edit and then judge with (``jurybox judge FILE --rubric
checklist``).

Nothing silently becomes a checklist: a judge's answer that is not such JSON, has too few or
too many points, or no positive one, becomes the item's row with an ``error`` (and the
judge's ``raw`` answer) and no checklist, which a judging run then rejects naming the row. An
empty list is never written. `import_file` writes HealthBench's rows as items
(`jurybox.rubrics.healthbench`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.protocol import Backend, Request
from jurybox.rubrics import Item
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.healthbench import join_responses, point_row, read_healthbench
from jurybox.rubrics.loading import load_definition
from jurybox.rubrics.points import Point, read_points
from jurybox.rubrics.prompts import Order, check_template, render_prompt
from jurybox.rubrics.rows import FileFormatError, RowError, read_rows_from
from jurybox.serving.options import argument, command_line, option

TAGS = ("essential", "important", "optional")
# The most characters of a judge's bad answer kept in its row's ``raw``.
RAW_CHARS = 2000


class DraftPrompt(BaseModel):
    """The prompt a checklist is drafted with, and the checklists its schema allows.

    Attributes:
        name: The prompt's name (its file's stem).
        description: What the prompt drafts.
        inputs: The item fields an item must have to be drafted for.
        optional_inputs: The item fields the template may show when an item has them.
        system: The system prompt.
        template: The prompt (a sandboxed Jinja template; ``rubric`` is this prompt).
        min_points: The fewest points a checklist may have.
        max_points: The most points a checklist may have.
        max_weight: The largest weight of a point (a pitfall's is down to minus it).
        max_criterion_chars: The longest a point's text may be.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "checklist-draft"
    description: str = ""
    inputs: list[str] = Field(default_factory=lambda: ["question"])
    optional_inputs: list[str] = Field(default_factory=lambda: ["reference", "context"])
    system: str = ""
    template: str = Field(min_length=1)
    min_points: int = Field(3, ge=1, le=64)
    max_points: int = Field(8, ge=1, le=64)
    max_weight: int = Field(10, ge=1, le=100)
    max_criterion_chars: int = Field(300, ge=20, le=4000)

    @property
    def pairwise(self) -> bool:
        """Never: a draft is written for one item."""
        return False

    @property
    def orders(self) -> tuple[Order | None, ...]:
        """One rendering per item."""
        return (None,)

    def calls(self) -> Sequence[Sequence[Any]]:
        """One call per item, scoring no criterion (the answer is the checklist)."""
        return [[]]

    @model_validator(mode="after")
    def _consistent(self) -> DraftPrompt:
        if self.min_points > self.max_points:
            raise ValueError(f"min_points {self.min_points} is over max_points {self.max_points}")
        fields = set(self.inputs) | set(self.optional_inputs)
        answers = sorted(fields & {"response", "response_a", "response_b"})
        if answers:
            raise ValueError(
                f"inputs: {', '.join(answers)}: a drafting judge never sees the response; "
                "a checklist is drafted from the question, reference and context only"
            )
        unknown = fields - {"question", "reference", "context"}
        if unknown:
            raise ValueError(f"inputs: unknown item fields {sorted(unknown)}")
        sample = Item.model_validate({"id": "sample", **{name: f"<{name}>" for name in fields}})
        check_template(self, sample)
        return self

    def answer_schema(self) -> dict[str, Any]:
        """The JSON schema a judge's draft follows: ``{"checklist": [points]}``.

        Returns:
            An object schema: the checklist, ``min_points`` to ``max_points`` points, each a
            criterion, its weight (an integer, not 0, within ``max_weight``) and its tag.
        """
        weights = [w for w in range(-self.max_weight, self.max_weight + 1) if w != 0]
        point = {
            "type": "object",
            "properties": {
                "criterion": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": self.max_criterion_chars,
                },
                "points": {"type": "integer", "enum": weights},
                "tag": {"type": "string", "enum": list(TAGS)},
            },
            "required": ["criterion", "points", "tag"],
            "additionalProperties": False,
        }
        checklist = {
            "type": "array",
            "items": point,
            "minItems": self.min_points,
            "maxItems": self.max_points,
        }
        return {
            "type": "object",
            "properties": {"checklist": checklist},
            "required": ["checklist"],
            "additionalProperties": False,
        }


def shipped_prompt_path() -> Path:
    """Where the shipped drafting prompt is (``checklist-draft.yaml``)."""
    return Path(str(files("jurybox.serving.runs").joinpath("checklist-draft.yaml")))


def load_draft_prompt(path: str | Path | None = None) -> DraftPrompt:
    """The drafting prompt in ``path``, or the shipped one.

    Args:
        path: A prompt file (YAML, the shipped one's fields), or None for the shipped one.

    Returns:
        The prompt, its template checked by rendering it once.

    Raises:
        DefinitionError: The file cannot be read or is not such a prompt (every problem named).
    """
    return load_definition(
        Path(path) if path is not None else shipped_prompt_path(), DraftPrompt, "draft prompt"
    )


def _last_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in ``text`` (an answer after any words around it), or None."""
    decoder = json.JSONDecoder()
    found = None
    at = text.find("{")
    while at >= 0:
        try:
            obj, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        if isinstance(obj, dict):
            found = obj
        at = text.find("{", end)
    return found


def parse_draft(text: str, prompt: DraftPrompt) -> list[Point]:
    """The checklist in a judge's answer, checked against the prompt's settings.

    Args:
        text: The judge's answer.
        prompt: The prompt it answered (how many points, their weights, the tags).

    Returns:
        The points, keyed p1.. in order.

    Raises:
        ValueError: The answer holds no such checklist: not JSON, no ``checklist`` list, too
            few or too many points, a weight outside the range or 0, an unknown tag, or no
            positive point (said, naming the point).
    """
    obj = _last_object(text)
    if obj is None:
        raise ValueError("the answer holds no JSON object")
    raw = obj.get("checklist")
    if not isinstance(raw, list):
        raise ValueError('the answer has no "checklist" list')
    if not prompt.min_points <= len(raw) <= prompt.max_points:
        raise ValueError(
            f"{len(raw)} point(s); the prompt asks for {prompt.min_points} to {prompt.max_points}"
        )
    points = read_points(raw, "checklist")
    for point in points:
        where = f"checklist[{int(point.key[1:]) - 1}]"
        if not point.points.is_integer() or abs(point.points) > prompt.max_weight:
            raise ValueError(
                f"{where}: points {point.points:g} is not a whole number within "
                f"±{prompt.max_weight}"
            )
        if point.tag is None:
            raise ValueError(f"{where}: no tag (one of {', '.join(TAGS)})")
        if len(point.text) > prompt.max_criterion_chars:
            raise ValueError(f"{where}: criterion over {prompt.max_criterion_chars} characters")
    if not any(point.points > 0 for point in points):
        raise ValueError("no positive point (an item's score needs points to earn)")
    return points


def _item(record: Mapping[str, Any], prompt: DraftPrompt) -> Item:
    """The item a record drafts for: its id and the prompt's fields, as text."""
    rid = record.get("id")
    if not isinstance(rid, (str, int)) or isinstance(rid, bool) or not str(rid).strip():
        raise InputError("id: missing item id", field="id")
    fields: dict[str, str] = {}
    for name in (*prompt.inputs, *prompt.optional_inputs):
        value = record.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            if name in prompt.inputs:
                raise InputError(f"{name}: missing, but the drafting prompt needs it", field=name)
            continue
        if not isinstance(value, str):
            raise InputError(f"{name}: expected text, got {type(value).__name__}", field=name)
        fields[name] = value
    return Item.model_validate({"id": str(rid).strip(), **fields})


def draft_rows(
    records: Sequence[Mapping[str, Any] | RowError], backend: Backend, prompt: DraftPrompt
) -> list[dict[str, Any]]:
    """Each record again, with its drafted checklist, or an ``error`` saying why it has none.

    Args:
        records: The items' rows (id, question, reference ... and any other fields, kept), or
            the row reader's errors (each written as an ``error`` row).
        backend: The judge that drafts.
        prompt: The drafting prompt.

    Returns:
        One row per record, in order: the record with ``checklist`` (HealthBench's keys) or,
        where there is none, with ``error`` (and the judge's ``raw`` answer, cut at 2000
        characters) and no ``checklist``.
    """
    out: list[dict[str, Any]] = [{} for _ in records]
    asked: list[tuple[int, Mapping[str, Any]]] = []
    requests: list[Request] = []
    schema = prompt.answer_schema()
    for k, record in enumerate(records):
        if isinstance(record, RowError):
            out[k] = {"error": f"row not drafted: {record}"}
            continue
        try:
            item = _item(record, prompt)
        except InputError as exc:
            out[k] = _failed(record, f"row not drafted: {exc}")
            continue
        messages, _, pieces = render_prompt(prompt, item, [], None)
        requests.append(Request(messages=messages, schema=schema, pieces=pieces))
        asked.append((k, record))
    generations = backend.generate(requests) if requests else []
    for (k, record), generation in zip(asked, generations, strict=True):
        if generation.error is not None:
            out[k] = _failed(record, f"the judge failed: {generation.error}", generation.text)
            continue
        try:
            points = parse_draft(generation.text, prompt)
        except ValueError as exc:
            cut = " (cut at max_tokens)" if generation.finish_reason == "length" else ""
            out[k] = _failed(record, f"no checklist{cut}: {exc}", generation.text)
            continue
        row = {key: v for key, v in record.items() if key not in ("error", "raw")}
        row["checklist"] = [point_row(p) for p in points]
        out[k] = row
    return out


def _failed(record: Mapping[str, Any], error: str, raw: str | None = None) -> dict[str, Any]:
    row = {k: v for k, v in record.items() if k not in ("checklist", "raw")}
    row["error"] = error
    if raw is not None:
        row["raw"] = raw[:RAW_CHARS]
    return row


@dataclass
class DraftReport:
    """What `draft_file` or `import_file` wrote.

    Attributes:
        out: The file written.
        rows: The rows written.
        drafted: The rows with a checklist.
        errors: The rows with an ``error`` instead (their first few messages in ``examples``).
        judge: The judge that drafted (None for an import).
        examples: The first errors, as ``id: error``.
        points: The points written, over all rows.
        without_response: For an import, the items without a response.
    """

    out: Path
    rows: int = 0
    drafted: int = 0
    errors: int = 0
    judge: str | None = None
    examples: list[str] | None = None
    points: int = 0
    without_response: int = 0


def _open_out(out: Path, overwrite: bool) -> Any:
    if out.suffix.lower() != ".jsonl":
        raise InputError(f"{out}: the output is a .jsonl file", field="out")
    if out.exists() and not overwrite:
        raise InputError(
            f"{out} exists (it may hold your edits); pass --overwrite to replace it", field="out"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    return out.open("w", encoding="utf-8")


def _records(source: str | Path, limit: int | None) -> Iterable[dict[str, Any] | RowError]:
    """The rows of ``source`` (any row file), and the row reader's errors in their places."""
    n = 0
    try:
        for _, _, record in read_rows_from(source):
            if limit is not None and n >= limit:
                return
            n += 1
            yield record
    except FileFormatError as exc:
        raise InputError(str(exc)) from None


@command_line(
    source=argument(
        type=str,
        metavar="items",
        help="Items to draft for (.jsonl, .json, .csv, .tsv or .parquet): id, question, "
        "and a reference answer where there is one; other fields are kept.",
        show_default=False,
    ),
    out=option(
        "--out",
        "-o",
        type=Path | None,
        default=None,
        help="The JSONL file written: each item again with its drafted checklist, or an "
        "error and the judge's raw answer. Default: ITEMS stem + .checklists.jsonl.",
        show_default=False,
    ),
    jury=option(
        "--jury",
        "-j",
        type=str | None,
        default=None,
        help="Shipped jury name or a jury YAML file whose judge drafts. Default: tiny on "
        "CPU, small-gpu with a GPU.",
        show_default=False,
    ),
    judge=option(help="The jury's judge that drafts (default: its first).", show_default=False),
    prompt=option(
        type=Path | None,
        default=None,
        help="A drafting prompt file (YAML, as the shipped one: see --show-prompt).",
        show_default=False,
    ),
    max_tokens=option(min=16, help="Tokens the judge may write per checklist."),
    limit=option(min=1, help="Draft only the first N rows.", show_default=False),
    chunk_size=option(min=1, help="Rows asked of the judge at a time (and written)."),
    overwrite=option(help="Replace --out when it exists (it may hold your edits)."),
)
def draft_file(
    source: str | Path,
    out: str | Path,
    jury: JurySpec,
    judge: str | None = None,
    prompt: DraftPrompt | None = None,
    max_tokens: int = 1024,
    limit: int | None = None,
    chunk_size: int = 16,
    overwrite: bool = False,
) -> DraftReport:
    """Draft a checklist for each item of ``source`` with one judge; write them to ``out``.

    Args:
        source: The items (any row file: id, question, reference ...).
        out: The JSONL file written: each row again with its ``checklist``, or an ``error``.
        jury: The jury whose judge drafts.
        judge: The judge's name (default: the jury's first).
        prompt: The drafting prompt (default: the shipped one).
        max_tokens: The tokens the judge may write per draft (a checklist is longer than a
            score: the judge's own ``max_tokens`` is replaced).
        limit: Draft only the first N rows.
        chunk_size: Rows asked of the judge at a time (and written).
        overwrite: Replace ``out`` when it exists (by default an error: it may hold edits).

    Returns:
        What was written.

    Raises:
        InputError: No such judge in the jury, ``out`` exists, or ``source`` cannot be read.
    """
    prompt = prompt or load_draft_prompt()
    names = [j.name for j in jury.judges]
    spec = next((j for j in jury.judges if j.name == (judge or names[0])), None)
    if spec is None:
        raise InputError(f"no judge {judge!r} in jury {jury.name}; it has {names}", field="judge")
    sampling = spec.sampling.model_copy(update={"max_tokens": max_tokens})
    spec = spec.model_copy(update={"sampling": sampling})
    out = Path(out)
    report = DraftReport(out=out, judge=spec.name, examples=[])
    records = iter(_records(source, limit))
    with Jury(jury) as loaded, _open_out(out, overwrite) as handle:
        backend = loaded.backend(spec)
        while chunk := [r for _, r in zip(range(chunk_size), records, strict=False)]:
            for row in draft_rows(chunk, backend, prompt):
                _count(report, row)
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()
    return report


def _count(report: DraftReport, row: Mapping[str, Any]) -> None:
    report.rows += 1
    if "checklist" in row:
        report.drafted += 1
        report.points += len(row["checklist"])
    if "error" in row:
        report.errors += 1
        if report.examples is not None and len(report.examples) < 5:
            report.examples.append(f"{row.get('id', '?')}: {row['error']}")


@command_line(
    source=argument(
        type=str,
        help="A HealthBench JSONL file (prompt, rubrics, ideal_completions_data, "
        "prompt_id), read as it is.",
        show_default=False,
    ),
    out=option(
        "--out",
        "-o",
        type=Path | None,
        default=None,
        help="The JSONL file written, one item a line. Default: SOURCE stem + .items.jsonl.",
        show_default=False,
    ),
    responses=option(
        type=Path | None,
        default=None,
        help="A row file of the model's answers (id, response) joined to the items by id.",
        show_default=False,
    ),
    overwrite=option(help="Replace --out when it exists."),
)
def import_file(
    source: str | Path,
    out: str | Path,
    responses: str | Path | None = None,
    overwrite: bool = False,
) -> DraftReport:
    """HealthBench's JSONL rows as items with their checklists, written to ``out``.

    Args:
        source: A HealthBench JSONL file (prompt, rubrics, ideal_completions_data, prompt_id).
        out: The JSONL file written (one item a line).
        responses: A row file of the model's answers (``id``, ``response``) joined by id.
        overwrite: Replace ``out`` when it exists.

    Returns:
        What was written (``without_response``: items no answer was joined to).

    Raises:
        HealthBenchError: Rows that cannot be imported (each named by line and point).
        InputError: ``out`` exists, or the responses cannot be joined.
    """
    rows = read_healthbench(source)
    missing = len(rows)
    if responses is not None:
        answers = []
        for _, number, record in read_rows_from(responses):
            if isinstance(record, RowError):
                raise InputError(f"{responses}: row {number}: {record.message}")
            answers.append(record)
        rows, missing = join_responses(rows, answers, str(responses))
    out = Path(out)
    report = DraftReport(out=out, without_response=missing)
    with _open_out(out, overwrite) as handle:
        for row in rows:
            _count(report, row)
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return report
