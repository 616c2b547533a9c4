"""One bulk run over a prediction file, whichever engine judges it.

A `Run` is everything a run is apart from how chunks get judged: the checks made before
anything is opened (``--out`` is not the predictions, the ``--map`` and the files' formats), the
results store and the check that resumed items were judged from the same input, the manifest
(running, then failed, interrupted or complete), the counts (`Tally`), the summary read
back from what was written and the `RunReport`. The local engine
(`jurybox.serving.runs.local`) and the Ray engine (`jurybox.serving.runs.ray`) each
open a Run, write what they judge into ``run.results`` and call `Run.finish`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from jurybox.judges import JurySpec
from jurybox.rubrics import Rubric, input_hash
from jurybox.rubrics.item_fields import DEFAULT_MAX_FIELD_CHARS
from jurybox.rubrics.rows import RowError, file_format, row_files
from jurybox.serving.runs.predictions import check_mapping, iter_predictions
from jurybox.serving.runs.results import (
    Results,
    ResultsDir,
    ResultsError,
    open_results,
    write_manifest,
)
from jurybox.serving.runs.summary import Summary, summarize

if TYPE_CHECKING:
    from jurybox.calibration import AppliedCalibration

MAX_LISTED_ERRORS = 1000  # rejected rows listed in the report and manifest (all are counted)


@dataclass
class RunReport:
    """What a run did: counts, the first rejected rows, the summary of its output, notes.

    Attributes:
        out: The output (a ``.jsonl`` file or a directory of shards).
        total_items: The valid items of the run (within ``limit``).
        already_done: Items already in the output before this run.
        judged: Items judged by this run.
        row_errors: The first rejected rows (at most MAX_LISTED_ERRORS; ``n_row_errors``
            counts them all).
        summary: The summary of the output (this run's items only).
        repaired_tail: Whether what a killed run left half-written (an incomplete last line, a
            temporary shard) was removed.
        seconds: How long the run took.
        interrupted: Whether the run was interrupted (what was written stays).
        notes: What the run wants said (the verdict cache's hits, judges' notes, ...).
        n_row_errors: Every rejected row, counted.
        cached: Of ``judged``, the items whose verdict came from the verdict cache.
    """

    out: Path
    total_items: int
    already_done: int
    judged: int
    row_errors: list[RowError]  # the first MAX_LISTED_ERRORS; n_row_errors counts them all
    summary: Summary
    repaired_tail: bool
    seconds: float
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    n_row_errors: int = 0
    cached: int = 0  # of ``judged``, the items whose verdict came from the verdict cache


class Tally:
    """A run's counts as its rows go by.

    ``id in tally``: whether the id is one of this run's items (``ids``: the engine's index of
    them, dropped by `forget_ids` before the summary reads the output back).
    """

    def __init__(self, ids: Container[str], count_rows: bool = True) -> None:
        self._ids: Container[str] | None = ids
        self.rows = 0  # read (counted where the engine sees every row: ``count_rows``)
        self._count_rows = count_rows
        self.items = self.already = self.judged = self.cached = self.empty = self.n_errors = 0
        self.errors: list[RowError] = []

    def error(self, error: RowError) -> None:
        """A rejected row (all are counted; the first MAX_LISTED_ERRORS are listed)."""
        self.n_errors += 1
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append(error)

    def __contains__(self, item_id: object) -> bool:
        if self._ids is None:
            raise RuntimeError("the run's ids were forgotten (forget_ids)")
        return item_id in self._ids

    def forget_ids(self) -> None:
        """Drop the id index once the rows are read (the counts stay)."""
        self._ids = None

    def counts(self) -> dict[str, Any]:
        """The counts a manifest records."""
        rows = {"rows": self.rows} if self._count_rows else {}
        return {
            **rows,
            "items": self.items,
            "rejected": self.n_errors,
            "rejected_rows": [str(e) for e in self.errors],
        }


class RunOptions(TypedDict, total=False):
    """The options of a run that both engines take (``judge_file``, ``judge_with_ray``).

    All are optional.

    Attributes:
        mapping: Field -> column (``--map``).
        limit: Judge only the first N valid items.
        max_field_chars: Longer fields reject the row.
        keep_raw: Scored votes keep the judge's raw output.
        allow_empty: Judge empty responses.
        calibration: A map applied to every record.
        progress: ``progress(done, total)``, called when the run starts and as the work
            advances: ``done`` items' worth, fractional within a chunk; ``total`` an
            estimate, or None.
        notify: ``notify(message)``: what the run is doing meanwhile (each judge loaded, with
            its time).
        format: The format of a results directory's shards (jsonl or parquet).
        shard_size: Verdicts per shard of a results directory.
        length_control: Add the length-controlled scores to the summary.
        human: The human labels the length control is fitted on.
    """

    mapping: Mapping[str, str] | None
    limit: int | None
    max_field_chars: int
    keep_raw: bool
    allow_empty: bool
    calibration: AppliedCalibration | None
    progress: Callable[[float, int | None], Any] | None
    notify: Callable[[str], Any] | None
    format: str | None
    shard_size: int | None
    length_control: bool
    human: str | Path | None


class Run:
    """One run of ``predictions`` (a file, directory or glob) into ``out``.

    See the module docstring. ``provenance`` and the calibration its records carry
    (``options``' ``calibration``, else ``records_calibration``: a service's map) key the
    results store; ``engine`` is recorded in the manifest.
    """

    def __init__(
        self,
        predictions: str | Path,
        rubric: Rubric,
        out: str | Path,
        *,
        jury: JurySpec,
        provenance: str,
        records_calibration: str | None = None,
        engine: str | None = None,
        **options: Unpack[RunOptions],
    ) -> None:
        self.began = time.perf_counter()
        mapping, limit = options.get("mapping"), options.get("limit")
        allow_empty = options.get("allow_empty", False)
        max_field_chars = options.get("max_field_chars", DEFAULT_MAX_FIELD_CHARS)
        self.keep_raw = options.get("keep_raw", False)
        self.applied = options.get("calibration")  # applied to each record by the engine
        self.progress = options.get("progress")
        self.notify = options.get("notify")
        calibration = self.applied.identity if self.applied is not None else records_calibration
        self.predictions, self.rubric, self.out = predictions, rubric, Path(out)
        if (
            self.out.exists()
            and Path(predictions).exists()
            and self.out.resolve() == Path(predictions).resolve()
        ):
            raise ResultsError(f"--out {out} is the predictions file itself; choose another --out")
        self.mapping = dict(mapping or {})
        # Mistakes in the options or the files' names fail before --out is opened.
        check_mapping(self.mapping, rubric)
        self.files = row_files(predictions)
        for path in self.files:
            file_format(path)
        self.jury, self.provenance, self.calibration = jury, provenance, calibration
        self.limit, self.allow_empty = limit, allow_empty
        self.reading: dict[str, Any] = {
            "mapping": self.mapping,
            "max_field_chars": max_field_chars,
            "allow_empty": allow_empty,
        }
        self.format, self.shard_size = options.get("format"), options.get("shard_size")
        self.length_control, self.human = options.get("length_control", False), options.get("human")
        self.engine = engine
        self.manifest: dict[str, Any] = {}
        self.interrupted = self.repaired = False
        self._results: Results | None = None

    @property
    def results(self) -> Results:
        """The results store, while `writing` is open (and after, to read back)."""
        if self._results is None:
            raise RuntimeError("Run.results before Run.writing()")
        return self._results

    def check_columns(self) -> None:
        """Read rows until the first valid item, to refuse a file the rubric cannot read.

        A column the rubric or ``--map`` needs that no row has is then said (PredictionsError)
        before anything is written. Reads one row of a usable file; the whole file when none of
        its rows is an item.
        """
        with closing(iter_predictions(self.predictions, self.rubric, **self.reading)) as rows:
            for _, row in rows:
                if not isinstance(row, RowError):
                    return

    @contextmanager
    def writing(
        self, tally: Tally, describe: Callable[[BaseException], str] = str
    ) -> Iterator[Results]:
        """Open the results store and write the running manifest.

        Resuming from changed input is refused. A KeyboardInterrupt inside ends the run as
        interrupted (what was written stays); any other exception writes a failed manifest
        (``describe`` gives its text) and propagates. A file the rubric cannot read (a column
        no row has) fails before ``out`` is touched.
        """
        self.check_columns()
        with open_results(
            self.out, self.provenance, self.calibration, self.format, self.shard_size
        ) as results:
            self._results = results
            if results.inputs:
                check_unchanged(
                    self.predictions, self.rubric, results.inputs, self.limit, **self.reading
                )
            self.manifest = {
                "jurybox": version("jurybox"),
                **({"engine": self.engine} if self.engine else {}),
                "predictions": str(Path(self.predictions).resolve()),
                "rubric": self.rubric.model_dump(mode="json", by_alias=True),
                "jury": self.jury.model_dump(mode="json"),
                "provenance": self.provenance,
                "mapping": self.mapping,
                "calibration": self.calibration,
                "limit": self.limit,
                "allow_empty": self.allow_empty,
                "out_format": results.format if isinstance(results, ResultsDir) else "jsonl file",
                "started": datetime.now(UTC).isoformat(),
            }
            write_manifest(self.out, {**self.manifest, "status": "running"})
            try:
                yield results
            except KeyboardInterrupt:
                self.interrupted = True
            except BaseException as exc:
                write_manifest(
                    self.out,
                    {
                        **self.manifest,
                        **tally.counts(),
                        "status": "failed",
                        "error": describe(exc),
                        "finished": datetime.now(UTC).isoformat(),
                    },
                )
                raise
            self.repaired = results.repaired

    def finish(
        self, tally: Tally, notes: list[str], cache: str | Path | None = None, **manifest: Any
    ) -> RunReport:
        """Summarise the output, write the final manifest and return the run's report.

        The summary is of this run's items only; the final manifest has ``manifest``'s extra
        keys. ``cache``: the verdict cache the run looked items up in, if any (the notes say how
        many came from it).
        """
        left_out = earlier_not_ours(self.results, tally)
        tally.forget_ids()  # (the summary's arrays are not held alongside the id index)
        if cache is not None:
            notes = [
                f"verdict cache: {tally.cached} of {tally.judged} item(s) judged before with "
                f"this configuration, taken from {cache}"
                if tally.cached
                else f"verdict cache: no item judged before ({cache})",
                *notes,
            ]
        summary = summarize(
            (r for r in self.results.iter_records() if r.id not in left_out),
            self.rubric,
            rejected_rows=tally.n_errors,
            empty_responses=tally.empty,
        )
        if self.length_control:
            notes = [*notes, *self._length_control(summary, left_out)]
        write_manifest(
            self.out,
            {
                **self.manifest,
                **tally.counts(),
                "status": "interrupted" if self.interrupted else "complete",
                "finished": datetime.now(UTC).isoformat(),
                "summary": summary.to_dict(),
                **manifest,
            },
        )
        return RunReport(
            out=self.out,
            total_items=tally.items,
            already_done=tally.already,
            judged=tally.judged,
            row_errors=tally.errors,
            summary=summary,
            repaired_tail=self.repaired,
            seconds=time.perf_counter() - self.began,
            interrupted=self.interrupted,
            notes=notes,
            n_row_errors=tally.n_errors,
            cached=tally.cached,
        )

    def _length_control(self, summary: Summary, left_out: Container[str]) -> list[str]:
        """Add the length-controlled scores to ``summary``; what kept them out, as notes.

        The run's verdicts are written whatever happens here.
        """
        from jurybox.calibration import judge_output_from_records
        from jurybox.rubrics.errors import InputError
        from jurybox.serving.runs.lengths import length_controls

        records = [r for r in self.results.iter_records() if r.id not in left_out]
        try:
            output = judge_output_from_records(records, source=str(self.out))
            controls = length_controls(
                self.predictions, output, self.rubric, human=self.human, mapping=self.mapping
            )
        except InputError as exc:
            return [f"no length-controlled scores: {exc}"]
        summary.length_control = [c.to_dict() for c in controls]
        return []


def earlier_not_ours(results: Results, ours: Container[str]) -> set[str]:
    """Ids written to ``results`` before this run that are not among its items.

    Those come from an earlier run with a larger --limit, or rows removed since: the summary
    leaves them out. Every record this run wrote is its own, so only the earlier ids are looked
    at, and the caller can drop its id index before the output is read back for the summary.
    """
    return {i for i in results.inputs if i not in ours}


def check_unchanged(
    predictions: str | Path,
    rubric: Rubric,
    written: Mapping[str, str | None],
    limit: int | None,
    **reading: Any,
) -> None:
    """Refuse to resume when items already written were judged from different input.

    Different input means changed predictions or --map: checked before anything is judged, in
    one pass over the rows.

    Raises:
        ResultsError: Items already written were judged from different input.
    """
    changed = []
    valid = 0
    for _, row in iter_predictions(predictions, rubric, **reading):
        if isinstance(row, RowError):
            continue
        valid += 1
        if limit is not None and valid > limit:
            break
        if row.id in written and written[row.id] != input_hash(row):
            changed.append(row.id)
    if changed:
        raise ResultsError(
            f"{len(changed)} item(s) already written were judged from different input "
            f"(e.g. {', '.join(changed[:3])}): the predictions or --map changed since; "
            "choose another --out"
        )
