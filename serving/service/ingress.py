"""The scoring service's front door (a FastAPI app served by a Ray Serve deployment): it
validates a request, renders the prompts, asks every judge deployment for its votes at once (a
jury's latency is its slowest judge, not the sum) and decides the verdicts: the judging path of
``jurybox judge``, with the service only moving items in and verdicts out.

Around that: bearer-token auth on /v1, limits on body size, items and field length, a bounded
queue (429 with Retry-After when full), a per-request deadline (504), /healthz, Prometheus
/metrics, and one JSON error shape for everything (:mod:`jurybox.serving.service.errors`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import os
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from jurybox.judges import Steps, provenance
from jurybox.judges.cache import CacheLookup, VerdictCache
from jurybox.rubrics import Rubric, Verdict, input_hash
from jurybox.serving.service.admission import Prepared, Workers, inline_rubric, prepare
from jurybox.serving.service.config import ServicePlan
from jurybox.serving.service.errors import HTTPProblem, body, problem_for, validation_problem
from jurybox.serving.service.protocol import (
    ErrorResponse,
    Health,
    JudgeInfo,
    JuryInfo,
    ProvenanceRequest,
    ProvenanceResponse,
    RubricList,
    RubricSummary,
    ScoreRequest,
    ScoreResponse,
)

logger = logging.getLogger("jurybox.serving")

API_VERSION = "1"
# What a 503 for a judge that could not answer tells the client to wait (Serve restarts a dead
# replica; a tiny model reloads in seconds, a large one in about a minute).
RETRY_AFTER_UNAVAILABLE_S = 10
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 411, 413, 422, 429, 503, 504)}

DESCRIPTION = ("Score long-form answers with a jury of LLM judges against explicit rubrics. "
               "POST /v1/score with a rubric and items; every verdict has exactly the fields of "
               "a `jurybox judge` output line.")


def _json(problem: HTTPProblem) -> JSONResponse:
    return JSONResponse(body(problem), status_code=problem.status, headers=problem.headers)


class Metrics:
    """Prometheus metrics of one ingress replica (served at /metrics)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter("jurybox_requests", "HTTP requests by route and status",
                                ["route", "status"], registry=self.registry)
        self.latency = Histogram("jurybox_request_seconds", "Request latency in seconds",
                                 ["route"], registry=self.registry,
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                                          600))
        self.votes = Counter("jurybox_votes", "Votes returned, by judge", ["judge"],
                             registry=self.registry)
        self.unscored = Counter("jurybox_unscored_votes", "Unscored votes by judge and reason",
                                ["judge", "reason"], registry=self.registry)
        self.queue = Gauge("jurybox_queue_depth", "Score requests waiting or being scored",
                           registry=self.registry)
        self.judge_calls = Counter("jurybox_judge_requests", "Requests sent to a judge "
                                   "deployment (each with the prompts of a request's open items)",
                                   ["judge"], registry=self.registry)
        self.cache = Counter("jurybox_verdict_cache", "Items looked up in the verdict cache, "
                             "by result (hit: answered from it; miss: judged)", ["result"],
                             registry=self.registry)

    def observe(self, path: str, status: int, seconds: float) -> None:
        route = path if path in ("/v1/score", "/v1/provenance", "/healthz", "/metrics",
                                 "/v1/jury", "/v1/rubrics") else "other"
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def count_votes(self, records: list[dict[str, Any]]) -> None:
        from jurybox.judges.parsing import reason_kind

        for record in records:
            for vote in record["votes"]:
                self.votes.labels(vote["judge"]).inc()
                if vote["score"] is None:
                    self.unscored.labels(vote["judge"], reason_kind(vote["error"] or "")).inc()

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class Gate:
    """At most ``concurrent`` requests scored and ``queued`` waiting; a request beyond that is
    told to come back (429 with Retry-After) instead of waiting without bound."""

    def __init__(self, concurrent: int, queued: int, gauge: Any) -> None:
        self.slots = asyncio.Semaphore(concurrent)
        self.concurrent, self.queued = concurrent, queued
        self.waiting = self.active = 0
        self.seconds = 1.0  # moving average of a request's scoring time, for Retry-After
        self.gauge = gauge

    def retry_after(self) -> int:
        return int(min(60, max(1, math.ceil(self.seconds * (self.waiting + 1) / self.concurrent))))

    async def __aenter__(self) -> Gate:
        if self.slots.locked() and self.waiting >= self.queued:
            raise HTTPProblem(429, "overloaded", f"the service is busy ({self.active} requests "
                              f"scoring, {self.waiting} waiting); retry later",
                              headers={"Retry-After": str(self.retry_after())})
        self.waiting += 1
        self.gauge.set(self.waiting + self.active)
        try:
            await self.slots.acquire()
        finally:
            self.waiting -= 1
        self.active += 1
        self.gauge.set(self.waiting + self.active)
        self._began = time.perf_counter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.active -= 1
        self.slots.release()
        self.gauge.set(self.waiting + self.active)
        self.seconds = 0.8 * self.seconds + 0.2 * (time.perf_counter() - self._began)


