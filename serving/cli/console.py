"""What every ``jurybox`` command shares: consoles, error messages and exit codes, JSON output.

The consoles, how an error becomes a message and an exit code (one place, from the error
family), and JSON output without NaN.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from jurybox.rubrics.errors import JuryboxError

if TYPE_CHECKING:
    from jurybox.judges import JurySpec

T = TypeVar("T")

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


def said(source: Any) -> None:
    """What a library object wants its user told: its ``notes``, then its ``warnings``, once.

    The lists are emptied, so a later call says only what was added since.
    """
    for line in source.notes:
        note(line)
    for line in source.warnings:
        warn(line)
    source.notes.clear()
    source.warnings.clear()


def progress_bar(total: int | None, initial: float, desc: str) -> Any:
    """A progress bar on stderr counting items (fractions of one shown as whole items)."""
    import sys

    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        unit="item",
        desc=desc,
        file=sys.stderr,
        bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]",
    )


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


def options_of(
    *options: type | Callable[..., Any], place: Mapping[str, str] | None = None
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A command whose options are the fields of a library class (``RunPlan``'s, ...).

    Each field with command-line metadata (``jurybox.serving.options.option``) becomes one
    parameter of the command, in the fields' order; the command receives their values as one
    dict (its first parameter, field name -> value, a negated flag turned back into the
    field's value), ready for ``options(**values)``. ``options`` may also be a library
    function whose parameters ``jurybox.serving.options.command_line`` marked: the same, in
    its parameters' order. The command's own parameters (its others: how it prints, what it
    runs) follow the fields, or come before the field ``place`` names for them.

    Several ``options`` (a command that calls one of several functions, as calibrate does):
    their options in turn, a name the ones before gave taken from them (the functions share
    its definition); ``given_to`` picks each function's values from the dict.
    """

    def decorate(command: Callable[..., T]) -> Callable[..., T]:
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in list(inspect.signature(command, eval_str=True).parameters.values())[1:]
        ]
        before: dict[str, list[inspect.Parameter]] = {}
        for param in own:
            before.setdefault((place or {}).get(param.name, ""), []).append(param)
        params: list[inspect.Parameter] = []
        fields: dict[str, tuple[str, bool]] = {}  # parameter -> (field, negated)
        for source, field, declared, cli in _fields(options):
            if field in fields or f"no_{field}" in fields:
                continue
            params.extend(before.pop(field, []))
            negated = cli.pop("negated", False)
            name = f"no_{field}" if negated else field
            if "type" in cli:
                kind = cli.pop("type")
            else:
                kind = bool if negated else typing.get_type_hints(source)[field]
            default = cli.pop("default", False if negated else declared)
            if default is dataclasses.MISSING or default is inspect.Parameter.empty:
                default = inspect.Parameter.empty
            params.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=Annotated[kind, as_typer({"cli": cli})],
                    default=default,
                )
            )
            fields[name] = (field, negated)
        for rest in before.values():
            params.extend(rest)

        @functools.wraps(command)
        def run(**values: Any) -> T:
            chosen = {
                field: (not values.pop(name) if negated else values.pop(name))
                for name, (field, negated) in fields.items()
            }
            return command(chosen, **values)

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        del run.__wrapped__  # (Typer reads the parameters above, not the command's)
        return run

    return decorate


def as_typer(metadata: Mapping[str, Any]) -> Any:
    """Typer's ``Argument`` or ``Option`` of an option's metadata (`jurybox.serving.options`).

    For a command parameter written by hand: ``Annotated[Path, as_typer(HUMAN)]``; the
    metadata's ``type``, ``default`` and ``negated`` are the parameter's own to say.
    """
    cli = {k: v for k, v in metadata["cli"].items() if k not in ("type", "default", "negated")}
    flags = cli.pop("flags", ())
    if cli.pop("argument", False):
        return typer.Argument(**cli)
    return typer.Option(*flags, **cli)


def given_to(function: Callable[..., Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The values of ``options`` (an `options_of` command's dict) that are ``function``'s."""
    return {
        name: options[name] for name in inspect.signature(function).parameters if name in options
    }


def _fields(
    sources: Iterable[type | Callable[..., Any]],
) -> Iterator[tuple[Any, str, Any, dict[str, Any]]]:
    """(source, name, default, command-line metadata) of each option of classes or functions."""
    for options in sources:
        if dataclasses.is_dataclass(options):
            for f in dataclasses.fields(options):
                if f.metadata.get("cli"):
                    yield options, f.name, f.default, dict(f.metadata["cli"])
            continue
        marked = getattr(options, "__command_line__", {})
        for p in inspect.signature(options).parameters.values():
            if p.name in marked:
                yield options, p.name, p.default, dict(marked[p.name])
