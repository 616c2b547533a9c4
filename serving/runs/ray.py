"""``jurybox judge --engine ray``: the bulk run as a Ray Data pipeline.

For files that outgrow one machine:

    read (the one row reader, one task per input file; bad rows become error rows)
      -> render (the rubric's prompts per item)
      -> one stage per judge (an actor pool holding the judge's backend, sized from the jury
         file: replicas, GPU share, CPUs; each adds that judge's votes, parsed where it runs);
         for a cascaded jury the judges stage by stage, each stage followed by a gate that
         settles the items it is confident about (later judges skip them: ``judges.cascade``)
      -> decide (verdict records, calibrated when a map is given)
      -> the driver writes them (shards of a directory, or a JSONL file)

A checklist rubric's item stays one row: the render stage expands it into its units (a point
each, or the item under its unit rubric: `jurybox.rubrics.checklist.units`), the judges ask the
units' prompts with the batch's other requests, a gate settles unit by unit, and the decide stage
assembles the item's verdict from its units' (`_Units`), as ``Jury.score`` does; the verdict
cache holds the units.

The stages stream concurrently, so a jury of three judges on three GPU shares keeps all three
busy. Prompts, parsing, aggregation and the record are the judging path of the local engine
(`jurybox.judges.judging`): on the same items with greedy decoding, the same verdicts.

Exactly once: the driver is the only writer, and each shard appears whole (renamed into place)
or not at all. A rerun after a crash, a killed driver or a lost worker reads the ids already
written and judges only the others; an id met twice in one run (the same item in two input
files) is written once and reported as a duplicate row. Why not Ray Data's own checkpointing:
the results must stay readable as one output with its manifest (resume, `agree`, `calibrate`
and the summary read shards like a file) and refuse a changed input or configuration, which
the project's results store already does for the local engine.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import pickle
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from jurybox.judges import JudgeSpec, JurySpec, provenance
from jurybox.judges.backends.base import backend_note
from jurybox.judges.cache import CacheLookup, VerdictCache
from jurybox.judges.cascade import StagePlan
from jurybox.judges.images import materialize_images
from jurybox.rubrics import Item, Rubric, Verdict, Vote, input_hash
from jurybox.rubrics.checklist import UnitGroup, assemble, units
from jurybox.rubrics.errors import last_line
from jurybox.rubrics.images import ImageError, ImagePolicy
from jurybox.serving.runs.predictions import RowError, iter_predictions
from jurybox.serving.runs.results import ResultsDir
from jurybox.serving.runs.run import Run, RunOptions, RunReport, Tally

CACHE_CHUNK = 256  # items the driver looks up in the verdict cache at a time

if TYPE_CHECKING:
    from ray.data import Dataset

    from jurybox.calibration import AppliedCalibration
    from jurybox.judges.backends.protocol import Backend


def _read_file(
    row: dict[str, Any],
    rubric: dict[str, Any],
    reading: dict[str, Any],
    done: set[str],
    allowed: set[str] | None,
    cached: set[str],
    images: ImagePolicy | None = None,
    known: dict[str, bytes] | None = None,
) -> Iterator[dict[str, Any]]:
    """One input file's rows through the one row reader.

    Each row becomes an item to judge, an error row, or a row already written (skipped, but its
    id counts for the summary) or answered from the verdict cache by the driver (judged, but not
    here). With ``images`` (a judge sees them) an item's images are read here, where its file is
    read, and travel on with it by content (an image that cannot be read or is over the limits
    makes its row an error row). ``known``: a checklist item's units the verdict cache holds
    while it holds others not (by item id, pickled per unit: `_Units`), judged no more.
    """
    rubric_def = Rubric.model_validate(rubric)
    label = row["label"]
    for n, got in iter_predictions(Path(row["file"]), rubric_def, **reading):
        if isinstance(got, RowError):
            error = RowError(got.row, got.field, got.message, got.kind, label or got.file)
            yield _row(error=json.dumps(dataclasses.asdict(error)))
        elif allowed is not None and got.id not in allowed:
            continue
        elif got.id in done:
            yield _row(got.id, n, label, skipped=True)
        elif got.id in cached:
            yield _row(got.id, n, label, cached=True, empty=got.empty_answer)
        else:
            loaded = got
            if images is not None and got.images_pending:
                try:
                    loaded = materialize_images(got, images)
                except ImageError as exc:
                    error = RowError(n, exc.field or "images", str(exc), file=label or None)
                    yield _row(error=json.dumps(dataclasses.asdict(error)))
                    continue
            yield _row(
                got.id,
                n,
                label,
                item=got.model_dump_json(),
                input=input_hash(got),
                empty=got.empty_answer,
                key=input_hash(loaded),
                images=pickle.dumps(loaded.loaded_images) if loaded.loaded_images else b"",
                known=(known or {}).get(got.id, b""),
            )


def _row(
    id: str = "",
    row: int = 0,
    file: str | None = None,
    item: str = "",
    input: str = "",
    error: str = "",
    skipped: bool = False,
    cached: bool = False,
    empty: bool = False,
    key: str = "",
    images: bytes = b"",
    known: bytes = b"",
) -> dict[str, Any]:
    # ``input``: the row's hash as read (resume checks it); ``key``: the verdict cache's key,
    # the images' digests in; ``images``: the loaded images, pickled (content, not paths);
    # ``known``: the units' verdicts the cache holds, pickled (None where judged here).
    return {
        "id": id,
        "row": row,
        "file": file or "",
        "item": item,
        "input": input,
        "error": error,
        "skipped": skipped,
        "cached": cached,
        "empty": empty,
        "key": key or input,
        "images": images,
        "known": known,
    }


class _Units:
    """What a row's item is judged as: its units, each judged as any rubric's item.

    An ordinary rubric's item is its own one unit. A checklist rubric's item is its unit group
    (`jurybox.rubrics.checklist.units` of the item alone: a unit per point, or the item under
    ``<name>.all<n>``, or the item itself), each unit decided (and cached) under its unit
    rubric's provenance, and the item's verdict assembled from them after the last stage, as
    ``Jury.score`` does. A row keeps one item; its columns hold a list per unit: the votes
    (pickled), ``settled`` (the verdicts decided so far, pickled; None where still open),
    ``confidence`` (earlier stages' confidences, JSON) and ``unit_keys`` (the units' cache keys).
    """

    def __init__(self, rubric: Rubric, jury: JurySpec, prov: str) -> None:
        self.rubric, self.jury, self.prov = rubric, jury, prov
        self._provs: dict[str, str] = {}

    def of(self, item: Item) -> UnitGroup:
        """The item's units and the rubric they are judged by."""
        if self.rubric.checklist is None:
            return UnitGroup(self.rubric, (item,), ((0, ""),))
        (group,) = units(self.rubric, [item])
        return group

    def provenance(self, unit_rubric: Rubric) -> str:
        """The provenance of a unit rubric's verdicts (checked to fit the jury, once)."""
        if unit_rubric is self.rubric:
            return self.prov
        if unit_rubric.name not in self._provs:
            self.jury.check_rubric(unit_rubric)
            self._provs[unit_rubric.name] = provenance(unit_rubric, self.jury)
        return self._provs[unit_rubric.name]

    def of_row(self, batch: dict[str, list[Any]], i: int) -> tuple[Rubric, list[str], str]:
        """Row ``i``'s unit rubric, its units' ids and their provenance."""
        if self.rubric.checklist is None:
            return self.rubric, [batch["id"][i]], self.prov
        group = self.of(Item.model_validate_json(batch["item"][i]))
        return group.rubric, [u.id for u in group.items], self.provenance(group.rubric)

    def verdict(self, item: Item | None, group: UnitGroup, got: list[Verdict]) -> Verdict:
        """The item's verdict from its units' (an ordinary rubric's: its one unit's)."""
        if self.rubric.checklist is None or item is None:
            return got[0]
        (verdict,) = assemble(self.rubric, [item], [group], [got], self.jury.name, self.prov)
        return verdict


