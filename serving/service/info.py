"""The small routes' answers: the rubrics, the jury and a rubric's provenance, without HTTP.

``GET /v1/rubrics``, ``GET /v1/rubrics/{name}``, ``GET /v1/jury`` and ``POST /v1/provenance``
read what a `jurybox.serving.service.scoring.ScoringService` holds (its rubrics, jury, limits
and calibration maps) and judge nothing; the ingress's routes (`jurybox.serving.service.ingress`)
answer with them. Health and metrics stay with the rooms that keep them (the service's judge
calls, `jurybox.serving.service.metrics`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jurybox.serving.errors import NotFound
from jurybox.serving.service.protocol import (
    JudgeInfo,
    JuryInfo,
    ProvenanceRequest,
    ProvenanceResponse,
    RubricList,
    RubricSummary,
)

if TYPE_CHECKING:
    from jurybox.serving.service.scoring import ScoringService


async def provenance_of(service: ScoringService, request: ProvenanceRequest) -> ProvenanceResponse:
    """POST /v1/provenance: the provenance hash of the rubric (named or inline) with this jury.

    And the calibration map applied to its verdicts, if any.
    """
    rubric = await service.rubric_of(request.rubric)
    prov = service.provenance_for(rubric)
    calibration = service.calibrations.get(prov)
    return ProvenanceResponse(
        rubric=rubric.name,
        provenance=prov,
        calibration=calibration.identity if calibration else None,
    )


async def list_rubrics(service: ScoringService) -> RubricList:
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
            for n, r in sorted(service.rubrics.items())
        ]
    )


async def get_rubric(service: ScoringService, name: str) -> dict[str, Any]:
    """GET /v1/rubrics/{name}: the rubric in full; 404 for a name the service does not know."""
    if name not in service.rubrics:
        raise NotFound(
            f"unknown rubric {name!r}; this service knows {sorted(service.rubrics)}",
            "name",
        )
    return service.rubrics[name].model_dump(mode="json", by_alias=True)


async def jury_info(service: ScoringService) -> JuryInfo:
    """GET /v1/jury: the judges, aggregation and spec, each rubric's provenance and calibration.

    And the ``max_items`` and ``max_judge_calls`` limits.
    """
    return JuryInfo(
        name=service.jury.name,
        description=service.jury.description,
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
            for j in service.jury.judges
        ],
        aggregation=service.jury.aggregation,
        provenance=dict(sorted(service.provenances.items())),
        calibration={
            n: service.calibrations[p].identity
            for n, p in service.provenances.items()
            if p in service.calibrations
        },
        max_items=service.limits.max_items,
        max_judge_calls=service.limits.max_judge_calls,
        max_field_chars=service.limits.max_field_chars,
        spec=service.jury.model_dump(mode="json"),
    )
