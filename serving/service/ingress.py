"""The scoring service's front door: a FastAPI app served by a Ray Serve deployment.

Its routes each call one method of `ScoringService` (which knows nothing of HTTP), or their own
module's serving logic (`jurybox.serving.service.groups`, `jurybox.serving.service.openrlhf`), and
turn its answer into a response.

Here: CORS, the checks every request passes first (`jurybox.serving.service.guard`: auth on /v1,
the body-size limit, counted before the body is read), the OpenAPI contract, metrics for every
answer, and one JSON error shape for everything (`jurybox.serving.problems`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Literal

import msgspec
import numpy as np
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from jurybox.rubrics import Rubric
from jurybox.serving.problems import (
    HTTPProblem,
    http_problem,
    problem_for,
    validation_problem,
)
from jurybox.serving.service import info
from jurybox.serving.service.draining import StateHandle
from jurybox.serving.service.groups import answer_groups
from jurybox.serving.service.groups_protocol import GroupRequest, GroupResponse
from jurybox.serving.service.guard import checked, problem_response, request_id
from jurybox.serving.service.openrlhf import answer_openrlhf
from jurybox.serving.service.openrlhf_protocol import OpenRLHFRequest, OpenRLHFResponse, Options
from jurybox.serving.service.protocol import (
    ErrorResponse,
    Health,
    JuryInfo,
    ProvenanceRequest,
    ProvenanceResponse,
    RubricList,
)
from jurybox.serving.service.score_protocol import ScoreRequest, ScoreResponse
from jurybox.serving.service.scoring import ScoringService

logger = logging.getLogger("jurybox.serving")

API_VERSION = "1"
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 408, 411, 413, 422, 429, 503, 504)
}

DESCRIPTION = (
    "Score long-form answers with a jury of LLM judges against explicit rubrics. "
    "POST /v1/score with a rubric and items; every verdict has exactly the fields of "
    "a `jurybox judge` output line."
)


def _plain(value: Any) -> Any:
    """What msgspec cannot encode itself: numpy scalars, as their Python values."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


_encode = msgspec.json.Encoder(enc_hook=_plain).encode


class JuryIngress:
    """The ingress deployment's class (see `jurybox.serving.service.builder.build_jury_app`).

    One of the deployment's replicas: the scoring service (`ScoringService`) and its HTTP app. The
    replicas share their metrics and drain through the deployment's actor
    (`jurybox.serving.service.shared`).
    """

    def __init__(self, plan: dict[str, Any], judges: dict[str, Any]) -> None:
        from ray import serve

        context = serve.get_replica_context()
        self.service = ScoringService(
            plan,
            judges,
            replicas=context.world_size or 1,
            rank=context.rank.rank if context.rank is not None else 0,
            replica=context.replica_id.unique_id,
            state=StateHandle(),
        )
        self.service.replica.start_reporting()  # Serve runs __init__ on the replica's event loop

    async def drain(self, timeout_s: float) -> int:
        """Every ingress replica takes no new score requests (see `Replica.drain`).

        Returns:
            How many requests are still in flight.
        """
        return await self.service.replica.drain(timeout_s)

    def __serve_build_asgi_app__(self) -> FastAPI:
        """The replica's FastAPI app, built around its scoring service (see `build_app`).

        Ray Serve calls this in the replica, after ``__init__``: the app is built there.
        """
        return build_app(self.service)


