"""The jury: its judges' backends, loaded once, and ``score``, the judging path run in-process.

The judging path is `jurybox.judges.judging`'s.

The CLI, the HTTP service and Ray Data call the same pieces; they only move items in and
verdicts out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Protocol

from jurybox.rubrics import Item, Rubric, Verdict, input_hash
from jurybox.rubrics.checklist import UnitGroup, assemble, units
from jurybox.rubrics.images import Image, ImagePolicy

from .backends.base import backend_note
from .backends.protocol import Backend
from .backends.registry import backend_kind, make_backend
from .cache import CacheLookup, VerdictCache
from .cascade import Steps
from .images import decide_vision, image_notes
from .judging import judge_votes, render_requests
from .spec import JudgeSpec, JurySpec, load_jury_spec, provenance


def freeze_loaded_objects() -> None:
    """Move everything alive now out of the cyclic garbage collector's view.

    Everything alive now is the models, tokenizers and compiled grammars; vLLM's server does the
    same after loading: the collector's passes over millions of long-lived objects otherwise cost
    ~100 us per judgment (perf/RESULTS.md, machinery).

    At exit they are handed back (``gc.unfreeze``): frozen objects are never collected, so
    extension modules would see their objects outlive the interpreter (triton's nanobind
    bindings, imported by torch, then print dozens of "nanobind: leaked ..." lines).
    """
    import atexit
    import gc

    gc.collect()
    gc.freeze()
    atexit.unregister(gc.unfreeze)  # once, however often a process loads models
    atexit.register(gc.unfreeze)


def _per_item(
    on_judge_done: Callable[[str, int], None] | None, group: UnitGroup
) -> Callable[[str, int], None] | None:
    """``on_judge_done`` counting a unit group's items, not its units (whole items, in step)."""
    if on_judge_done is None or not group.items:
        return on_judge_done
    n_items = len({i for i, _ in group.owner})
    done: dict[str, tuple[int, int]] = {}  # judge -> (units done, items told)

    def told(name: str, n: int) -> None:
        units_done, items_told = done.get(name, (0, 0))
        units_done += n
        now = units_done * n_items // len(group.items)
        done[name] = (units_done, now)
        if now > items_told:
            on_judge_done(name, now - items_told)

    return told


def loads_side_by_side(spec: JudgeSpec) -> bool:
    """Whether the judge's model may load while other judges' do: its backend's entry says.

    Only a vLLM engine may, and not always (`jurybox.judges.backends.vllm.loads_side_by_side`);
    other backends load in this process, where loading side by side gains nothing on a CPU and
    transformers' first imports are not thread-safe.
    """
    return backend_kind(spec.backend).loads_side_by_side(spec)


class JuryLike(Protocol):
    """What a bulk run needs of a jury.

    `Jury` judges here; the scoring service's client
    (``jurybox.serving.service.client.RemoteJury``) judges through a running service, whose
    records arrive made (and calibrated by its maps).
    """

    spec: JurySpec
    cache: VerdictCache | None
    cache_hits: int

    @property
    def default_chunk_size(self) -> int:
        """How many items to judge at a time."""
        ...

    def provenance(self, rubric: Rubric) -> str:
        """The provenance hash its verdicts with ``rubric`` carry."""
        ...

    def records_calibration(self, rubric: Rubric) -> str | None:
        """The calibration map the records it returns already carry (None: uncalibrated)."""
        ...

    def needs_judging(self, rubric: Rubric, items: Sequence[Item]) -> bool:
        """Whether scoring ``items`` would ask a judge (False when all are in the cache)."""
        ...

    def load_backends(self, on_loaded: Callable[[str, float], None] | None = None) -> None:
        """Make the judges ready (load the models; check the service can answer).

        ``on_loaded(what, seconds)`` is called as each is ready.
        """
        ...

    def score_records(
        self,
        rubric: Rubric,
        items: Sequence[Item],
        keep_raw: bool = False,
        on_progress: Callable[[float], None] | None = None,
    ) -> list[dict[str, Any]]:
        """One verdict record per item, in order, with its input hash.

        ``on_progress(done)`` is called as the work advances (``done``: items' worth of it so
        far, up to ``len(items)``).
        """
        ...

    def close(self) -> None:
        """Release the judges (and the cache)."""
        ...


