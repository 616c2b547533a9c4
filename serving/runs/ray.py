"""``jurybox judge --engine ray``: the bulk run as a Ray Data pipeline, for files that outgrow one
machine.

    read (the one row reader, one task per input file; bad rows become error rows)
      -> render (the rubric's prompts per item)
      -> one stage per judge (an actor pool holding the judge's backend, sized from the jury
         file: replicas, GPU share, CPUs; each adds that judge's votes, parsed where it runs);
         for a cascaded jury the judges stage by stage, each stage followed by a gate that
         settles the items it is confident about (later judges skip them: ``judges.cascade``)
      -> decide (verdict records, calibrated when a map is given)
      -> the driver writes them (shards of a directory, or a JSONL file)

The stages stream concurrently, so a jury of three judges on three GPU shares keeps all three
busy. Prompts, parsing, aggregation and the record are the judging path of the local engine
(:mod:`jurybox.judges.judging`): on the same items with greedy decoding, the same verdicts.

Exactly once: the driver is the only writer, and each shard appears whole (renamed into place)
or not at all. A rerun after a crash, a killed driver or a lost worker reads the ids already
written and judges only the others; an id met twice in one run (the same item in two input
files) is written once and reported as a duplicate row. Why not Ray Data's own checkpointing:
the results must stay readable as one output with its manifest (resume, `agree`, `calibrate`
and the summary read shards like a file) and refuse a changed input or configuration, which
the project's results store already does for the local engine.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jurybox.judges import JurySpec, provenance
from jurybox.rubrics import Rubric
from jurybox.serving.runs.local import (
    MAX_LISTED_ERRORS,
    RunReport,
    check_unchanged,
    earlier_not_ours,
    input_hash,
)
from jurybox.serving.runs.predictions import (
    DEFAULT_MAX_FIELD_CHARS,
    RowError,
    check_mapping,
    iter_predictions,
)
from jurybox.serving.runs.results import ResultsDir, ResultsError, open_results, write_manifest
from jurybox.serving.runs.summary import summarize

if TYPE_CHECKING:
    from ray.data import Dataset

    from jurybox.calibration import AppliedCalibration
    from jurybox.judges.backends.base import Backend


def _read_file(row: dict[str, Any], rubric: dict[str, Any], reading: dict[str, Any],
               done: set[str], allowed: set[str] | None) -> Iterator[dict[str, Any]]:
    """One input file through the one row reader: an item to judge, an error row, or a row
    already written (skipped, but its id counts for the summary)."""
    rubric_def = Rubric.model_validate(rubric)
    label = row["label"]
    for _, got in iter_predictions(Path(row["file"]), rubric_def, **reading):
        if isinstance(got, RowError):
            error = RowError(got.row, got.field, got.message, got.kind, label or got.file)
            yield _row(error=str(error))
        elif allowed is not None and got.id not in allowed:
            continue
        elif got.id in done:
            yield _row(id=got.id, skipped=True)
        else:
            yield _row(id=got.id, item=got.model_dump_json(), input=input_hash(got),
                       empty=not (got.response or "").strip())


def _row(id: str = "", item: str = "", input: str = "", error: str = "", skipped: bool = False,
         empty: bool = False) -> dict[str, Any]:
    return {"id": id, "item": item, "input": input, "error": error, "skipped": skipped,
            "empty": empty}


def _judged(batch: dict[str, list[Any]]) -> list[int]:
    """The rows still to judge: items, less those an earlier cascade stage settled."""
    settled = batch.get("settled") or [b""] * len(batch["item"])
    return [i for i, (item, done) in enumerate(zip(batch["item"], settled)) if item and not done]


def _lists(batch: Any) -> dict[str, list[Any]]:
    """A pandas batch as plain columns (bytes stay bytes: Arrow binary, never numpy's
    fixed-width strings, which would cut trailing zero bytes off pickles)."""
    return batch.to_dict("list")


class _Render:
    def __init__(self, rubric: dict[str, Any]) -> None:
        self.rubric = Rubric.model_validate(rubric)

    def __call__(self, batch: Any) -> dict[str, Any]:
        from jurybox.judges import render_requests
        from jurybox.rubrics import Item

        batch = _lists(batch)
        rows = _judged(batch)
        items = [Item.model_validate_json(batch["item"][i]) for i in rows]
        requests = render_requests(self.rubric, items) if items else None
        blobs = [b""] * len(batch["item"])
        if requests is not None:
            n_calls = len(requests.calls)
            for k, i in enumerate(rows):
                own = range(k * n_calls, (k + 1) * n_calls)
                blobs[i] = pickle.dumps(([requests.requests[j] for j in own],
                                         {j - k * n_calls: requests.errors[j]
                                          for j in own if j in requests.errors}))
        batch["requests"] = blobs
        batch["settled"] = [b""] * len(blobs)  # a cascade stage's final verdict, pickled
        batch["confidence"] = [""] * len(blobs)  # earlier stages' confidences (JSON)
        return batch


class _Gate:
    """After a cascade stage's judges: the items the stage settles get their verdict (the later
    judges skip them); the others go on with the stage's confidence noted."""

    def __init__(self, rubric: dict[str, Any], jury: dict[str, Any], prov: str, k: int) -> None:
        self.rubric = Rubric.model_validate(rubric)
        self.jury = JurySpec.model_validate(jury)
        self.prov, self.k = prov, k
        members = {n for stage in self.jury.stages[: k + 1] for n in stage.judges}
        self.columns = [f"votes_{j}" for j, judge in enumerate(self.jury.judges)
                        if judge.name in members]

    def __call__(self, batch: Any) -> dict[str, Any]:
        from jurybox.judges.cascade import settle

        batch = _lists(batch)
        for i in _judged(batch):
            votes = [v for column in self.columns for v in pickle.loads(batch[column][i])]
            earlier = json.loads(batch["confidence"][i] or "[]")
            verdict, conf = settle(self.rubric, self.jury, self.prov, self.k, batch["id"][i],
                                   votes, earlier)
            if verdict is None:
                batch["confidence"][i] = json.dumps([*earlier, conf])
            else:
                batch["settled"][i] = pickle.dumps(verdict)
        return batch


