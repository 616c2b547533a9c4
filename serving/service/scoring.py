"""The scoring service without HTTP.

A request's rubric and items admitted, looked up in the verdict cache, the rest sent to every judge
deployment at once (a jury's latency is its slowest judge, not the sum) and decided: the judging
path of ``jurybox judge``, with the service only moving items in and verdicts out. Around it: a
bounded queue (`Gate`: 429 with Retry-After when full), a per-request deadline (504) that cancels
the judges' work too, health, Prometheus metrics and a graceful drain, each shared with the other
ingress replicas (`jurybox.serving.service.shared`). The HTTP routes are
`jurybox.serving.service.ingress`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import json
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from jurybox.judges import provenance
from jurybox.judges.cache import CacheBusy, CacheLookup, VerdictCache
from jurybox.judges.cascade import Steps
from jurybox.judges.images import jury_sees_images
from jurybox.judges.judging import Requests
from jurybox.judges.parsing import reason_code
from jurybox.rubrics import Rubric, Verdict, input_hash
from jurybox.rubrics.errors import InputError, last_line
from jurybox.rubrics.reward import RewardSpec, Unscored
from jurybox.serving.problems import HTTPProblem
from jurybox.serving.service import openrlhf
from jurybox.serving.service.admission import (
    Clients,
    Prepared,
    Workers,
    check_inline,
    inline_rubric,
    prepare,
)
from jurybox.serving.service.config import ResolvedConfig
from jurybox.serving.service.openrlhf import Filter, OpenRLHFRequest, Options
from jurybox.serving.service.pace import SHARE, Pace, check_pace, slices
from jurybox.serving.service.protocol import (
    GroupRequest,
    Health,
    JudgeInfo,
    JuryInfo,
    ProvenanceRequest,
    ProvenanceResponse,
    RubricList,
    RubricSummary,
    ScoreItem,
    ScoreRequest,
)

logger = logging.getLogger("jurybox.serving")

# What a 503 for a judge that could not answer tells the client to wait (Serve restarts a dead
# replica; a tiny model reloads in seconds, a large one in about a minute).
RETRY_AFTER_UNAVAILABLE_S = 10
# The longest a request waits for the verdict cache (another process writing or vacuuming the
# file) before it judges, or answers, without it.
CACHE_BUSY_S = 2.0
# How long one answer of /healthz and /metrics (open routes) serves every caller.
HEALTH_CACHE_S = 1.0


class Metrics:
    """Prometheus metrics of one ingress replica (/metrics serves every replica's, summed)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter(
            "jurybox_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "jurybox_request_seconds",
            "Request latency in seconds",
            ["route"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
        )
        self.votes = Counter(
            "jurybox_votes", "Votes returned, by judge", ["judge"], registry=self.registry
        )
        self.unscored = Counter(
            "jurybox_unscored_votes",
            "Unscored votes by judge and reason (a code of jurybox.judges.parsing.REASON_CODES)",
            ["judge", "reason"],
            registry=self.registry,
        )
        self.queue = Gauge(
            "jurybox_queue_depth", "Score requests waiting or being scored", registry=self.registry
        )
        self.judge_calls = Counter(
            "jurybox_judge_requests",
            "Requests sent to a judge deployment (each with the prompts of a request's open items)",
            ["judge"],
            registry=self.registry,
        )
        self.cache = Counter(
            "jurybox_verdict_cache",
            "Items looked up in the verdict cache, "
            "by result (hit: answered from it; miss: judged; skipped: judged "
            "or not stored, the cache being locked by another process)",
            ["result"],
            registry=self.registry,
        )

    def observe(self, path: str, status: int, seconds: float) -> None:
        """Count one answered request by route and status and record its latency.

        A path that is not one of the fixed routes (``/v1/rubrics/{name}`` included) counts as
        ``other``, one of OpenRLHF's rewards as ``/v1/openrlhf/{rubric}``.
        """
        if path in (
            "/v1/score",
            "/v1/groups",
            "/v1/provenance",
            "/healthz",
            "/metrics",
            "/v1/jury",
            "/v1/rubrics",
        ):
            route = path
        elif path.startswith("/v1/openrlhf/"):
            route = "/v1/openrlhf/{rubric}"
        else:
            route = "other"
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def count_votes(self, records: list[dict[str, Any]]) -> None:
        """Count the votes of verdict records by judge, the unscored ones by judge and reason.

        By reason code, a closed set: a reason's text can carry an item's.
        """
        from jurybox.judges.parsing import reason_code

        votes: collections.Counter[str] = collections.Counter()
        unscored: collections.Counter[tuple[str, str]] = collections.Counter()
        for record in records:
            for vote in record["votes"]:
                votes[vote["judge"]] += 1
                if vote["score"] is None:
                    unscored[vote["judge"], reason_code(vote["error"] or "")] += 1
        for judge, n in votes.items():  # one metric update per label, not per vote
            self.votes.labels(judge).inc(n)
        for (judge, kind), n in unscored.items():
            self.unscored.labels(judge, kind).inc(n)

    def text(self) -> bytes:
        """Every metric in Prometheus's text exposition format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class Gate:
    """At most ``concurrent`` batches judged at once and ``queued`` requests waiting for a slot.

    A request beyond that is told to come back (429 with Retry-After) instead of waiting without
    bound. The requests that wait together are judged together (`_Batch`).
    """

    def __init__(self, concurrent: int, queued: int, gauge: Any) -> None:
        self.slots = asyncio.Semaphore(concurrent)
        self.concurrent, self.queued = concurrent, queued
        self.waiting = self.active = 0
        self.seconds = 1.0  # moving average of a batch's judging time, for Retry-After
        self.gauge = gauge
        self.pace = Pace()  # how fast the judges answer

    def retry_after(self) -> int:
        """Seconds a refused request is told to wait.

        The average judging time of a batch, rounded up, between 1 and 60 (the requests waiting now
        are judged in the next batches, together).
        """
        batches = 1 + self.waiting // max(1, self.queued)
        return int(min(60, max(1, math.ceil(self.seconds * batches))))

    def admit(self, admitted: bool = False) -> None:
        """Count one more request waiting; 429 when every slot is busy and the queue full.

        ``admitted``: a later slice of a request admitted already, counted but never refused
        (a 429 halfway would throw away the slices judged).
        """
        if self.waiting >= self.queued and not admitted:
            raise HTTPProblem(
                429,
                "overloaded",
                f"the service is busy ({self.active} batches "
                f"judging, {self.waiting} requests waiting); retry later",
                headers={"Retry-After": str(self.retry_after())},
            )
        self.waiting += 1
        self._show()

    def left(self, n: int = 1) -> None:
        """``n`` requests stop waiting (judged now, or gone)."""
        self.waiting -= n
        self._show()

    @contextlib.asynccontextmanager
    async def slot(self, held: bool = False) -> AsyncIterator[None]:
        """One batch judging, once a slot is free (``held``: taken already)."""
        if not held:
            await self.slots.acquire()
        self.active += 1
        self._show()
        began = time.perf_counter()
        try:
            yield
        finally:
            self.active -= 1
            self.slots.release()
            self._show()
            self.seconds = 0.8 * self.seconds + 0.2 * (time.perf_counter() - began)

    def _show(self) -> None:
        self.gauge.set(self.waiting + self.active)


class _Part:
    """One request's share of a batch: its requests to judge, deadline and answer."""

    def __init__(self, requests: Requests, deadline: float) -> None:
        self.requests, self.deadline = requests, deadline
        self.answer: asyncio.Future[list[Verdict]] = asyncio.get_running_loop().create_future()
        self.waiting = True  # counted as waiting at the gate


class _Batch:
    """Requests of one rubric and jury (one provenance) that waited for a slot together.

    They are judged in one walk through the jury's steps: one call per judge for all of them instead
    of one each (a trainer's one-sample requests arrive by the dozen).
    """

    def __init__(self, rubric: Rubric, prov: str) -> None:
        self.rubric, self.prov = rubric, prov
        self.parts: list[_Part] = []
        self.calls = 0  # judge calls per judge so far
        self.started = False
        self.task: asyncio.Future[None] | None = None


class ScoringService:
    """What the scoring service does, without HTTP.

    Each route of the ingress (`jurybox.serving.service.ingress.build_app`) calls one method and
    only turns its answer into a response. Errors are `HTTPProblem`, the one error shape.

    One of ``replicas`` ingress replicas (``rank`` among them, named ``replica``) scores its share
    of ``max_concurrent`` requests at once and queues its share of ``max_queued``; with ``state``
    (the handle of the replicas' `IngressState`) its metrics and drain are the whole service's, else
    its own.
    """

    def __init__(
        self,
        plan: dict[str, Any],
        judges: dict[str, Any],
        *,
        replicas: int = 1,
        rank: int = 0,
        replica: str = "ingress",
        state: Callable[[], Any] | None = None,
    ) -> None:
        self.plan = ResolvedConfig.model_validate(plan)
        self.jury = self.plan.jury_spec()
        self.rubrics = self.plan.rubric_objects()
        self.limits = self.plan.limits
        self.judges = judges  # judge name -> DeploymentHandle
        self.token = os.environ.get(self.plan.token_env) if self.plan.token_env else None
        if self.plan.token_env and not self.token:
            raise RuntimeError(
                f"the environment variable {self.plan.token_env} holding the "
                "service's token is not set where the ingress runs"
            )
        self.provenances = {name: provenance(r, self.jury) for name, r in self.rubrics.items()}
        # None when a judge sees images; else the jury's name: a request's images are refused.
        self.seen_by = None if jury_sees_images(self.jury) else self.jury.name
        self.calibrations: dict[str, AppliedCalibration] = {}
        from jurybox.calibration import AppliedCalibration, CalibrationMap
        from jurybox.calibration.maps.conformal import ConformalMap

        for entry in self.plan.calibration:
            cmap = CalibrationMap.from_dict(entry["map"], source=entry["identity"])
            self.calibrations[cmap.provenance_] = AppliedCalibration(cmap, entry["identity"])
        for entry in self.plan.conformal:
            conformal = ConformalMap.from_dict(entry["map"], source=entry["identity"])
            prov = str(conformal.provenance)  # one a rubric has (ServiceConfig.resolve)
            self.calibrations[prov] = AppliedCalibration.joined(
                self.calibrations.get(prov), conformal, entry["identity"], self.plan.route_width
            )
        self.metrics = Metrics()
        self.cache = (
            VerdictCache(self.plan.verdict_cache, busy_s=CACHE_BUSY_S)
            if self.plan.verdict_cache is not None
            else None
        )
        # (at least 1: a config file may ask for more replicas than max_concurrent)
        self.gate = Gate(
            max(1, share(self.limits.max_concurrent, replicas, rank)),
            share(self.limits.max_queued, replicas, rank),
            self.metrics.queue,
        )
        self._open: dict[str, _Batch] = {}  # by provenance: the batch requests join
        self._batches: set[asyncio.Task[None]] = set()  # running: the service holds them
        # Inline rubrics are validated and rendered there.
        self.workers = Workers(queued=self.limits.max_render_queued)
        self.clients = Clients(self.limits.max_client_requests)  # open requests per address
        self.in_flight = 0  # score requests being answered
        self.draining = False  # set on shutdown: new score requests get 503
        self.replica, self._state = replica, state
        self._reporter: asyncio.Task[None] | None = None
        self._health = Shared(self._check_health, HEALTH_CACHE_S)
        self._metrics_text = Shared(self._read_metrics, 0.0)  # callers at once share a read

    def __del__(self) -> None:
        workers = self.__dict__.get("workers")
        if workers is not None:
            workers.close()

    # -- the judging path ----------------------------------------------------------------------

    def _named(self, name: str) -> Rubric:
        if name not in self.rubrics:
            raise HTTPProblem(
                422,
                "invalid_request",
                f"unknown rubric {name!r}; this service "
                f"knows {sorted(self.rubrics)} (or send an inline rubric)",
                "rubric",
            )
        return self.rubrics[name]

    async def _rubric(self, ref: str | dict[str, Any]) -> Rubric:
        if isinstance(ref, str):
            return self._named(ref)
        await asyncio.to_thread(check_inline, ref, self.limits)  # before it is pickled
        return await self.workers.run(self.limits.max_render_s, inline_rubric, ref, self.limits)

    async def _prepare(self, request: ScoreRequest, limit_items: bool = True) -> Prepared:
        """The request's rubric, items and prompts (see `jurybox.serving.service.admission`).

        The operator's rubrics in a thread, a client's inline rubric in a worker process; never on
        the event loop, which keeps answering every other route meanwhile. ``limit_items=False``: a
        group request's round, whose items were bounded as the request's completions and judge calls
        (`jurybox.serving.service.groups`).
        """
        limits = self.limits
        if limit_items and len(request.items) > limits.max_items:
            raise HTTPProblem(
                413,
                "too_large",
                f"{len(request.items)} items; this service takes "
                f"at most {limits.max_items} per request (max_items)",
                "items",
            )
        if not request.items:
            raise HTTPProblem(
                422, "invalid_request", "items is empty; send at least one item", "items"
            )
        raw = [item.model_dump(exclude_none=True) for item in request.items]
        if isinstance(request.rubric, str):
            return await asyncio.to_thread(
                prepare, self._named(request.rubric), raw, limits, request.allow_empty, self.seen_by
            )
        # Checked here, before the request is pickled for a worker: a structure too deep for
        # pickle would kill the worker (a 500), and the size bounds cost nothing to check.
        await asyncio.to_thread(check_inline, request.rubric, limits)
        return await self.workers.run(
            limits.max_render_s,
            prepare,
            request.rubric,
            raw,
            limits,
            request.allow_empty,
            self.seen_by,
        )

    def _provenance(self, rubric: Rubric) -> str:
        self.jury.check_rubric(rubric)
        known = self.rubrics.get(rubric.name)
        if known is not None and known == rubric:
            return self.provenances[rubric.name]
        return provenance(rubric, self.jury)

    async def _votes_of(self, judge: str, requests: Any, deadline: float) -> Any:
        """One judge's votes; a replica that dies is asked once more.

        Serve routes the retry to a live or restarted replica. A judge that still cannot answer
        fails the request with a retryable 503, never with votes: as in-process (``JudgeFailed``),
        an infrastructure failure is no verdict, so a client (``judge --url``) writes nothing and a
        rerun retries.
        """
        from ray.exceptions import RayActorError
        from ray.serve.exceptions import BackPressureError

        handle = self.judges[judge]
        reason = "no answer"
        for _ in range(2):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.metrics.judge_calls.labels(judge).inc()
            began = time.monotonic()
            response = handle.votes.remote(requests)
            try:
                votes = await asyncio.wait_for(response, left)
                self.gate.pace.measured(judge, len(requests.requests), time.monotonic() - began)
                return votes
            except (TimeoutError, asyncio.CancelledError) as exc:
                # Past the deadline, or the client left: stop the judge's work too (awaiting
                # no more does not cancel it), so none runs beside the next request's.
                try:
                    response.cancel()
                except Exception:  # its routing failed at this very moment: nothing to stop
                    pass
                if _cancelled_here() or not isinstance(exc, asyncio.CancelledError):
                    raise
                # Cancelled by someone else (Serve, for another request): no answer, asked again.
                reason = "its call was cancelled"
                continue
            except BackPressureError as exc:
                raise HTTPProblem(
                    429,
                    "overloaded",
                    f"judge {judge} is busy; retry later",
                    headers={"Retry-After": str(int(exc.retry_after_s or 5))},
                ) from None
            except RayActorError as exc:
                reason = f"its replica died ({type(exc).__name__})"
                continue
            except Exception as exc:
                reason = _short(exc)
                break
        raise HTTPProblem(
            503,
            "unavailable",
            f"judge {judge} could not answer: {reason}; nothing was scored, retry later",
            headers={"Retry-After": str(RETRY_AFTER_UNAVAILABLE_S)},
        )

    async def _score(
        self, request: ScoreRequest, deadline: float, limit_items: bool = True
    ) -> list[dict[str, Any]]:
        rubric, items, requests = await self._prepare(request, limit_items)
        prov = self._provenance(rubric)
        # Items judged before with this configuration are answered from the verdict cache;
        # only the others go to the judges (none at all when every item is cached).
        lookup = await self._looked_up(prov, items)
        fresh: list[Verdict] = []
        if lookup.todo and limit_items:  # (a group request's rounds: checked as a whole)
            check_pace(self, len(lookup.todo) * len(requests.calls), deadline)
        if lookup.todo:
            fresh = await self._judged(rubric, prov, requests.subset(lookup.todo), deadline)
            await self._stored(lookup, fresh)
        records = await asyncio.to_thread(self._records, rubric, prov, lookup, fresh, items)
        self.metrics.count_votes(records)
        return records

    async def _judged(
        self, rubric: Rubric, prov: str, requests: Requests, deadline: float
    ) -> list[Verdict]:
        """The verdicts of ``requests``, a slice at a time beyond a slice (`pace.slices`).

        At most `pace.SHARE` slices at once, each waiting for a slot as a request does: the other
        requests' batches are judged between them.
        """
        parts = slices(len(requests.item_ids), len(requests.calls), self.limits.max_judge_calls)
        if len(parts) == 1:
            return await self._judged_together(rubric, prov, requests, deadline)
        share = asyncio.Semaphore(SHARE)

        first = asyncio.Event()  # the first slice is past the gate: the request is admitted

        async def part(k: int, items: range) -> list[Verdict]:
            async with share:
                if k:
                    await first.wait()
                subset = requests.subset(list(items))
                return await self._judged_together(
                    rubric, prov, subset, deadline, admitted=k > 0, entered=first
                )

        return [
            v
            for verdicts in await _all([part(k, p) for k, p in enumerate(parts)])
            for v in verdicts
        ]

    async def _judged_together(
        self,
        rubric: Rubric,
        prov: str,
        requests: Requests,
        deadline: float,
        admitted: bool = False,
        entered: asyncio.Event | None = None,
    ) -> list[Verdict]:
        """The verdicts of ``requests``, judged as soon as a slot is free.

        Together with the other requests of the same rubric that wait for one meanwhile (up to
        ``max_judge_calls`` per batch). ``admitted``: a later slice of an admitted request (never
        a 429); ``entered`` is set once this one is past the gate.
        """
        part = _Part(requests, deadline)
        batch = self._open.get(prov)
        calls = len(requests.requests)
        if batch is None and not self.gate.slots.locked():
            # A free slot: judged at once, alone (as if no batching; nothing waits to join).
            await self.gate.slots.acquire()  # (free: returns without waiting)
            part.waiting = False
            batch = _Batch(rubric, prov)
            batch.task = self._detached(self._run_batch(batch, held=True))
            batch.task.add_done_callback(functools.partial(self._unused_slot, batch))
        else:
            self.gate.admit(admitted)
            if batch is None or batch.calls + calls > self.limits.max_judge_calls:
                batch = self._open[prov] = _Batch(rubric, prov)
                batch.task = self._detached(self._run_batch(batch))
        batch.parts.append(part)
        batch.calls += calls
        if entered is not None:
            entered.set()
        try:
            return await asyncio.shield(part.answer)
        except asyncio.CancelledError:  # its client left, or its deadline passed
            part.answer.cancel()
            if part.waiting:
                part.waiting = False
                self.gate.left()
            if batch.task is not None and all(p.answer.done() for p in batch.parts):
                # Nobody waits for it: stop its judges' work too, and let no request join it.
                if self._open.get(prov) is batch:
                    del self._open[prov]
                batch.task.cancel()
            raise

    def _detached(self, run: Any) -> asyncio.Task[None]:
        """``run`` as a task of the service's own, which no request's cancellation reaches.

        In an empty context: a task copies the context of the request that made it, and Ray Serve
        cancels every handle call made in a request's context when that request is cancelled (its
        client left), which would fail every other request merged into the batch. The service
        keeps the task until it ends (the event loop holds tasks only weakly).
        """
        task = asyncio.get_running_loop().create_task(run, context=contextvars.Context())
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)
        return task

    def _unused_slot(self, batch: _Batch, _: object) -> None:
        """A batch cancelled before it began gives back the slot it was given."""
        if not batch.started:
            self.gate.slots.release()

    async def _run_batch(self, batch: _Batch, held: bool = False) -> None:
        try:
            async with self.gate.slot(held):
                if self._open.get(batch.prov) is batch:
                    del self._open[batch.prov]  # the next requests start a batch of their own
                batch.started = True
                waiting = [p for p in batch.parts if p.waiting]
                for p in waiting:
                    p.waiting = False
                self.gate.left(len(waiting))
                live = [p for p in batch.parts if not p.answer.done()]
                if live:
                    await self._answer(batch.rubric, batch.prov, live)
        except BaseException as exc:
            if self._open.get(batch.prov) is batch:
                del self._open[batch.prov]
            for p in batch.parts:
                if p.waiting:
                    p.waiting = False
                    self.gate.left()
                if not p.answer.done():  # a client still waits: an answer, never a cancel
                    p.answer.set_exception(exc if isinstance(exc, Exception) else _stopped())
            if not isinstance(exc, Exception):
                raise

    async def _answer(self, rubric: Rubric, prov: str, parts: list[_Part]) -> None:
        """Judge ``parts`` together and give each its verdicts.

        If the batch fails (a judge cannot take it), each part is judged alone, so that only the
        part at fault fails.
        """
        deadline = max(p.deadline for p in parts)
        joined = Requests.join([p.requests for p in parts]) if len(parts) > 1 else parts[0].requests
        try:
            verdicts = await self._steps(rubric, prov, joined, deadline)
        except Exception as exc:
            if len(parts) == 1:
                raise
            logger.info(
                "a batch of %d requests failed (%s); judging each alone", len(parts), _short(exc)
            )
            for p in parts:
                if p.answer.done():
                    continue
                try:
                    alone = await self._steps(rubric, prov, p.requests, p.deadline)
                except Exception as one:
                    if not p.answer.done():
                        p.answer.set_exception(one)
                else:
                    if not p.answer.done():
                        p.answer.set_result(alone)
            return
        start = 0
        for p in parts:
            n = len(p.requests.item_ids)
            if not p.answer.done():
                p.answer.set_result(verdicts[start : start + n])
            start += n

    async def _steps(
        self, rubric: Rubric, prov: str, requests: Requests, deadline: float
    ) -> list[Verdict]:
        """Every judge of a step at once.

        A cascaded jury's later stages get only the items the earlier ones left open.
        """
        steps = Steps(rubric, self.jury, prov, requests)
        while (step := steps.next()) is not None:
            judges, open_requests = step
            votes = await _all([self._votes_of(j.name, open_requests, deadline) for j in judges])
            # Deciding (aggregation, a client's formula) is CPU work: not on the loop.
            await asyncio.to_thread(steps.add, votes)
        return steps.verdicts()

    def _records(
        self, rubric: Rubric, prov: str, lookup: CacheLookup, fresh: list[Verdict], items: list[Any]
    ) -> list[dict[str, Any]]:
        """The verdict records of a request, calibrated where a map applies (in a thread)."""
        verdicts = lookup.merged(fresh)
        records = [v.to_record(input=input_hash(item)) for v, item in zip(verdicts, items)]
        calibration = self.calibrations.get(prov)
        if calibration is not None:
            records = [calibration.apply(r, rubric, it) for r, it in zip(records, items)]
        return records

    async def _looked_up(self, prov: str, items: list[Any]) -> CacheLookup:
        """The items' cache lookup; every item to judge when the cache is busy.

        Busy: another process holds its lock. A verdict never waits on the cache.
        """
        if self.cache is None:
            return CacheLookup.of(None, prov, items)  # every item to judge
        try:
            lookup = await asyncio.to_thread(CacheLookup.of, self.cache, prov, items)
        except CacheBusy as exc:
            logger.warning("verdict cache skipped for %d item(s): %s", len(items), exc)
            self.metrics.cache.labels("skipped").inc(len(items))
            return CacheLookup.of(None, prov, items)
        self.metrics.cache.labels("hit").inc(len(lookup.found))
        self.metrics.cache.labels("miss").inc(len(lookup.todo))
        return lookup

    async def _stored(self, lookup: CacheLookup, fresh: list[Verdict]) -> None:
        """Store fresh verdicts in the cache, or skip it (saying so) when it is busy."""
        if lookup.cache is None:
            return
        try:
            await asyncio.to_thread(lookup.store, fresh)
        except CacheBusy as exc:
            logger.warning("verdict cache skipped: %d verdict(s) not stored: %s", len(fresh), exc)
            self.metrics.cache.labels("skipped").inc(len(fresh))

    # -- what the routes answer (see build_app) ----------------------------------------------

    async def score(self, request: ScoreRequest) -> list[dict[str, Any]]:
        """POST /v1/score: ``{"verdicts": [...]}``, one record per item.

        Calibrated when a map applies; 504 past ``request_timeout_s``.
        """
        timeout = self.limits.request_timeout_s
        self.in_flight += 1
        try:
            records = await asyncio.wait_for(
                self._score(request, time.monotonic() + timeout), timeout
            )
        except TimeoutError:
            raise HTTPProblem(
                504,
                "timeout",
                f"the request took longer than the service's "
                f"deadline of {self.limits.request_timeout_s:g} s "
                "(request_timeout_s); retry with fewer items",
            ) from None
        finally:
            self.in_flight -= 1
        return records

    async def groups(self, request: GroupRequest) -> list[dict[str, Any]]:
        """POST /v1/groups: ``{"groups": [...]}``, each group's rewards.

        With the comparisons behind them (`jurybox.serving.service.groups`); 504 past
        ``request_timeout_s``.
        """
        from jurybox.serving.service.groups import score_groups

        timeout = self.limits.request_timeout_s
        self.in_flight += 1
        try:
            return await asyncio.wait_for(
                score_groups(self, request, time.monotonic() + timeout), timeout
            )
        except TimeoutError:
            raise HTTPProblem(
                504,
                "timeout",
                f"the request took longer than the service's "
                f"deadline of {timeout:g} s (request_timeout_s); retry with fewer "
                "groups or a design with fewer calls",
            ) from None
        finally:
            self.in_flight -= 1

    async def openrlhf(
        self, rubric: str, request: OpenRLHFRequest, options: Options, request_id: str = ""
    ) -> bytes:
        """POST /v1/openrlhf/{rubric}: OpenRLHF's remote reward model, scored as /v1/score scores.

        See `jurybox.serving.service.openrlhf`. The answer as JSON (a criterion without a value in
        ``extra_logs`` is NaN, which OpenRLHF's JSON reader takes). A refused sample is logged here
        with the request's id: OpenRLHF drops an error's body.
        """
        try:
            reward = openrlhf.reward_options(
                options.score,
                options.scale,
                options.calibrated,
                options.unscored,
                self.plan.openrlhf_unscored,
            )
            return await self._openrlhf(rubric, request, reward, options.scores, request_id or "-")
        except HTTPProblem as exc:
            problem = openrlhf.renamed(exc)
            logger.warning(
                "OpenRLHF request %s refused (%d %s): %s [field %s]",
                request_id or "-",
                problem.status,
                problem.kind,
                problem.message[:500],
                problem.field,
            )
            raise problem from None

    async def _openrlhf(
        self,
        rubric_name: str,
        request: OpenRLHFRequest,
        reward: RewardSpec,
        scores: Filter,
        request_id: str,
    ) -> bytes:
        if reward.unscored == "none":
            raise HTTPProblem(
                422,
                "invalid_request",
                "unscored=none is not possible here: "
                "OpenRLHF needs a number for every sample (give unscored=error "
                "or a value)",
                "unscored",
            )
        rubric = self._named(rubric_name)
        if reward.calibrated and self.provenances[rubric_name] not in self.calibrations:
            raise HTTPProblem(
                422,
                "invalid_request",
                f"calibrated=true, but this service has "
                f"no calibration map for rubric {rubric_name} (start it with "
                "--calibration MAP)",
                "calibrated",
            )
        criteria_policy: Unscored = (
            reward.unscored if isinstance(reward.unscored, float) else "none"
        )
        try:
            bound = reward.bind(rubric)
            criteria = [
                RewardSpec(
                    score=c.name,
                    scale=reward.scale,
                    calibrated=reward.calibrated,
                    unscored=criteria_policy,
                ).bind(rubric)
                for c in rubric.criteria
            ]
        except InputError as exc:
            raise HTTPProblem(422, "invalid_request", str(exc), exc.field) from None
        limits = self.limits
        raw = await asyncio.to_thread(
            openrlhf.items_of, request, limits.max_items, limits.max_field_chars
        )
        if not raw:
            raise HTTPProblem(
                422, "invalid_request", "query is empty; send at least one sample", "query"
            )
        sent, unsent = openrlhf.split_unsent(raw, limits.max_field_chars)
        items = [ScoreItem.model_validate(item) for item in sent]
        records = (
            await self.score(ScoreRequest(rubric=rubric_name, items=items, allow_empty=True))
            if items
            else []
        )
        records = openrlhf.merged(records, unsent, rubric, self.jury.name)
        spans = {c.name: c.scale.high - c.scale.low for c in rubric.criteria}
        given = await asyncio.to_thread(openrlhf.answer, bound, criteria, records, spans, scores)
        for k, record in enumerate(records):
            value, why = bound.raw(record)
            if value is None:
                logger.warning(
                    "OpenRLHF request %s: sample %d unscored (%s), rewarded %s: %s",
                    request_id,
                    k,
                    reason_code(why),
                    reward.unscored,
                    why[:300],
                )
        return json.dumps(given).encode()

    async def drain(self, timeout_s: float) -> int:
        """Make every ingress replica take no new score requests and wait for those in flight.

        New score requests are answered 503 with Retry-After; the wait, at most ``timeout_s``, is
        for those in flight on any replica to finish (``jurybox serve`` calls it on Ctrl-C, before
        it deletes the application).

        Returns:
            How many requests are still in flight.
        """
        self.draining = True
        deadline = time.monotonic() + timeout_s
        if self._state is not None:
            try:
                return await self._drain_all(deadline)
            except Exception as exc:  # no shared state to reach: drain this replica alone
                self.state_lost()
                logger.warning(
                    "drain: the other ingress replicas cannot be told (%s); draining this one",
                    _short(exc),
                )
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return self.in_flight

    async def _drain_all(self, deadline: float) -> int:
        assert self._state is not None
        await self._state().drain.remote()
        while True:
            await self._report()
            status = await self._state().status.remote()
            # Done once every live replica has heard of the drain (so admits no more) and none
            # has a request in flight.
            if (status["all_know"] and not status["in_flight"]) or time.monotonic() >= deadline:
                return int(status["in_flight"])
            await asyncio.sleep(0.1)

    # -- sharing with the other ingress replicas ---------------------------------------------

    def start_reporting(self) -> None:
        """Report to the shared state every ``REPORT_S`` seconds from now on.

        A no-op without a shared state, outside an event loop, or when already reporting.
        """
        if self._state is None or self._reporter is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._reporter = loop.create_task(self._reporting())

    def state_lost(self) -> None:
        """A call to the shared state failed (a subclass holding its handle looks it up again)."""

    async def _reporting(self) -> None:
        from jurybox.serving.service.shared import REPORT_S

        while True:
            try:
                await self._report()
            except Exception as exc:  # the state restarting: the next report rebuilds it
                self.state_lost()
                logger.debug("report to the shared ingress state failed: %s", _short(exc))
            await asyncio.sleep(REPORT_S)

    async def _report(self) -> None:
        """This replica's metrics and requests in flight to the shared state.

        Learns from it whether to drain.
        """
        from jurybox.serving.service.shared import snapshot

        assert self._state is not None
        if await self._state().report.remote(
            self.replica, os.getpid(), snapshot(self.metrics.registry), self.in_flight
        ):
            self.draining = True

    async def provenance_of(self, request: ProvenanceRequest) -> ProvenanceResponse:
        """POST /v1/provenance: the provenance hash of the rubric (named or inline) with this jury.

        And the calibration map applied to its verdicts, if any.
        """
        rubric = await self._rubric(request.rubric)
        prov = self._provenance(rubric)
        calibration = self.calibrations.get(prov)
        return ProvenanceResponse(
            rubric=rubric.name,
            provenance=prov,
            calibration=calibration.identity if calibration else None,
        )

    async def list_rubrics(self) -> RubricList:
        """GET /v1/rubrics: a summary of each rubric the service knows, by name."""
        return RubricList(
            rubrics=[
                RubricSummary(
                    name=n,
                    description=r.description,
                    inputs=r.inputs,
                    criteria=r.criterion_names,
                    formula=r.formula.name if r.formula else None,
                )
                for n, r in sorted(self.rubrics.items())
            ]
        )

    async def get_rubric(self, name: str) -> dict[str, Any]:
        """GET /v1/rubrics/{name}: the rubric in full; 404 for a name the service does not know."""
        if name not in self.rubrics:
            raise HTTPProblem(
                404,
                "not_found",
                f"unknown rubric {name!r}; this service knows {sorted(self.rubrics)}",
                "name",
            )
        return self.rubrics[name].model_dump(mode="json", by_alias=True)

    async def jury_info(self) -> JuryInfo:
        """GET /v1/jury: the judges, aggregation and spec, each rubric's provenance and calibration.

        And the ``max_items`` and ``max_judge_calls`` limits.
        """
        return JuryInfo(
            name=self.jury.name,
            description=self.jury.description,
            judges=[
                JudgeInfo(
                    name=j.name,
                    model=j.model,
                    revision=j.revision,
                    backend=j.backend,
                    weight=j.weight,
                    temperature=j.sampling.temperature,
                    reasoning=j.reasoning.mode,
                )
                for j in self.jury.judges
            ],
            aggregation=self.jury.aggregation,
            provenance=dict(sorted(self.provenances.items())),
            calibration={
                n: self.calibrations[p].identity
                for n, p in self.provenances.items()
                if p in self.calibrations
            },
            max_items=self.limits.max_items,
            max_judge_calls=self.limits.max_judge_calls,
            max_field_chars=self.limits.max_field_chars,
            spec=self.jury.model_dump(mode="json"),
        )

    async def healthz(self) -> Health:
        """GET /healthz: every judge's state (pinged at once); 200 when all are ``ok``, else 503.

        One answer serves every caller for `HEALTH_CACHE_S` (and callers that come while the judges
        are pinged wait for that one ping): an open route that anyone may call in a loop costs the
        judges at most one ping a second.
        """
        return await self._health.get()

    async def _check_health(self) -> Health:
        states = await asyncio.gather(*(self._judge_state(j.name) for j in self.jury.judges))
        judges = dict(zip((j.name for j in self.jury.judges), states))
        ok = all(s == "ok" for s in judges.values())
        return Health(status="ok" if ok else "unavailable", judges=judges)

    async def _judge_state(self, judge: str) -> str:
        try:
            response = self.judges[judge].ping.remote()
            await asyncio.wait_for(response, self.plan.health_timeout_s)
            return "ok"
        except TimeoutError:
            response.cancel()
            return f"no answer within {self.plan.health_timeout_s:g} s (loading, or overloaded)"
        except Exception as exc:
            return _short(exc)

    async def metrics_text(self) -> bytes:
        """GET /metrics: the metrics of every ingress replica, summed, as Prometheus text.

        This replica's alone without a shared state; 503 while the shared state cannot be read
        (Serve restarting it). Callers that come while it is read share that reading.
        """
        return await self._metrics_text.get()

    async def _read_metrics(self) -> bytes:
        from jurybox.serving.service.shared import render

        if self._state is None:
            return self.metrics.text()
        try:
            await self._report()  # this replica's counts as of now
            families = await self._state().metrics.remote()
        except Exception as exc:
            self.state_lost()
            raise HTTPProblem(
                503,
                "unavailable",
                "the metrics the ingress replicas share "
                f"cannot be read right now ({_short(exc)}); retry shortly",
                headers={"Retry-After": "2"},
            ) from None
        return render(families)


