"""The scoring service without HTTP.

A request's rubric and items admitted, looked up in the verdict cache, the rest sent to every judge
deployment at once (a jury's latency is its slowest judge, not the sum) and decided: the judging
path of ``jurybox judge``, with the service only moving items in and verdicts out. It is composed of
rooms of one job each: a bounded queue (`jurybox.serving.service.gate`: 429 with Retry-After when
full), the batches requests are judged in (`jurybox.serving.service.batching`), the calls to the
judges (`jurybox.serving.service.calls`), the verdict cache and the jurors' checks around them
(`jurybox.serving.service.verdicts`), Prometheus metrics (`jurybox.serving.service.metrics`)
and the drain and metrics shared with the other ingress replicas
(`jurybox.serving.service.draining`); around them a per-request deadline (504) that cancels the
judges' work too, and health. The HTTP routes are `jurybox.serving.service.ingress`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Collection, Sequence
from typing import Any

from jurybox.judges import provenance
from jurybox.judges.cache import VerdictCache
from jurybox.judges.images import jury_sees_images
from jurybox.judges.judging import Requests
from jurybox.judges.jurors import JurorCheck, departed_note
from jurybox.rubrics import Item, Rubric, Verdict
from jurybox.rubrics.checklist import assemble
from jurybox.serving.errors import Invalid, TimedOut, TooLarge
from jurybox.serving.service.admission import (
    Prepared,
    Units,
    check_inline,
    inline_rubric,
    prepare,
)
from jurybox.serving.service.batching import Batches
from jurybox.serving.service.calls import JudgeCalls
from jurybox.serving.service.config import ResolvedConfig
from jurybox.serving.service.draining import Replica, StateHandle
from jurybox.serving.service.gate import CLIENT, Clients, Gate, share
from jurybox.serving.service.metrics import Metrics, Shared
from jurybox.serving.service.pace import check_pace
from jurybox.serving.service.protocol import (
    Health,
)
from jurybox.serving.service.score_protocol import ScoreRequest
from jurybox.serving.service.sentinel import sentinel_of
from jurybox.serving.service.verdicts import MAX_AGREEMENT_KEYS as MAX_AGREEMENT_KEYS
from jurybox.serving.service.verdicts import (
    Jurors,
    count_canaries,
    looked_up,
    records_of,
    stored,
)
from jurybox.serving.service.workers import Workers

logger = logging.getLogger("jurybox.serving")

# What the judging path takes: a rubric (a name, a client's inline one, or one validated), and
# items (`Item` objects, or a client's fields, checked as a request's items are).
Ref = str | dict[str, Any] | Rubric
Fields = Item | dict[str, Any]
# The longest a request waits for the verdict cache (another process writing or vacuuming the
# file) before it judges, or answers, without it.
CACHE_BUSY_S = 2.0
# How long one answer of /healthz and /metrics (open routes) serves every caller.
HEALTH_CACHE_S = 1.0


class ScoringService:
    """What the scoring service does, without HTTP.

    Each route of the ingress (`jurybox.serving.service.ingress.build_app`) calls one method (or
    its own module's serving logic: `jurybox.serving.service.groups.answer_groups`,
    `jurybox.serving.service.openrlhf.answer_openrlhf`) and only turns its answer into a
    response. The routes reach the jury through `judge` (``/v1/score`` and OpenRLHF's through
    `score_items`; the group route's pointwise rounds directly), except the group route's
    listwise rounds, which ask each judge through ``calls.votes``. Errors are the problems of
    `jurybox.serving.errors`, by name.

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
        state: StateHandle | None = None,
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
        self.sentinel = sentinel_of(self.plan)  # (the OpenRLHF route's; None without one)
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
        self.calls = JudgeCalls(
            self.jury, judges, self.metrics, self.gate.pace, self.plan.health_timeout_s
        )
        self.batches = Batches(self.gate, self.calls, self.limits.max_judge_calls)
        # Inline rubrics are validated and rendered there.
        self.workers = Workers(queued=self.limits.max_render_queued)
        self.clients = Clients(self.limits.max_client_requests)  # open requests per address
        self.replica = Replica(replica, self.metrics, state)  # in flight, drain, shared metrics
        self._health = Shared(self._check_health, HEALTH_CACHE_S)
        self.juror_check = (
            JurorCheck(leave_out=self.plan.leave_out_flagged) if self.plan.juror_checks else None
        )
        # (jurors' agreement kept across requests: `jurybox.serving.service.verdicts`)
        self.jurors = Jurors(self.juror_check, self.jury, self.metrics)
        if self.juror_check is not None and (note := departed_note(self.jury)):
            logger.info("--juror-checks: %s", note)

    def __del__(self) -> None:
        workers = self.__dict__.get("workers")
        if workers is not None:
            workers.close()

    # -- the judging path ----------------------------------------------------------------------

    def named_rubric(self, name: str) -> Rubric:
        """The operator's rubric ``name``; 422 for a name this service does not know."""
        if name not in self.rubrics:
            raise Invalid(
                f"unknown rubric {name!r}; this service "
                f"knows {sorted(self.rubrics)} (or send an inline rubric)",
                "rubric",
            )
        return self.rubrics[name]

    async def rubric_of(self, ref: str | dict[str, Any]) -> Rubric:
        """The rubric a request names, or its inline rubric (validated in a worker process)."""
        if isinstance(ref, str):
            return self.named_rubric(ref)
        await asyncio.to_thread(check_inline, ref, self.limits)  # before it is pickled
        return await self.workers.run(self.limits.max_render_s, inline_rubric, ref, self.limits)

    def provenance_for(self, rubric: Rubric) -> str:
        """The provenance hash verdicts of ``rubric`` and this jury carry."""
        self.jury.check_rubric(rubric)
        known = self.rubrics.get(rubric.name)
        if known is not None and known == rubric:
            return self.provenances[rubric.name]
        return provenance(rubric, self.jury)

    async def _prepare(
        self, rubric: Ref, items: Sequence[Fields], allow_empty: bool, limit_items: bool
    ) -> Prepared:
        """The rubric, items and prompts (see `jurybox.serving.service.admission`).

        The operator's rubrics in a thread, a client's (inline, or validated from one) in a worker
        process; never on the event loop, which keeps answering every other route meanwhile.
        ``limit_items=False``: a group request's round, whose items were bounded as the request's
        completions and judge calls (`jurybox.serving.service.groups`).
        """
        limits = self.limits
        if limit_items and len(items) > limits.max_items:
            raise TooLarge(
                f"{len(items)} items; this service takes "
                f"at most {limits.max_items} per request (max_items)",
                "items",
            )
        if not items:
            raise Invalid("items is empty; send at least one item", "items")
        if isinstance(rubric, str):
            rubric = self.named_rubric(rubric)
        known = self.rubrics.get(rubric.name) if isinstance(rubric, Rubric) else None
        if known is not None and (known is rubric or known == rubric):
            return await asyncio.to_thread(
                prepare, rubric, list(items), limits, allow_empty, self.seen_by
            )
        if isinstance(rubric, dict):
            # Checked here, before the request is pickled for a worker: a structure too deep
            # for pickle would kill the worker (a 500), and the size bounds cost nothing to check.
            await asyncio.to_thread(check_inline, rubric, limits)
        return await self.workers.run(
            limits.max_render_s, prepare, rubric, list(items), limits, allow_empty, self.seen_by
        )

    async def judge(
        self,
        rubric: Ref,
        items: Sequence[Fields],
        deadline: float,
        *,
        allow_empty: bool = False,
        limit_items: bool = True,
        canaries: Collection[int] = (),
    ) -> list[dict[str, Any]]:
        """The verdict records of ``items`` with ``rubric``, judged by ``deadline``.

        The way to the jury for every route but the group route's listwise rounds. ``rubric``: a name, a client's inline rubric or
        a `Rubric`; ``items``: `Item` objects or a client's fields, checked as a request's items
        are (`jurybox.serving.service.admission.prepare`). Items judged before with this
        configuration are answered from the verdict cache, the others judged in the batches
        (`jurybox.serving.service.batching`); calibrated where a map applies.
        ``limit_items=False``: a group request's round (its bounds and pace are checked for the
        request as a whole). ``canaries``: the positions of canary items
        (`jurybox.serving.service.verdicts.count_canaries`).
        """
        rubric, checked, requests = await self._prepare(rubric, items, allow_empty, limit_items)
        prov = self.provenance_for(rubric)
        canaries = frozenset(canaries)
        if isinstance(requests, Units):  # a checklist rubric: its units judged, then assembled
            judged = await self._judged_units(requests, deadline, limit_items, canaries)
            verdicts = await asyncio.to_thread(
                assemble, rubric, checked, requests.groups, judged, self.jury.name, prov
            )
            records = await asyncio.to_thread(
                records_of, self.calibrations, rubric, prov, verdicts, checked
            )
        else:
            verdicts = await self._judged(
                rubric, prov, checked, requests, deadline, limit_items, canaries
            )
            records = await asyncio.to_thread(
                records_of, self.calibrations, rubric, prov, verdicts, checked
            )
        self.metrics.count_votes(records)
        if canaries:
            count_canaries(self.metrics, self.rubrics, rubric, records, canaries)
        return records

    async def _judged(
        self,
        rubric: Rubric,
        prov: str,
        items: list[Item],
        requests: Requests,
        deadline: float,
        limit_items: bool,
        canaries: frozenset[int],
    ) -> list[Verdict]:
        """The verdicts of ``items``: the verdict cache's, the others judged; jurors checked.

        Items judged before with this configuration are answered from the verdict cache; only
        the others go to the judges (none at all when every item is cached).
        """
        lookup = await looked_up(self.cache, self.metrics, prov, items, canaries)
        fresh: list[Verdict] = []
        if lookup.todo and limit_items:  # (a group request's rounds: checked as a whole)
            check_pace(self, len(lookup.todo) * len(requests.calls), deadline)
        if lookup.todo:
            fresh = await self.batches.judged(rubric, prov, requests.subset(lookup.todo), deadline)
            await stored(lookup, fresh, self.metrics, canaries)
        # (jurors checked after the cache stored what it stores: never cached)
        merged = lookup.merged(fresh)
        return await asyncio.to_thread(self.jurors.checked, rubric, prov, merged, CLIENT.get())

    async def _judged_units(
        self, units: Units, deadline: float, limit_items: bool, canaries: frozenset[int]
    ) -> list[list[Verdict]]:
        """A checklist rubric's unit verdicts, per unit group (`jurybox.rubrics.checklist`).

        Each group is judged as any rubric's items are, all groups at once: looked up in the
        verdict cache under its own rubric's provenance (an edited checklist re-judges only its
        new points), the rest judged in the batches, its jurors checked. The pace is checked
        once, on every group's calls to make; a canary item's units are all judged afresh.
        """
        provs = [self.provenance_for(group.rubric) for group in units.groups]
        marks = [
            frozenset(u for u, (i, _) in enumerate(group.owner) if i in canaries)
            for group in units.groups
        ]
        lookups = [
            await looked_up(self.cache, self.metrics, prov, list(group.items), mark)
            for group, prov, mark in zip(units.groups, provs, marks)
        ]
        calls = sum(len(lk.todo) * len(r.calls) for lk, r in zip(lookups, units.requests))
        if calls and limit_items:
            check_pace(self, calls, deadline)

        async def one(k: int) -> list[Verdict]:
            group, prov, lookup = units.groups[k], provs[k], lookups[k]
            fresh: list[Verdict] = []
            if lookup.todo:
                todo = units.requests[k].subset(lookup.todo)
                fresh = await self.batches.judged(group.rubric, prov, todo, deadline)
                await stored(lookup, fresh, self.metrics, marks[k])
            merged = lookup.merged(fresh)
            return await asyncio.to_thread(
                self.jurors.checked, group.rubric, prov, merged, CLIENT.get()
            )

        return await _together([one(k) for k in range(len(units.groups))])

    # -- what the routes answer (see build_app) ----------------------------------------------

    async def score(self, request: ScoreRequest) -> list[dict[str, Any]]:
        """POST /v1/score: ``{"verdicts": [...]}``, one record per item (see `score_items`)."""
        # (an item's canary flag is the service's, never a field its rubric sees)
        items = [item.model_dump(exclude_none=True, exclude={"canary"}) for item in request.items]
        canaries = [k for k, item in enumerate(request.items) if item.canary]
        return await self.score_items(
            request.rubric, items, allow_empty=request.allow_empty, canaries=canaries
        )

    async def score_items(
        self,
        rubric: Ref,
        items: Sequence[Fields],
        *,
        allow_empty: bool = False,
        canaries: Collection[int] = (),
    ) -> list[dict[str, Any]]:
        """The verdict records of ``items`` (see `judge`), within ``request_timeout_s``.

        Counted in flight (a drain waits for it); 504 past the deadline. ``canaries``: the
        positions of canary items (judged afresh, counted apart, their verdicts marked).
        """
        timeout = self.limits.request_timeout_s
        with self.replica.flight():
            try:
                return await asyncio.wait_for(
                    self.judge(
                        rubric,
                        items,
                        time.monotonic() + timeout,
                        allow_empty=allow_empty,
                        canaries=canaries,
                    ),
                    timeout,
                )
            except TimeoutError:
                raise TimedOut(
                    f"the request took longer than the service's "
                    f"deadline of {self.limits.request_timeout_s:g} s "
                    "(request_timeout_s); retry with fewer items",
                ) from None

    async def healthz(self) -> Health:
        """GET /healthz: every judge's state (pinged at once); 200 when all are ``ok``, else 503.

        One answer serves every caller for `HEALTH_CACHE_S` (and callers that come while the judges
        are pinged wait for that one ping): an open route that anyone may call in a loop costs the
        judges at most one ping a second.
        """
        return await self._health.get()

    async def _check_health(self) -> Health:
        states = await asyncio.gather(*(self.calls.state(j.name) for j in self.jury.judges))
        judges = dict(zip((j.name for j in self.jury.judges), states))
        ok = all(s == "ok" for s in judges.values())
        return Health(status="ok" if ok else "unavailable", judges=judges)


async def _together(calls: list[Any]) -> list[Any]:
    """The answers of ``calls`` (coroutines), run at once; when one fails, the others cancelled."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
