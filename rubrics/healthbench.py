"""HealthBench's JSONL rows as items with their own checklists.

A HealthBench row (arXiv 2505.08775; the public files of ``openai/simple-evals``) holds a
conversation (``prompt``: chat messages), the physicians' rubric for it (``rubrics``: each a
``criterion``, its ``points``, negative for a pitfall, and ``tags``), an ideal completion where
one was written (``ideal_completions_data.ideal_completion``), its ``prompt_id`` and
``example_tags``. An item row made from it has:

- ``id``: the ``prompt_id`` (or ``row-N`` where a row has none);
- ``question``: the last message, which must be the user's;
- ``context``: the messages before it, one ``role: content`` paragraph each (none for a
  conversation of one message);
- ``reference``: the ideal completion, where the row has one;
- ``checklist``: the rubric's points as they are (``criterion``, ``points``, ``tags``);
- ``example_tags``: kept, as an extra field.

The model's answer (``response``) is not in HealthBench's rows: it is the model's under test,
joined by id (`join_responses`). Every problem names its line and, inside the rubric, the point
(``line 3: rubrics[2]: ...``); a file with any is not imported, and all of them are said.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.points import Point, read_points

# The most problems an error lists (the count of the rest follows them).
MAX_LISTED = 20


class HealthBenchError(InputError):
    """A HealthBench file that cannot be imported: every problem, each naming its line.

    Attributes:
        problems: Each problem, as ``line N: field: what is wrong``.
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        listed = list(problems[:MAX_LISTED])
        more = len(problems) - len(listed)
        tail = f"\n  ... and {more} more" if more else ""
        super().__init__(
            f"{source}: {len(problems)} problem(s), nothing imported:\n  "
            + "\n  ".join(listed)
            + tail
        )
        self.problems = list(problems)


def point_row(point: Point) -> dict[str, Any]:
    """A point as a checklist row writes it: HealthBench's keys, a tag only where set.

    Args:
        point: The point.

    Returns:
        ``{"criterion", "points", "tag"?, "tags"?}``, whole points written as integers.
    """
    points: float | int = int(point.points) if point.points.is_integer() else point.points
    row: dict[str, Any] = {"criterion": point.text, "points": points}
    if point.tag is not None:
        row["tag"] = point.tag
    if point.tags:
        row["tags"] = list(point.tags)
    return row


def _message(raw: Any, where: str) -> tuple[str, str]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a message {{role, content}}, got {type(raw).__name__}")
    role, content = raw.get("role"), raw.get("content")
    if role not in ("system", "developer", "user", "assistant"):
        raise ValueError(f"{where}.role: expected system, user or assistant, got {role!r}")
    if not isinstance(content, str) or not content.strip():
        raise ValueError(f"{where}.content: expected text, got {content!r}")
    return role, content


