"""The HTTP API's request, response and error models.

They are the API's documentation: FastAPI turns them (and their ``Field`` descriptions) into the
OpenAPI schema at ``/openapi.json``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from jurybox.judges.groups import GroupResult, GroupSpec
from jurybox.judges.spec import Aggregation
from jurybox.rubrics import VerdictRecord

RubricRef = Annotated[str, Field(min_length=1)] | dict[str, Any]
RUBRIC_HELP = (
    "A rubric the service knows, by name (see GET /v1/rubrics), or an inline rubric: an "
    "object with the fields of a rubric YAML file (criteria, template, inputs, ...)."
)


class ScoreItem(BaseModel):
    """One thing to judge: the fields of a prediction-file row.

    Fields beyond these are available to rubrics by name (e.g. entity_name for mirage-id).
    """

    model_config = ConfigDict(extra="allow")

    id: StrictStr | StrictInt = Field(
        description="The item's id, unique within the request "
        "(a string or an integer; true or 1.5 is refused)."
    )
    question: str | None = Field(None, description="What the model was asked.")
    response: str | None = Field(None, description="The model's answer, to be judged.")
    reference: str | None = Field(
        None, description="The expert (gold) answer, where the rubric compares with one."
    )
    context: str | None = Field(None, description="Further context (dialogue, location...).")
    images: list[str] | None = Field(
        None,
        description="The item's images, a list, inline only: "
        "data: URLs or base64 (a path or URL is refused: "
        "the service reads no file on a client's word), "
        "within the service's image limits; refused (422) when no judge of the jury sees images.",
    )
    canary: bool = Field(
        False,
        description="A canary: an exploit response the client built (a self-assessment, an "
        "instruction to the judge, ...) to watch how much the jury rewards it. It is judged as "
        "any item (and costs its judge calls), never answered from nor stored in the verdict "
        "cache, counted apart in /metrics (jurybox_canary_items_total, jurybox_canary_score), "
        "and its verdict carries canary: true. Not a field the rubric sees.",
    )


class ScoreRequest(BaseModel):
    """The body of POST /v1/score: a rubric and the items to judge with it."""

    model_config = ConfigDict(extra="forbid")

    rubric: RubricRef = Field(description=RUBRIC_HELP)
    items: list[ScoreItem] = Field(
        min_length=1,
        description="The items to judge, at least "
        "one and at most the service's max_items; verdicts come back "
        "in the same order.",
    )
    allow_empty: bool = Field(
        False,
        description="Judge items whose response is empty (a model "
        "that answered nothing) instead of refusing them.",
    )


class ScoreResponse(BaseModel):
    """The answer to POST /v1/score: one verdict per item of the request, in its order."""

    verdicts: list[VerdictRecord] = Field(
        description="One verdict per item, in order: exactly "
        "the fields of a `jurybox judge` output line."
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


#: The largest seed a group request takes (numpy seeds with non-negative integers).
MAX_SEED = 2**63 - 1


class GroupDesign(GroupSpec):
    """`GroupSpec` as a request sends it: its numbers bounded so that no arithmetic overflows.

    The seed is a non-negative 63-bit integer; the group term's range, its width and (for a mixed
    reward) ``weight`` times it are finite, so every reward is a finite number or null with a
    reason, never an overflow.
    """

    seed: int = Field(
        0,
        ge=0,
        le=MAX_SEED,
        description="Seeds the random designs, Swiss pairings and listwise "
        "orders, with each group's content (the same group, the same calls): 0 to 2**63 - 1.",
    )

    @field_validator("high")
    @classmethod
    def _finite_width(cls, high: float, info: ValidationInfo) -> float:
        low = info.data.get("low")
        if low is not None and not math.isfinite(high - low):
            raise ValueError(
                f"the group term's range [{low}, {high}] is {high - low} wide; its width "
                "high - low must be a finite number"
            )
        return high

    @field_validator("weight")
    @classmethod
    def _finite_mix(cls, weight: float | None, info: ValidationInfo) -> float | None:
        low, high = info.data.get("low"), info.data.get("high")
        if weight is None or low is None or high is None:
            return weight
        widest = max(abs(low), abs(high), high - low)
        if not math.isfinite(weight * widest):
            raise ValueError(
                f"weight {weight} times the group term's range [{low}, {high}] overflows; "
                "give a weight and range whose product is a finite number"
            )
        return weight


class GroupIn(BaseModel):
    """One prompt's completions: the item fields they share and the completions themselves.

    Fields beyond these are available to rubrics by name, as a score item's are.
    """

    model_config = ConfigDict(extra="allow")

    id: StrictStr | StrictInt = Field(description="The group's id, unique within the request.")
    question: str | None = Field(None, description="What the model was asked.")
    reference: str | None = Field(
        None, description="The expert (gold) answer, where a rubric compares with one."
    )
    context: str | None = Field(None, description="Further context (dialogue, location...).")
    images: list[str] | None = Field(
        None,
        description="The group's images, shown with every judge call made of it, as a score "
        "item's are: a list, inline only, within the service's image limits (counted once "
        "per request, decoded once); refused (422) when no judge of the jury sees images.",
    )
    completions: list[str] = Field(
        min_length=1,
        description="The completions to reward "
        "against each other (one: rewarded pointwise, which needs "
        "the pointwise rubric).",
    )


class GroupRequest(BaseModel):
    """The body of POST /v1/groups: groups of completions, the rubrics and the design."""

    model_config = ConfigDict(extra="forbid")

    rubric: RubricRef = Field(
        description="The design's rubric: a pairwise rubric for the "
        "comparing designs (round_robin, regular, swiss, anchor), a "
        "pointwise one for pointwise and listwise. " + RUBRIC_HELP
    )
    pointwise: RubricRef | None = Field(
        None,
        description="The pointwise rubric: for the "
        "anchor design (the median's completion), a mixed "
        "reward (design.weight) and groups of one.",
    )
    design: GroupDesign = Field(
        default_factory=GroupDesign,
        description="How each group is judged and what its rewards are.",
    )
    score: str | None = Field(
        None,
        description="The pointwise reward's score: a criterion or "
        "the formula of the pointwise rubric (default: its formula).",
    )
    scale: Literal["unit", "raw"] = Field(
        "unit", description="The pointwise reward on [0, 1] (unit) or the rubric's scale (raw)."
    )
    groups: list[GroupIn] = Field(
        min_length=1,
        description="The groups; their completions "
        "count against max_items, the design's judge calls against "
        "max_judge_calls and the prompt text its calls would render, "
        "estimated from the plan, against max_request_prompt_chars (413 "
        "beyond, before any judge runs). A group whose largest judge call "
        "would render more than max_prompt_chars, or whose image is over an "
        "image limit, is answered unscored, with the reason.",
    )
    allow_empty: bool = Field(
        False, description="Judge empty completions instead of refusing them."
    )


class GroupResponse(BaseModel):
    """The answer to POST /v1/groups: one result per group, in order."""

    groups: list[GroupResult] = Field(
        description="Each group's rewards, one per completion "
        "in order, with the comparisons (or scores) behind "
        "them."
    )