class JuryIngress:
    """The ingress deployment's class (see :func:`jurybox.serving.service.builder.build_jury_app`)."""

    def __init__(self, plan: dict[str, Any], judges: dict[str, Any]) -> None:
        self.plan = ServicePlan.model_validate(plan)
        self.jury = self.plan.jury_spec()
        self.rubrics = self.plan.rubric_objects()
        self.limits = self.plan.limits
        self.judges = judges  # judge name -> DeploymentHandle
        self.token = os.environ.get(self.plan.token_env) if self.plan.token_env else None
        if self.plan.token_env and not self.token:
            raise RuntimeError(f"the environment variable {self.plan.token_env} holding the "
                               "service's token is not set where the ingress runs")
        self.provenances = {name: provenance(r, self.jury) for name, r in self.rubrics.items()}
        self.calibrations: dict[str, AppliedCalibration] = {}
        from jurybox.calibration import AppliedCalibration, CalibrationMap

        for entry in self.plan.calibration:
            cmap = CalibrationMap.from_dict(entry["map"], source=entry["identity"])
            self.calibrations[cmap.provenance_] = AppliedCalibration(cmap, entry["identity"])
        self.metrics = Metrics()
        self.cache = (VerdictCache(self.plan.verdict_cache)
                      if self.plan.verdict_cache is not None else None)
        self.gate = Gate(self.limits.max_concurrent, self.limits.max_queued, self.metrics.queue)
        self.workers = Workers()  # inline rubrics are validated and rendered there
        self.in_flight = 0  # score requests being answered
        self.draining = False  # set on shutdown: new score requests get 503

    def __del__(self) -> None:
        workers = self.__dict__.get("workers")
        if workers is not None:
            workers.close()

    def __serve_build_asgi_app__(self) -> FastAPI:
        """Ray Serve calls this in the replica, after ``__init__``: the app is built there,
        around this ingress (see :func:`build_app`)."""
        return build_app(self)

    # -- the judging path ----------------------------------------------------------------------

    def _named(self, name: str) -> Rubric:
        if name not in self.rubrics:
            raise HTTPProblem(422, "invalid_request", f"unknown rubric {name!r}; this service "
                              f"knows {sorted(self.rubrics)} (or send an inline rubric)",
                              "rubric")
        return self.rubrics[name]

    async def _rubric(self, ref: str | dict[str, Any]) -> Rubric:
        if isinstance(ref, str):
            return self._named(ref)
        return await self.workers.run(self.limits.max_render_s, inline_rubric, ref, self.limits)

    async def _prepare(self, request: ScoreRequest) -> Prepared:
        """The request's rubric, items and prompts (see :mod:`jurybox.serving.service.admission`): the
        operator's rubrics in a thread, a client's inline rubric in a worker process; never on
        the event loop, which keeps answering every other route meanwhile."""
        limits = self.limits
        if len(request.items) > limits.max_items:
            raise HTTPProblem(413, "too_large", f"{len(request.items)} items; this service takes "
                              f"at most {limits.max_items} per request (max_items)", "items")
        if not request.items:
            raise HTTPProblem(422, "invalid_request", "items is empty; send at least one item",
                              "items")
        raw = [item.model_dump(exclude_none=True) for item in request.items]
        if isinstance(request.rubric, str):
            return await asyncio.to_thread(prepare, self._named(request.rubric), raw, limits,
                                           request.allow_empty)
        return await self.workers.run(limits.max_render_s, prepare, request.rubric, raw, limits,
                                      request.allow_empty)

    def _provenance(self, rubric: Rubric) -> str:
        self.jury.check_rubric(rubric)
        known = self.rubrics.get(rubric.name)
        if known is not None and known == rubric:
            return self.provenances[rubric.name]
        return provenance(rubric, self.jury)

    async def _votes_of(self, judge: str, requests: Any, deadline: float) -> Any:
        """One judge's votes; a replica that dies is asked once more (Serve routes the retry to
        a live or restarted replica). A judge that still cannot answer fails the request with
        a retryable 503, never with votes: as in-process (``JudgeFailed``), an infrastructure
        failure is no verdict, so a client (``judge --url``) writes nothing and a rerun retries.
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
            response = handle.votes.remote(requests)
            try:
                return await asyncio.wait_for(response, left)
            except (TimeoutError, asyncio.CancelledError):
                # Past the deadline, or the client left: stop the judge's work too (awaiting
                # no more does not cancel it), so none runs beside the next request's.
                try:
                    response.cancel()
                except Exception:  # its routing failed at this very moment: nothing to stop
                    pass
                raise
            except BackPressureError as exc:
                raise HTTPProblem(429, "overloaded", f"judge {judge} is busy; retry later",
                                  headers={"Retry-After": str(int(exc.retry_after_s or 5))}) from None
            except RayActorError as exc:
                reason = f"its replica died ({type(exc).__name__})"
                continue
            except Exception as exc:
                reason = _short(exc)
                break
        raise HTTPProblem(503, "unavailable", f"judge {judge} could not answer: {reason}; "
                          "nothing was scored, retry later",
                          headers={"Retry-After": str(RETRY_AFTER_UNAVAILABLE_S)})

    async def _score(self, request: ScoreRequest, deadline: float) -> list[dict[str, Any]]:
        rubric, items, requests = await self._prepare(request)
        prov = self._provenance(rubric)
        # Items judged before with this configuration are answered from the verdict cache;
        # only the others go to the judges (none at all when every item is cached).
        lookup = await asyncio.to_thread(CacheLookup.of, self.cache, prov, items)
        if self.cache is not None:
            self.metrics.cache.labels("hit").inc(len(lookup.found))
            self.metrics.cache.labels("miss").inc(len(lookup.todo))
        fresh: list[Verdict] = []
        if lookup.todo:
            async with self.gate:
                # Every judge of a step at once; a cascaded jury's later stages get only the
                # items the earlier ones left open.
                steps = Steps(rubric, self.jury, prov, requests.subset(lookup.todo))
                while (step := steps.next()) is not None:
                    judges, open_requests = step
                    steps.add(await _all(
                        [self._votes_of(j.name, open_requests, deadline) for j in judges]))
            fresh = steps.verdicts()
            await asyncio.to_thread(lookup.store, fresh)
        verdicts = lookup.merged(fresh)
        records = [{**v.to_record(), "input": input_hash(item)} for v, item in zip(verdicts, items)]
        calibration = self.calibrations.get(prov)
        if calibration is not None:
            records = [calibration.apply(r, rubric) for r in records]
        self.metrics.count_votes(records)
        return records

    # -- what the routes answer (see build_app) ----------------------------------------------

    async def score(self, request: ScoreRequest) -> JSONResponse:
        timeout = self.limits.request_timeout_s
        self.in_flight += 1
        try:
            records = await asyncio.wait_for(self._score(request, time.monotonic() + timeout),
                                             timeout)
        except TimeoutError:
            raise HTTPProblem(504, "timeout", f"the request took longer than the service's "
                              f"deadline of {self.limits.request_timeout_s:g} s "
                              "(request_timeout_s); retry with fewer items") from None
        finally:
            self.in_flight -= 1
        return JSONResponse({"verdicts": records})

    async def drain(self, timeout_s: float) -> int:
        """Take no new score requests (503 with Retry-After) and wait, at most ``timeout_s``,
        for those in flight to finish; returns how many are still in flight (``jurybox serve``
        calls it on Ctrl-C, before it deletes the application)."""
        self.draining = True
        deadline = time.monotonic() + timeout_s
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return self.in_flight

    async def provenance_of(self, request: ProvenanceRequest) -> ProvenanceResponse:
        rubric = await self._rubric(request.rubric)
        prov = self._provenance(rubric)
        calibration = self.calibrations.get(prov)
        return ProvenanceResponse(rubric=rubric.name, provenance=prov,
                                  calibration=calibration.identity if calibration else None)

    async def list_rubrics(self) -> RubricList:
        return RubricList(rubrics=[
            RubricSummary(name=n, description=r.description, inputs=r.inputs,
                          criteria=r.criterion_names,
                          formula=r.formula.name if r.formula else None)
            for n, r in sorted(self.rubrics.items())])

    async def get_rubric(self, name: str) -> JSONResponse:
        if name not in self.rubrics:
            raise HTTPProblem(404, "not_found", f"unknown rubric {name!r}; this service knows "
                              f"{sorted(self.rubrics)}", "name")
        return JSONResponse(self.rubrics[name].model_dump(mode="json", by_alias=True))

    async def jury_info(self) -> JuryInfo:
        return JuryInfo(
            name=self.jury.name, description=self.jury.description,
            judges=[JudgeInfo(name=j.name, model=j.model, revision=j.revision, backend=j.backend,
                              weight=j.weight, temperature=j.sampling.temperature,
                              reasoning=j.reasoning.mode) for j in self.jury.judges],
            aggregation=self.jury.aggregation,
            provenance=dict(sorted(self.provenances.items())),
            calibration={n: self.calibrations[p].identity for n, p in self.provenances.items()
                         if p in self.calibrations},
            max_items=self.limits.max_items,
            max_judge_calls=self.limits.max_judge_calls,
            spec=self.jury.model_dump(mode="json"),
        )

    async def healthz(self) -> JSONResponse:
        states = await asyncio.gather(*(self._judge_state(j.name) for j in self.jury.judges))
        judges = dict(zip((j.name for j in self.jury.judges), states))
        ok = all(s == "ok" for s in judges.values())
        return JSONResponse(Health(status="ok" if ok else "unavailable", judges=judges).model_dump(),
                            status_code=200 if ok else 503)

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

    async def metrics_text(self) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(self.metrics.text(), media_type=CONTENT_TYPE_LATEST)


async def _all(calls: list[Any]) -> list[Any]:
    """Every judge's answer; when one fails the request (503, 429), the others' calls are
    cancelled, at the judges too, instead of judging on for a request that has failed."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