def _settled(batch: dict[str, list[Any]], i: int) -> list[Verdict | None]:
    """Row ``i``'s units' verdicts decided so far (None: open)."""
    return pickle.loads(batch["settled"][i])


def _judged(batch: dict[str, list[Any]]) -> list[int]:
    """The rows still to judge: items with a unit no earlier cascade stage (or cache) settled."""
    left = batch.get("open") or [1] * len(batch["item"])
    return [i for i, (item, n) in enumerate(zip(batch["item"], left)) if item and n]


def _column(jury: JurySpec, judge: JudgeSpec) -> str:
    """The column that carries a judge's votes (pickled, one list per unit of an item)."""
    return f"votes_{[j.name for j in jury.judges].index(judge.name)}"


def _members(plan: StagePlan, k: int) -> dict[str, str]:
    """The judges run by the end of stage ``k``, by name, and their votes' columns."""
    return {j.name: _column(plan.jury, j) for j in plan.members(k)}


def _votes(
    batch: dict[str, list[Any]], i: int, columns: dict[str, str]
) -> list[dict[str, list[Vote]]]:
    """Row ``i``'s votes in ``columns`` (judge name -> column), per unit, by judge name.

    A judge that did not judge the row (every unit settled before its stage) gives none.
    """
    got = {name: pickle.loads(batch[c][i]) for name, c in columns.items() if batch[c][i]}
    n = len(_settled(batch, i))
    return [{name: per_unit[u] for name, per_unit in got.items()} for u in range(n)]


