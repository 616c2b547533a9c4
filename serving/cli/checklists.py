"""``jurybox checklists``: write items' own checklists (draft them with a judge, or import them).

``draft`` asks a judge model for a checklist per item (`jurybox.serving.runs.checklist_draft`
's ``draft_file``); ``import`` reads HealthBench's JSONL (``import_file``). Both write a JSONL
file of items with a ``checklist`` field, for a person to review before judging with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import load_jury, note, options_of, reported, warn
from jurybox.serving.runs.checklist_draft import draft_file, import_file

checklists_app = typer.Typer(
    help="Items' own checklists (what a good answer must contain or avoid, with points): "
    "draft them with a judge model or import HealthBench's, into a JSONL file you review and "
    "then judge with `jurybox judge FILE --rubric checklist` (or checklist-all, "
    "checklist-implicit). See the Checklists guide.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@checklists_app.command("draft")
@options_of(draft_file)
def draft_cmd(
    options: dict[str, Any],
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
    from jurybox.serving.runs.checklist_draft import load_draft_prompt, shipped_prompt_path
    from jurybox.serving.runs.plan import default_jury

    if show_prompt:
        with reported():
            path = options["prompt"] or shipped_prompt_path()
            load_draft_prompt(path)
            typer.echo(path.read_text(encoding="utf-8"), nl=False)
        return
    options["out"] = options["out"] or Path(options["source"]).with_suffix(".checklists.jsonl")
    options["jury"] = load_jury(options["jury"] or default_jury())
    with reported():
        options["prompt"] = load_draft_prompt(options["prompt"])
        report = draft_file(**options)
    for example in report.examples or []:
        warn(example)
    note(
        f"{report.out}: {report.drafted} of {report.rows} item(s) drafted by {report.judge} "
        f"({report.points} points), {report.errors} with an error; review it before judging"
    )


@checklists_app.command("import")
@options_of(import_file)
def import_cmd(options: dict[str, Any]) -> None:
    """Import HealthBench's JSONL as items with their own checklists.

    Each row's last message (the user's) becomes the question, the messages before it the
    context (one `role: content` paragraph each), its ideal completion the reference, its
    rubrics the checklist as they are (criterion, points, tags) and its prompt_id the id.
    A row that cannot be imported is named with its line (and the point, `rubrics[2]`), and
    nothing is written until every row reads.
    """
    options["out"] = options["out"] or Path(options["source"]).with_suffix(".items.jsonl")
    with reported():
        report = import_file(**options)
    note(f"{report.out}: {report.rows} item(s), {report.points} checklist points")
    if report.without_response:
        note(
            f"{report.without_response} item(s) have no response yet: add the model's answers "
            "(--responses FILE with id and response) before judging"
        )
