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
from types import SimpleNamespace
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
    function, or a pydantic model, whose parameters or fields
    ``jurybox.serving.options.command_line`` marked: the same, in the order it marks them
    (a ``nested`` field's own options in its place, its values a dict under its name). The
    command's own parameters (its others: how it prints, what it runs) follow the options;
    ``place`` moves a parameter, the command's own or an option, before the one it names
    (an option by its field's name).

    Several ``options`` (a command that calls one of several functions, as calibrate does):
    their options in turn, a name the ones before gave taken from them (the functions share
    its definition); ``given_to`` picks each function's values from the dict.
    """

    def decorate(command: Callable[..., T]) -> Callable[..., T]:
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in list(inspect.signature(command, eval_str=True).parameters.values())[1:]
        ]
        params: list[inspect.Parameter] = []
        fields: dict[str, tuple[tuple[str, ...], bool]] = {}  # parameter -> (field path, negated)
        for source, path, declared, cli in _fields(options):
            field = path[-1]
            if field in fields or f"no_{field}" in fields:
                continue
            negated = cli.pop("negated", False)
            name = f"no_{field}" if negated else field
            if "type" in cli:
                kind = cli.pop("type")
            elif negated:
                kind = bool
            else:
                kind = _hint(source, field)
            default = cli.pop("default", False if negated else declared)
            params.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=Annotated[kind, as_typer({"cli": cli})],
                    default=default,
                )
            )
            fields[name] = (path, negated)
        named = {path[-1]: name for name, (path, _) in fields.items()}  # field -> parameter
        placed = {named.get(k, k): named.get(v, v) for k, v in (place or {}).items()}
        params = _placed([*params, *own], placed)

        @functools.wraps(command)
        def run(**values: Any) -> T:
            chosen: dict[str, Any] = {}
            for name, (path, negated) in fields.items():
                value = values.pop(name)
                into = chosen
                for step in path[:-1]:
                    into = into.setdefault(step, {})
                into[path[-1]] = not value if negated else value
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


def _placed(params: list[inspect.Parameter], place: Mapping[str, str]) -> list[inspect.Parameter]:
    """``params`` in order, each that ``place`` names moved before the parameter it names."""
    names = {p.name for p in params}
    before: dict[str, list[inspect.Parameter]] = {}
    for param in params:
        if place.get(param.name) in names:
            before.setdefault(place[param.name], []).append(param)
    placed: list[inspect.Parameter] = []

    def emit(param: inspect.Parameter) -> None:
        for earlier in before.get(param.name, []):
            emit(earlier)
        placed.append(param)

    for param in params:
        if place.get(param.name) not in names:
            emit(param)
    return placed


def _fields(
    sources: Iterable[type | Callable[..., Any]], within: tuple[str, ...] = ()
) -> Iterator[tuple[Any, tuple[str, ...], Any, dict[str, Any]]]:
    """(source, field path, default, command-line metadata) of each option of some sources.

    A `jurybox.serving.options.nested` field's options come in its place, under its name.
    """
    for options in sources:
        if dataclasses.is_dataclass(options):
            for f in dataclasses.fields(options):
                if f.metadata.get("cli"):
                    yield options, (*within, f.name), _given(f.default), dict(f.metadata["cli"])
            continue
        marked = getattr(options, "__command_line__", {})
        model_fields = getattr(options, "model_fields", None)  # a pydantic model's
        declared = inspect.signature(options).parameters
        for name, cli in marked.items():
            if cli.get("nested"):
                inner = _hint(options, name)
                yield from _fields([inner], (*within, name))
            elif model_fields is not None:
                default = model_fields[name].get_default(call_default_factory=True)
                yield options, (*within, name), _given(default), dict(cli)
            else:
                yield options, (*within, name), _given(declared[name].default), dict(cli)


def _hint(source: Any, name: str) -> Any:
    """The type ``source`` (a class or function) declares for ``name``.

    Only that annotation is evaluated: others may name types imported only for type checking.
    """
    if dataclasses.is_dataclass(source) or isinstance(source, type):
        return typing.get_type_hints(source)[name]
    own = SimpleNamespace(__annotations__={name: source.__annotations__[name]})
    return typing.get_type_hints(own, globalns=source.__globals__)[name]


def _given(default: Any) -> Any:
    """A declared default as a parameter's: none (a required field) as ``Parameter.empty``."""
    from pydantic_core import PydanticUndefined

    if default is dataclasses.MISSING or default is PydanticUndefined:
        return inspect.Parameter.empty
    return default