def build_app(service: ScoringService) -> FastAPI:
    """The HTTP app of one ingress replica: plain FastAPI routes that call ``service``.

    The routes are closures over the ingress, not methods decorated with ``@app.get``: Ray
    Serve's class-based view rewrites such methods' signatures, and with FastAPI >= 0.137 the
    rewritten routes ask every caller for a ``self`` query parameter (422 on every route). An
    app built here, in the replica, depends on nothing but FastAPI's public API.
    """
    from fastapi import Security
    from fastapi.security import HTTPBearer
    from fastapi_offline import FastAPIOffline

    # /docs and /redoc with their assets served here, not from a CDN: they work offline.
    app = FastAPIOffline(
        title="jurybox", version=API_VERSION, description=DESCRIPTION, static_url="/docs-assets"
    )
    # The token check is the middleware's (_checked); this only documents the scheme, so that
    # /docs asks for the token and "Try it out" sends it.
    v1: dict[str, Any] = {
        "dependencies": [Security(HTTPBearer(auto_error=False))]
        if service.token is not None
        else []
    }

    _contract(app, service)

    @app.exception_handler(HTTPProblem)
    async def _on_problem(request: Request, exc: HTTPProblem) -> JSONResponse:
        return problem_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return problem_response(validation_problem(list(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        return problem_response(
            http_problem(exc.status_code, detail, getattr(exc, "headers", None))
        )

    @app.middleware("http")
    async def _guard(request: Request, call_next: Any) -> Response:
        """CORS, auth and body size before anything reads the body; metrics for every answer."""
        began = time.perf_counter()
        origin = request.headers.get("origin")
        allowed = origin is not None and origin in service.plan.cors_origins
        if (
            allowed
            and request.method == "OPTIONS"
            and "access-control-request-method" in request.headers
        ):
            response: Response = Response(
                status_code=204,
                headers={
                    "Access-Control-Allow-Methods": "GET, POST",
                    "Access-Control-Allow-Headers": request.headers.get(
                        "access-control-request-headers", "authorization, content-type"
                    ),
                    "Access-Control-Max-Age": "600",
                },
            )
        else:
            try:
                response = await checked(service, request, call_next)
            except asyncio.CancelledError:  # the client left and Serve cancelled the request
                service.metrics.observe(request.url.path, 499, time.perf_counter() - began)
                raise
            except ClientDisconnect:  # the client left while its body was read: no failure
                response = Response(status_code=499)
            except Exception as exc:  # answered here, so that /metrics counts the 500 too
                if isinstance(exc, RuntimeError) and str(exc) == "No response returned.":
                    # Starlette's word for a request whose client left (its handler was
                    # cancelled): no failure of ours; counted as nginx's 499.
                    response = Response(status_code=499)
                else:
                    logger.exception("%s %s failed", request.method, request.url.path)
                    response = problem_response(problem_for(exc))
        if allowed:
            assert origin is not None  # (allowed: the request named an origin)
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Vary"] = "Origin"
        service.metrics.observe(request.url.path, response.status_code, time.perf_counter() - began)
        return response

    @app.post(
        "/v1/score",
        response_model=ScoreResponse,
        responses=ERRORS,
        **v1,
        summary="Judge items with the jury",
    )
    async def score(request: ScoreRequest) -> Response:
        # Encoded once, by msgspec (json.dumps took ~1.3 ms of an 8-item answer); a NaN would
        # be null here, where Starlette's JSONResponse refuses it.
        return Response(
            _encode({"verdicts": await service.score(request)}), media_type="application/json"
        )

    @app.post(
        "/v1/groups",
        response_model=GroupResponse,
        responses=ERRORS,
        **v1,
        summary="Reward groups of completions against each other (GRPO's groups)",
    )
    async def groups(request: GroupRequest) -> Response:
        """Each group's completions rewarded against each other (see `jurybox.judges.groups`).

        Compared in pairs on a pairwise rubric, each pair in both orders (round_robin, regular,
        swiss, anchor), scored together in one call per judge (listwise), or scored alone
        (pointwise); each reward with the comparisons behind it. The groups' completions count
        against max_items and the design's judge calls against max_judge_calls, before any judge
        runs.
        """
        return Response(
            _encode({"groups": await answer_groups(service, request)}),
            media_type="application/json",
        )

    @app.post(
        "/v1/openrlhf/{rubric}",
        response_model=OpenRLHFResponse,
        responses=ERRORS,
        **v1,
        summary="OpenRLHF's remote reward model (--reward.remote_url)",
    )
    async def openrlhf(
        http: Request,
        rubric: str,
        request: OpenRLHFRequest,
        score: str | None = None,
        scale: Literal["unit", "raw"] = "unit",
        calibrated: bool = False,
        unscored: str | None = None,
        scores: Literal["reward", "agreement"] = "reward",
        prechecks: bool = Query(
            False, description="on: a sample not worth judging (a master key...) is not sent."
        ),
        precheck_reward: float | None = Query(
            None, description="A pre-checked sample's reward (default: the unscored value)."
        ),
        canaries: float = Query(
            0.0, ge=0, le=1, description="One canary every ceil(1/canaries) samples (0: none)."
        ),
    ) -> Response:
        """The jury's reward for each of OpenRLHF's samples.

        See `jurybox.serving.service.openrlhf`. The rubric's formula (or ``score``), on [0, 1]
        unless ``scale=raw``. ``unscored`` is required (here or as the service's
        ``--openrlhf-unscored``): ``error`` (a 422: OpenRLHF's step then fails) or the reward an
        unscored sample gets, flagged in ``extra_logs``. ``scores``: what OpenRLHF's dynamic filter
        reads (the reward, or the jury's agreement). The token, where the service has one, in the
        URL: ``http://jurybox:TOKEN@host:port/v1/openrlhf/RUBRIC?unscored=0``.

        Guards (`jurybox.serving.service.guards`): ``prechecks=on`` does not send a sample not
        worth judging (empty, punctuation only, the question echoed, a known master key): it is
        unscored with its reason (code ``prechecked``), rewarded ``precheck_reward`` (else the
        unscored value); ``canaries=0.03`` adds a canary (an exploit response built from the
        sample's prompt) every 34th sample, judged with the samples and never among the
        rewards: ``extra_logs`` gains ``jurybox/prechecked``, ``jurybox/canary_reward`` and
        ``jurybox/canary_alarm``.
        """
        options = Options(
            score, scale, calibrated, unscored, scores, prechecks, precheck_reward, canaries
        )
        return Response(
            await answer_openrlhf(service, rubric, request, options, request_id(http)),
            media_type="application/json",
        )

    @app.post(
        "/v1/provenance",
        response_model=ProvenanceResponse,
        responses=ERRORS,
        **v1,
        summary="The provenance hash verdicts of a rubric and this jury carry",
    )
    async def provenance_of(request: ProvenanceRequest) -> ProvenanceResponse:
        return await info.provenance_of(service, request)

    @app.get(
        "/v1/rubrics",
        response_model=RubricList,
        responses=ERRORS,
        **v1,
        summary="The rubrics this service knows",
    )
    async def list_rubrics() -> RubricList:
        return await info.list_rubrics(service)

    @app.get(
        "/v1/rubrics/{name}",
        responses={**ERRORS, 404: {"model": ErrorResponse}},
        **v1,
        summary="One rubric, in full",
    )
    async def get_rubric(name: str) -> JSONResponse:
        return JSONResponse(await info.get_rubric(service, name))

    @app.get(
        "/v1/jury",
        response_model=JuryInfo,
        responses=ERRORS,
        **v1,
        summary="The jury: judges, aggregation, provenance per rubric",
    )
    async def jury_info() -> JuryInfo:
        return await info.jury_info(service)

    @app.get(
        "/healthz",
        response_model=Health,
        responses={503: {"model": Health}},
        summary="200 when every judge can answer; 503 naming those that cannot",
    )
    async def healthz() -> JSONResponse:
        health = await service.healthz()
        return JSONResponse(health.model_dump(), status_code=200 if health.status == "ok" else 503)

    @app.get(
        "/metrics",
        summary="Prometheus metrics of the service (every ingress replica's)",
        response_class=Response,
        responses={
            200: {
                "description": "Prometheus text exposition format",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            503: {"model": ErrorResponse},
        },
    )
    async def metrics_text() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(await service.replica.metrics_text(), media_type=CONTENT_TYPE_LATEST)

    return app


def _contract(app: FastAPI, service: ScoringService) -> None:
    """The OpenAPI document says what this service takes.

    The names of its rubrics, the fields of an inline rubric, and its limits. What it cannot say
    (the rubric decides which item fields are required; a template must render) is a 422 naming the
    field.
    """
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = plain()
        models = schema["components"]["schemas"]
        inline = Rubric.model_json_schema(
            by_alias=True, ref_template="#/components/schemas/{model}"
        )
        models.update(inline.pop("$defs", {}))
        limits = service.limits
        inline["properties"]["template"]["maxLength"] = limits.max_template_chars
        inline["properties"]["criteria"]["maxItems"] = limits.max_criteria
        models["InlineRubric"] = inline
        for name in ("ScoreRequest", "ProvenanceRequest", "GroupRequest"):
            models[name]["properties"]["rubric"]["anyOf"] = [
                {"type": "string", "enum": sorted(service.rubrics)},
                {"$ref": "#/components/schemas/InlineRubric"},
            ]
        models["GroupRequest"]["properties"]["pointwise"]["anyOf"] = [
            {"type": "string", "enum": sorted(service.rubrics)},
            {"$ref": "#/components/schemas/InlineRubric"},
            {"type": "null"},
        ]
        models["ScoreRequest"]["properties"]["items"]["maxItems"] = limits.max_items
        models["GroupRequest"]["properties"]["groups"]["maxItems"] = limits.max_items
        models["OpenRLHFRequest"]["properties"]["query"]["maxItems"] = limits.max_items
        for parameter in schema["paths"]["/v1/openrlhf/{rubric}"]["post"]["parameters"]:
            if parameter["name"] == "rubric":
                parameter["schema"]["enum"] = sorted(service.rubrics)
        for field in ("question", "response", "reference", "context"):
            models["ScoreItem"]["properties"][field]["anyOf"][0]["maxLength"] = (
                limits.max_field_chars
            )
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
