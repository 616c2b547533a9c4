"""MkDocs hooks: the reference pages generated from the code at build time, so they cannot go
stale. A page holds a marker (an HTML comment) that is replaced by:

- ``<!-- generated: cli -->``: every ``jurybox`` command's ``--help``, from the Typer app;
- ``<!-- generated: http -->``: the scoring service's routes from its OpenAPI document (the
  ingress's own FastAPI app, built without Ray), and the document itself;
- ``<!-- generated: verdict -->``: the fields of a verdict record (its pydantic model);
- ``<!-- generated: rubric -->``: the fields of a rubric file (its pydantic model).
"""

from __future__ import annotations

import json
from typing import Any


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, render in (
        ("cli", _cli),
        ("http", _http),
        ("verdict", _verdict),
        ("rubric", _rubric),
    ):
        tag = f"<!-- generated: {marker} -->"
        if tag in markdown:
            markdown = markdown.replace(tag, render())
    return markdown


def _cli() -> str:
    import typer
    from typer.core import TyperGroup

    from jurybox.serving.cli import app

    root = typer.main.get_command(app)
    parts: list[str] = []

    def walk(command: Any, path: list[str], parent: Any) -> None:
        # Typer carries its own copy of click: the command's own Context class.
        ctx = command.context_class(
            command, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100
        )
        if len(path) > 1:
            parts.append(f"{'#' * min(len(path), 4)} `{' '.join(path)}`\n")
            parts.append("```text\n" + command.get_help(ctx).rstrip() + "\n```\n")
        if isinstance(command, TyperGroup):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name], ctx)

    walk(root, ["jurybox"], None)
    return "\n".join(parts)


def _openapi() -> dict[str, Any]:
    from types import SimpleNamespace

    from jurybox.rubrics import list_rubrics
    from jurybox.serving.service.config import Limits
    from jurybox.serving.service.ingress import build_app
    from jurybox.serving.service.metrics import Metrics

    ingress = SimpleNamespace(
        plan=SimpleNamespace(cors_origins=[]),
        token=b"token",
        limits=Limits(),
        metrics=Metrics(),
        rubrics=dict.fromkeys(list_rubrics()),
    )
    return build_app(ingress).openapi()  # type: ignore[arg-type]


def _http() -> str:
    schema = _openapi()
    parts = ["| method | path | what it does |", "|---|---|---|"]
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            summary = (op.get("summary") or "").replace("|", "\\|")
            parts.append(f"| {method.upper()} | `{path}` | {summary} |")
    parts.append("")
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            parts.append(f"### {method.upper()} `{path}`\n")
            if op.get("description"):
                parts.append(op["description"].strip() + "\n")
            body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {})
            ref = (body.get("schema") or {}).get("$ref")
            if ref:
                parts.append(f"Request body: `{ref.rsplit('/', 1)[-1]}` (in the document below).\n")
            codes = ", ".join(
                f"{code} ({r.get('description', '')})"
                for code, r in op.get("responses", {}).items()
            )
            if codes:
                parts.append(f"Responses: {codes}.\n")
    parts.append('??? note "The OpenAPI document (`GET /openapi.json`)"\n')
    document = json.dumps(schema, indent=2)
    parts.append(
        "    ```json\n" + "\n".join("    " + line for line in document.splitlines()) + "\n    ```\n"
    )
    return "\n".join(parts)


def _fields(model: Any) -> str:
    schema = model.model_json_schema(by_alias=True)
    rows = ["| field | type | required | description |", "|---|---|---|---|"]
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        rows.append(
            f"| `{name}` | {_type(prop)} | {'yes' if name in required else ''} | "
            f"{(prop.get('description') or '').replace('|', '/').strip()} |"
        )
    return "\n".join(rows) + "\n"


def _type(prop: dict[str, Any]) -> str:
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    return str(kind)


def _verdict() -> str:
    from jurybox.rubrics import VerdictRecord

    return _fields(VerdictRecord)


def _rubric() -> str:
    from jurybox.rubrics import Rubric

    return _fields(Rubric)