def _lists(batch: Any) -> dict[str, list[Any]]:
    """A pandas batch as plain columns.

    Bytes stay bytes (Arrow binary), never numpy's fixed-width strings, which would cut trailing
    zero bytes off pickles.
    """
    return batch.to_dict("list")


class _Render:
    def __init__(self, rubric: dict[str, Any], jury: dict[str, Any], prov: str) -> None:
        self.rubric = Rubric.model_validate(rubric)
        self.units = _Units(self.rubric, JurySpec.model_validate(jury), prov)

    def __call__(self, batch: Any) -> dict[str, Any]:
        from jurybox.judges.judging import render_requests
        from jurybox.rubrics import Item

        batch = _lists(batch)
        rows = _judged(batch)
        n = len(batch["item"])
        items = [Item.model_validate_json(batch["item"][i]) for i in rows]
        items = [
            it.with_images(pickle.loads(batch["images"][i])) if batch["images"][i] else it
            for i, it in zip(rows, items)
        ]
        batch["images"] = [b""] * n  # (they travel on in the requests)
        blobs, settled, keys, left = [b""] * n, [b""] * n, [""] * n, [0] * n
        confidence = [""] * n  # earlier stages' confidences per unit (JSON)
        # Each row carries its own item's requests, one per unit, rendered by unit rubric (an
        # ordinary rubric's items all at once).
        groups = [self.units.of(it) for it in items]
        by_rubric: dict[str, list[int]] = {}
        for k, group in enumerate(groups):
            by_rubric.setdefault(group.rubric.name, []).append(k)
        for ks in by_rubric.values():
            unit_rubric = groups[ks[0]].rubric
            self.units.provenance(unit_rubric)  # the jury fits it
            made = render_requests(unit_rubric, [u for k in ks for u in groups[k].items]).split()
            for k in ks:
                i, group = rows[k], groups[k]
                own, made = made[: len(group.items)], made[len(group.items) :]
                known = pickle.loads(batch["known"][i]) if batch["known"][i] else None
                known = known or [None] * len(group.items)
                todo = [u for u, v in enumerate(known) if v is None]
                blobs[i] = pickle.dumps(own)
                settled[i] = pickle.dumps(known)
                keys[i] = json.dumps([input_hash(u) for u in group.items])
                confidence[i] = json.dumps([[] for _ in group.items])
                left[i] = len(todo)
        batch["requests"] = blobs  # per unit, pickled
        batch["settled"] = settled
        batch["confidence"] = confidence
        batch["unit_keys"] = keys
        batch["open"] = left
        return batch


