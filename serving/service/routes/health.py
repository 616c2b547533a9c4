"""GET /healthz and GET /metrics: whether the jury can answer, and how it has (no token asked)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from jurybox.serving.service.protocol import ErrorResponse, Health
from jurybox.serving.service.scoring import ScoringService


def router(service: ScoringService) -> APIRouter:
    """The health and metrics routes, around one replica's scoring service."""
    routes = APIRouter()

    @routes.get(
        "/healthz",
        response_model=Health,
        responses={503: {"model": Health}},
        summary="200 when every judge can answer; 503 naming those that cannot",
    )
    async def healthz() -> JSONResponse:
        health = await service.healthz()
        return JSONResponse(health.model_dump(), status_code=200 if health.status == "ok" else 503)

    @routes.get(
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

    return routes
