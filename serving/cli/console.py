"""What every ``jurybox`` command shares: consoles, error messages and exit codes, JSON output.

The consoles, how an error becomes a message and an exit code (one place, from the error
family), and JSON output without NaN.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from jurybox.rubrics.errors import JuryboxError

if TYPE_CHECKING:
    from jurybox.judges import JurySpec

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` to stderr; the caller raises the returned Exit."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print ``warning: message`` to stderr (the message is not read as Rich markup)."""
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)


def note(message: str) -> None:
    """Print ``message`` to stderr as it is (no Rich markup)."""
    err.print(message, highlight=False, markup=False)


@contextmanager
def reported(hint: str | None = None) -> Iterator[None]:
    """Turn jurybox errors into ``error: ...`` and their exit code (input 2, execution 1).

    ``hint`` is added to execution errors (e.g. how to resume). An OSError (a file that cannot
    be read or written) becomes an error naming the file, with exit code 2.
    """
    try:
        yield
    except JuryboxError as exc:
        message = str(exc)
        if hint and exc.exit_code != 2:
            message += f"\n{hint}"
        raise fail(message, exc.exit_code) from None
    except OSError as exc:  # a file that cannot be read or written
        raise fail(f"cannot use {exc.filename or 'a file'}: {exc.strerror or exc}") from None


def dumps(payload: Any) -> str:
    """JSON with undefined values as null: never NaN or Infinity."""
    from jurybox.calibration.stats.stat import jsonable

    return json.dumps(jsonable(payload), indent=2, allow_nan=False, default=str)


def parse_map(pairs: list[str], option: str = "--map") -> dict[str, str]:
    """``--map FIELD=COLUMN`` pairs as ``{field: column}`` (both stripped).

    A later pair for a field wins; a malformed pair prints an error and raises the Exit of
    `fail`.
    """
    mapping = {}
    for pair in pairs:
        field, sep, column = pair.partition("=")
        if not sep or not field.strip() or not column.strip():
            example = "response=model_answer" if option == "--map" else "smollm2-135m=smollm"
            form = "FIELD=COLUMN" if option == "--map" else "NAME=VALUE"
            raise fail(f"{option} expects {form} (e.g. {option} {example}), got {pair!r}")
        mapping[field.strip()] = column.strip()
    return mapping


def load_jury(name: str) -> JurySpec:
    """A jury file by name or path, its errors printed as the command's error."""
    from jurybox.judges import load_jury_spec

    with reported():
        return load_jury_spec(name)
