"""What the service knows: provenance, its rubrics, its jury (answers: `jurybox.serving.service.info`)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from jurybox.serving.service import info
from jurybox.serving.service.protocol import (
    ErrorResponse,
    JuryInfo,
    ProvenanceRequest,
    ProvenanceResponse,
    RubricList,
)
from jurybox.serving.service.routes import ERRORS, v1
from jurybox.serving.service.scoring import ScoringService


def router(service: ScoringService) -> APIRouter:
    """POST /v1/provenance, GET /v1/rubrics, /v1/rubrics/{name} and /v1/jury."""
    routes = APIRouter()
    authed = v1(service)

    @routes.post(
        "/v1/provenance",
        response_model=ProvenanceResponse,
        responses=ERRORS,
        **authed,
        summary="The provenance hash verdicts of a rubric and this jury carry",
    )
    async def provenance_of(request: ProvenanceRequest) -> ProvenanceResponse:
        return await info.provenance_of(service, request)

    @routes.get(
        "/v1/rubrics",
        response_model=RubricList,
        responses=ERRORS,
        **authed,
        summary="The rubrics this service knows",
    )
    async def list_rubrics() -> RubricList:
        return await info.list_rubrics(service)

    @routes.get(
        "/v1/rubrics/{name}",
        responses={**ERRORS, 404: {"model": ErrorResponse}},
        **authed,
        summary="One rubric, in full",
    )
    async def get_rubric(name: str) -> JSONResponse:
        return JSONResponse(await info.get_rubric(service, name))

    @routes.get(
        "/v1/jury",
        response_model=JuryInfo,
        responses=ERRORS,
        **authed,
        summary="The jury: judges, aggregation, provenance per rubric",
    )
    async def jury_info() -> JuryInfo:
        return await info.jury_info(service)

    return routes