class _Settle:
    """The gate after a cascade stage's judges.

    The units the stage settles get their verdict (the later judges skip them); the others go on
    with the stage's confidence noted.
    """

    def __init__(self, rubric: dict[str, Any], jury: dict[str, Any], prov: str, k: int) -> None:
        self.rubric = Rubric.model_validate(rubric)
        self.plan = StagePlan.of(JurySpec.model_validate(jury))
        self.units = _Units(self.rubric, self.plan.jury, prov)
        self.k = k
        self.columns = _members(self.plan, k)

    def __call__(self, batch: Any) -> dict[str, Any]:
        batch = _lists(batch)
        for i in _judged(batch):
            unit_rubric, ids, prov = self.units.of_row(batch, i)
            settled = _settled(batch, i)
            earlier = json.loads(batch["confidence"][i])
            votes = _votes(batch, i, self.columns)
            for u, done in enumerate(settled):
                if done is not None:
                    continue
                verdict, conf = self.plan.settle(
                    unit_rubric, prov, self.k, ids[u], votes[u], earlier[u]
                )
                if verdict is None:
                    earlier[u].append(conf)
                else:
                    settled[u] = verdict
            batch["settled"][i] = pickle.dumps(settled)
            batch["confidence"][i] = json.dumps(earlier)
            batch["open"][i] = sum(v is None for v in settled)
        return batch


class _Judge:
    """One judge's stage.

    Its backend is built once per actor, at its first item (a rerun with nothing left to judge
    loads no model).
    """

    def __init__(
        self,
        spec: dict[str, Any],
        column: str,
        backend_factory: Callable[[Any], Any] | None = None,
        rubric_name: str = "",
    ) -> None:
        from jurybox.judges import JudgeSpec

        self.spec = JudgeSpec.model_validate(spec)
        self.column = column
        self.rubric_name = rubric_name
        self._factory = backend_factory
        self._backend: Backend | None = None
        self._load_s = 0.0  # the load's seconds, until a batch has carried them to the driver

    @property
    def backend(self) -> Any:
        if self._backend is None:
            from jurybox.judges.images import decide_vision
            from jurybox.judges.jury import freeze_loaded_objects, make_backend

            began = time.perf_counter()
            self._backend = (self._factory or make_backend)(decide_vision(self.spec))
            freeze_loaded_objects()
            self._load_s = time.perf_counter() - began
        return self._backend

    def __call__(self, batch: Any) -> dict[str, Any]:
        from jurybox.judges.images import image_notes
        from jurybox.judges.judging import Requests, judge_votes

        batch = _lists(batch)
        rows = _judged(batch)
        votes_out = [b""] * len(batch["item"])
        began = time.perf_counter()
        notes: list[str] = []
        # The rows' open units, asked together where they are asked the same calls (a
        # checklist's all_points items are asked one call per number of points).
        asked: dict[tuple[Any, ...], list[tuple[int, int, Requests]]] = {}
        per_row: dict[int, list[list[Vote]]] = {}
        for i in rows:
            own: list[Requests] = pickle.loads(batch["requests"][i])
            per_row[i] = [[] for _ in own]
            for u, done in enumerate(_settled(batch, i)):
                if done is None:
                    calls = tuple(tuple(c.name for c in call) for call in own[u].calls)
                    asked.setdefault((calls, own[u].orders), []).append((i, u, own[u]))
        for parts in asked.values():
            requests = Requests.join([r for _, _, r in parts])
            notes += image_notes(self.spec, self.rubric_name, requests.requests)
            votes = judge_votes(self.spec, self.backend, requests)
            for (i, u, _), per_unit in zip(parts, votes):
                per_row[i][u] = per_unit
        for i, got in per_row.items():
            votes_out[i] = pickle.dumps(got)
        batch[self.column] = votes_out
        batch[f"{self.column}_s"] = [(time.perf_counter() - began) / max(len(rows), 1)] * len(
            votes_out
        )
        # What the backend says the run should know (the local engine's Jury.notes()), and
        # what judging said of the items' images: one per line.
        said = "\n".join(n for n in [backend_note(self._backend), *dict.fromkeys(notes)] if n)
        batch[f"{self.column}_note"] = [said] * len(votes_out)
        # How long this actor took to load its judge, on the batch that loaded it (the driver
        # says so, as the local engine does).
        batch[f"{self.column}_load"] = [self._load_s] * len(votes_out)
        self._load_s = 0.0
        return batch


