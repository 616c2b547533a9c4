"""How a group of completions is judged: the design, its reward's scale and its cost.

`GroupSpec` is the caller's word (see `jurybox.judges.groups`, which re-exports it, for the
designs); `GroupCost` what one group costs under it.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jurybox.rubrics import Rubric
from jurybox.rubrics.errors import InputError

from .rankings import Relative
from .resolution import Use

Design = Literal["pointwise", "round_robin", "regular", "swiss", "anchor", "listwise"]
#: The designs that compare completions in pairs (on a pairwise rubric).
COMPARING: tuple[Design, ...] = ("round_robin", "regular", "swiss", "anchor")
#: Most completions a listwise prompt shows (one letter each).
LETTERS = string.ascii_uppercase


class GroupSpec(BaseModel):
    """How a group of completions is judged and what its rewards are.

    See `jurybox.judges.groups`' module docstring.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    design: Design = Field(
        "round_robin", description="pointwise, round_robin, regular, swiss, anchor or listwise."
    )
    per_completion: int = Field(
        3,
        ge=1,
        le=64,
        description="regular and swiss: comparisons "
        "per completion (Swiss rounds); at least the group's size "
        "minus one is the round robin.",
    )
    relative: Relative = Field(
        "bradley_terry",
        description="The comparisons' term: "
        "bradley_terry (the completion's Bradley-Terry probability of "
        "beating a groupmate drawn at random) or win_share (its mean "
        "share, ties half).",
    )
    low: float = Field(
        0.0,
        description="The group term's value for the worst completion "
        "possible (its [0, 1] mapped onto [low, high]).",
    )
    high: float = Field(1.0, description="The group term's value for the best.")
    centred: bool = Field(False, description="Subtract the group's mean from the group term.")
    weight: float | None = Field(
        None,
        description="Mixed: the reward is the pointwise reward "
        "plus weight x the group term (a pointwise rubric needed); "
        "None: the group term alone.",
    )
    use: Use = Field(
        "expected",
        description="Read verdicts from the judges' expected scores "
        "where every scored vote has a distribution (else their chosen scores, "
        "said per completion), or from their chosen scores (score).",
    )
    prior: float = Field(
        1.0,
        gt=0.0,
        le=1000.0,
        description="bradley_terry: virtual tie games "
        "per completion, spread over its groupmates (the estimate exists for "
        "any outcome; a larger prior pulls strengths together).",
    )
    seed: int = Field(
        0,
        ge=0,
        le=2**63 - 1,
        description="Seeds the random designs, Swiss pairings and listwise "
        "orders, with each group's content (the same group, the same calls).",
    )

    @model_validator(mode="after")
    def _sensible(self) -> GroupSpec:
        if not math.isfinite(self.low) or not math.isfinite(self.high) or self.high <= self.low:
            raise ValueError(
                f"the group term's range [{self.low}, {self.high}] must be finite "
                "and high above low"
            )
        if not math.isfinite(self.high - self.low):
            raise ValueError(
                f"the group term's range [{self.low}, {self.high}] is wider than a float "
                "holds: high - low must be a finite number"
            )
        if self.weight is not None and not math.isfinite(self.weight * (self.high - self.low)):
            raise ValueError(
                "weight must be a finite number (or None), and weight times the group "
                "term's range too"
            )
        if self.weight is not None and self.design == "pointwise":
            raise ValueError(
                "weight mixes the pointwise reward with a group term; the "
                "pointwise design has none (give another design, or no weight)"
            )
        return self

    def check(self, rubric: Rubric, pointwise: Rubric | None) -> None:
        """Refuse a ``rubric`` (the design's) or ``pointwise`` rubric that does not fit.

        The pointwise rubric is for the anchor, a mixed reward and groups of one.

        Raises:
            InputError: A rubric does not fit the design (naming the field).
        """
        if self.design in COMPARING and not rubric.pairwise:
            raise InputError(
                f"the {self.design} design compares completions in pairs: it needs "
                f"a pairwise rubric (mode: pairwise, e.g. pairwise or "
                f"general-pairwise); {rubric.name} is not one",
                field="rubric",
            )
        if self.design not in COMPARING and rubric.pairwise:
            raise InputError(
                f"the {self.design} design scores each completion: it needs a "
                f"pointwise rubric; {rubric.name} is pairwise (give a comparing "
                "design: round_robin, regular, swiss or anchor)",
                field="rubric",
            )
        if pointwise is not None and pointwise.pairwise:
            raise InputError(
                f"the pointwise rubric {pointwise.name} is pairwise; give one that "
                "scores a single response",
                field="pointwise",
            )
        if pointwise is None and self.design == "anchor":
            raise InputError(
                "the anchor design compares every completion with the one of "
                "median pointwise score: give the pointwise rubric that scores "
                "them",
                field="pointwise",
            )
        if pointwise is None and self.weight is not None:
            raise InputError(
                "a mixed reward (weight) adds the pointwise reward: give the pointwise rubric",
                field="pointwise",
            )

    def cost(self, k: int, rubric: Rubric, pointwise: Rubric | None = None) -> GroupCost:
        """The judge calls (each judge's) one group of ``k`` completions takes.

        These are at most, as identical completions are a tie without a call.
        """
        scorer = (
            pointwise
            if pointwise is not None
            else (rubric if self.design in ("pointwise", "listwise") else None)
        )
        if k == 1:
            return GroupCost(
                "pointwise",
                1,
                0,
                scorer.judge_calls if scorer else 0,
                0,
                "one completion: rewarded pointwise",
            )
        r = min(self.per_completion, k - 1)
        pairs = {
            "round_robin": k * (k - 1) // 2,
            "regular": k * (k - 1) // 2 if r >= k - 1 else k * r // 2,
            "swiss": r * (k // 2),
            "anchor": k - 1,
        }.get(self.design, 0)
        point = 0
        if self.design in ("pointwise", "anchor") or self.weight is not None:
            assert scorer is not None  # (check: these need one)
            point = k * scorer.judge_calls
        compare = pairs * rubric.judge_calls
        listwise = 1 if self.design == "listwise" else 0
        return GroupCost(
            self.design,
            k,
            pairs,
            point,
            compare + listwise,
            self._words(k, r, pairs, rubric, point, compare, listwise),
        )

    def _words(
        self, k: int, r: int, pairs: int, rubric: Rubric, point: int, compare: int, listwise: int
    ) -> str:
        per = rubric.judge_calls
        plural = "pair" if pairs == 1 else "pairs"
        orders = (
            f"{pairs} {plural} x {per} calls (both orders)"
            if per == 2
            else f"{pairs} {plural} x {per} calls ({per // 2} per order)"
        )
        design = {
            "round_robin": f"round robin: {orders}",
            "regular": f"{r}-regular design: {orders}",
            "swiss": f"{r} Swiss rounds: {orders}",
            "anchor": f"against the median's anchor: {orders}",
            "listwise": "listwise: the whole group in one call",
            "pointwise": "",
        }[self.design]
        parts = [
            p for p in (design, f"{point} pointwise calls ({k} completions)" if point else "") if p
        ]
        total = point + compare + listwise
        return f"{total} judge calls per judge per group of {k} ({'; '.join(parts)})"


@dataclass(frozen=True)
class GroupCost:
    """What one group costs.

    That is the design used, its size, the pairs it compares, the pointwise calls and the group
    design's calls (each judge's), and the same in words.
    """

    design: str
    k: int
    pairs: int
    pointwise_calls: int
    group_calls: int
    words: str

    @property
    def calls(self) -> int:
        """Every judge call the group takes, per judge."""
        return self.pointwise_calls + self.group_calls
