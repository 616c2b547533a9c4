"""The wire models of ``POST /v1/score``: the items to judge and their verdicts.

Its serving logic is `jurybox.serving.service.scoring.ScoringService.score_items`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, WithJsonSchema

from jurybox.rubrics import VerdictRecord
from jurybox.rubrics.points import Point
from jurybox.serving.service.protocol import RUBRIC_HELP, RubricRef

#: A checklist point as the wire takes it (`jurybox.rubrics.points.Point`, read by `read_points`:
#: its errors name the point).
POINT_SCHEMA: dict[str, Any] = {
    **Point.model_json_schema(by_alias=True),
    "title": "ChecklistPoint",
    "description": "One checklist point: what to check (criterion, or text), what it is worth "
    "(points: negative for a pitfall, never 0), an optional tag and free tags, and its key "
    "(p1, p2 ... by position when not given).",
}


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
    checklist: list[Annotated[dict[str, Any], WithJsonSchema(POINT_SCHEMA)]] | None = Field(
        None,
        description="The item's own checklist, for a checklist rubric (one whose file says "
        "checklist:): a list of points, each {criterion (or text), points, tag, tags, key}, "
        "HealthBench's rubric entries read as they are. points: what the point is worth, "
        "negative for a pitfall (met: the answer commits it), never 0; tag: essential, "
        "important or optional; key: p1, p2 ... by position when not given. Bounded before "
        "any judge runs: at most max_points points per item (413 naming "
        "items[i].checklist[k]), each point's text within max_field_chars (422 naming it), "
        "and, with calls: per_point, one judge call per point against max_judge_calls. The "
        "verdict holds each point's decision (points), its votes and the item's score.",
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