class _Decide:
    def __init__(
        self,
        rubric: dict[str, Any],
        jury: dict[str, Any],
        prov: str,
        keep_raw: bool,
        calibration: tuple[Any, ...] | None,
        store: bool,
    ) -> None:
        self.rubric = Rubric.model_validate(rubric)
        self.plan = StagePlan.of(JurySpec.model_validate(jury))
        self.units = _Units(self.rubric, self.plan.jury, prov)
        self.prov, self.keep_raw, self.store = prov, keep_raw, store
        self.columns = _members(self.plan, self.plan.last)
        self.calibration = None
        if calibration is not None:
            from jurybox.calibration import AppliedCalibration

            self.calibration = AppliedCalibration.from_wire(calibration)

    def __call__(self, batch: Any) -> dict[str, Any]:
        batch = _lists(batch)
        records = [""] * len(batch["item"])
        fresh = [""] * len(batch["item"])  # for the driver's verdict cache
        last = self.plan.last
        checklist = self.rubric.checklist is not None
        for i, blob in enumerate(batch["item"]):
            if not blob:
                continue
            item = Item.model_validate_json(blob) if checklist or self.calibration else None
            if item is not None and checklist:
                group = self.units.of(item)
                unit_rubric, ids = group.rubric, [u.id for u in group.items]
                prov = self.units.provenance(unit_rubric)
            else:
                unit_rubric, ids, prov = self.units.of_row(batch, i)
                group = UnitGroup(unit_rubric, (), ())
            settled = _settled(batch, i)
            known = pickle.loads(batch["known"][i]) if batch["known"][i] else [None] * len(ids)
            earlier = json.loads(batch["confidence"][i])
            votes = _votes(batch, i, self.columns) if batch["open"][i] else []
            got: list[Verdict] = []
            for u, done in enumerate(settled):
                if done is None:
                    done, _ = self.plan.settle(
                        unit_rubric, prov, last, ids[u], votes[u], earlier[u]
                    )
                    assert done is not None  # the last stage decides every unit
                got.append(done)
            verdict = self.units.verdict(item, group, got)
            if self.store:
                keys = json.loads(batch["unit_keys"][i])
                fresh[i] = json.dumps(
                    [
                        [prov, keys[u], v.model_dump_json()]
                        for u, v in enumerate(got)
                        if known[u] is None
                    ]
                )
            record = verdict.to_record(self.keep_raw, input=batch["input"][i])
            if self.calibration is not None:
                assert item is not None
                record = self.calibration.apply(record, self.rubric, item)
            records[i] = json.dumps(record, ensure_ascii=False, allow_nan=False)
        # What the driver needs; the prompts and pickled votes stay behind.
        keep = ["id", "row", "file", "input", "key", "error", "skipped", "cached", "empty"] + [
            f"{_column(self.plan.jury, j)}{end}"
            for j in self.plan.jury.judges
            for end in ("_s", "_note", "_load")
        ]
        return {**{k: batch[k] for k in keep}, "record": records, "verdict": fresh}


def _pool(spec: JudgeSpec) -> dict[str, Any]:
    """Actor-pool options for one judge's stage, from its execution settings."""
    import ray

    from jurybox.judges.backends.registry import backend_kind

    options = spec.execution.actor_pool_options()
    options["compute"] = ray.data.ActorPoolStrategy(**options.pop("pool"))
    options["batch_size"] = spec.execution.batch_size if backend_kind(spec.backend).batches else 256
    return options


