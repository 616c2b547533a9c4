"""A benchmark run as ``jurybox bench`` makes it, for any caller.

A pack's own files and a model's predictions in, the paper's table (a
`jurybox.benchmarks.BenchReport`) out.

Where a pack needs a jury, the items are judged through the bulk runner of ``jurybox judge``
(`jurybox.serving.runs.local.judge_file`), so a killed run resumes: each judged set is written
to ``OUT/TASK.items.jsonl`` (exactly what the judges see) and judged into
``OUT/TASK.judged.jsonl`` with its manifest.

```python
from jurybox.serving.runs.bench import Bench

bench = Bench("microvqa", "examples/microvqa.json", "examples/microvqa.predictions.jsonl")
report = bench.run()         # bench.notes, bench.warnings: what it wants said
print(report.to_markdown())
```
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from jurybox.benchmarks import PACKS
from jurybox.rubrics.errors import InputError
from jurybox.serving.options import argument, option

if TYPE_CHECKING:
    from jurybox.benchmarks import BenchReport, Judged, Pack
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
            if it.checklist is not None:
                row["checklist"] = [
                    p.model_dump(by_alias=True, exclude_defaults=True) for p in it.checklist
                ]
            row.update({k: v for k, v in it.extra.items() if v is not None})
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)


def make_jury(spec: JurySpec) -> Jury:
    """The jury a benchmark run judges with (one place, so tests can hand in a loaded one)."""
    from jurybox.judges import Jury

    return Jury(spec)


_PACK_OPTIONS = ("subset", "unscored", "queries", "corpus", "depth", "checklist")


@dataclass
class Bench:
    """One benchmark run (see the module docstring); the fields are ``jurybox bench``'s options.

    Constructing it checks the pack and its options (an ``InputError`` naming the option);
    ``judge`` loads the jury where the pack judges, ``run`` scores. ``notes`` and
    ``warnings``: what a caller should tell its user (the default jury chosen, where the
    judged records go, unpinned model revisions).

    Attributes:
        name: The pack (`jurybox.benchmarks.PACKS`).
        data: The benchmark's data file in its own format (MRMR: the qrels).
        predictions: The model's predictions.
        jury: A jury name or YAML file; the MIRAGE packs always judge (default: ``tiny`` on
            CPU, ``small-gpu`` with a GPU), the others judge only with one.
        out: The directory of the judged records (a rerun resumes), the table and the
            per-item results; default when a jury judges: PREDICTIONS stem + ``.NAME.bench``.
        limit: Only the first N items (MRMR: queries).
        subset, unscored, queries, corpus, depth, checklist: The pack's own options (None: not
            given).
        chunk_size: Items judged (and written) per step; default: the jury's.
        notes: What a caller should tell its user.
        warnings: What a caller should warn its user of.

    Raises:
        InputError: An unknown pack, or an option the pack does not take.
    """

    name: str = field(
        metadata=argument(
            help=f"Benchmark pack: {', '.join(PACKS)}.", metavar="NAME", show_default=False
        )
    )
    data: Path = field(
        metadata=option(
            "--data",
            "-d",
            help="The benchmark's data file in its own format (MRMR: the qrels).",
            show_default=False,
        )
    )
    predictions: Path = field(
        metadata=option(
            "--predictions",
            "-p",
            help="The model's predictions: rows with id and response "
            "(MRMR: the run, {query_id: {doc_id: score}} or TREC).",
            show_default=False,
        )
    )
    jury: str | None = field(
        default=None,
        metadata=option(
            "--jury",
            "-j",
            help="Jury name or YAML file. The MIRAGE packs always judge (default: "
            "tiny on CPU, small-gpu with a GPU); for microvqa and mir it adds "
            "the judge fallback for unparseable answers (and mir's reasoning "
            "steps), for mrmr relevance grading.",
            show_default=False,
        ),
    )
    out: Path | None = field(
        default=None,
        metadata=option(
            "--out",
            "-o",
            help="Directory for the judged records (rerunning resumes), the table "
            "(report.md, report.json) and per-item results. Default when a "
            "jury judges: PREDICTIONS stem + .NAME.bench.",
            file_okay=False,
            show_default=False,
        ),
    )
    limit: int | None = field(
        default=None,
        metadata=option(
            help="Trial run: only the first N items (MRMR: queries); the table says so.",
            min=1,
            show_default=False,
        ),
    )
    subset: Literal["auto", "standard", "contextual"] | None = field(
        default=None,
        metadata=option(
            help="mirage-mmst: the Standard or Contextual set (MG only). Default: auto, from the "
            "data's fields.",
            show_default=False,
        ),
    )
    unscored: Literal["exclude", "zero"] | None = field(
        default=None,
        metadata=option(
            help="Judged metrics: leave items the jury could not score out of the mean (exclude, "
            "the default) or count them as 0; the table says how many either way.",
            show_default=False,
        ),
    )
    queries: Path | None = field(
        default=None,
        metadata=option(
            help="mrmr: the query file (id, category, task, text): per-category and per-task "
            "metrics, and the query texts for grading.",
            show_default=False,
        ),
    )
    corpus: Path | None = field(
        default=None,
        metadata=option(
            help="mrmr: the corpus file (id, text), for relevance grading.", show_default=False
        ),
    )
    depth: int | None = field(
        default=None,
        metadata=option(
            help="mrmr grading: grade the run's top N documents per query (and the qrels' own); "
            "default 10.",
            min=1,
            show_default=False,
        ),
    )
    checklist: bool | None = field(
        default=None,
        metadata=option(
            "--checklist",
            help="Also judge item-level checklists, an added view beside the paper's "
            "metrics: mirage-mmmt, each item's goal facts (each missing fact asked for, each "
            "known fact kept; needs the decomp file); mir (with --jury), the five reference "
            "steps as five equal points. Each point met or not (rubric checklist).",
            show_default=False,
        ),
    )
    chunk_size: int | None = field(
        default=None,
        metadata=option(
            help="Items judged (and written) per step; default: the jury's.",
            min=1,
            show_default=False,
        ),
    )
    notes: list[str] = field(default_factory=list, init=False)
    warnings: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.data, self.predictions = Path(self.data), Path(self.predictions)
        pack = self.pack  # an unknown pack is the first error
        stray = [k for k in self.given if k not in pack.options]
        if stray:
            takers = [p.name for p in PACKS.values() if stray[0] in p.options]
            raise InputError(
                f"--{stray[0]} does not apply to {self.name} (it applies to {', '.join(takers)})",
                field=stray[0],
            )

    @cached_property
    def pack(self) -> Pack:
        """The pack (an ``InputError`` for an unknown one)."""
        from jurybox.benchmarks import get_pack

        return get_pack(self.name)

    @property
    def given(self) -> dict[str, Any]:
        """The pack's own options that were given."""
        values = {k: getattr(self, k) for k in _PACK_OPTIONS}
        return {k: v for k, v in values.items() if v is not None}

    @property
    def judged(self) -> bool:
        """Whether a jury judges (one was given, or the pack needs one)."""
        return self.jury is not None or self.pack.jury == "required"

    @property
    def target(self) -> Path | None:
        """Where the judged records, the table and the per-item results go (None: nowhere)."""
        if self.out is not None or not self.judged:
            return self.out
        return Path(f"{self.predictions.stem}.{self.name}.bench")

    @cached_property
    def judge(self) -> ResumableJudge | None:
        """The judge of a judged run (None: the pack scores without one), its jury loaded."""
        if not self.judged:
            return None
        from jurybox.judges import load_jury_spec
        from jurybox.judges.weights import unpinned_warnings
        from jurybox.serving.runs.plan import default_jury

        jury_name = self.jury or default_jury()
        if self.jury is None:
            self.notes.append(f"jury: {jury_name} (default; pass --jury to choose)")
        spec = load_jury_spec(jury_name)
        self.warnings.extend(unpinned_warnings(spec.judges))
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        assert self.target is not None
        return ResumableJudge(make_jury(spec), self.target, self.chunk_size)

    def run(self, progress: Callable[[str, float, int | None], Any] | None = None) -> BenchReport:
        """Score the predictions (judging them first where the pack judges).

        Args:
            progress: ``progress(task, done, total)`` as each judged task advances.

        Returns:
            The report: metrics with CIs, tables, counts and notes.

        Raises:
            InputError: The data or predictions cannot be read (naming the file and row), or
                a judge model cannot be loaded.
            ExecutionError: A judge could not judge.
            Interrupted: Judging was interrupted (what was judged is saved in ``target``).
        """
        from jurybox.benchmarks import run_benchmark

        judge = self.judge
        if judge is not None:
            judge.progress = progress
        try:
            return run_benchmark(
                self.name,
                self.data,
                self.predictions,
                judge=judge,
                limit=self.limit,
                **self.given,
            )
        except OSError as exc:  # e.g. a hub model that cannot be downloaded here
            files = (self.data, self.predictions, self.queries, self.corpus)
            if exc.filename and Path(exc.filename) in files:
                raise
            raise InputError(f"cannot load a judge model: {exc}") from None