def healthbench_item(row: Any, where: str, n: int) -> dict[str, Any]:
    """One HealthBench row as an item row (see the module's docstring for the fields).

    Args:
        row: The row, as read from its JSON line.
        where: Where the row is, for errors (``line 3``).
        n: The row's number, for the id of a row without a ``prompt_id``.

    Returns:
        The item row: ``id``, ``question``, ``context``?, ``reference``?, ``checklist``,
        ``example_tags``?.

    Raises:
        InputError: The row is not HealthBench's shape; the message names ``where`` and the
            field (``rubrics[2]`` for a point).
    """
    if not isinstance(row, Mapping):
        raise InputError(f"{where}: expected a JSON object, got {type(row).__name__}")
    try:
        prompt = row.get("prompt")
        if not isinstance(prompt, list) or not prompt:
            raise ValueError(f"prompt: expected a list of chat messages, got {prompt!r:.60}")
        messages = [_message(m, f"prompt[{k}]") for k, m in enumerate(prompt)]
        if messages[-1][0] != "user":
            raise ValueError(
                f"prompt[{len(messages) - 1}]: the last message must be the user's, "
                f"got {messages[-1][0]!r}"
            )
        ideal = row.get("ideal_completions_data")
        reference = None
        if ideal is not None:
            if not isinstance(ideal, Mapping):
                raise ValueError("ideal_completions_data: expected an object or null")
            reference = ideal.get("ideal_completion")
            if reference is not None and not isinstance(reference, str):
                raise ValueError("ideal_completions_data.ideal_completion: expected text")
        rid = row.get("prompt_id", f"row-{n}")
        if not isinstance(rid, str) or not rid.strip():
            raise ValueError(f"prompt_id: expected text, got {rid!r}")
        tags = row.get("example_tags")
        if tags is not None and not (
            isinstance(tags, list) and all(isinstance(t, str) for t in tags)
        ):
            raise ValueError("example_tags: expected a list of text")
    except ValueError as exc:
        raise InputError(f"{where}: {exc}", field=str(exc).partition(":")[0]) from None
    if "rubrics" not in row:
        raise InputError(f"{where}: rubrics: missing (HealthBench's checklist)", field="rubrics")
    try:
        points = read_points(row["rubrics"], f"{where}: rubrics")
    except ValueError as exc:
        raise InputError(str(exc), field="rubrics") from None
    out: dict[str, Any] = {"id": rid, "question": messages[-1][1]}
    if len(messages) > 1:
        out["context"] = "\n\n".join(f"{role}: {content}" for role, content in messages[:-1])
    if reference:
        out["reference"] = reference
    out["checklist"] = [point_row(p) for p in points]
    if tags:
        out["example_tags"] = list(tags)
    return out


def read_healthbench(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a HealthBench JSONL file as an item row.

    Args:
        path: The file (one JSON object a line; blank lines are skipped).

    Returns:
        The item rows, in the file's order.

    Raises:
        HealthBenchError: Any row that cannot be imported (all of them listed, each with its
            line and field), or two rows with one id.
        InputError: The file cannot be read.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({exc})") from None
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not JSON ({exc.msg}, column {exc.colno})")
            continue
        try:
            row = healthbench_item(raw, where, len(rows) + len(problems) + 1)
        except InputError as exc:
            problems.append(str(exc))
            continue
        if row["id"] in seen:
            problems.append(f"{where}: prompt_id {row['id']!r} is line {seen[row['id']]}'s too")
            continue
        seen[row["id"]] = number
        rows.append(row)
    if not rows and not problems:
        problems.append("no rows")
    if problems:
        raise HealthBenchError(str(path), problems)
    return rows


def join_responses(
    rows: Sequence[dict[str, Any]], responses: Iterable[Mapping[str, Any]], source: str
) -> tuple[list[dict[str, Any]], int]:
    """The item rows with each one's ``response`` from ``responses`` (rows ``{id, response}``).

    Args:
        rows: The item rows (`read_healthbench`'s).
        responses: The model's answers, one ``{id, response}`` each.
        source: Where the responses come from, for errors.

    Returns:
        The rows (new dicts) with their responses, and how many rows got none.

    Raises:
        InputError: An answer without an id or a text response, an id twice, or an id that is
            no row's.
    """
    by_id: dict[str, str] = {}
    for k, answer in enumerate(responses, 1):
        rid, text = answer.get("id"), answer.get("response")
        if not isinstance(rid, str) or not isinstance(text, str):
            raise InputError(f"{source}: row {k}: expected text id and response")
        if rid in by_id:
            raise InputError(f"{source}: row {k}: id {rid!r} twice")
        by_id[rid] = text
    known = {row["id"] for row in rows}
    unknown = sorted(set(by_id) - known)
    if unknown:
        raise InputError(
            f"{source}: {len(unknown)} response(s) for ids not in the file, e.g. {unknown[0]!r}"
        )
    out = [
        {**row, "response": by_id[row["id"]]} if row["id"] in by_id else dict(row) for row in rows
    ]
    return out, sum(1 for row in rows if row["id"] not in by_id)