class _Judge:
    """One judge's stage: its backend is built once per actor, at its first item (a rerun with
    nothing left to judge loads no model)."""

    def __init__(self, rubric: dict[str, Any], spec: dict[str, Any], column: str,
                 backend_factory: Callable[[Any], Any] | None = None) -> None:
        from jurybox.judges import JudgeSpec

        self.rubric = Rubric.model_validate(rubric)
        self.spec = JudgeSpec.model_validate(spec)
        self.column = column
        self._factory = backend_factory
        self._backend: Backend | None = None

    @property
    def backend(self) -> Any:
        if self._backend is None:
            from jurybox.judges.jury import make_backend, settle_after_loading

            self._backend = (self._factory or make_backend)(self.spec)
            settle_after_loading()
        return self._backend

    def __call__(self, batch: Any) -> dict[str, Any]:
        from jurybox.judges import Requests, judge_votes

        batch = _lists(batch)
        rows = _judged(batch)
        calls = tuple(tuple(c) for c in self.rubric.calls())
        requests: list[Any] = []
        errors: dict[int, str] = {}
        for i in rows:
            own, own_errors = pickle.loads(batch["requests"][i])
            errors.update({len(requests) + j: e for j, e in own_errors.items()})
            requests.extend(own)
        votes_out = [b""] * len(batch["item"])
        began = time.perf_counter()
        if rows:
            ids = tuple(batch["id"][i] for i in rows)
            votes = judge_votes(self.spec, self.backend, Requests(ids, calls, tuple(requests), errors))
            for i, per_item in zip(rows, votes):
                votes_out[i] = pickle.dumps(per_item)
        batch[self.column] = votes_out
        batch[f"{self.column}_s"] = [(time.perf_counter() - began) / max(len(rows), 1)] * len(votes_out)
        return batch


