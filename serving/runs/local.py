"""The local engine: bulk offline judging of a prediction file, in-process, streaming.

Read rows, skip what is done, judge in chunks, append each chunk's verdicts, summarise from what
was written. The run itself (checks, results, manifest, summary) is
`jurybox.serving.runs.run.Run`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Unpack

from jurybox.judges import Jury
from jurybox.judges.jury import JuryLike
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.images import ImageError
from jurybox.rubrics.rows import count_rows
from jurybox.serving.runs.predictions import IdIndex, RowError, iter_predictions
from jurybox.serving.runs.run import Run, RunOptions, RunReport, Tally


def judge_file(
    predictions: str | Path,
    rubric: Rubric,
    jury: JuryLike,
    out: str | Path,
    *,
    chunk_size: int | None = None,
    **options: Unpack[RunOptions],
) -> RunReport:
    """Judge every valid row of ``predictions`` not yet in ``out`` with ``jury``, in-process.

    Streams: rows are read, judged ``chunk_size`` at a time (default: the jury's) and appended
    chunk by chunk; resuming keeps only ids and input hashes, and the summary is computed from
    the output as it is read back, so memory does not grow with the file.

    Args:
        predictions: The prediction file, a directory of them, or a glob.
        rubric: The rubric to judge with.
        jury: The jury: a ``jurybox.judges.Jury`` here, or a scoring service's ``RemoteJury``.
        out: The output: a ``.jsonl`` file, or a directory of JSONL/Parquet shards
            (``format``). Items already in it are not judged again.
        chunk_size: Items judged (and written) per step; default: the jury's.
        **options: The run's options, ``jurybox.serving.runs.run.RunOptions``.

    Returns:
        The report of what was done: counts, rejected rows, the summary of the output, notes.

    Raises:
        PredictionsError: The prediction file as a whole cannot be judged (no rows, a column
            the rubric needs that no row has, a ``mapping`` naming a field nothing reads).
        ResultsError: ``out`` cannot be appended to safely (not jurybox's output, another run
            writing it, another configuration or changed input, the predictions file itself).
        InputError: Other input at fault, e.g. a file in a format jurybox does not read, or a
            judge model that is not installed (``ModelNotAvailable``).
        JudgeFailed: A judge could not judge a chunk at all (what was written before stays).
        ServiceError: With a ``RemoteJury``: the service could not answer.
    """
    run = Run(
        predictions,
        rubric,
        out,
        jury=jury.spec,
        provenance=jury.provenance(rubric),
        records_calibration=jury.records_calibration(rubric),
        **options,
    )
    chunk_size = chunk_size or jury.default_chunk_size
    # A jury here reads the items' images as the rows are read (when a judge sees them), so
    # an image that cannot be read or is over the limits rejects its row, as a bad field does.
    load = (lambda item: jury.with_images([item])[0]) if isinstance(jury, Jury) else None
    rows = RowStream(predictions, rubric, run.limit, load_images=load, **run.reading)
    total = count_rows(predictions)
    total = min(total, run.limit) if total is not None and run.limit is not None else total
    hits_before = jury.cache_hits
    progress = run.progress
    with run.writing(rows) as results:
        done = results.done()
        if progress is not None:
            progress(0, total)  # the bar and its clock start with the run
        loaded = False
        for chunk, skipped in rows.chunks(done, chunk_size):
            rows.already += skipped
            # Models load at the first chunk with anything to judge: a run whose items are
            # all in the verdict cache loads none.
            if chunk and not loaded and jury.needs_judging(rubric, chunk):
                jury.load_backends(_loaded_note(run.notify))
                loaded = True
            if chunk:
                records = jury.score_records(
                    rubric, chunk, keep_raw=run.keep_raw, on_progress=_within(progress, rows, total)
                )
                if run.applied is not None:
                    records = [run.applied.apply(r, rubric, it) for r, it in zip(records, chunk)]
                results.append(records)
                rows.judged += len(chunk)
                rows.cached = jury.cache_hits - hits_before
            if run.progress is not None:
                run.progress(rows.already + rows.judged, total)
    notes = jury.notes() if isinstance(jury, Jury) else []
    return run.finish(rows, notes, cache=jury.cache.path if jury.cache is not None else None)


def _within(
    progress: Callable[[float, int | None], Any] | None, rows: Tally, total: int | None
) -> Callable[[float], None] | None:
    """``on_progress`` for one chunk: its share done, counted after what came before it."""
    if progress is None:
        return None
    base = rows.already + rows.judged
    return lambda part: progress(base + part, total)


def _loaded_note(notify: Callable[[str], Any] | None) -> Callable[[str, float], None] | None:
    """``on_loaded`` for ``load_backends``: says each judge is ready, with its time."""
    if notify is None:
        return None
    return lambda what, seconds: notify(f"{what} ready in {seconds:.1f} s")


class RowStream(Tally):
    """The valid items of a prediction file, read once, in chunks, counted as they go by.

    It keeps only the ids (one index, shared with the reader's duplicate check) and the first
    rejected rows. ``id in stream``: whether the id is one of this run's items (within
    ``limit``).
    """

    def __init__(
        self,
        predictions: str | Path,
        rubric: Rubric,
        limit: int | None,
        load_images: Callable[[Item], Item] | None = None,
        **reading: Any,
    ) -> None:
        self._index = IdIndex()
        self._load_images = load_images
        super().__init__(self._index)
        self._rows = iter_predictions(predictions, rubric, ids=self._index, **reading)
        self.limit = limit
        if limit == 0:
            self._index.mark(None)
        self.rows = 0

    def chunks(self, done: set[str], size: int) -> Iterator[tuple[list[Item], int]]:
        """``(items to judge, items skipped as already done)``, at most ``size`` items a chunk."""
        chunk: list[Item] = []
        skipped = 0
        for n, row in self._rows:
            self.rows += 1
            if isinstance(row, RowError):
                self.error(row)
                continue
            if self.limit is not None and self.items >= self.limit:
                continue  # keep reading: rejected rows are still counted
            if self._load_images is not None and row.id not in done and row.images_pending:
                try:
                    row = self._load_images(row)
                except ImageError as exc:
                    self.error(RowError(n, exc.field or "images", str(exc)))
                    continue
            self.items += 1
            if self.items == self.limit:
                self._index.mark(row.id)
            if row.empty_answer:
                self.empty += 1
            if row.id in done:
                skipped += 1
                continue
            chunk.append(row)
            if len(chunk) >= size:
                yield chunk, skipped
                chunk, skipped = [], 0
        if chunk or skipped:
            yield chunk, skipped
