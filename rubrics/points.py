"""An item's own checklist: its points, how they are read, and how a rubric judges them.

A point is what a good answer must contain (positive points) or must avoid (a pitfall, negative
points), as HealthBench writes its per-conversation rubrics: ``{"criterion": ..., "points": 5,
"tags": [...]}`` is read as it is. This module imports nothing of jurybox: the item and the rubric
build on it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

#: A point's key: ``p1``, ``p2`` ... by its position in the checklist as written.
KEY = re.compile(r"^p[1-9][0-9]*$")

Tag = Literal["essential", "important", "optional"]


class Point(BaseModel):
    """One checklist point: what to check, its points, its tag.

    Attributes:
        key: ``p1``, ``p2`` ... by position in the checklist as written; kept when dropout leaves
            points out, so a key names the same point in every subset.
        text: What to check (HealthBench's ``criterion`` is read as it is).
        points: What the point is worth: positive for what a good answer does, negative for a
            pitfall (what it must not do); never 0.
        tag: How much the point matters, where the checklist says: ``essential``,
            ``important`` or ``optional``.
        tags: Free tags, kept verbatim (HealthBench's ``axis:...``, ``level:...``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    key: str = Field("", pattern=r"^(p[1-9][0-9]*)?$")
    text: str = Field(min_length=1, alias="criterion")
    points: float
    tag: Tag | None = None
    tags: list[str] = Field(default_factory=list)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("a point's text is blank")
        return text

    @field_validator("points")
    @classmethod
    def _worth_something(cls, points: float) -> float:
        if not math.isfinite(points) or points == 0:
            raise ValueError(f"must be a finite number other than 0, got {points!r}")
        return points

    @property
    def pitfall(self) -> bool:
        """Whether the point is a pitfall (negative points: met means the answer commits it)."""
        return self.points < 0

    def shown(self) -> dict[str, Any]:
        """The point as rubric templates see it: its key, text, points and tag."""
        return {"key": self.key, "text": self.text, "points": self.points, "tag": self.tag}


def read_points(raw: Any, where: str = "checklist") -> list[Point]:
    """A checklist as keyed points.

    Args:
        raw: A list of points: `Point` s or mappings (``criterion`` or ``text``, ``points``,
            optional ``tag``, ``tags`` and ``key``); or that list as a JSON string.
        where: Where the checklist comes from (e.g. ``items[3].checklist``), for the messages.

    Returns:
        The points in order; a point without a key gets ``p<position>`` (1-based).

    Raises:
        ValueError: The checklist is not a non-empty list of points, or a point is not one
            (the message names ``where[k]`` and what is wrong), or keys repeat.
    """
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not a JSON list of points ({exc.msg})") from None
    if not isinstance(raw, (list, tuple)):
        raise ValueError(f"{where}: expected a list of points, got {type(raw).__name__}")
    if not raw:
        raise ValueError(f"{where}: a checklist needs at least one point")
    out: list[Point] = []
    for k, entry in enumerate(raw):
        at = f"{where}[{k}]"
        if isinstance(entry, Point):
            point = entry
        elif isinstance(entry, dict):
            if "criterion" in entry and "text" in entry:
                raise ValueError(f"{at}: give the point's text once, as criterion or text")
            try:
                point = Point.model_validate(entry)
            except ValidationError as exc:
                raise ValueError(f"{at}: {_problems(exc)}") from None
        else:
            raise ValueError(f"{at}: expected a point (an object), got {type(entry).__name__}")
        if not point.key:
            point = point.model_copy(update={"key": f"p{k + 1}"})
        out.append(point)
    seen: dict[str, int] = {}
    for k, point in enumerate(out):
        if point.key in seen:
            raise ValueError(
                f"{where}[{k}]: key {point.key!r} repeats that of {where}[{seen[point.key]}]"
            )
        seen[point.key] = k
    return out


def _problems(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False)[:3]:
        name = ".".join(str(p) for p in err["loc"]) or "point"
        if err["type"] == "missing":
            parts.append(f"{name}: missing")
        elif err["type"] == "extra_forbidden":
            parts.append(f"{name}: not a field of a point (criterion/text, points, tag, tags, key)")
        else:
            parts.append(f"{name}: {err['msg'].removeprefix('Value error, ')}")
    return "; ".join(parts)


class ChecklistRule(BaseModel):
    """How a checklist rubric judges an item's points and scores the item.

    Attributes:
        score: ``points``: each point judged met or not, the item's score by HealthBench's rule
            (points earned over the positive points possible, clipped to [0, 1]); ``implicit``:
            one judgment of the whole checklist on the rubric's own criteria (Rubrics as
            Rewards' implicit aggregation).
        calls: With ``score: points``: ``per_point`` (one judge call per point) or
            ``all_points`` (one structured call per item, a criterion per point).
        max_points: The most points an item may have.
        name: The key of the item's score in a verdict's ``scores`` (``score: points``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: Literal["points", "implicit"] = "points"
    calls: Literal["per_point", "all_points"] = "per_point"
    max_points: int = Field(64, ge=1, le=512)
    name: str = Field("score", pattern=r"^[a-z][a-z0-9_]*$")

    @field_validator("name")
    @classmethod
    def _not_a_key(cls, name: str) -> str:
        if KEY.match(name) or name == "met":
            raise ValueError(f"the score's name {name!r} clashes with a point's key or met")
        return name

    @model_validator(mode="after")
    def _calls_for_points(self) -> ChecklistRule:
        if self.score == "implicit" and self.calls != "per_point":
            raise ValueError(
                "calls applies to score: points; score: implicit is one judgment per item"
            )
        return self

    @property
    def expands(self) -> bool:
        """Whether items are judged through units other than themselves (``score: points``)."""
        return self.score == "points"