class Jury:
    """A loaded jury: its spec, its judges' backends and its verdict cache.

    Backends (the models) load on first use and stay loaded; with a ``cache``
    (`VerdictCache`), items judged before with the same configuration are answered from it.

    Example (after ``jurybox models fetch --jury tiny``):

    ```python
    from jurybox.judges import Jury
    from jurybox.rubrics import Item, load_rubric

    item = Item(id="q1", question="What causes brown rings on tomato leaves?",
                response="Early blight, a fungal disease.",
                reference="Early blight (Alternaria); remove infected leaves.")
    with Jury.load("tiny") as jury:  # closed (models released) at the end of the block
        (verdict,) = jury.score(load_rubric("general"), [item])
    verdict.status, verdict.scores  # "scored" or "unscored", a score per criterion
    ```

    Args:
        spec: The jury: its judges, aggregation and any cascade stages.
        backends: Backends already made, by judge name (the others are made on first use).
        cache: Verdicts judged before, answered from instead of judging again.
        images: Where the items' images are read from, and their limits (default:
            `ImagePolicy`'s).
    """

    def __init__(
        self,
        spec: JurySpec,
        backends: dict[str, Backend] | None = None,
        cache: VerdictCache | None = None,
        images: ImagePolicy | None = None,
    ) -> None:
        self.spec = spec
        self._backends: dict[str, Backend] = dict(backends or {})
        self.cache = cache
        self.cache_hits = 0
        # Where the items' images are read from and their limits (for judges that see them).
        self.images = images or ImagePolicy()
        self._notes: dict[str, None] = {}  # what a run should know, once each, in order
        self._loaded: dict[tuple[str, tuple[str, ...]], tuple[Image, ...]] = {}  # a few items'

    @classmethod
    def load(
        cls,
        name_or_path: str | Path,
        cache: VerdictCache | None = None,
        images: ImagePolicy | None = None,
    ) -> Jury:
        """A shipped jury by name, or a jury file; its judges' models load on first use.

        Args:
            name_or_path: A shipped jury's name (``tiny``, ``mirage``, ...) or a jury file's path.
            cache: Verdicts judged before, answered from instead of judging again.
            images: Where the items' images are read from, and their limits.

        Returns:
            The jury, no model loaded yet.

        Raises:
            DefinitionError: No such jury, or its file cannot be used (every problem named).
        """
        return cls(load_jury_spec(name_or_path), cache=cache, images=images)

    def with_images(self, items: Sequence[Item]) -> list[Item]:
        """``items`` holding their loaded images where a judge of the jury sees images.

        Otherwise the items are returned as they are: no image is read, and a run says once that
        none is shown. The images of the last items are kept, so that asking whether a chunk
        needs judging and judging it read them once.

        Args:
            items: The items, their images not yet read.

        Returns:
            The items, in order, with their images loaded where a judge sees them.

        Raises:
            ImageError: An image cannot be shown to a judge (missing, unreadable, not an image,
                of a format not taken, or over a limit).
        """
        from .images import jury_sees_images, materialize_images

        if not any(it.images_pending for it in items):
            return list(items)
        if not jury_sees_images(self.spec):
            self._notes[
                f"no judge of jury {self.spec.name} sees images (vision): the items' "
                "images were not read or shown; they were judged on their text"
            ] = None
            return list(items)
        out = []
        for it in items:
            key = (it.id, tuple(it.images))
            known = self._loaded.get(key)
            if known is None:
                it = materialize_images(it, self.images)
                if len(self._loaded) >= 4096:
                    self._loaded.clear()
                self._loaded[key] = it.loaded_images
            elif it.images_pending:
                it = it.with_images(known)
            out.append(it)
        return out

    @property
    def default_chunk_size(self) -> int:
        """How many items to judge at a time: the jury spec's ``default_chunk_size``."""
        return self.spec.default_chunk_size

    def backend(self, judge: JudgeSpec) -> Backend:
        """The judge's backend, made (its model loaded) on first use.

        Args:
            judge: One of the jury's judges.

        Returns:
            Its backend.

        Raises:
            InputError: The judge's backend is unknown, or cannot run as specified
                (`JudgeConfigError`).
        """
        if judge.name not in self._backends:
            self._backends[judge.name] = make_backend(decide_vision(judge))
        return self._backends[judge.name]

    def load_backends(self, on_loaded: Callable[[str, float], None] | None = None) -> None:
        """Load every judge's model now (a run loads them before its first chunk).

        vLLM engines load side by side where they may (`loads_side_by_side`), the others one
        after another. Where one fails, the others still load (and are closed with the jury) and
        its error is raised.

        Args:
            on_loaded: Called as ``on_loaded("judge NAME", seconds)`` as each is ready.

        Raises:
            InputError: A judge cannot run as specified (`JudgeConfigError`: e.g. its backend
                is not installed).
        """
        pending = [j for j in self.spec.judges if j.name not in self._backends]
        together = [j for j in pending if loads_side_by_side(j)]
        if len(together) < 2:  # one engine has nothing to load beside
            together = []
        alone = [j for j in pending if j not in together]

        def load(judge: JudgeSpec) -> tuple[Backend, float]:
            began = time.perf_counter()
            return make_backend(decide_vision(judge)), time.perf_counter() - began

        def loaded(judge: JudgeSpec, backend: Backend, seconds: float) -> None:
            self._backends[judge.name] = backend
            if on_loaded is not None:
                on_loaded(f"judge {judge.name}", seconds)

        errors: list[BaseException] = []
        if together:
            # vLLM (and the transformers it loads) imported here first: a module's first
            # import from two threads at once can see it half made.
            from .backends.vllm import import_engine

            import_engine()
            with ThreadPoolExecutor(max_workers=len(together)) as pool:
                futures = {pool.submit(load, judge): judge for judge in together}
                for future in as_completed(futures):
                    try:
                        loaded(futures[future], *future.result())
                    except BaseException as exc:  # the others finish loading: close() frees them
                        errors.append(exc)
        if errors:
            raise errors[0]
        for judge in alone:
            loaded(judge, *load(judge))
        freeze_loaded_objects()

    def provenance(self, rubric: Rubric) -> str:
        """The provenance hash of this jury with ``rubric`` (checked to fit together).

        Args:
            rubric: The rubric to judge with.

        Returns:
            The hash its verdicts carry (`provenance`).

        Raises:
            InputError: The jury's settings do not fit the rubric (`JurySpec.check_rubric`).
        """
        self.spec.check_rubric(rubric)
        return provenance(rubric, self.spec)

    def records_calibration(self, rubric: Rubric) -> str | None:
        """Always None: records made here carry no calibration.

        Args:
            rubric: The rubric judged with (unused).

        Returns:
            None.
        """
        return None  # records made here are calibrated by the run, if at all

    def needs_judging(self, rubric: Rubric, items: Sequence[Item]) -> bool:
        """Whether scoring ``items`` would ask a judge.

        Args:
            rubric: The rubric to judge with.
            items: The items to judge.

        Returns:
            True when some item is not in the cache (any item at all, without a cache).

        Raises:
            InputError: The jury's settings do not fit the rubric.
            ImageError: An item's image cannot be shown to a judge that sees images.
        """
        if self.cache is None:
            return bool(items)
        items = self.with_images(items)
        if rubric.checklist is not None:  # its units are what the cache holds
            self.spec.check_rubric(rubric)
            return any(self.needs_judging(g.rubric, g.items) for g in units(rubric, items))
        found = self.cache.contains(self.provenance(rubric), [input_hash(it) for it in items])
        return len(found) < len(items)  # (a membership test: score reads the verdicts)

    def score_records(
        self,
        rubric: Rubric,
        items: Sequence[Item],
        keep_raw: bool = False,
        on_progress: Callable[[float], None] | None = None,
    ) -> list[dict[str, Any]]:
        """`score` as verdict records (what a results file holds), with input hashes.

        Args:
            rubric: The rubric to judge with.
            items: The items to judge.
            keep_raw: Keep each vote's raw output in the records.
            on_progress: Called as ``on_progress(done)`` after each judge's part: each judge's
                votes on an item count as a 1/J share of it (J judges).

        Returns:
            One verdict record per item, in order, with its input hash.

        Raises:
            InputError: The jury's settings do not fit the rubric, or a judge's backend cannot
                run as specified.
            MissingInputs: Some item lacks a field the rubric needs.
            ImageError: An item's image cannot be shown to a judge that sees images.
            JudgeFailed: A judge failed as a whole (nothing of the batch is recorded).
        """
        on_judge_done = None
        if on_progress is not None:
            share, done = 1.0 / len(self.spec.judges), [0.0]

            def on_judge_done(name: str, n: int) -> None:
                done[0] = min(len(items), done[0] + n * share)
                on_progress(done[0])

        return [
            v.to_record(keep_raw, input=input_hash(it))
            for v, it in zip(self.score(rubric, items, on_judge_done), items)
        ]

    def score(
        self,
        rubric: Rubric,
        items: Sequence[Item],
        on_judge_done: Callable[[str, int], None] | None = None,
    ) -> list[Verdict]:
        """Judge ``items`` and return one verdict per item, in order.

        Every judge judges every item, or, for a cascaded jury, each stage's judges judge the
        items earlier stages left open (a judge no item reaches never loads). With a cache, items
        judged before with the same configuration get their cached verdict and are not judged
        again. Items' images are read (once, checked) when a judge sees images: `with_images`.

        Args:
            rubric: The rubric to judge with.
            items: The items to judge.
            on_judge_done: Called as ``on_judge_done(judge, n)`` once a judge has voted on ``n``
                items.

        Returns:
            One verdict per item, in order.

        Raises:
            InputError: The jury's settings do not fit the rubric, or a judge's backend cannot
                run as specified.
            MissingInputs: Some item lacks a field the rubric needs.
            ImageError: An item's image cannot be shown to a judge that sees images.
            JudgeFailed: A judge failed as a whole (nothing of the batch is recorded).
        """
        prov = self.provenance(rubric)
        items = self.with_images(items)
        if rubric.checklist is not None:
            return self._score_checklist(rubric, prov, items, on_judge_done)
        return self._score(rubric, prov, items, on_judge_done)

    def _score(
        self,
        rubric: Rubric,
        prov: str,
        items: Sequence[Item],
        on_judge_done: Callable[[str, int], None] | None,
        missed: list[int] | None = None,
    ) -> list[Verdict]:
        lookup = CacheLookup.of(self.cache, prov, items)
        if missed is None:
            self.cache_hits += len(lookup.found)
        else:  # a checklist's units: the caller counts the items found whole
            missed.extend(lookup.todo)
        fresh = self._judge(rubric, prov, [items[k] for k in lookup.todo], on_judge_done)
        lookup.store(fresh)
        return lookup.merged(fresh)

    def _score_checklist(
        self,
        rubric: Rubric,
        prov: str,
        items: Sequence[Item],
        on_judge_done: Callable[[str, int], None] | None,
    ) -> list[Verdict]:
        """A checklist rubric: its units judged as any rubric's items, then assembled.

        Only the units' verdicts are cached (each under its unit rubric's provenance); the
        items' verdicts are assembled from them (`jurybox.rubrics.checklist`).
        """
        groups = units(rubric, items)
        verdicts = []
        judged: set[int] = set()  # the items with a unit not found in the cache
        for group in groups:
            self.spec.check_rubric(group.rubric)
            missed: list[int] = []
            verdicts.append(
                self._score(
                    group.rubric,
                    prov if group.rubric is rubric else provenance(group.rubric, self.spec),
                    group.items,
                    _per_item(on_judge_done, group),
                    missed,
                )
            )
            judged.update(group.owner[k][0] for k in missed)
        # ``cache_hits`` counts items, as for any rubric: an item whose every unit was cached.
        self.cache_hits += len(items) - len(judged)
        return assemble(rubric, items, groups, verdicts, self.spec.name, prov)

    def _judge(
        self,
        rubric: Rubric,
        prov: str,
        items: Sequence[Item],
        on_judge_done: Callable[[str, int], None] | None,
    ) -> list[Verdict]:
        if not items:
            return []
        steps = Steps(rubric, self.spec, prov, render_requests(rubric, items))
        while (step := steps.next()) is not None:
            judges, requests = step
            votes = []
            for judge in judges:
                self._notes.update(
                    dict.fromkeys(image_notes(judge, rubric.name, requests.requests))
                )
                votes.append(judge_votes(judge, self.backend(judge), requests))
                if on_judge_done is not None:
                    on_judge_done(judge.name, len(requests.item_ids))
            steps.add(votes)
        return steps.verdicts()

    def notes(self) -> list[str]:
        """What a run should know of this jury's judging, once each.

        That is what the loaded backends say (e.g. a tokenizer that cannot split the prompts'
        shared beginning exactly), and what judging said of the items' images (a text-only judge
        not shown them, a rubric with no place for them).

        Returns:
            The notes, in the order they arose.
        """
        return [*(note for b in self._backends.values() if (note := backend_note(b))), *self._notes]

    def close(self) -> None:
        """Close and drop every loaded backend, and close the cache if there is one.

        The backends close side by side: a vLLM engine's processes take seconds to exit.
        """
        backends = list(self._backends.values())
        self._backends.clear()
        with ThreadPoolExecutor(max_workers=max(1, len(backends))) as pool:
            for done in [pool.submit(backend.close) for backend in backends]:
                done.result()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> Jury:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