def judge_with_ray(
    predictions: str | Path,
    rubric: Rubric,
    jury: JurySpec,
    out: str | Path,
    *,
    address: str | None = None,
    backend_factory: Callable[[Any], Any] | None = None,
    cache: VerdictCache | None = None,
    images: ImagePolicy | None = None,
    **options: Unpack[RunOptions],
) -> RunReport:
    """Judge every valid row of ``predictions`` not yet in ``out`` on a Ray cluster.

    The pipeline is the module docstring's.

    Args:
        predictions: The prediction file, a directory of them, or a glob.
        rubric: The rubric to judge with.
        jury: The jury's spec.
        out: The output: a ``.jsonl`` file or a directory of shards.
        address: The Ray cluster's address; default: a local Ray started for the run.
        backend_factory: ``backend_factory(judge_spec)`` replaces the judges' backends
            (benchmarks, tests), as a Jury takes backends passed in.
        cache: A verdict cache: the driver answers the items it holds (they never enter the
            pipeline) and stores the rest.
        images: Where the items' images are read from and their limits (read where the rows are
            read, when a judge sees images; the driver reads them too, for the cache's keys).
        **options: The run's options, `RunOptions`.

    Returns:
        The same report as the local engine, with per-judge throughput in its notes.

    Raises:
        InputError: An item of a checklist rubric has no checklist or too many points (the run
            stops, as the local engine's does).
        JudgeFailed: The Ray pipeline failed as a whole (a jurybox error a stage raised is
            raised as itself).
    """
    import ray

    from jurybox.judges.images import jury_sees_images
    from jurybox.rubrics.rows import count_rows

    jury.check_rubric(rubric)
    prov = provenance(rubric, jury)
    images = (images or ImagePolicy()) if jury_sees_images(jury) else None
    run = Run(predictions, rubric, out, jury=jury, provenance=prov, engine="ray", **options)
    limit, keep_raw, calibration = run.limit, run.keep_raw, run.applied
    started_ray = not ray.is_initialized()
    if started_ray:
        _init_ray(address, jury)
    state = _Driver(total=min(count_rows(predictions) or 0, limit or 10**18) or None)
    judging = False
    try:
        with run.writing(state, describe=last_line) as results:
            allowed = _first_ids(predictions, rubric, limit, run.reading) if limit else None
            done = results.done()
            cached: set[str] = set()
            known: dict[str, bytes] = {}
            if cache is not None:
                cached, known = _answer_from_cache(
                    run, jury, cache, done, allowed, keep_raw, calibration, images
                )
            judging = True
            if run.progress is not None:
                run.progress(0, state.total)  # the bar and its clock start with the run
            if run.notify is not None:
                run.notify(
                    f"Ray Data: {len(jury.judges)} judge stage(s) starting; each actor "
                    "loads its judge at its first batch (said as the batch arrives)"
                )
            for batch in _pipeline(
                run.files,
                rubric,
                jury,
                prov,
                run.reading,
                done,
                allowed,
                cached,
                keep_raw,
                calibration,
                backend_factory,
                store=cache is not None,
                images=images,
                known=known,
            ).iter_batches(batch_size=None):
                records, verdicts = state.take(batch, jury)
                if run.notify is not None:
                    for name, seconds in state.loaded:
                        run.notify(f"judge {name} ready in {seconds:.1f} s (a Ray actor)")
                state.loaded.clear()
                if records:
                    results.append(records)
                    if isinstance(results, ResultsDir):
                        results.flush()  # a shard per batch: progress survives the driver
                if cache is not None:
                    for unit_prov, entries in verdicts.items():
                        cache.put_json(unit_prov, jury.name, entries)
                if run.progress is not None:
                    run.progress(state.already + state.judged, state.total)
    except BaseException as exc:
        if not judging or isinstance(exc, KeyboardInterrupt):
            raise
        raise _failure(exc) from None
    finally:
        if started_ray:
            ray.shutdown()
    throughput = [
        f"judge {j.name}: {state.throughput(k):.2f} judgments/s per actor"
        for k, j in enumerate(jury.judges)
        if state.busy.get(k, 0.0) > 0
    ]
    return run.finish(
        state,
        [*throughput, *state.notes],
        cache=cache.path if cache is not None else None,
        throughput=throughput,
    )


