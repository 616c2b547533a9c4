"""From what a group's judging read to its rewards.

`GroupJob` (`jurybox.judges.groups`) asks the jury and records what it reads in a `GroupState`
per group; `group_result` turns that into the group's `GroupResult`: each completion's reward
(the design's term, mixed with the pointwise reward when asked), its comparisons, and whether
the group's spread is signal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from jurybox.rubrics import Rubric

from . import rankings
from .group_results import (
    Comparison,
    CompletionReward,
    Group,
    GroupResult,
    sign_flip_test,
    spread_signal,
)
from .group_spec import COMPARING, GroupSpec
from .resolution import Reading, ResolvedReward, Use


@dataclass
class PairRead:
    """A comparison read from the lower-numbered completion's side."""

    share: float | None
    used: Use | None
    reason: str | None
    inconsistent: list[str] = field(default_factory=list)
    judged: bool = True


@dataclass
class GroupState:
    """What is known of one group so far."""

    index: int
    group: Group
    k: int
    rng: np.random.Generator
    fallback: bool = False
    pointwise: list[Reading | None] = field(default_factory=list)
    compared: dict[tuple[int, int], PairRead] = field(default_factory=dict)
    listed: list[Reading | None] = field(default_factory=list)
    position: list[list[float]] = field(default_factory=list)
    asked: int = 0


def scored(s: GroupState) -> tuple[list[int], list[int], list[float]]:
    """The group's scored comparisons: first completions, second ones, the first's shares."""
    i, j, share = [], [], []
    for (a, b), read in s.compared.items():
        if read.share is not None:
            i.append(a)
            j.append(b)
            share.append(read.share)
    return i, j, share


def group_result(
    s: GroupState,
    spec: GroupSpec,
    rubric: Rubric,
    pointwise_rubric: Rubric | None,
    scorer: Rubric | None,
    point_reward: ResolvedReward | None,
) -> GroupResult:
    """One group's result from what its judging read.

    Args:
        s: What is known of the group.
        spec: How it was judged.
        rubric: The design's rubric.
        pointwise_rubric: The pointwise rubric, if any.
        scorer: The rubric its pointwise readings are of (None: none were made).
        point_reward: How a pointwise verdict is read as a reward (None: none were made).

    Returns:
        Its rewards, each completion's account and whether its spread is signal.
    """
    cost = spec.cost(s.k, rubric, pointwise_rubric)
    if s.fallback:
        reading = s.pointwise[0]
        assert reading is not None
        assert scorer is not None
        done = CompletionReward(
            reward=reading.value,
            reason=reading.why or None,
            pointwise=reading.value,
            used=reading.used,
            note=reading.note or None,
        )
        return GroupResult(
            id=s.group.key,
            design="pointwise",
            rewards=[reading.value],
            completions=[done],
            calls=cost.calls,
            asked=s.asked,
            fallback=f"a group of one completion is rewarded pointwise "
            f"({scorer.name}); nothing to compare it with",
        )
    term = np.full(s.k, np.nan)
    theta = np.full(s.k, np.nan)
    shares = np.full(s.k, np.nan)
    why: list[str | None] = [None] * s.k
    if spec.design in COMPARING:
        i, j, share = scored(s)
        if i:
            term, theta, shares = rankings.relative(s.k, i, j, share, spec.relative, spec.prior)
        for c in range(s.k):
            if math.isnan(term[c]):
                mine = [r for (a, b), r in s.compared.items() if c in (a, b)]
                why[c] = (
                    (
                        "all its comparisons unscored: "
                        + "; ".join(dict.fromkeys(r.reason or "unscored" for r in mine))
                    )
                    if mine
                    else (
                        "no comparison: "
                        + (
                            "no completion of the group has a pointwise score to choose the anchor"
                            if spec.design == "anchor"
                            else "none asked"
                        )
                    )
                )
    elif spec.design == "listwise":
        for c, reading in enumerate(s.listed):
            if reading is not None and reading.value is not None:
                term[c] = reading.value
            else:
                why[c] = reading.why if reading is not None else "not judged"
    else:  # pointwise: the term on [0, 1] whatever the reward's scale
        assert point_reward is not None
        bound = point_reward.reward
        for c, reading in enumerate(s.pointwise):
            if reading is not None and reading.value is not None:
                term[c] = (
                    reading.value
                    if bound.spec.scale == "unit"
                    else ((reading.value - bound.low) / (bound.high - bound.low))
                )
            else:
                why[c] = reading.why if reading is not None else "not judged"
    term = rankings.scaled(term, spec.low, spec.high, spec.centred)
    completions = []
    for c in range(s.k):
        readings = _readings(s, c)
        used: Use | None = None
        notes = [r[1] for r in readings if r[1]]
        if readings:
            used = "expected" if all(u == "expected" for u, _ in readings) else "score"
        own: float | None = None if math.isnan(term[c]) else float(term[c])
        point = s.pointwise[c]
        point_value = point.value if point is not None else None
        reward, reason = own, why[c]
        if spec.weight is not None and spec.design != "pointwise":
            if point_value is None:
                reward, reason = (
                    None,
                    "no pointwise reward: " + (point.why if point is not None else "not judged"),
                )
            elif own is not None:
                reward = point_value + spec.weight * own
        comparisons = [
            _comparison(c, a, b, r) for (a, b), r in sorted(s.compared.items()) if c in (a, b)
        ]
        completions.append(
            CompletionReward(
                reward=reward,
                reason=reason if reward is None else None,
                pointwise=point_value,
                term=own,
                strength=None if math.isnan(theta[c]) else float(theta[c]),
                win_share=None if math.isnan(shares[c]) else float(shares[c]),
                used=used,
                note="; ".join(dict.fromkeys(notes)) or None,
                comparisons=comparisons,
            )
        )
    effect = None
    if spec.design == "listwise":
        effect = [float(np.mean(v)) if v else None for v in s.position]
    null_p: float | None = None
    reachable = False
    if spec.design in COMPARING:
        null_p, reachable = sign_flip_test(s.k, *scored(s), rng=s.rng)
    result = GroupResult(
        id=s.group.key,
        design=spec.design,
        rewards=[c.reward for c in completions],
        completions=completions,
        calls=cost.calls,
        asked=s.asked,
        position_effect=effect,
        null_p=null_p,
    )
    result.signal = spread_signal(result.spread, null_p, reachable)
    if result.signal is False and spec.weight is not None and (result.spread or 0) > 1e-12:
        result.signal = None  # the comparisons show none; the pointwise reward may
    return result


def _readings(s: GroupState, c: int) -> list[tuple[Use, str]]:
    out: list[tuple[Use, str]] = []
    for reading in (s.pointwise[c], s.listed[c]):
        if reading is not None and reading.value is not None:
            out.append((reading.used, reading.note))
    for (a, b), r in s.compared.items():
        if c in (a, b) and r.share is not None and r.used is not None:
            out.append((r.used, r.reason or ""))
    return out


def _comparison(c: int, a: int, b: int, read: PairRead) -> Comparison:
    other = b if c == a else a
    share = None if read.share is None else (read.share if c == a else 1.0 - read.share)
    winner: Literal["this", "other", "tie"] | None = None
    if share is not None:
        winner = "this" if share > 0.5 + 1e-9 else "other" if share < 0.5 - 1e-9 else "tie"
    return Comparison(
        other=other,
        share=share,
        winner=winner,
        used=read.used,
        reason=read.reason,
        inconsistent=read.inconsistent,
        judged=read.judged,
    )
