"""The scoring service without HTTP.

A request's rubric and items admitted, looked up in the verdict cache, the rest sent to every judge
deployment at once (a jury's latency is its slowest judge, not the sum) and decided: the judging
path of ``jurybox judge``, with the service only moving items in and verdicts out. It is composed of
rooms of one job each: a bounded queue (`jurybox.serving.service.gate`: 429 with Retry-After when
full), the batches requests are judged in (`jurybox.serving.service.batching`), the calls to the
judges (`jurybox.serving.service.calls`), Prometheus metrics (`jurybox.serving.service.metrics`)
and the drain and metrics shared with the other ingress replicas
(`jurybox.serving.service.draining`); around them a per-request deadline (504) that cancels the
judges' work too, and health. The HTTP routes are `jurybox.serving.service.ingress`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any

from jurybox.judges import provenance
from jurybox.judges.cache import CacheBusy, CacheLookup, VerdictCache
from jurybox.judges.images import jury_sees_images
from jurybox.judges.parsing import reason_code
from jurybox.rubrics import Rubric, Verdict, input_hash
from jurybox.rubrics.errors import InputError
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
from jurybox.serving.service.batching import Batches
from jurybox.serving.service.calls import JudgeCalls
from jurybox.serving.service.config import ResolvedConfig
from jurybox.serving.service.draining import Replica, StateHandle
from jurybox.serving.service.gate import Gate, share
from jurybox.serving.service.metrics import Metrics, Shared
from jurybox.serving.service.openrlhf import Filter, OpenRLHFRequest, Options
from jurybox.serving.service.pace import check_pace
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

# The longest a request waits for the verdict cache (another process writing or vacuuming the
# file) before it judges, or answers, without it.
CACHE_BUSY_S = 2.0
# How long one answer of /healthz and /metrics (open routes) serves every caller.
HEALTH_CACHE_S = 1.0


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
            fresh = await self.batches.judged(rubric, prov, requests.subset(lookup.todo), deadline)
            await self._stored(lookup, fresh)
        records = await asyncio.to_thread(self._records, rubric, prov, lookup, fresh, items)
        self.metrics.count_votes(records)
        return records

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
        with self.replica.flight():
            try:
                return await asyncio.wait_for(
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

    async def groups(self, request: GroupRequest) -> list[dict[str, Any]]:
        """POST /v1/groups: ``{"groups": [...]}``, each group's rewards.

        With the comparisons behind them (`jurybox.serving.service.groups`); 504 past
        ``request_timeout_s``.
        """
        from jurybox.serving.service.groups import score_groups

        timeout = self.limits.request_timeout_s
        with self.replica.flight():
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
        states = await asyncio.gather(*(self.calls.state(j.name) for j in self.jury.judges))
        judges = dict(zip((j.name for j in self.jury.judges), states))
        ok = all(s == "ok" for s in judges.values())
        return Health(status="ok" if ok else "unavailable", judges=judges)