def _answer_from_cache(
    run: Run,
    jury: JurySpec,
    cache: VerdictCache,
    done: set[str],
    allowed: set[str] | None,
    keep_raw: bool,
    calibration: AppliedCalibration | None,
    images: ImagePolicy | None = None,
) -> tuple[set[str], dict[str, bytes]]:
    """The driver's verdict-cache lookup: the items it answers, written, and their ids.

    One pass over the rows (the reader's, so duplicates are the reader's too): the run's items
    whose verdict the cache holds are written here, and their ids returned, for the read stage to
    mark them answered (they never enter the pipeline). A checklist rubric's items are looked up
    by unit, as ``Jury.score`` does (`_Units`): an item whose every unit is held is answered;
    one with some held comes back by id with them (pickled per unit, None where not held), for
    the pipeline to judge the others only.
    """
    answered: set[str] = set()
    known: dict[str, bytes] = {}
    chunk: list[Item] = []  # images loaded (the digests are the cache's key)
    read: list[Item] = []  # as read (their hash is the record's input)
    the_units = _Units(run.rubric, jury, run.provenance)

    def found_verdicts() -> dict[int, Verdict]:
        if run.rubric.checklist is None:
            return CacheLookup.of(cache, run.provenance, chunk).found
        per_item: list[list[Verdict | None]] = [[] for _ in chunk]
        for group in units(run.rubric, chunk):  # a lookup per unit rubric
            lookup = CacheLookup.of(cache, the_units.provenance(group.rubric), group.items)
            for u, (k, _) in enumerate(group.owner):
                per_item[k].append(lookup.found.get(u))
        whole: dict[int, Verdict] = {}
        for k, got in enumerate(per_item):
            if all(v is not None for v in got):
                item = chunk[k]
                whole[k] = the_units.verdict(item, the_units.of(item), got)  # type: ignore[arg-type]
            elif any(v is not None for v in got):
                known[chunk[k].id] = pickle.dumps(got)
        return whole

    def answer() -> None:
        found = found_verdicts()
        ks = sorted(found)
        records = [found[k].to_record(keep_raw, input=input_hash(read[k])) for k in ks]
        if calibration is not None:
            records = [calibration.apply(r, run.rubric, chunk[k]) for r, k in zip(records, ks)]
        if records:
            run.results.append(records)
            answered.update(r["id"] for r in records)
        chunk.clear()
        read.clear()

    for _, row in iter_predictions(run.predictions, run.rubric, **run.reading):
        if isinstance(row, RowError) or row.id in done:
            continue
        if allowed is not None and row.id not in allowed:
            continue
        loaded = row
        if images is not None and row.images_pending:
            try:
                loaded = materialize_images(row, images)
            except ImageError:
                continue  # the read stage makes it an error row
        chunk.append(loaded)
        read.append(row)
        if len(chunk) >= CACHE_CHUNK:
            answer()
    if chunk:
        answer()
    if answered and isinstance(run.results, ResultsDir):
        run.results.flush()
    return answered, known


def _init_ray(address: str | None, jury: JurySpec) -> None:
    import ray

    if address:
        # Ray annotates logging_level as int but takes a level name (its own default is "info").
        ray.init(
            address=address,
            logging_level="WARNING",  # type: ignore[arg-type]
            log_to_driver=False,
        )
        return
    # A local Ray: logical CPUs enough for every judge's actors and the light stages.
    ray.init(
        num_cpus=jury.ray_cpus(light=4),
        include_dashboard=False,
        logging_level="WARNING",  # type: ignore[arg-type]  # a name
        log_to_driver=False,
    )


def _pipeline(
    files: list[Path],
    rubric: Rubric,
    jury: JurySpec,
    prov: str,
    reading: dict[str, Any],
    done: set[str],
    allowed: set[str] | None,
    cached: set[str],
    keep_raw: bool,
    calibration: AppliedCalibration | None,
    backend_factory: Callable[[Any], Any] | None = None,
    store: bool = False,
    images: ImagePolicy | None = None,
    known: dict[str, bytes] | None = None,
) -> Any:
    import ray

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # jurybox's own bar counts items
    ctx.verbose_progress = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    rubric_data = rubric.model_dump(mode="json", by_alias=True)
    labels = [p.name if len(files) > 1 else None for p in files]
    ds: Dataset = ray.data.from_items(
        [{"file": str(p), "label": label} for p, label in zip(files, labels)],
        override_num_blocks=len(files),
    )
    ds = ds.flat_map(
        partial(
            _read_file,
            rubric=rubric_data,
            reading=reading,
            done=done,
            allowed=allowed,
            cached=cached,
            images=images,
            known=known,
        ),
        num_cpus=0.25,
    )
    # Blocks (and batches) no larger than a judge's batch, so verdicts stream out, and are
    # written, as the judges finish batches, not once a whole file is judged.
    step = min(_pool(j)["batch_size"] for j in jury.judges)
    ds = ds.repartition(target_num_rows_per_block=step)
    light = {
        "compute": ray.data.ActorPoolStrategy(size=1),
        "num_cpus": 0.25,
        "batch_size": step,
        "batch_format": "pandas",
    }
    jury_data = jury.model_dump(mode="json")
    ds = ds.map_batches(_Render, fn_constructor_args=(rubric_data, jury_data, prov), **light)
    # One stage per judge; a cascaded jury's judges stage by stage, each stage followed by a
    # gate that settles the items it is confident about (the later judges skip them).
    plan = StagePlan.of(jury)
    for s, judges in enumerate(plan.stages):
        for judge in judges:
            ds = ds.map_batches(
                _Judge,
                fn_constructor_args=(
                    judge.model_dump(mode="json"),
                    _column(jury, judge),
                    backend_factory,
                    rubric.name,
                ),
                batch_format="pandas",
                **_pool(judge),
            )
        if s < plan.last:
            ds = ds.map_batches(
                _Settle,
                fn_constructor_args=(rubric_data, jury.model_dump(mode="json"), prov, s),
                **light,
            )
    cal = None if calibration is None else calibration.to_wire()
    return ds.map_batches(
        _Decide,
        fn_constructor_args=(rubric_data, jury.model_dump(mode="json"), prov, keep_raw, cal, store),
        **light,
    )


