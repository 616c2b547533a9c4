"""Bulk offline judging of a prediction file, in-process: read, skip what is done, judge in
chunks, append each chunk's verdicts, summarise."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jurybox.judges import Jury, JurySpec, provenance
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.errors import InputError

from .predictions import DEFAULT_MAX_FIELD_CHARS, RowError, read_predictions
from .results import ResultsError, ResultsFile, write_manifest
from .summary import Summary, summarize

if TYPE_CHECKING:
    from jurybox.calibration import CalibrationMap


@dataclass
class RunReport:
    out: Path
    total_items: int
    already_done: int
    judged: int
    row_errors: list[RowError]
    summary: Summary
    repaired_tail: bool
    seconds: float
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Calibration:
    """A calibration map applied while judging, and the identity its records carry, so that one
    results file never mixes calibrated and uncalibrated records (or two maps)."""

    map: CalibrationMap
    identity: str
    force: bool = False

    def apply(self, record: dict[str, Any], rubric: Rubric) -> dict[str, Any]:
        calibrated = self.map.apply_to_record(record, force=self.force, formula=rubric.formula)
        return {**calibrated, "calibration": self.identity}


def load_calibration(path: str | Path, rubric: Rubric, jury: JurySpec, force: bool = False
                     ) -> Calibration:
    """Load a map for judging with this rubric and jury; a map fitted for another
    configuration is refused unless ``force``."""
    from jurybox.calibration import CalibrationMap

    path = Path(path)
    try:
        cmap = CalibrationMap.load(path)
        content = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    expected = provenance(rubric, jury)
    if cmap.provenance_ != expected and not force:
        raise InputError(
            f"{path} was fitted for provenance {cmap.provenance_}, but this rubric and jury give "
            f"{expected}; refit it, or pass --force-calibration to apply it anyway"
        )
    return Calibration(cmap, f"{path.name}:{hashlib.sha256(content).hexdigest()[:12]}", force)


def input_hash(item: Item) -> str:
    """Identity of what was judged, so a resumed run notices changed predictions or --map."""
    blob = json.dumps(item.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def judge_file(
    predictions: str | Path,
    rubric: Rubric,
    jury: Jury,
    out: str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    limit: int | None = None,
    chunk_size: int | None = None,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    keep_raw: bool = False,
    allow_empty: bool = False,
    calibration: Calibration | None = None,
    progress: Callable[[int, int], Any] | None = None,
) -> RunReport:
    """Judge every valid row of ``predictions`` not yet in ``out``.

    ``progress(done, total)`` is called as items complete; ``calibration`` adds calibrated
    scores to each record before it is written. ``chunk_size`` defaults to the jury's (items
    judged and written per step).
    """
    began = time.perf_counter()
    out = Path(out)
    if out.exists() and Path(predictions).exists() and out.resolve() == Path(predictions).resolve():
        raise ResultsError(f"--out {out} is the predictions file itself; choose another --out")
    read = read_predictions(predictions, rubric, mapping, max_field_chars, allow_empty)
    items = read.items[:limit] if limit is not None else read.items
    prov = jury.provenance(rubric)
    remote = hasattr(jury, "score_records")  # a RemoteJury: the service writes the records
    chunk_size = chunk_size or getattr(jury, "default_chunk_size", jury.spec.default_chunk_size)
    interrupted = False
    hashes = {it.id: input_hash(it) for it in items}
    calibration_id = calibration.identity if calibration is not None else (
        jury.service_calibration(rubric) if remote else None)
    with ResultsFile(out, prov, calibration_id) as results:
        done = results.done()
        changed = [i for i in done if i in hashes and results.records[i].input != hashes[i]]
        if changed:
            raise ResultsError(
                f"{out}: {len(changed)} item(s) already there were judged from different input "
                f"(e.g. {', '.join(changed[:3])}): the predictions or --map changed since; "
                "choose another --out"
            )
        todo = [it for it in items if it.id not in done]
        already = len(items) - len(todo)
        manifest = {
            "jurybox": version("jurybox"),
            "predictions": str(Path(predictions).resolve()),
            "rubric": rubric.model_dump(mode="json"),
            "jury": jury.spec.model_dump(mode="json"),
            "provenance": prov,
            "mapping": dict(mapping or {}),
            "calibration": calibration_id,
            "limit": limit,
            "rows": read.rows,
            "allow_empty": allow_empty,
            "rejected_rows": [str(e) for e in read.errors],
            "started": datetime.now(timezone.utc).isoformat(),
        }
        write_manifest(out, {**manifest, "status": "running"})
        if progress is not None:
            progress(already, len(items))
        judged = 0
        try:
            if todo:
                jury.load_backends()
            for start in range(0, len(todo), chunk_size):
                chunk = todo[start : start + chunk_size]
                if remote:
                    records = jury.score_records(rubric, chunk)
                else:
                    verdicts = jury.score(rubric, chunk)
                    records = [{**v.to_record(keep_raw=keep_raw), "input": hashes[v.id]}
                               for v in verdicts]
                    if calibration is not None:
                        records = [calibration.apply(r, rubric) for r in records]
                results.append(records)
                judged += len(chunk)
                if progress is not None:
                    progress(already + judged, len(items))
        except KeyboardInterrupt:
            interrupted = True
        except BaseException as exc:
            write_manifest(out, {**manifest, "status": "failed", "error": str(exc),
                                 "finished": datetime.now(timezone.utc).isoformat()})
            raise
        ids = {it.id for it in items}
        records = [r for k, r in results.records.items() if k in ids]
        repaired = results.repaired
    summary = summarize(records, rubric, rejected_rows=len(read.errors),
                        empty_responses=read.empty_responses)
    write_manifest(
        out,
        {
            **manifest,
            "status": "interrupted" if interrupted else "complete",
            "finished": datetime.now(timezone.utc).isoformat(),
            "summary": summary.to_dict(),
        },
    )
    return RunReport(
        out=out,
        total_items=len(items),
        already_done=already,
        judged=judged,
        row_errors=read.errors,
        summary=summary,
        repaired_tail=repaired,
        seconds=time.perf_counter() - began,
        interrupted=interrupted,
    )
