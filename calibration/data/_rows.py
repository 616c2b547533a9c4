"""Reading a labels or verdicts file strictly, a bad row an error naming it.

Every row goes through the one row reader (`jurybox.rubrics.rows`), and a bad row is an
error naming it, since statistics on a silently shortened file would mislead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jurybox.rubrics.errors import InputError

from ..errors import InputDataError

EXAMPLES = 10  # problems shown in one message


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, with an ``s`` unless ``n`` is 1: ``count(2, "row")`` is ``"2 rows"``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def numbered_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(row number, record)`` for every row of ``path``; InputDataError at the first bad one."""
    from jurybox.rubrics.rows import RowError, read_rows

    rows, errors = [], []
    try:
        for n, row in read_rows(path):
            if isinstance(row, RowError):
                errors.append(row)
            else:
                rows.append((n, row))
    except InputError as exc:
        raise InputDataError(str(exc)) from None
    if errors:
        first = errors[0]
        if first.kind == "encoding":
            raise InputDataError(f"{path}: not UTF-8 text (row {first.row}: {first.message})")
        if first.kind == "syntax":
            raise InputDataError(f"{path}: line {first.row} is not JSON ({first.message})")
        raise InputDataError(
            f"{path}: {count(len(errors), 'bad row')}; first: "
            + "; ".join(str(e) for e in errors[:EXAMPLES])
        )
    return rows