class Shared:
    """One answer of ``fetch`` for every caller within ``ttl_s`` seconds.

    Callers that come while it is being fetched await that fetch (which a caller's leaving does not
    cancel).
    """

    def __init__(self, fetch: Callable[[], Any], ttl_s: float) -> None:
        self.fetch, self.ttl_s = fetch, ttl_s
        self._value: tuple[float, Any] | None = None
        self._task: asyncio.Future[Any] | None = None

    async def get(self) -> Any:
        """The answer kept within ``ttl_s`` seconds, else the fetch under way, else a new one."""
        if self._value is not None and time.monotonic() - self._value[0] < self.ttl_s:
            return self._value[1]
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self.fetch())
            self._task.add_done_callback(self._keep)
        return await asyncio.shield(self._task)

    def _keep(self, task: asyncio.Future[Any]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._value = (time.monotonic(), task.result())


def share(total: int, replicas: int, rank: int) -> int:
    """Replica ``rank``'s share of ``total`` among ``replicas``.

    The shares add up to ``total`` exactly (the first ``total % replicas`` replicas take one more).
    """
    return total // replicas + (1 if rank < total % replicas else 0)


async def _all(calls: list[Any]) -> list[Any]:
    """Every judge's answer; when one fails the request, the others' calls are cancelled.

    When one fails the request (503, 429), the others' calls are cancelled, at the judges too,
    instead of judging on for a request that has failed.
    """
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


def _cancelled_here() -> bool:
    """Whether the running task is being cancelled (else a CancelledError came from elsewhere)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _stopped() -> HTTPProblem:
    """What a client still waiting gets when its batch is stopped under it (the service stops)."""
    return HTTPProblem(
        503,
        "unavailable",
        "the batch this request was judged in was stopped (the service is shutting "
        "down); nothing was scored, retry later",
        headers={"Retry-After": str(RETRY_AFTER_UNAVAILABLE_S)},
    )


def _short(exc: BaseException) -> str:
    """An exception from another process, in one line, with its type."""
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {last_line(exc)}"[:300]
