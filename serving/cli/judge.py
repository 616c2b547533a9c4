"""``jurybox judge``: a prediction file through a jury, or ``--estimate`` of what that costs.

The jury judges on the local engine, the Ray engine, or a scoring service.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import (
    err,
    fail,
    note,
    options_of,
    out,
    parse_map,
    progress_bar,
    reported,
    said,
)
from jurybox.serving.runs.plan import RunPlan, image_policy


@options_of(RunPlan, place={"url": "cache", "quiet": "cache"})
def judge(
    options: dict[str, Any],
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="Judge through a running `jurybox serve` at this URL instead of loading the jury here (same output file, resume and summary). The token, if the service wants one, is read from $JURYBOX_TOKEN.",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate",
            help="Print what the run would take (items to judge after --out and the cache, judge calls, prompt tokens by the judges' own tokenizers where available, output-token budget; for a cascade the calls expected per stage) without loading a model or writing anything.",
        ),
    ] = False,
) -> None:
    """Judge a prediction file with a jury and write one verdict per item.

    Each output line has id, status (scored/unscored), scores (per criterion, plus the rubric's
    formula), votes (per judge and criterion: score, expected score, or the error) and the
    provenance hash. Rows that cannot be judged are reported with their row and field; the rest
    of the file is still judged. Ends with a summary table.
    """
    options["mapping"] = parse_map(options["mapping"])
    with reported():
        if url is not None:
            options["jury"] = _served(url, options)
        plan = RunPlan(**options)
        plan.judges, plan.applied  # noqa: B018 (loaded now: their errors are the command's)
    try:
        _run(plan, estimate=estimate, quiet=quiet)
    finally:
        plan.close()  # the models' processes end here, side by side, not one by one at exit


def _served(url: str, options: dict[str, Any]) -> Any:
    """The jury of the service at ``url`` (``--url``), its images read from the items' files."""
    from jurybox.serving.service.client import Client, RemoteJury

    if options["jury"] is not None:
        raise fail("--url judges with the service's jury: drop --jury")
    pairs = options["pairs"]
    images = image_policy(
        options["predictions"] or (pairs[0] if pairs else None),
        options["image_root"],
        options["allow_remote_images"],
    )  # (the items' files are read here)
    remote = RemoteJury(Client(url, token=os.environ.get("JURYBOX_TOKEN")), images)
    note(f"jury: {remote.spec.name} at {url}")
    return remote


def _run(plan, *, estimate: bool, quiet: bool) -> None:
    """Estimate or run a loaded plan, and say what it did."""
    from jurybox.serving.runs.summary import render

    said(plan)
    target = plan.target
    if estimate:
        with reported():
            est = plan.estimate()
        said(plan)
        _print_estimate(est, plan.loaded_rubric, target)
        return

    bar = None

    def progress(done: float, total: int | None) -> None:
        nonlocal bar
        if quiet:
            return
        if bar is None:
            # Fractional counts within a chunk (each judge's share of it) show as whole items.
            bar = progress_bar(total, done, "judging")
        else:
            bar.update(done - bar.n)

    def notify(message: str) -> None:
        if quiet:
            return
        if bar is not None:
            bar.write(message, file=sys.stderr)
        else:
            note(message)

    try:
        with reported(
            f"items judged before this are saved in {target}; run the same command again to resume"
        ):
            report = plan.run(progress, notify)
    finally:
        if bar is not None:
            bar.close()
    said(plan)
    for e in report.row_errors[:20]:
        err.print(f"[yellow]skipped[/] {plan.predictions or target}: {e}", highlight=False)
    if report.n_row_errors > 20:
        note(
            f"... and {report.n_row_errors - 20} more rejected rows (the first "
            f"{len(report.row_errors)} listed in {target.name}.manifest.json)"
        )
    for line in report.notes:
        note(line)
    if report.repaired_tail:
        note(f"removed an incomplete last line from {target} (left by an interrupted run)")
    render(report.summary, out)
    note(
        f"{report.judged} judged now, {report.already_done} already in {target}, "
        f"{report.n_row_errors} rows rejected; {report.seconds:.1f} s"
    )
    if report.interrupted:
        raise fail(f"interrupted; run the same command again to resume ({target})", code=130)
    if report.total_items == 0:
        raise fail(
            f"no row of {plan.predictions or target} could be judged (all "
            f"{report.n_row_errors} rejected)"
        )


def _print_estimate(est, rubric, target) -> None:
    from rich.table import Table

    t = Table(
        title=f"{est.items} items: {est.already_done} already in {target}, {est.cached} "
        f"in the verdict cache, {est.to_judge} to judge"
        + (f"; {est.rejected_rows} rows rejected" if est.rejected_rows else ""),
        show_footer=True,
    )
    cascaded = any(j.expected_calls is not None for j in est.judges)
    expected = sum(j.expected_calls or 0 for j in est.judges)
    t.add_column("judge", "total", no_wrap=True)
    t.add_column("stage", "", justify="right")
    t.add_column("calls", f"{sum(j.calls for j in est.judges):,}", justify="right")
    if cascaded:
        t.add_column("expected", f"{expected:,.0f}", justify="right")
    t.add_column("prompt tokens", f"{sum(j.prompt_tokens for j in est.judges):,}", justify="right")
    t.add_column("output budget", f"{sum(j.output_budget for j in est.judges):,}", justify="right")
    for j in est.judges:
        row = [j.name, str(j.stage or "-"), f"{j.calls:,}"]
        if cascaded:
            row.append("-" if j.expected_calls is None else f"{j.expected_calls:,.0f}")
        t.add_row(*row, f"{j.prompt_tokens:,}", f"{j.output_budget:,}")
    out.print(t)
    for j in est.judges:
        note(f"{j.name}: prompt tokens counted by {j.tokens_by}")
    for line in est.notes:
        note(line)
    rule, how = rubric.checklist, ""
    if rule is not None and rule.score == "points" and rule.calls == "per_point":
        how = ": one call per point of each item's checklist, the mean rounded up"
    note(
        f"{est.calls_per_item} call(s) per item and judge (rubric {rubric.name}{how}); nothing "
        "was judged or written"
    )