def _short(exc: BaseException) -> str:
    """An exception from another process, in one line (Ray wraps remote tracebacks)."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[-1] if text else ''}"[:300]


def build_app(ingress: JuryIngress) -> FastAPI:
    """The HTTP app of one ingress replica: plain FastAPI routes that call ``ingress``.

    The routes are closures over the ingress, not methods decorated with ``@app.get``: Ray
    Serve's class-based view rewrites such methods' signatures, and with FastAPI >= 0.137 the
    rewritten routes ask every caller for a ``self`` query parameter (422 on every route). An
    app built here, in the replica, depends on nothing but FastAPI's public API."""
    from fastapi import Security
    from fastapi.security import HTTPBearer
    from fastapi_offline import FastAPIOffline

    # /docs and /redoc with their assets served here, not from a CDN: they work offline.
    app = FastAPIOffline(title="jurybox", version=API_VERSION, description=DESCRIPTION,
                         static_url="/docs-assets")
    # The token check is the middleware's (_checked); this only documents the scheme, so that
    # /docs asks for the token and "Try it out" sends it.
    v1: dict[str, Any] = {"dependencies": [Security(HTTPBearer(auto_error=False))]
                          if ingress.token is not None else []}

    _contract(app, ingress)

    @app.exception_handler(HTTPProblem)
    async def _on_problem(request: Request, exc: HTTPProblem) -> JSONResponse:
        return _json(exc)

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _json(validation_problem(list(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {401: "unauthorized", 404: "not_found", 413: "too_large"}.get(exc.status_code,
                                                                            "invalid_request")
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 400 and "parsing the body" in detail:
            detail = ("the body could not be read as JSON: it must be UTF-8 JSON, with no value "
                      "nested beyond the parser's depth and no integer over 4,300 digits")
        return _json(HTTPProblem(exc.status_code, kind, detail,
                                 headers=getattr(exc, "headers", None)))

    @app.middleware("http")
    async def _guard(request: Request, call_next: Any) -> Response:
        """CORS, auth and body size before anything reads the body; metrics for every answer."""
        began = time.perf_counter()
        origin = request.headers.get("origin")
        allowed = origin is not None and origin in ingress.plan.cors_origins
        if (allowed and request.method == "OPTIONS"
                and "access-control-request-method" in request.headers):
            response: Response = Response(status_code=204, headers={
                "Access-Control-Allow-Methods": "GET, POST",
                "Access-Control-Allow-Headers": request.headers.get(
                    "access-control-request-headers", "authorization, content-type"),
                "Access-Control-Max-Age": "600"})
        else:
            try:
                response = await _checked(ingress, request, call_next)
            except Exception as exc:  # answered here, so that /metrics counts the 500 too
                if isinstance(exc, RuntimeError) and str(exc) == "No response returned.":
                    # Starlette's word for a request whose client left (its handler was
                    # cancelled): no failure of ours; counted as nginx's 499.
                    response = Response(status_code=499)
                else:
                    logger.exception("%s %s failed", request.method, request.url.path)
                    response = _json(problem_for(exc))
        if allowed:
            assert origin is not None  # (allowed: the request named an origin)
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Vary"] = "Origin"
        ingress.metrics.observe(request.url.path, response.status_code,
                                time.perf_counter() - began)
        return response

    @app.post("/v1/score", response_model=ScoreResponse, responses=ERRORS, **v1,
              summary="Judge items with the jury")
    async def score(request: ScoreRequest) -> JSONResponse:
        return await ingress.score(request)

    @app.post("/v1/provenance", response_model=ProvenanceResponse, responses=ERRORS, **v1,
              summary="The provenance hash verdicts of a rubric and this jury carry")
    async def provenance_of(request: ProvenanceRequest) -> ProvenanceResponse:
        return await ingress.provenance_of(request)

    @app.get("/v1/rubrics", response_model=RubricList, responses=ERRORS, **v1,
             summary="The rubrics this service knows")
    async def list_rubrics() -> RubricList:
        return await ingress.list_rubrics()

    @app.get("/v1/rubrics/{name}", responses={**ERRORS, 404: {"model": ErrorResponse}}, **v1,
             summary="One rubric, in full")
    async def get_rubric(name: str) -> JSONResponse:
        return await ingress.get_rubric(name)

    @app.get("/v1/jury", response_model=JuryInfo, responses=ERRORS, **v1,
             summary="The jury: judges, aggregation, provenance per rubric")
    async def jury_info() -> JuryInfo:
        return await ingress.jury_info()

    @app.get("/healthz", response_model=Health, responses={503: {"model": Health}},
             summary="200 when every judge can answer; 503 naming those that cannot")
    async def healthz() -> JSONResponse:
        return await ingress.healthz()

    @app.get("/metrics", summary="Prometheus metrics of this ingress replica",
             response_class=Response, responses={200: {
                 "description": "Prometheus text exposition format",
                 "content": {"text/plain": {"schema": {"type": "string"}}}}})
    async def metrics_text() -> Response:
        return await ingress.metrics_text()

    return app


def _contract(app: FastAPI, ingress: JuryIngress) -> None:
    """The OpenAPI document says what this service takes: the names of its rubrics, the
    fields of an inline rubric, and its limits. What it cannot say (the rubric decides which item
    fields are required; a template must render) is a 422 naming the field."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = plain()
        models = schema["components"]["schemas"]
        inline = Rubric.model_json_schema(by_alias=True,
                                          ref_template="#/components/schemas/{model}")
        models.update(inline.pop("$defs", {}))
        limits = ingress.limits
        inline["properties"]["template"]["maxLength"] = limits.max_template_chars
        inline["properties"]["criteria"]["maxItems"] = limits.max_criteria
        models["InlineRubric"] = inline
        for name in ("ScoreRequest", "ProvenanceRequest"):
            models[name]["properties"]["rubric"]["anyOf"] = [
                {"type": "string", "enum": sorted(ingress.rubrics)},
                {"$ref": "#/components/schemas/InlineRubric"}]
        models["ScoreRequest"]["properties"]["items"]["maxItems"] = limits.max_items
        for field in ("question", "response", "reference", "context"):
            models["ScoreItem"]["properties"][field]["anyOf"][0]["maxLength"] = (
                limits.max_field_chars)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


async def _checked(ingress: JuryIngress, request: Request, call_next: Any) -> Response:
    if request.url.path.startswith("/v1/") and ingress.token is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        # The scheme is case-insensitive (RFC 7235); the token is compared in constant time.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(),
                                                                 ingress.token.encode()):
            return _json(HTTPProblem(401, "unauthorized", "missing or wrong bearer token "
                                     "(Authorization: Bearer <token>)",
                                     headers={"WWW-Authenticate": "Bearer"}))
    if ingress.draining and request.url.path == "/v1/score":
        return _json(HTTPProblem(503, "unavailable", "the service is shutting down; retry "
                                 "later (or at another replica)",
                                 headers={"Retry-After": str(RETRY_AFTER_UNAVAILABLE_S)}))
    limit = ingress.limits.max_body_bytes
    length = request.headers.get("content-length")
    too_large = HTTPProblem(413, "too_large", f"the request body is larger than the service's "
                            f"limit of {limit} bytes (max_body_bytes)")
    if length is not None and length.isdigit() and int(length) > limit:
        return _json(too_large)
    if length is None and request.method in ("POST", "PUT", "PATCH"):
        # A chunked upload is refused before any of it is read: Ray Serve's replica pulls a
        # request's body from its proxy eagerly, whatever the app reads, so a stream counted
        # up to the limit would still have buffered all that arrived meanwhile (100 MB: +155
        # MB in the ingress). Every JSON client sends Content-Length.
        return _json(HTTPProblem(411, "invalid_request", "the request has no Content-Length "
                                 "(a chunked body); send the body with its Content-Length, "
                                 f"at most {limit} bytes (max_body_bytes)"))
    return await call_next(request)
