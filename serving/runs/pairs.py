"""Two prediction files paired by id, for a pairwise rubric (``jurybox judge --pairs A B``).

Each id found in both files becomes one row: the shared fields (question, reference, context
and any other column) from A, ``response_a`` from A, ``response_b`` from B, and ``model_a`` /
``model_b`` naming the two systems (the files' stems unless named), which ``jurybox compare``
reads. The rows are written to a file beside the output, rewritten identically on every run, so
a rerun resumes like any other run. What cannot be paired is counted and named, never dropped
silently: ids in one file only, rows that are not valid rows, and ids whose question differs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.rows import RowError, read_rows_from

SHARED = ("question", "reference", "context")
SHOWN = 5  # ids named per kind of problem


class PairsError(InputError):
    """The two files cannot be paired at all."""


@dataclass
class Paired:
    """What `write_pairs` wrote.

    The file, the systems' names, the pairs, and what did not pair (as plain sentences for the
    run's notes).
    """

    path: Path
    names: tuple[str, str]
    pairs: int
    problems: list[str] = field(default_factory=list)


def pair_names(a: str | Path, b: str | Path) -> tuple[str, str]:
    """The two systems' default names: the files' stems (suffixed when they are the same)."""
    sa, sb = Path(a).stem, Path(b).stem
    return (sa, sb) if sa != sb else (f"{sa}(1)", f"{sb}(2)")


def _rows(path: str | Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    rows: dict[str, dict[str, Any]] = {}
    problems = []
    for file, n, record in read_rows_from(path):
        where = f"{file}: row {n}" if file else f"{path}: row {n}"
        if isinstance(record, RowError):
            problems.append(f"{where}: {record.message}")
            continue
        ident = record.get("id")
        if ident is None or not str(ident).strip():
            problems.append(f"{where}: missing item id")
            continue
        key = str(ident).strip()
        if key in rows:
            problems.append(f"{where}: duplicate id {key!r}")
            continue
        if "response" not in record:
            raise PairsError(
                f"{where}: no column 'response' (each file of --pairs holds one "
                f"system's predictions: id, question, response ...)",
                field="response",
            )
        rows[key] = record
    return rows, problems


def _listed(what: str, ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:SHOWN])
    more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
    return f"{len(ids)} id(s) {what}: {shown}{more}"


def write_pairs(
    a: str | Path, b: str | Path, out: str | Path, names: tuple[str, str] | None = None
) -> Paired:
    """Pair ``a`` with ``b`` by id and write the pairs as JSONL to ``out`` (atomically).

    Raises:
        PairsError: A file has no ``response`` column, or no id is in both files with the same
            question.
    """
    names = names or pair_names(a, b)
    rows_a, problems_a = _rows(a)
    rows_b, problems_b = _rows(b)
    problems = [f"not paired: {p}" for p in (*problems_a, *problems_b)]
    only_a = [i for i in rows_a if i not in rows_b]
    only_b = [i for i in rows_b if i not in rows_a]
    differ = []
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for ident, ra in rows_a.items():
            rb = rows_b.get(ident)
            if rb is None:
                continue
            qa, qb = ra.get("question"), rb.get("question")
            if qa is not None and qb is not None and str(qa).strip() != str(qb).strip():
                differ.append(ident)
                continue
            row = {k: v for k, v in ra.items() if k not in ("response", "model")}
            for name in SHARED:
                if row.get(name) is None and rb.get(name) is not None:
                    row[name] = rb[name]
            row.update(
                id=ident,
                response_a=ra["response"],
                response_b=rb["response"],
                model_a=names[0],
                model_b=names[1],
            )
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            n += 1
    os.replace(tmp, out)
    if only_a:
        problems.append(_listed(f"only in {a} (A, {names[0]}), not judged", only_a))
    if only_b:
        problems.append(_listed(f"only in {b} (B, {names[1]}), not judged", only_b))
    if differ:
        problems.append(_listed("whose question differs between the files, not judged", differ))
    if n == 0:
        raise PairsError(
            f"--pairs {a} {b}: no id is in both files with the same question"
            + (f" ({'; '.join(problems[:3])})" if problems else "")
        )
    return Paired(out, names, n, problems)
