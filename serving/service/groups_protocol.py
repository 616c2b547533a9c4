"""The wire models of ``POST /v1/groups``: groups of completions, the design, the results.

Its serving logic is `jurybox.serving.service.groups`.
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
    WithJsonSchema,
    field_validator,
)

from jurybox.judges.groups import GroupResult, GroupSpec
from jurybox.serving.service.protocol import RUBRIC_HELP, RubricRef
from jurybox.serving.service.score_protocol import POINT_SCHEMA

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
    checklist: list[Annotated[dict[str, Any], WithJsonSchema(POINT_SCHEMA)]] | None = Field(
        None,
        description="The prompt's own checklist, for a checklist rubric (design pointwise): "
        "every completion of the group is judged on it, as a score item's checklist is "
        "(its points bounded by max_points and max_field_chars, before any judge runs; with "
        "calls: per_point each point of each completion is a judge call).",
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
