"""Bulk offline judging of a prediction file, in-process, streaming: read rows, skip what is
done, judge in chunks, append each chunk's verdicts, summarise from what was written."""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jurybox.judges import Jury
from jurybox.rubrics import Item, Rubric, input_hash
from jurybox.rubrics.rows import count_rows, file_format, row_files
from jurybox.serving.runs.predictions import (
    DEFAULT_MAX_FIELD_CHARS,
    IdIndex,
    RowError,
    check_mapping,
    iter_predictions,
)
from jurybox.serving.runs.results import (
    Results,
    ResultsDir,
    ResultsError,
    open_results,
    write_manifest,
)
from jurybox.serving.runs.summary import Summary, summarize
from jurybox.serving.service.client import RemoteJury

if TYPE_CHECKING:
    from jurybox.calibration import AppliedCalibration


@dataclass
class RunReport:
    out: Path
    total_items: int
    already_done: int
    judged: int
    # The first MAX_LISTED_ERRORS; n_row_errors counts them all. The Ray engine lists them as
    # text (its rows come back from the workers as text; a duplicate id has no row number).
    row_errors: Sequence[RowError | str]
    summary: Summary
    repaired_tail: bool
    seconds: float
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)
    n_row_errors: int = 0


MAX_LISTED_ERRORS = 1000  # rejected rows listed in the report and manifest (all are counted)