class _Decide:
    def __init__(self, rubric: dict[str, Any], jury: dict[str, Any], prov: str, keep_raw: bool,
                 calibration: tuple[dict[str, Any], str, bool] | None) -> None:
        self.rubric = Rubric.model_validate(rubric)
        self.jury = JurySpec.model_validate(jury)
        self.prov, self.keep_raw = prov, keep_raw
        self.calibration = None
        if calibration is not None:
            from jurybox.calibration import AppliedCalibration, CalibrationMap

            cmap, identity, force = calibration
            self.calibration = AppliedCalibration(CalibrationMap.from_dict(cmap), identity, force)

    def __call__(self, batch: Any) -> dict[str, Any]:
        from jurybox.judges.cascade import settle

        batch = _lists(batch)
        records = [""] * len(batch["item"])
        last = max(len(self.jury.stages) - 1, 0)
        for i, item in enumerate(batch["item"]):
            if not item:
                continue
            if batch["settled"][i]:
                verdict = pickle.loads(batch["settled"][i])
            else:
                votes = [v for j in range(len(self.jury.judges))
                         for v in pickle.loads(batch[f"votes_{j}"][i])]
                verdict, _ = settle(self.rubric, self.jury, self.prov, last, batch["id"][i],
                                    votes, json.loads(batch["confidence"][i] or "[]"))
            if verdict is not None:
                record = {**verdict.to_record(keep_raw=self.keep_raw), "input": batch["input"][i]}
                if self.calibration is not None:
                    record = self.calibration.apply(record, self.rubric)
                records[i] = json.dumps(record, ensure_ascii=False, allow_nan=False)
        # What the driver needs; the prompts and pickled votes stay behind.
        keep = ["id", "error", "skipped", "empty"] + [f"votes_{j}_s"
                                                      for j in range(len(self.jury.judges))]
        return {**{k: batch[k] for k in keep}, "record": records}


def _pool(spec: Any) -> dict[str, Any]:
    """Actor-pool options for one judge's stage, from its execution settings."""
    import ray

    ex = spec.execution
    if isinstance(ex.replicas, tuple):
        compute = ray.data.ActorPoolStrategy(min_size=ex.replicas[0], max_size=ex.replicas[1])
    else:
        compute = ray.data.ActorPoolStrategy(size=ex.replicas)
    options: dict[str, Any] = {"compute": compute, "num_cpus": ex.num_cpus,
                               "batch_size": spec.execution.batch_size
                               if spec.backend == "transformers" else 256}
    gpus = ex.tensor_parallel_size if ex.tensor_parallel_size > 1 else ex.num_gpus
    if gpus:
        options["num_gpus"] = gpus
    return options


