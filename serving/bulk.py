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
from typing import Any

from jurybox.judges import Jury
from jurybox.rubrics import Item, Rubric

from .predictions import DEFAULT_MAX_FIELD_CHARS, RowError, read_predictions
from .results import ResultsError, ResultsFile
from .summary import Summary, summarize


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


def input_hash(item: Item) -> str:
    """Identity of what was judged, so a resumed run notices changed predictions or --map."""
    blob = json.dumps(item.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def manifest_path(out: Path) -> Path:
    return out.with_name(out.name + ".manifest.json")


def write_manifest(out: Path, payload: dict[str, Any]) -> None:
    path = manifest_path(out)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    tmp.replace(path)


def judge_file(
    predictions: str | Path,
    rubric: Rubric,
    jury: Jury,
    out: str | Path,
    *,
    mapping: Mapping[str, str] | None = None,
    limit: int | None = None,
    chunk_size: int = 16,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    keep_raw: bool = False,
    transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    calibration: str | None = None,
    progress: Callable[[int, int], Any] | None = None,
) -> RunReport:
    """Judge every valid row of ``predictions`` not yet in ``out``.

    ``progress(done, total)`` is called as items complete; ``transform`` may add fields (e.g.
    calibrated scores) to each record before it is written, and ``calibration`` names the map it
    applies, so that one output file never mixes calibrated and uncalibrated records.
    """
    began = time.perf_counter()
    out = Path(out)
    read = read_predictions(predictions, rubric, mapping, max_field_chars)
    items = read.items[:limit] if limit is not None else read.items
    prov = jury.provenance(rubric)
    interrupted = False
    hashes = {it.id: input_hash(it) for it in items}
    with ResultsFile(out, prov, calibration) as results:
        done = results.done()
        changed = [i for i in done if i in hashes and results.records[i].get("input") != hashes[i]]
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
            "calibration": calibration,
            "limit": limit,
            "rows": read.rows,
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
                verdicts = jury.score(rubric, chunk)
                records = [{**v.to_record(keep_raw=keep_raw), "input": hashes[v.id]} for v in verdicts]
                if transform is not None:
                    records = [{**transform(r), "calibration": calibration} for r in records]
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
    summary = summarize(records, rubric, rejected_rows=len(read.errors))
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
