"""The HTTP API's shared request, response and error models, and the small routes' models.

They are the API's documentation: FastAPI turns them (and their ``Field`` descriptions) into the
OpenAPI schema at ``/openapi.json``. Each large route's own models are in its protocol module:
``/v1/score``'s in `jurybox.serving.service.score_protocol`, ``/v1/groups``' in
`jurybox.serving.service.groups_protocol`, ``/v1/openrlhf``'s in
`jurybox.serving.service.openrlhf_protocol`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from jurybox.judges.spec import Aggregation

RubricRef = Annotated[str, Field(min_length=1)] | dict[str, Any]
RUBRIC_HELP = (
    "A rubric the service knows, by name (see GET /v1/rubrics), or an inline rubric: an "
    "object with the fields of a rubric YAML file (criteria, template, inputs, ...)."
)


class ProvenanceRequest(BaseModel):
    """The body of POST /v1/provenance: the rubric whose provenance with this jury is asked for."""

    model_config = ConfigDict(extra="forbid")

    rubric: RubricRef = Field(description=RUBRIC_HELP)


class ProvenanceResponse(BaseModel):
    """The answer to POST /v1/provenance.

    The hash verdicts of this rubric and jury carry, and the calibration map applied to them, if
    any.
    """

    rubric: str = Field(description="The rubric's name.")
    provenance: str = Field(description="The hash verdicts of this rubric and jury carry.")
    calibration: str | None = Field(
        None,
        description="The calibration map the service applies "
        "to this rubric's verdicts (file:hash), if any.",
    )


class ErrorDetail(BaseModel):
    """What went wrong with a request.

    The kind of error, a message, and the field at fault when there is one.
    """

    type: Literal[
        "invalid_request",
        "unauthorized",
        "not_found",
        "too_large",
        "overloaded",
        "timeout",
        "unavailable",
        "unscored",
        "internal",
    ] = Field(
        description="What kind of error (unscored: a reward route's items the jury could not "
        "score, while the reward's unscored policy is error)."
    )
    message: str = Field(description="What is wrong, and what was expected.")
    field: str | None = Field(
        None, description="The request field at fault, e.g. items[2].reference, when there is one."
    )


class ErrorResponse(BaseModel):
    """The body of every error answer."""

    error: ErrorDetail


class RubricSummary(BaseModel):
    """One rubric the service knows: its name, description, inputs, criteria and formula."""

    name: str
    description: str
    inputs: list[str] = Field(description="Item fields the rubric needs.")
    criteria: list[str]
    formula: str | None = Field(None, description="The rubric-level formula's name, if any.")


class RubricList(BaseModel):
    """The answer to GET /v1/rubrics: a summary of each rubric the service knows."""

    rubrics: list[RubricSummary]


class JudgeInfo(BaseModel):
    """One judge of the service's jury.

    Its model, backend, weight, temperature and reasoning mode.
    """

    name: str
    model: str
    revision: str | None
    backend: str
    weight: float
    temperature: float
    reasoning: str = Field(description="off, or think (the judge reasons before answering).")


class JuryInfo(BaseModel):
    """The answer to GET /v1/jury.

    The judges, the aggregation, each rubric's provenance and calibration map, the request limits,
    and the jury file as loaded.
    """

    name: str
    description: str
    judges: list[JudgeInfo]
    aggregation: Aggregation
    provenance: dict[str, str] = Field(
        description="Per rubric the service knows: the provenance hash its verdicts carry."
    )
    calibration: dict[str, str] = Field(description="Per rubric: the calibration map applied.")
    max_items: int = Field(description="Most items one score request may hold.")
    max_judge_calls: int = Field(
        description="Most judge calls one score request may buy (items "
        "x calls per item of its rubric)."
    )
    max_field_chars: int | None = Field(
        None,
        description="Longest item field a score request may hold (characters; 422 beyond). "
        "The adapters send none longer: such an item is unscored, with its reason.",
    )
    spec: dict[str, Any] = Field(description="The jury file as the service loaded it.")


class Health(BaseModel):
    """The answer to GET /healthz.

    ``ok`` when every judge can answer (else ``unavailable``), and each judge's state.
    """

    status: Literal["ok", "unavailable"]
    judges: dict[str, str] = Field(description="Per judge: ok, or why it cannot answer.")
