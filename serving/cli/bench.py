"""``jurybox bench``: a benchmark's own files and a model's predictions in, the paper's table out.

The command parses options and prints; the run is `jurybox.serving.runs.bench.Bench` (the
packs are `jurybox.benchmarks`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import (
    dumps,
    fail,
    note,
    options_of,
    progress_bar,
    reported,
    said,
)
from jurybox.serving.runs.bench import Bench, Interrupted


@options_of(Bench, place={"json_out": "limit"})
def bench(
    options: dict[str, Any],
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object, one key per metric (shares as fractions in "
            "0..1), instead of the table.",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Score a model's predictions on a benchmark and print the paper's table.

    Every item stays in the denominator: unanswered items count as wrong (0), unparseable
    answers as wrong, queries missing from a run as 0, and the table says how many of each.
    Bad input (missing fields, duplicate ids, predictions for ids the data lacks) exits with
    code 2 and names the file, row and field.
    """
    with reported():
        run = Bench(**options)
        try:
            run.judge  # noqa: B018 (loaded now: its errors are the command's)
        finally:
            said(run)
    target = run.target
    if run.judged and run.out is None:
        note(f"judged records go to {target} (rerun the same command to resume; --out to choose)")
    bars: dict[str, Any] = {}

    def progress(task: str, done: float, total: int | None) -> None:
        if quiet:
            return
        if task not in bars:
            bars[task] = progress_bar(total, done, task)
        else:
            bars[task].update(done - bars[task].n)

    hint = f"items judged before this are saved in {target}; run the same command again to resume"
    try:
        with reported(hint if target is not None else None):
            report = run.run(progress)
    except Interrupted:
        raise fail(
            f"interrupted; run the same command again to resume ({target})", code=130
        ) from None
    finally:
        for bar in bars.values():
            bar.close()
    if target is not None:
        _save(report, target)
    typer.echo(dumps(report.to_dict()) if json_out else report.to_markdown())


def _save(report: Any, target: Path) -> None:
    """Write the table and the per-item results into ``target``, and say so."""
    try:
        written = report.save(target)
    except OSError as exc:
        raise fail(f"cannot write {target}: {exc.strerror or exc}") from None
    note(f"wrote {', '.join(str(p) for p in written[:2])} and the per-item results in {target}")
