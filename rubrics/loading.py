"""Loading YAML definitions, with errors that name the file, the field and what was expected.

Rubrics are loaded here, juries in `jurybox.judges`.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import InputError
from .rubric import Rubric

M = TypeVar("M", bound=BaseModel)


_PLURAL = {"jury": "juries"}


class DefinitionError(InputError):
    """A rubric or jury file that cannot be used, with every problem found in it."""


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def format_validation_error(source: str, exc: ValidationError) -> str:
    """A pydantic ValidationError as text.

    The text is ``source`` and the number of problems, then one line per problem with its
    location, the message and (except for missing fields and value errors) the input it got.
    """
    lines = [f"{source}: {exc.error_count()} problem(s)"]
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"].removeprefix("Value error, ")
        got = ""
        if err["type"] not in ("missing", "value_error") and "input" in err:
            got = f" (got {err['input']!r:.60})"
        lines.append(f"  {_where(loc)}: {msg}{got}")
    return "\n".join(lines)


def read_mapping(path: Path, what: str) -> dict[Any, Any]:
    """The YAML mapping in the file ``path`` (``what`` names the file's kind in the error).

    Raises:
        DefinitionError: The text is not UTF-8, not valid YAML or not a mapping (naming the
            file, and the line and column of invalid YAML).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DefinitionError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise DefinitionError(
            f"{path}:{where} invalid YAML: {getattr(exc, 'problem', exc)}"
        ) from None
    if not isinstance(data, dict):
        raise DefinitionError(f"{path}: {what} must be a YAML mapping, got {type(data).__name__}")
    return data


def load_definition(path: Path, model: type[M], kind: str) -> M:
    """A ``model`` validated from the YAML file ``path``.

    Its ``name`` defaults to the file's stem.

    Raises:
        DefinitionError: The text is not UTF-8, not valid YAML or not a mapping, or validation
            finds problems (naming the file, and every problem found).
    """
    data = read_mapping(path, f"a {kind} file")
    data.setdefault("name", path.stem)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise DefinitionError(format_validation_error(str(path), exc)) from None


def _library() -> Path:
    return Path(str(files("jurybox.rubrics").joinpath("library")))


def resolve_definition(name_or_path: str | Path, library: Path, kind: str) -> Path:
    """A shipped definition by name, or a file path.

    Raises:
        DefinitionError: A file path names no file, or the name is not a shipped definition's.
    """
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        if not candidate.is_file():
            raise DefinitionError(f"{kind} file {candidate} does not exist")
        return candidate
    shipped = library / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    known = sorted(p.stem for p in library.glob("*.yaml"))
    raise DefinitionError(
        f"unknown {kind} {str(name_or_path)!r}: not a file, and not one of the shipped "
        f"{_PLURAL.get(kind, kind + 's')} {known}"
    )


def list_rubrics() -> list[str]:
    """The names of the shipped rubrics, sorted.

    Returns:
        The names `load_rubric` takes.
    """
    return sorted(p.stem for p in _library().glob("*.yaml"))


def load_rubric(name_or_path: str | Path) -> Rubric:
    """Load a shipped rubric by name (``general``, ``mirage-mg`` ...) or a rubric YAML file.

    Args:
        name_or_path: A shipped rubric's name, or the path of a rubric file
            (``.yaml``/``.yml``).

    Returns:
        The validated rubric (its template checked to render); its ``name`` defaults to the
        file's stem.

    Raises:
        DefinitionError: There is no such file or shipped rubric, the file is not UTF-8 text,
            not valid YAML or not a mapping, or validation finds problems (each named, with
            the file).
    """
    return load_definition(resolve_definition(name_or_path, _library(), "rubric"), Rubric, "rubric")
