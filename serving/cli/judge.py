"""``jurybox judge``: a prediction file through a jury, or ``--estimate`` of what that costs.

The jury judges on the local engine, the Ray engine, or a scoring service.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from jurybox.serving.cli.console import (
    err,
    fail,
    note,
    out,
    parse_map,
    reported,
    warn,
)


def judge(
    rubric: Annotated[
        str,
        typer.Option(
            "--rubric",
            "-r",
            help="Shipped rubric name (see `jurybox rubrics`) or a rubric YAML file.",
            show_default=False,
        ),
    ],
    predictions: Annotated[
        str | None,
        typer.Argument(
            help="Prediction file (.jsonl, .json list, .csv, .tsv or .parquet), a directory of them, or a quoted glob such as 'preds/*.parquet'. For a pairwise rubric, rows with response_a and response_b (or give --pairs instead).",
            show_default=False,
        ),
    ] = None,
    pairs: Annotated[
        tuple[str, str] | None,
        typer.Option(
            "--pairs",
            help="Pairwise rubrics: two prediction files (one system each: id, question, response ...) paired by id; A is the first, B the second. The pairs are written beside --out (OUT.pairs.jsonl, with model_a/model_b from the files' stems, which `jurybox compare` reads).",
            show_default=False,
        ),
    ] = None,
    jury: Annotated[
        str | None,
        typer.Option(
            "--jury",
            "-j",
            help="Shipped jury name (see `jurybox juries`) or a jury YAML file. Default: tiny on CPU, small-gpu with a GPU.",
            show_default=False,
        ),
    ] = None,
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Output: a .jsonl file (one verdict per line), or a directory (a path without a suffix) of JSONL or Parquet shards (--format). Re-running with the same --out judges only the items not yet in it. Default: PREDICTIONS stem + .RUBRIC.judged.jsonl.",
            show_default=False,
        ),
    ] = None,
    out_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Shards of a directory --out: jsonl (default) or parquet.",
            show_default=False,
        ),
    ] = None,
    shard_size: Annotated[
        int | None,
        typer.Option(
            help="Verdicts per shard of a directory --out (default 1000; a shard is also written at least every 30 s, and with --engine ray after every batch).",
            min=1,
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="local: judge in this process; ray: a Ray Data pipeline (one stage per judge) on a local Ray or the cluster of --address."
        ),
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            help="With --engine ray: the Ray cluster to join (default: $RAY_ADDRESS, else a local Ray).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            help="Judge only the first N valid items of the file.", min=1, show_default=False
        ),
    ] = None,
    map_: Annotated[
        list[str],
        typer.Option(
            "--map",
            "-m",
            help="Read a field from another column: FIELD=COLUMN (repeatable), e.g. --map reference=answer.",
            show_default=False,
        ),
    ] = [],
    chunk_size: Annotated[
        int | None,
        typer.Option(
            help="Items judged (and written) per step. Default: 16 with transformers judges, 256 with vLLM/OpenAI judges (whose engines batch continuously).",
            min=1,
            show_default=False,
        ),
    ] = None,
    max_field_chars: Annotated[
        int, typer.Option(help="Reject rows with a longer field.", min=1)
    ] = 100_000,
    allow_empty: Annotated[
        bool,
        typer.Option(
            "--allow-empty",
            help="Judge rows whose response is empty (a model that answered nothing) instead of rejecting them; the summary counts them.",
        ),
    ] = False,
    keep_raw: Annotated[
        bool,
        typer.Option(
            "--keep-raw",
            help="Keep each judge's raw output in every vote; by default only unscored votes keep it. (Reasoning text is kept when the jury sets reasoning.keep.)",
        ),
    ] = False,
    calibration: Annotated[
        Path | None,
        typer.Option(
            help="Calibration map (from `jurybox calibrate`) to apply: adds `calibrated` scores.",
            show_default=False,
        ),
    ] = None,
    force_calibration: Annotated[
        bool,
        typer.Option(
            "--force-calibration",
            help="Apply the calibration map (or the conformal map) even if it was fitted for another rubric/jury configuration.",
        ),
    ] = False,
    conformal: Annotated[
        Path | None,
        typer.Option(
            "--conformal",
            help="Conformal map (from `jurybox calibrate --conformal`) to apply: adds each criterion's `interval`, the levels a human's label falls in with the map's probability.",
            show_default=False,
        ),
    ] = None,
    route_width: Annotated[
        float | None,
        typer.Option(
            "--route-width",
            help="With --conformal: send an item to a human (`route` in its verdict, counted in the summary) when a criterion's interval is wider than this (in the scale's units; 0: anything but a single level) or missing.",
            min=0.0,
            show_default=False,
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="Judge through a running `jurybox serve` at this URL instead of loading the jury here (same output file, resume and summary). The token, if the service wants one, is read from $JURYBOX_TOKEN.",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Judge every item even if this configuration judged it before (and store nothing). By default verdicts are cached by configuration and input (see `jurybox cache`).",
        ),
    ] = False,
    length_control: Annotated[
        bool,
        typer.Option(
            "--length-control",
            help="Add to the summary each criterion's length-controlled score beside the raw one (the jury's score with the part explained by the answer's length in words removed, at the reference answers' median length; AlpacaEval-style). Fitted on the human labels of --human, with whether it raises agreement under 5-fold cross-validation; without them on the scores themselves, which assumes quality does not grow with length.",
        ),
    ] = False,
    human: Annotated[
        Path | None,
        typer.Option(
            "--human",
            help="With --length-control: human labels (JSONL/CSV: id, rater, one column per criterion) to fit the length bias on.",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    image_root: Annotated[
        Path | None,
        typer.Option(
            "--image-root",
            help="Where the items' relative image paths are read from, for judges that see images (vision). Default: the folder of the predictions.",
            show_default=False,
        ),
    ] = None,
    allow_remote_images: Annotated[
        bool,
        typer.Option(
            "--allow-remote-images",
            help="Fetch items' http(s) image URLs (never by default: give paths, file:// or data: URLs).",
        ),
    ] = False,
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
    from jurybox.judges.jury import JuryLike
    from jurybox.serving.runs.plan import RunPlan, image_policy

    mapping = parse_map(map_)
    with reported():
        if url is not None and jury is not None:
            raise fail("--url judges with the service's jury: drop --jury")
        judges: str | JuryLike | None = jury
        if url is not None:
            from jurybox.serving.service.client import Client, RemoteJury

            images = image_policy(
                predictions or (pairs[0] if pairs else None), image_root, allow_remote_images
            )  # (the items' files are read here)
            remote = RemoteJury(Client(url, token=os.environ.get("JURYBOX_TOKEN")), images)
            note(f"jury: {remote.spec.name} at {url}")
            judges = remote
        plan = RunPlan(
            rubric,
            predictions=predictions,
            pairs=pairs,
            jury=judges,
            out=out_path,
            engine=engine,
            address=address,
            mapping=mapping,
            limit=limit,
            chunk_size=chunk_size,
            max_field_chars=max_field_chars,
            allow_empty=allow_empty,
            keep_raw=keep_raw,
            calibration=calibration,
            conformal=conformal,
            force_calibration=force_calibration,
            route_width=route_width,
            length_control=length_control,
            human=human,
            cache=not no_cache,
            format=out_format,
            shard_size=shard_size,
            image_root=image_root,
            allow_remote_images=allow_remote_images,
        )
        plan.judges, plan.applied  # noqa: B018 (loaded now: their errors are the command's)
    try:
        _run(plan, estimate=estimate, quiet=quiet)
    finally:
        plan.close()  # the models' processes end here, side by side, not one by one at exit


def _run(plan, *, estimate: bool, quiet: bool) -> None:
    """Estimate or run a loaded plan, and say what it did."""
    from tqdm import tqdm

    from jurybox.serving.runs.summary import render

    _said(plan)
    target = plan.target
    if estimate:
        with reported():
            est = plan.estimate()
        _said(plan)
        _print_estimate(est, plan.loaded_rubric, target)
        return

    bar = None

    def progress(done: float, total: int | None) -> None:
        nonlocal bar
        if quiet:
            return
        if bar is None:
            # Fractional counts within a chunk (each judge's share of it) show as whole items.
            bar = tqdm(
                total=total,
                initial=done,
                unit="item",
                desc="judging",
                file=sys.stderr,
                bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]",
            )
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
    _said(plan)
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


def _said(plan) -> None:
    """What the plan wants the user told (notes, then warnings), once each."""
    for line in plan.notes:
        note(line)
    for line in plan.warnings:
        warn(line)
    plan.notes.clear()
    plan.warnings.clear()


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
    note(
        f"{est.calls_per_item} call(s) per item and judge (rubric {rubric.name}); nothing was "
        "judged or written"
    )