def judge_with_ray(
    predictions: str | Path,
    rubric: Rubric,
    jury: JurySpec,
    out: str | Path,
    *,
    address: str | None = None,
    mapping: Mapping[str, str] | None = None,
    limit: int | None = None,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    keep_raw: bool = False,
    allow_empty: bool = False,
    calibration: AppliedCalibration | None = None,
    progress: Callable[[int, int | None], Any] | None = None,
    format: str | None = None,
    shard_size: int | None = None,
    backend_factory: Callable[[Any], Any] | None = None,
) -> RunReport:
    """Judge every valid row of ``predictions`` not yet in ``out`` on a Ray cluster (see the
    module docstring). Returns the same report as the local engine, with per-judge
    throughput in its notes. ``backend_factory(judge_spec)`` replaces the judges' backends
    (benchmarks, tests), as a Jury takes backends passed in."""
    import ray

    from jurybox.rubrics.rows import count_rows, file_format, row_files

    began = time.perf_counter()
    out = Path(out)
    if out.exists() and Path(predictions).exists() and out.resolve() == Path(predictions).resolve():
        raise ResultsError(f"--out {out} is the predictions file itself; choose another --out")
    check_mapping(dict(mapping or {}), rubric)
    files = row_files(predictions)
    for path in files:
        file_format(path)
    jury.check_rubric(rubric)
    prov = provenance(rubric, jury)
    calibration_id = calibration.identity if calibration is not None else None
    reading = dict(mapping=dict(mapping or {}), max_field_chars=max_field_chars,
                   allow_empty=allow_empty)
    started_ray = not ray.is_initialized()
    if started_ray:
        _init_ray(address, jury)
    try:
        with open_results(out, prov, calibration_id, format, shard_size) as results:
            if results.inputs:
                check_unchanged(predictions, rubric, results.inputs, limit, **reading)
            allowed = _first_ids(predictions, rubric, limit, reading) if limit else None
            manifest = {
                "jurybox": version("jurybox"), "engine": "ray",
                "predictions": str(Path(predictions).resolve()),
                "rubric": rubric.model_dump(mode="json", by_alias=True),
                "jury": jury.model_dump(mode="json"), "provenance": prov,
                "mapping": dict(mapping or {}), "calibration": calibration_id, "limit": limit,
                "allow_empty": allow_empty,
                "out_format": results.format if isinstance(results, ResultsDir) else "jsonl file",
                "started": datetime.now(UTC).isoformat(),
            }
            write_manifest(out, {**manifest, "status": "running"})
            state = _Run(total=min(count_rows(predictions) or 0, limit or 10**18) or None)
            done = results.done()
            try:
                for batch in _pipeline(files, rubric, jury, prov, reading, done, allowed,
                                       keep_raw, calibration, backend_factory
                                       ).iter_batches(batch_size=None):
                    records = state.take(batch, len(jury.judges))
                    if records:
                        results.append(records)
                        if isinstance(results, ResultsDir):
                            results.flush()  # a shard per batch: progress survives the driver
                    if progress is not None:
                        progress(state.already + state.judged, state.total)
            except KeyboardInterrupt:
                state.interrupted = True
            except BaseException as exc:
                write_manifest(out, {**manifest, **state.counts(), "status": "failed",
                                     "error": _stage_error(exc),
                                     "finished": datetime.now(UTC).isoformat()})
                raise _failure(exc) from None
            repaired = results.repaired
        left_out = earlier_not_ours(results, state.ids)
        state.ids = set()  # not held alongside the summary's arrays
        summary = summarize((r for r in results.iter_records() if r.id not in left_out), rubric,
                            rejected_rows=state.n_errors, empty_responses=state.empty)
        notes = [f"judge {j.name}: {state.throughput(k):.2f} judgments/s per actor"
                 for k, j in enumerate(jury.judges) if state.busy.get(k, 0.0) > 0]
        write_manifest(out, {**manifest, **state.counts(),
                             "status": "interrupted" if state.interrupted else "complete",
                             "finished": datetime.now(UTC).isoformat(),
                             "summary": summary.to_dict(), "throughput": notes})
        return RunReport(out=out, total_items=state.items, already_done=state.already,
                         judged=state.judged, row_errors=state.errors, summary=summary,
                         repaired_tail=repaired, seconds=time.perf_counter() - began,
                         interrupted=state.interrupted, notes=notes, n_row_errors=state.n_errors)
    finally:
        if started_ray:
            ray.shutdown()


def _init_ray(address: str | None, jury: JurySpec) -> None:
    import ray

    if address:
        # Ray annotates logging_level as int but takes a level name (its own default is "info").
        ray.init(address=address, logging_level="WARNING",  # type: ignore[arg-type]
                 log_to_driver=False)
        return
    # A local Ray: logical CPUs enough for every judge's actors and the light stages.
    wanted = sum(j.execution.num_cpus * (j.execution.replicas[1] if isinstance(
        j.execution.replicas, tuple) else j.execution.replicas) for j in jury.judges) + 4
    ray.init(num_cpus=max(os.cpu_count() or 1, int(wanted + 0.999)), include_dashboard=False,
             logging_level="WARNING", log_to_driver=False)  # type: ignore[arg-type]  # as above