def judge_file(
    predictions: str | Path,
    rubric: Rubric,
    jury: Jury | RemoteJury,
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
    (a ``.jsonl`` file, or a directory of JSONL/Parquet shards: ``format``).

    Streams: rows are read, judged ``chunk_size`` at a time (default: the jury's) and appended
    chunk by chunk; resuming keeps only ids and input hashes, and the summary is computed from
    the output as it is read back, so memory does not grow with the file. ``progress(done,
    total)`` is called as items complete (``total`` is an estimate, or None when unknown);
    ``calibration`` adds calibrated scores to each record before it is written.
    """
    began = time.perf_counter()
    out = Path(out)
    if out.exists() and Path(predictions).exists() and out.resolve() == Path(predictions).resolve():
        raise ResultsError(f"--out {out} is the predictions file itself; choose another --out")
    prov = jury.provenance(rubric)
    remote = jury if isinstance(jury, RemoteJury) else None  # the service writes the records
    chunk_size = chunk_size or (remote.default_chunk_size if remote is not None
                                else jury.spec.default_chunk_size)
    calibration_id = calibration.identity if calibration is not None else (
        remote.service_calibration(rubric) if remote is not None else None)
    reading = dict(mapping=mapping, max_field_chars=max_field_chars, allow_empty=allow_empty)
    # Mistakes in the options or the file's name fail before --out is opened.
    check_mapping(dict(mapping or {}), rubric)
    for path in row_files(predictions):
        file_format(path)
    with open_results(out, prov, calibration_id, format, shard_size) as results:
        if results.inputs:
            check_unchanged(predictions, rubric, results.inputs, limit, **reading)
        rows = RowStream(predictions, rubric, limit, **reading)
        total = count_rows(predictions)
        total = min(total, limit) if total is not None and limit is not None else total
        manifest = {
            "jurybox": version("jurybox"),
            "predictions": str(Path(predictions).resolve()),
            "rubric": rubric.model_dump(mode="json", by_alias=True),
            "jury": jury.spec.model_dump(mode="json"),
            "provenance": prov,
            "mapping": dict(mapping or {}),
            "calibration": calibration_id,
            "limit": limit,
            "allow_empty": allow_empty,
            "out_format": results.format if isinstance(results, ResultsDir) else "jsonl file",
            "started": datetime.now(UTC).isoformat(),
        }
        write_manifest(out, {**manifest, "status": "running"})
        done = results.done()
        already = judged = 0
        interrupted = False
        try:
            loaded = False
            for chunk, skipped in rows.chunks(done, chunk_size):
                already += skipped
                # Models load at the first chunk with anything to judge: a run whose items
                # are all in the verdict cache loads none.
                if chunk and not loaded and _needs_judging(jury, rubric, chunk):
                    jury.load_backends()
                    loaded = True
                if chunk:
                    if remote is not None:
                        records = remote.score_records(rubric, chunk)
                    else:
                        verdicts = jury.score(rubric, chunk)
                        records = [{**v.to_record(keep_raw=keep_raw), "input": input_hash(it)}
                                   for v, it in zip(verdicts, chunk)]
                        if calibration is not None:
                            records = [calibration.apply(r, rubric) for r in records]
                    results.append(records)
                    judged += len(chunk)
                if progress is not None:
                    progress(already + judged, total)
        except KeyboardInterrupt:
            interrupted = True
        except BaseException as exc:
            write_manifest(out, {**manifest, **rows.counts(), "status": "failed",
                                 "error": str(exc),
                                 "finished": datetime.now(UTC).isoformat()})
            raise
        repaired = results.repaired
    left_out = earlier_not_ours(results, rows)
    rows.forget_ids()  # (the summary's arrays are not held alongside the id index)
    notes = []
    if isinstance(jury, Jury) and jury.cache is not None:  # (a RemoteJury has no cache here)
        hits = jury.cache_hits
        notes.append(f"verdict cache: {hits} of {judged} item(s) judged before with this "
                     f"configuration, taken from {jury.cache.path}" if hits else
                     f"verdict cache: no item judged before ({jury.cache.path})")
    summary = summarize((r for r in results.iter_records() if r.id not in left_out), rubric,
                        rejected_rows=rows.n_errors, empty_responses=rows.empty)
    write_manifest(
        out,
        {
            **manifest,
            **rows.counts(),
            "status": "interrupted" if interrupted else "complete",
            "finished": datetime.now(UTC).isoformat(),
            "summary": summary.to_dict(),
        },
    )
    return RunReport(
        out=out,
        total_items=rows.items,
        already_done=already,
        judged=judged,
        row_errors=rows.errors,
        summary=summary,
        repaired_tail=repaired,
        seconds=time.perf_counter() - began,
        notes=notes,
        interrupted=interrupted,
        n_row_errors=rows.n_errors,
    )


class RowStream:
    """The valid items of a prediction file, read once, in chunks; it keeps only the ids (one
    index, shared with the reader's duplicate check) and the first rejected rows as it goes.
    ``id in stream``: whether the id is one of this run's items (within ``limit``)."""

    def __init__(self, predictions: str | Path, rubric: Rubric, limit: int | None, **reading: Any
                 ) -> None:
        self._ids: IdIndex | None = IdIndex()
        self._rows = iter_predictions(predictions, rubric, ids=self._ids, **reading)
        self.limit = limit
        if limit == 0:
            self._ids.mark(None)
        self.items = 0
        self.errors: list[RowError] = []
        self.n_errors = 0
        self.rows = 0
        self.empty = 0

    def __contains__(self, item_id: object) -> bool:
        if self._ids is None:
            raise RuntimeError("RowStream: the ids were forgotten (forget_ids)")
        return item_id in self._ids

    def forget_ids(self) -> None:
        """Drop the id index once the rows are read (the counts stay)."""
        self._ids = None

    def chunks(self, done: set[str], size: int) -> Iterator[tuple[list[Item], int]]:
        """``(items to judge, items skipped as already done)``, at most ``size`` items a chunk."""
        chunk: list[Item] = []
        skipped = 0
        for _, row in self._rows:
            self.rows += 1
            if isinstance(row, RowError):
                self.n_errors += 1
                if len(self.errors) < MAX_LISTED_ERRORS:
                    self.errors.append(row)
                continue
            if self.limit is not None and self.items >= self.limit:
                continue  # keep reading: rejected rows are still counted
            self.items += 1
            if self.items == self.limit:
                self._ids.mark(row.id)  # type: ignore[union-attr]
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

    def counts(self) -> dict[str, Any]:
        return {"rows": self.rows, "items": self.items, "rejected": self.n_errors,
                "rejected_rows": [str(e) for e in self.errors]}


def earlier_not_ours(results: Results, ours: Container[str]) -> set[str]:
    """Ids written to ``results`` before this run that are not among its items (an earlier run
    with a larger --limit, rows removed since): the summary leaves them out. Every record this
    run wrote is its own, so only the earlier ids are looked at, and the caller can drop its id
    index before the output is read back for the summary."""
    return {i for i in results.inputs if i not in ours}


def _needs_judging(jury: Any, rubric: Rubric, chunk: list[Item]) -> bool:
    cache = getattr(jury, "cache", None)
    if cache is None:
        return True
    found = cache.contains(jury.provenance(rubric), [input_hash(it) for it in chunk])
    return len(found) < len(chunk)  # (a membership test: Jury.score reads the verdicts)


def check_unchanged(predictions: str | Path, rubric: Rubric, written: Mapping[str, str | None],
                    limit: int | None, **reading: Any) -> None:
    """Refuse to resume when items already written were judged from different input (changed
    predictions or --map): checked before anything is judged, in one pass over the rows."""
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
