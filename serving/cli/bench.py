"""``jurybox bench``: a benchmark's own files and a model's predictions in, the paper's table out.

The command parses options and prints; the packs are `jurybox.benchmarks`. Where a pack
needs a jury, the items are judged through the bulk runner of ``jurybox judge``
(`jurybox.serving.runs.local.judge_file`), so a killed run resumes: each judged set is written
to ``OUT/TASK.items.jsonl`` (exactly what the judges see) and judged into
``OUT/TASK.judged.jsonl`` with its manifest.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from jurybox.benchmarks import PACKS
from jurybox.serving.cli.console import dumps, fail, note, reported, warn

if TYPE_CHECKING:
    from jurybox.benchmarks import Judged
    from jurybox.judges import Jury, JurySpec
    from jurybox.rubrics import Item, Rubric


class Interrupted(Exception):
    """Judging was interrupted (Ctrl-C); what was judged is saved."""


class ResumableJudge:
    """A `jurybox.benchmarks.Judge` that judges through the resumable bulk runner.

    Every judged set is kept in ``out_dir``.
    """

    def __init__(
        self,
        jury: Jury,
        out_dir: Path,
        chunk_size: int | None = None,
        progress: Callable[[str, float, int | None], Any] | None = None,
    ) -> None:
        self.jury = jury
        self.out_dir = Path(out_dir)
        self.chunk_size = chunk_size
        self.progress = progress

    def __call__(self, task: str, rubric: Rubric, items: Sequence[Item]) -> Judged:
        """Judge ``task``'s items with ``rubric`` into ``OUT/TASK.judged.jsonl``, resuming.

        Returns:
            The verdicts of ``items``, and why each rejected item was rejected.

        Raises:
            Interrupted: Judging was interrupted (what was judged is saved).
        """
        from jurybox.benchmarks import Judged
        from jurybox.calibration import load_judge_output
        from jurybox.rubrics.rows import RowError
        from jurybox.serving.runs.local import judge_file

        self.out_dir.mkdir(parents=True, exist_ok=True)
        source = self.out_dir / f"{task}.items.jsonl"
        target = self.out_dir / f"{task}.judged.jsonl"
        _write_items(source, items)

        def progress(done: float, total: int | None) -> None:
            if self.progress is not None:
                self.progress(task, done, total)

        report = judge_file(
            source,
            rubric,
            self.jury,
            target,
            chunk_size=self.chunk_size,
            allow_empty=True,
            progress=progress,
        )
        if report.interrupted:
            raise Interrupted(str(target))
        wanted = {it.id for it in items}
        records = {}
        if target.exists() and target.stat().st_size:
            records = {r.id: r for r in load_judge_output(target).records if r.id in wanted}
        # The runner numbers rejected rows by line; line n of the items file is items[n - 1].
        failed = {
            items[e.row - 1].id: f"rejected by the runner: {e}"
            for e in report.row_errors
            if isinstance(e, RowError) and 0 < e.row <= len(items)
        }
        return Judged(records, failed)


def _write_items(path: Path, items: Sequence[Item]) -> None:
    """The items as prediction rows (the same content every run, so a rerun resumes)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for it in items:
            row: dict[str, Any] = {"id": it.id}
            for name in ("question", "response", "reference", "context"):
                value = getattr(it, name)
                if value is not None:
                    row[name] = value
            if it.images:
                row["images"] = it.images
            row.update({k: v for k, v in it.extra.items() if v is not None})
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)


def make_jury(spec: JurySpec) -> Jury:
    """The jury a command judges with (one place, so tests can hand in a loaded one)."""
    from jurybox.judges import Jury

    return Jury(spec)


_OPTION_OF = {
    "subset": "--subset",
    "unscored": "--unscored",
    "queries": "--queries",
    "corpus": "--corpus",
    "depth": "--depth",
}