def _pipeline(files: list[Path], rubric: Rubric, jury: JurySpec, prov: str,
              reading: dict[str, Any], done: set[str], allowed: set[str] | None,
              keep_raw: bool, calibration: AppliedCalibration | None,
              backend_factory: Callable[[Any], Any] | None = None) -> Any:
    import ray

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # jurybox's own bar counts items
    ctx.verbose_progress = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    rubric_data = rubric.model_dump(mode="json", by_alias=True)
    labels = [p.name if len(files) > 1 else None for p in files]
    ds: Dataset = ray.data.from_items(
        [{"file": str(p), "label": label} for p, label in zip(files, labels)],
        override_num_blocks=len(files))
    ds = ds.flat_map(partial(_read_file, rubric=rubric_data, reading=reading, done=done,
                             allowed=allowed), num_cpus=0.25)
    # Blocks (and batches) no larger than a judge's batch, so verdicts stream out, and are
    # written, as the judges finish batches, not once a whole file is judged.
    step = min(_pool(j)["batch_size"] for j in jury.judges)
    ds = ds.repartition(target_num_rows_per_block=step)
    light = {"compute": ray.data.ActorPoolStrategy(size=1), "num_cpus": 0.25, "batch_size": step,
             "batch_format": "pandas"}
    ds = ds.map_batches(_Render, fn_constructor_args=(rubric_data,), **light)
    # One stage per judge; a cascaded jury's judges stage by stage, each stage followed by a
    # gate that settles the items it is confident about (the later judges skip them).
    index = {j.name: k for k, j in enumerate(jury.judges)}
    stages = [s.judges for s in jury.stages] if jury.cascaded else [list(index)]
    for s, names in enumerate(stages):
        for name in names:
            judge = jury.judges[index[name]]
            ds = ds.map_batches(_Judge, fn_constructor_args=(
                rubric_data, judge.model_dump(mode="json"), f"votes_{index[name]}",
                backend_factory), batch_format="pandas", **_pool(judge))
        if s < len(stages) - 1:
            ds = ds.map_batches(_Gate, fn_constructor_args=(
                rubric_data, jury.model_dump(mode="json"), prov, s), **light)
    cal = None if calibration is None else (calibration.map.to_dict(), calibration.identity,
                                            calibration.force)
    return ds.map_batches(_Decide, fn_constructor_args=(rubric_data, jury.model_dump(mode="json"),
                                                        prov, keep_raw, cal), **light)


class _Run:
    """What the driver counts as batches come out of the pipeline."""

    def __init__(self, total: int | None) -> None:
        self.total = total
        self.ids: set[str] = set()
        self.items = 0
        self.errors: list[str] = []
        self.n_errors = self.already = self.judged = self.empty = 0
        self.busy: dict[int, float] = {}
        self.counted: dict[int, int] = {}
        self.interrupted = False

    def take(self, batch: dict[str, Any], n_judges: int) -> list[dict[str, Any]]:
        records = []
        for i in range(len(batch["id"])):
            if batch["error"][i]:
                self._error(str(batch["error"][i]))
                continue
            item_id = str(batch["id"][i])
            if item_id in self.ids:  # the same id in two input files: written once
                self._error(f"duplicate id {item_id!r} (in more than one input file)")
                continue
            self.ids.add(item_id)
            self.items += 1
            if batch["skipped"][i]:
                self.already += 1
                continue
            self.empty += int(batch["empty"][i])
            records.append(json.loads(batch["record"][i]))
            self.judged += 1
            for k in range(n_judges):
                self.busy[k] = self.busy.get(k, 0.0) + float(batch[f"votes_{k}_s"][i])
                self.counted[k] = self.counted.get(k, 0) + 1
        return records

    def _error(self, message: str) -> None:
        self.n_errors += 1
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append(message)

    def throughput(self, k: int) -> float:
        return self.counted.get(k, 0) / self.busy[k] if self.busy.get(k) else 0.0

    def counts(self) -> dict[str, Any]:
        return {"items": self.items, "rejected": self.n_errors,
                "rejected_rows": list(self.errors)}


def _first_ids(predictions: str | Path, rubric: Rubric, limit: int, reading: dict[str, Any]
               ) -> set[str]:
    """The ids of the first ``limit`` valid items (what --limit judges)."""
    ids: set[str] = set()
    for _, row in iter_predictions(predictions, rubric, **reading):
        if not isinstance(row, RowError):
            ids.add(row.id)
            if len(ids) >= limit:
                break
    return ids


def _stage_error(exc: BaseException) -> str:
    text = str(getattr(exc, "cause", None) or exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def _failure(exc: BaseException) -> BaseException:
    """A stage that failed as a whole stops the job with its error (a jurybox error as itself)."""
    from jurybox.judges import JudgeFailed
    from jurybox.rubrics.errors import JuryboxError

    cause = getattr(exc, "cause", None)
    if isinstance(cause, JuryboxError):
        return cause
    if isinstance(exc, JuryboxError):
        return exc
    return JudgeFailed(f"the Ray pipeline failed: {_stage_error(exc)}")
