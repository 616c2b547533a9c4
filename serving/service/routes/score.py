"""POST /v1/score: the route of `ScoringService.score` (wire models: `score_protocol`)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from jurybox.serving.service.routes import ERRORS, encode, v1
from jurybox.serving.service.score_protocol import ScoreRequest, ScoreResponse
from jurybox.serving.service.scoring import ScoringService


def router(service: ScoringService) -> APIRouter:
    """The score route, around one replica's scoring service."""
    routes = APIRouter()

    @routes.post(
        "/v1/score",
        response_model=ScoreResponse,
        responses=ERRORS,
        **v1(service),
        summary="Judge items with the jury",
    )
    async def score(request: ScoreRequest) -> Response:
        # Encoded once, by msgspec (json.dumps took ~1.3 ms of an 8-item answer); a NaN would
        # be null here, where Starlette's JSONResponse refuses it.
        return Response(
            encode({"verdicts": await service.score(request)}), media_type="application/json"
        )

    return routes