class _Driver(Tally):
    """What the driver counts as batches come out of the pipeline.

    Each judge's busy time too, for its throughput.
    """

    def __init__(self, total: int | None) -> None:
        self.ids: set[str] = set()
        super().__init__(self.ids, count_rows=False)
        self.total = total
        self.busy: dict[int, float] = {}
        self.counted: dict[int, int] = {}
        self.notes: dict[str, None] = {}  # the judges' backends' notes, in order, once each
        self.loaded: dict[tuple[str, float], None] = {}  # (judge, seconds) an actor loaded it in

    def take(
        self, batch: dict[str, Any], jury: JurySpec
    ) -> tuple[list[dict[str, Any]], dict[str, list[tuple[str, str]]]]:
        """The records to write and the fresh verdicts of one batch.

        The verdicts are by provenance, each as (input hash, verdict JSON): an item's, or a
        checklist item's units' under their unit rubrics'.
        """
        records: list[dict[str, Any]] = []
        verdicts: dict[str, list[tuple[str, str]]] = {}
        columns = [_column(jury, judge) for judge in jury.judges]
        for i in range(len(batch["id"])):
            if batch["error"][i]:
                self.error(RowError(**json.loads(batch["error"][i])))
                continue
            item_id = str(batch["id"][i])
            if item_id in self.ids:  # the same id in two input files: written once
                self.error(
                    RowError(
                        int(batch["row"][i]),
                        "id",
                        f"duplicate id {item_id!r} (in more than one input file)",
                        file=batch["file"][i] or None,
                    )
                )
                continue
            self.ids.add(item_id)
            self.items += 1
            if batch["skipped"][i]:
                self.already += 1
                continue
            self.empty += int(batch["empty"][i])
            self.judged += 1
            if batch["cached"][i]:  # written by the driver from the verdict cache
                self.cached += 1
                continue
            records.append(json.loads(batch["record"][i]))
            for prov, key, verdict in json.loads(batch["verdict"][i] or "[]"):
                verdicts.setdefault(prov, []).append((key, verdict))
            for k, column in enumerate(columns):
                self.busy[k] = self.busy.get(k, 0.0) + float(batch[f"{column}_s"][i])
                self.counted[k] = self.counted.get(k, 0) + 1
                for note in filter(None, batch[f"{column}_note"][i].split("\n")):
                    self.notes[note] = None
                if load := float(batch[f"{column}_load"][i]):
                    self.loaded[(jury.judges[k].name, load)] = None
        return records, verdicts

    def throughput(self, k: int) -> float:
        return self.counted.get(k, 0) / self.busy[k] if self.busy.get(k) else 0.0


def _first_ids(
    predictions: str | Path, rubric: Rubric, limit: int, reading: dict[str, Any]
) -> set[str]:
    """The ids of the first ``limit`` valid items (what --limit judges)."""
    ids: set[str] = set()
    for _, row in iter_predictions(predictions, rubric, **reading):
        if not isinstance(row, RowError):
            ids.add(row.id)
            if len(ids) >= limit:
                break
    return ids


def _failure(exc: BaseException) -> BaseException:
    """A stage that failed as a whole stops the job with its error (a jurybox error as itself)."""
    from jurybox.judges import JudgeFailed
    from jurybox.rubrics.errors import JuryboxError

    cause = getattr(exc, "cause", None)
    if isinstance(cause, JuryboxError):
        return cause
    if isinstance(exc, JuryboxError):
        return exc
    return JudgeFailed(f"the Ray pipeline failed: {last_line(exc)}")
