"""``jurybox label``: a local web page to label judged items, and ``jurybox labels plan``.

The page writes the human labels file that ``jurybox agree`` and ``jurybox calibrate`` read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import fail, given_to, note, options_of, reported, warn
from jurybox.serving.labelling.foreground import serve_session
from jurybox.serving.labelling.start import start_session
from jurybox.serving.runs.label_plan import plan_labels


@options_of(
    start_session,
    serve_session,
    place={"paths": "labels", "rubric": "rater", "rater": "goal"},
)
def label(
    options: dict[str, Any],
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="[ITEMS] VERDICTS",
            help="VERDICTS: what `jurybox judge` wrote (a JSONL file, or a directory of its shards). ITEMS, before it: the predictions file that was judged (JSONL, CSV or Parquet), whose text the page shows; by default the one its manifest names.",
            exists=True,
            show_default=False,
        ),
    ],
    rubric: Annotated[
        str | None,
        typer.Option(
            "--rubric",
            "-r",
            help="Rubric name or YAML file. Default: the rubric named in the verdicts.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Label judged items in a web page: keyboard first, blind to the judges by default.

    Open the address it prints. Each saved label is one line of --labels (fsync'd before the
    page moves on), with the rater and how the item was chosen; a relabel, undo or skip appends
    a newer line, which wins. The HTTP API the page uses (GET /api/next?rater=R, POST
    /api/labels, POST /api/skip, POST /api/undo, GET /api/progress) serves other tools too.
    """
    try:
        import uvicorn  # noqa: F401

        from jurybox.serving.labelling.app import build_app  # noqa: F401
    except ImportError as exc:
        raise fail(
            f"jurybox label needs the label extra ({exc.name} is not installed): pip "
            "install -c locks/cpu.txt -e '.[label]'"
        ) from None

    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.inputs import judged_from, judged_items

    notes: list[str] = []
    warnings: list[str] = []
    with reported():
        if len(paths) > 2:
            raise InputError(
                f"{len(paths)} files given: label takes [ITEMS] VERDICTS", field="items"
            )
        if len(paths) == 2:
            items, verdicts = paths
        else:
            items, verdicts = judged_from(paths[0]), paths[0]
            note(f"items: {items} (named in the manifest of {verdicts})")
        try:
            judged = judged_items(items, verdicts, rubric, warnings)
        finally:
            _said(notes, warnings)
        try:
            session = start_session(
                judged.items,
                judged.verdicts,
                judged.rubric,
                **given_to(start_session, options),
                notes=notes,
                warnings=warnings,
            )
        finally:
            _said(notes, warnings)
        serve_session(session, **given_to(serve_session, options), say=note)


def _said(notes: list[str], warnings: list[str]) -> None:
    """Say the notes, then warn of the warnings, once each."""
    for line in notes:
        note(line)
    for line in warnings:
        warn(line)
    notes.clear()
    warnings.clear()


labels_app = typer.Typer(help="Human labels: how many are still needed.", no_args_is_help=True)


@labels_app.command("plan")
@options_of(plan_labels)
def plan_cmd(
    options: dict[str, Any],
    json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """How many further labels each criterion needs to reach --target-width."""
    from jurybox.serving.cli.console import dumps

    with reported():
        found = plan_labels(**options)
    for message in found.notes:
        warn(message)
    if json_out:
        typer.echo(dumps(found.to_dict()))
        return
    for criterion, row in found.criteria.items():
        typer.echo(f"{criterion}: {_words(row, found.items)}")


def _words(row: dict[str, Any], items: int) -> str:
    """One criterion's plan in words (after its name)."""
    if row["needed"] is None:
        return f"not reachable even with every item labelled; from {row['basis']}"
    beyond = f" (more than the {items} judged items)" if row["needed"] > items else ""
    low, high = row["range"]
    span = (
        f"{low}-{high}"
        if high is not None
        else f"{low} to more than every judged item"
        if low is not None
        else "unknown"
    )
    fixed = (
        f"; a fixed-sample interval would need {row['fixed_sample']}, valid only for a "
        "count decided in advance"
        if row.get("fixed_sample") is not None
        else ""
    )
    if isinstance(row.get("sequence"), dict):  # the mean: the plan above is fixed-sample
        got = row["sequence"]["needed"]
        fixed = (
            f"; that is for a count decided in advance, with {_shown(row)}: the "
            f"page's {row['sequence']['method']} sequence (valid whenever you stop) "
            "needs "
            + (f"about {got}" if got is not None else "more than the pool holds")
            + f", from {row['sequence']['basis']}"
        )
        if "designs" in row:
            fixed += f"; design: {row['designs']['pick']}, as {row['designs']['why']}"
    return (
        f"{row['further']} more label(s), {row['needed']} in all "
        f"(range {span}){beyond}; from {row['basis']}{fixed}"
    )


def _shown(row: dict[str, Any]) -> str:
    """Which interval ``agree --ppi`` shows at the planned count, in words."""
    if row["interval"] == "normal":
        return (
            "the normal interval (by then at least 5 labels are expected to depart from the "
            "jury's score)"
        )
    return (
        "the betting interval (fewer than 5 labels are expected to depart from the jury's "
        "score, so the normal one cannot be trusted yet)"
    )