def bench(
    name: Annotated[
        str,
        typer.Argument(
            help=f"Benchmark pack: {', '.join(PACKS)}.", metavar="NAME", show_default=False
        ),
    ],
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            "-d",
            help="The benchmark's data file in its own format (MRMR: the qrels).",
            show_default=False,
        ),
    ],
    predictions: Annotated[
        Path,
        typer.Option(
            "--predictions",
            "-p",
            help="The model's predictions: rows with id and response "
            "(MRMR: the run, {query_id: {doc_id: score}} or TREC).",
            show_default=False,
        ),
    ],
    jury: Annotated[
        str | None,
        typer.Option(
            "--jury",
            "-j",
            help="Jury name or YAML file. The MIRAGE packs always judge (default: "
            "tiny on CPU, small-gpu with a GPU); for microvqa and mir it adds "
            "the judge fallback for unparseable answers (and mir's reasoning "
            "steps), for mrmr relevance grading.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Directory for the judged records (rerunning resumes), the table "
            "(report.md, report.json) and per-item results. Default when a "
            "jury judges: PREDICTIONS stem + .NAME.bench.",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object, one key per metric (shares as fractions in "
            "0..1), instead of the table.",
        ),
    ] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            help="Trial run: only the first N items (MRMR: queries); the table says so.",
            min=1,
            show_default=False,
        ),
    ] = None,
    subset: Annotated[
        Literal["auto", "standard", "contextual"] | None,
        typer.Option(
            help="mirage-mmst: the Standard or Contextual set (MG only). Default: auto, from the "
            "data's fields.",
            show_default=False,
        ),
    ] = None,
    unscored: Annotated[
        Literal["exclude", "zero"] | None,
        typer.Option(
            help="Judged metrics: leave items the jury could not score out of the mean (exclude, "
            "the default) or count them as 0; the table says how many either way.",
            show_default=False,
        ),
    ] = None,
    queries: Annotated[
        Path | None,
        typer.Option(
            help="mrmr: the query file (id, category, task, text): per-category and per-task "
            "metrics, and the query texts for grading.",
            show_default=False,
        ),
    ] = None,
    corpus: Annotated[
        Path | None,
        typer.Option(
            help="mrmr: the corpus file (id, text), for relevance grading.", show_default=False
        ),
    ] = None,
    depth: Annotated[
        int | None,
        typer.Option(
            help="mrmr grading: grade the run's top N documents per query (and the qrels' own); "
            "default 10.",
            min=1,
            show_default=False,
        ),
    ] = None,
    chunk_size: Annotated[
        int | None,
        typer.Option(
            help="Items judged (and written) per step; default: the jury's.",
            min=1,
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Score a model's predictions on a benchmark and print the paper's table.

    Every item stays in the denominator: unanswered items count as wrong (0), unparseable
    answers as wrong, queries missing from a run as 0, and the table says how many of each.
    Bad input (missing fields, duplicate ids, predictions for ids the data lacks) exits with
    code 2 and names the file, row and field.
    """
    from jurybox.benchmarks import get_pack, run_benchmark

    given = {
        "subset": subset,
        "unscored": unscored,
        "queries": queries,
        "corpus": corpus,
        "depth": depth,
    }
    given = {k: v for k, v in given.items() if v is not None}
    with reported():
        pack = get_pack(name)
    stray = [k for k in given if k not in pack.options]
    if stray:
        takers = [p.name for p in PACKS.values() if stray[0] in p.options]
        raise fail(
            f"{_OPTION_OF[stray[0]]} does not apply to {name} (it applies to {', '.join(takers)})"
        )
    judge = None
    target = out
    bars: dict[str, Any] = {}
    if jury is not None or pack.jury == "required":
        judge, target = _judge(name, jury, out, predictions, chunk_size, quiet, bars)
    try:
        with reported(
            f"items judged before this are saved in {target}; run the same command again to resume"
            if target is not None
            else None
        ):
            try:
                report = run_benchmark(name, data, predictions, judge=judge, limit=limit, **given)
            except OSError as exc:  # e.g. a hub model that cannot be downloaded here
                if exc.filename and Path(exc.filename) in (data, predictions, queries, corpus):
                    raise
                raise fail(f"cannot load a judge model: {exc}") from None
    except Interrupted:
        raise fail(
            f"interrupted; run the same command again to resume ({target})", code=130
        ) from None
    finally:
        for bar in bars.values():
            bar.close()
    if target is not None:
        try:
            written = report.save(target)
        except OSError as exc:
            raise fail(f"cannot write {target}: {exc.strerror or exc}") from None
        note(f"wrote {', '.join(str(p) for p in written[:2])} and the per-item results in {target}")
    if json_out:
        typer.echo(dumps(report.to_dict()))
    else:
        typer.echo(report.to_markdown())


def _judge(
    name: str,
    jury: str | None,
    out: Path | None,
    predictions: Path,
    chunk_size: int | None,
    quiet: bool,
    bars: dict[str, Any],
) -> tuple[ResumableJudge, Path]:
    from tqdm import tqdm

    from jurybox.judges import load_jury_spec
    from jurybox.judges.weights import unpinned_warnings
    from jurybox.serving.runs.plan import default_jury

    jury_name = jury or default_jury()
    if jury is None:
        note(f"jury: {jury_name} (default; pass --jury to choose)")
    with reported():
        spec = load_jury_spec(jury_name)
    for message in unpinned_warnings(spec.judges):
        warn(message)
    target = out or Path(f"{predictions.stem}.{name}.bench")
    if out is None:
        note(f"judged records go to {target} (rerun the same command to resume; --out to choose)")

    def progress(task: str, done: float, total: int | None) -> None:
        if quiet:
            return
        bar = bars.get(task)
        if bar is None:
            bars[task] = tqdm(
                total=total,
                initial=done,
                unit="item",
                desc=task,
                file=sys.stderr,
                bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]",
            )
        else:
            bar.update(done - bar.n)

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return ResumableJudge(make_jury(spec), target, chunk_size, progress), target
