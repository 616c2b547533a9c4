"""``jurybox checklists``: write items' own checklists (draft them with a judge, or import them).

``draft`` asks a judge model for a checklist per item (`jurybox.serving.runs.checklist_draft`
's ``draft_file``); ``import`` reads HealthBench's JSONL (``import_file``). Both write a JSONL
file of items with a ``checklist`` field, for a person to review before judging with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jurybox.serving.cli.console import load_jury, note, reported, warn

checklists_app = typer.Typer(
    help="Items' own checklists (what a good answer must contain or avoid, with points): "
    "draft them with a judge model or import HealthBench's, into a JSONL file you review and "
    "then judge with `jurybox judge FILE --rubric checklist` (or checklist-all, "
    "checklist-implicit). See the Checklists guide.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@checklists_app.command("draft")
def draft_cmd(
    items: Annotated[
        str,
        typer.Argument(
            help="Items to draft for (.jsonl, .json, .csv, .tsv or .parquet): id, question, "
            "and a reference answer where there is one; other fields are kept.",
            show_default=False,
        ),
    ],
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="The JSONL file written: each item again with its drafted checklist, or an "
            "error and the judge's raw answer. Default: ITEMS stem + .checklists.jsonl.",
            show_default=False,
        ),
    ] = None,
    jury: Annotated[
        str | None,
        typer.Option(
            "--jury",
            "-j",
            help="Shipped jury name or a jury YAML file whose judge drafts. Default: tiny on "
            "CPU, small-gpu with a GPU.",
            show_default=False,
        ),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(help="The jury's judge that drafts (default: its first).", show_default=False),
    ] = None,
    prompt: Annotated[
        Path | None,
        typer.Option(
            help="A drafting prompt file (YAML, as the shipped one: see --show-prompt).",
            show_default=False,
        ),
    ] = None,
    max_tokens: Annotated[
        int,
        typer.Option(min=16, help="Tokens the judge may write per checklist."),
    ] = 1024,
    limit: Annotated[
        int | None,
        typer.Option(min=1, help="Draft only the first N rows.", show_default=False),
    ] = None,
    chunk_size: Annotated[
        int, typer.Option(min=1, help="Rows asked of the judge at a time (and written).")
    ] = 16,
    overwrite: Annotated[
        bool, typer.Option(help="Replace --out when it exists (it may hold your edits).")
    ] = False,
    show_prompt: Annotated[
        bool,
        typer.Option(
            "--show-prompt", help="Print the drafting prompt file (--prompt or the shipped one)."
        ),
    ] = False,
) -> None:
    """Draft a checklist for each item with a judge model, into a file you review.

    The judge sees the item's question (and context) and its reference answer, never a
    response, and answers under a JSON schema: 3 to 8 points (the prompt's settings), each
    a criterion, its points (1..10, or -1..-10 for a pitfall a good answer avoids) and a tag
    (essential, important, optional). A judge's answer that holds no such checklist becomes
    the item's row with an `error` and its `raw` answer, no checklist: `jurybox judge` rejects
    that row by name until you write its checklist or remove it. Read every draft before
    judging with it: a small model's drafts are often poor. The command exits 0 when the file is
    written, errors or not (they are counted at the end).
    """
    from jurybox.serving.runs.checklist_draft import (
        draft_file,
        load_draft_prompt,
        shipped_prompt_path,
    )
    from jurybox.serving.runs.plan import default_jury

    if show_prompt:
        with reported():
            path = prompt or shipped_prompt_path()
            load_draft_prompt(path)
            typer.echo(path.read_text(encoding="utf-8"), nl=False)
        return
    target = out_path or Path(items).with_suffix(".checklists.jsonl")
    spec = load_jury(jury or default_jury())
    with reported():
        report = draft_file(
            items,
            target,
            spec,
            judge=judge,
            prompt=load_draft_prompt(prompt),
            max_tokens=max_tokens,
            limit=limit,
            chunk_size=chunk_size,
            overwrite=overwrite,
        )
    for example in report.examples or []:
        warn(example)
    note(
        f"{report.out}: {report.drafted} of {report.rows} item(s) drafted by {report.judge} "
        f"({report.points} points), {report.errors} with an error; review it before judging"
    )


@checklists_app.command("import")
def import_cmd(
    source: Annotated[
        str,
        typer.Argument(
            help="A HealthBench JSONL file (prompt, rubrics, ideal_completions_data, "
            "prompt_id), read as it is.",
            show_default=False,
        ),
    ],
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="The JSONL file written, one item a line. Default: SOURCE stem + .items.jsonl.",
            show_default=False,
        ),
    ] = None,
    responses: Annotated[
        Path | None,
        typer.Option(
            help="A row file of the model's answers (id, response) joined to the items by id.",
            show_default=False,
        ),
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace --out when it exists.")] = False,
) -> None:
    """Import HealthBench's JSONL as items with their own checklists.

    Each row's last message (the user's) becomes the question, the messages before it the
    context (one `role: content` paragraph each), its ideal completion the reference, its
    rubrics the checklist as they are (criterion, points, tags) and its prompt_id the id.
    A row that cannot be imported is named with its line (and the point, `rubrics[2]`), and
    nothing is written until every row reads.
    """
    from jurybox.serving.runs.checklist_draft import import_file

    target = out_path or Path(source).with_suffix(".items.jsonl")
    with reported():
        report = import_file(source, target, responses=responses, overwrite=overwrite)
    note(f"{report.out}: {report.rows} item(s), {report.points} checklist points")
    if report.without_response:
        note(
            f"{report.without_response} item(s) have no response yet: add the model's answers "
            "(--responses FILE with id and response) before judging"
        )
