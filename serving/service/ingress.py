"""The scoring service's front door: a FastAPI app served by a Ray Serve deployment.

It composes the routes (`jurybox.serving.service.routes`: one module per feature, each calling
its own serving logic, which knows nothing of HTTP) into one app around a replica's
`ScoringService`.

Here: CORS, the checks every request passes first (`jurybox.serving.service.guard`: auth on /v1,
the body-size limit, counted before the body is read), the OpenAPI contract, metrics for every
answer, and one JSON error shape for everything (`jurybox.serving.problems`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from jurybox.rubrics import Rubric
from jurybox.serving.errors import RequestProblem
from jurybox.serving.problems import (
    http_problem,
    problem_for,
    validation_problem,
)
from jurybox.serving.service.draining import StateHandle
from jurybox.serving.service.guard import checked, problem_response
from jurybox.serving.service.routes import groups, health, info, openrlhf, score
from jurybox.serving.service.scoring import ScoringService

logger = logging.getLogger("jurybox.serving")

API_VERSION = "1"
DESCRIPTION = (
    "Score long-form answers with a jury of LLM judges against explicit rubrics. "
    "POST /v1/score with a rubric and items; every verdict has exactly the fields of "
    "a `jurybox judge` output line."
)


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
    """The HTTP app of one ingress replica: each feature's routes, around ``service``.

    The routes (`jurybox.serving.service.routes`) are closures over the service, not methods decorated with ``@app.get``: Ray
    Serve's class-based view rewrites such methods' signatures, and with FastAPI >= 0.137 the
    rewritten routes ask every caller for a ``self`` query parameter (422 on every route). An
    app built here, in the replica, depends on nothing but FastAPI's public API.
    """
    from fastapi_offline import FastAPIOffline

    # /docs and /redoc with their assets served here, not from a CDN: they work offline.
    app = FastAPIOffline(
        title="jurybox", version=API_VERSION, description=DESCRIPTION, static_url="/docs-assets"
    )
    _contract(app, service)

    @app.exception_handler(RequestProblem)
    async def _on_problem(request: Request, exc: RequestProblem) -> JSONResponse:
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

    for feature in (score, groups, openrlhf, info, health):  # the OpenAPI document's order
        app.include_router(feature.router(service))

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
