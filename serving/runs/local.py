"""Bulk offline judging of a prediction file, in-process, streaming: read rows, skip what is
done, judge in chunks, append each chunk's verdicts, summarise from what was written. The run
itself (checks, results, manifest, summary) is :class:`jurybox.serving.runs.run.Run`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jurybox.judges import JuryLike
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.items import DEFAULT_MAX_FIELD_CHARS
from jurybox.rubrics.rows import count_rows
from jurybox.serving.runs.predictions import IdIndex, RowError, iter_predictions
from jurybox.serving.runs.run import Run, RunReport, Tally

if TYPE_CHECKING:
    from jurybox.calibration import AppliedCalibration


def judge_file(
    predictions: str | Path,
    rubric: Rubric,
    jury: JuryLike,
    out: str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    limit: int | None = None,
    chunk_size: int | None = None,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    keep_raw: bool = False,
    allow_empty: bool = False,
    calibration: AppliedCalibration | None = None,
    progress: Callable[[int, int | None], Any] | None = None,
    format: str | None = None,
    shard_size: int | None = None,
) -> RunReport:
    """Judge every valid row of ``predictions`` (a file, directory or glob) not yet in ``out``
    (a ``.jsonl`` file, or a directory of JSONL/Parquet shards: ``format``) with ``jury``
    (a :class:`~jurybox.judges.Jury` here, or a scoring service's ``RemoteJury``).

    Streams: rows are read, judged ``chunk_size`` at a time (default: the jury's) and appended
    chunk by chunk; resuming keeps only ids and input hashes, and the summary is computed from
    the output as it is read back, so memory does not grow with the file. ``progress(done,
    total)`` is called as items complete (``total`` is an estimate, or None when unknown);
    ``calibration`` adds calibrated scores to each record before it is written.
    """
    prov = jury.provenance(rubric)
    chunk_size = chunk_size or jury.default_chunk_size
    calibration_id = (calibration.identity if calibration is not None
                      else jury.records_calibration(rubric))
    run = Run(predictions, rubric, out, jury=jury.spec, provenance=prov,
              calibration=calibration_id, mapping=mapping, limit=limit,
              max_field_chars=max_field_chars, allow_empty=allow_empty, format=format,
              shard_size=shard_size)
    rows = RowStream(predictions, rubric, limit, **run.reading)
    total = count_rows(predictions)
    total = min(total, limit) if total is not None and limit is not None else total
    hits_before = jury.cache_hits
    with run.writing(rows) as results:
        done = results.done()
        loaded = False
        for chunk, skipped in rows.chunks(done, chunk_size):
            rows.already += skipped
            # Models load at the first chunk with anything to judge: a run whose items are
            # all in the verdict cache loads none.
            if chunk and not loaded and jury.needs_judging(rubric, chunk):
                jury.load_backends()
                loaded = True
            if chunk:
                records = jury.score_records(rubric, chunk, keep_raw=keep_raw)
                if calibration is not None:
                    records = [calibration.apply(r, rubric) for r in records]
                results.append(records)
                rows.judged += len(chunk)
                rows.cached = jury.cache_hits - hits_before
            if progress is not None:
                progress(rows.already + rows.judged, total)
    cache = jury.cache.path if jury.cache is not None else None
    return run.finish(rows, [], cache=cache)


class RowStream(Tally):
    """The valid items of a prediction file, read once, in chunks, counted as they go by; it
    keeps only the ids (one index, shared with the reader's duplicate check) and the first
    rejected rows. ``id in stream``: whether the id is one of this run's items (within
    ``limit``)."""

    def __init__(self, predictions: str | Path, rubric: Rubric, limit: int | None, **reading: Any
                 ) -> None:
        self._index = IdIndex()
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
        for _, row in self._rows:
            self.rows += 1
            if isinstance(row, RowError):
                self.error(row)
                continue
            if self.limit is not None and self.items >= self.limit:
                continue  # keep reading: rejected rows are still counted
            self.items += 1
            if self.items == self.limit:
                self._index.mark(row.id)
            if not (row.response or "").strip():
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
