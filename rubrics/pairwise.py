"""Pairwise judging: which of two answers is better, asked of every judge in both orders.

A pairwise rubric's scale runs from 0 (the answer shown second is better) to 1 (the first is),
symmetric about 0.5. Every judge sees each item twice, A first ("ab") and B first ("ba"); its
votes are stored as they came, each with its ``order``, their score turned into **A's share**
(1: A is better) so the two orders can be compared. A judge whose two orders point to
different answers is *inconsistent* on the item (position bias at work): its vote counts as a
tie or as unscored, as the rubric's ``inconsistent`` says; a tie on its expected score too (0.5,
not the mean of two contradictory readings, which would read as a preference). A consistent
judge's vote is the mean of its two A shares (and of its two expected scores: the
order-debiased verdict).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .item import Winner
from .rubric import Criterion, Rubric, Scale
from .verdict import Vote

EPS = 1e-9
PREFERENCE = {"a": 1.0, "tie": 0.5, "b": 0.0}  # human preference labels, as A's share


def a_share(criterion: Criterion, value: float) -> float:
    """The point of the criterion's scale that ``value`` becomes when the answers swap places.

    It is 1 - value, exactly a scale value (the rubric checked the scale is symmetric).
    """
    for v in criterion.scale.values:
        if math.isclose(v, 1.0 - value, abs_tol=EPS):
            return v
    raise ValueError(f"{value!r} has no mirror on the scale {criterion.scale.short()}")


def side(value: float) -> int:
    """1 when A is better (share above one half), -1 when B is, 0 for a tie."""
    return 1 if value > 0.5 + EPS else -1 if value < 0.5 - EPS else 0


def winner_of(value: float | None) -> Winner | None:
    """The winner a share means: "a", "b" or "tie"; None without a value."""
    if value is None:
        return None
    return ("tie", "a", "b")[side(value)]


def p_a_better(criterion: Criterion, vote: Vote) -> float | None:
    """The probability the vote's judge gave to A being better.

    It is the mass of its answer distribution on the points that favour A (in the order it saw);
    None without one.
    """
    if not vote.scored or vote.distribution is None:
        return None
    values = criterion.scale.answer_texts()
    mass = 0.0
    for text, p in vote.distribution.items():
        share = values[text] if vote.order != "ba" else 1.0 - values[text]
        if side(share) > 0:
            mass += p
    return mass


def combine_orders(criterion: str, votes: Sequence[Vote], inconsistent: str) -> list[Vote]:
    """One vote per judge from its votes in both orders on ``criterion``.

    The jury aggregates these; agreement with humans compares them.
    """
    by_judge: dict[str, dict[str | None, Vote]] = {}
    for v in votes:
        by_judge.setdefault(v.judge, {})[v.order] = v
    out = []
    for judge, pair in by_judge.items():
        ab, ba = pair.get("ab"), pair.get("ba")
        if ab is None or ba is None:
            out.append(
                Vote(
                    judge=judge,
                    criterion=criterion,
                    error="asked in one order only (a pairwise vote needs both)",
                )
            )
            continue
        failed = next((v for v in (ab, ba) if not v.scored), None)
        if failed is not None:
            first = "A" if failed.order == "ab" else "B"
            out.append(
                Vote(judge=judge, criterion=criterion, error=f"with {first} first: {failed.error}")
            )
            continue
        assert ab.score is not None and ba.score is not None
        expected = None
        if ab.expected is not None and ba.expected is not None:
            expected = (ab.expected + ba.expected) / 2
        if side(ab.score) != side(ba.score):
            why = (
                f"inconsistent under order swap: with A first it chose "
                f"{winner_of(ab.score)}, with B first {winner_of(ba.score)}"
            )
            if inconsistent == "unscored":
                out.append(Vote(judge=judge, criterion=criterion, error=why))
            else:
                out.append(
                    Vote(
                        judge=judge,
                        criterion=criterion,
                        score=0.5,
                        expected=None if expected is None else 0.5,
                        label="tie",
                        raw=why,
                    )
                )
            continue
        out.append(
            Vote(
                judge=judge, criterion=criterion, score=(ab.score + ba.score) / 2, expected=expected
            )
        )
    return out


def jury_p_a(rubric: Rubric, votes: Sequence[Vote]) -> float | None:
    """The jury's probability that A is better on a one-criterion pairwise rubric.

    It is, per judge, the mean over its two orders, then the mean over judges with both; None
    when no judge has a distribution in both orders.
    """
    (criterion,) = rubric.criteria
    per_judge: dict[str, list[float | None]] = {}
    for v in votes:
        if v.criterion == criterion.name:
            per_judge.setdefault(v.judge, []).append(p_a_better(criterion, v))
    probs = []
    for ps in per_judge.values():
        known = [p for p in ps if p is not None]
        if len(ps) == 2 and len(known) == 2:
            probs.append(sum(known) / 2)
    return sum(probs) / len(probs) if probs else None


def inconsistent_judges(rubric: Rubric, votes: Sequence[Vote]) -> list[tuple[str, str]]:
    """The (judge, criterion) pairs whose two orders point to different answers."""
    out = []
    for c in rubric.criteria:
        seen: dict[str, dict[str | None, Vote]] = {}
        for v in votes:
            if v.criterion == c.name:
                seen.setdefault(v.judge, {})[v.order] = v
        for judge, pair in seen.items():
            ab, ba = pair.get("ab"), pair.get("ba")
            if (
                ab is not None
                and ba is not None
                and ab.score is not None
                and ba.score is not None
                and side(ab.score) != side(ba.score)
            ):
                out.append((judge, c.name))
    return out


def human_scale(criterion: Criterion) -> Scale:
    """The scale human preference labels of a pairwise criterion are read on.

    It is ``a`` (A is better, 1), ``tie`` (0.5) and ``b`` (0) for a scale of those points (ties
    optional), else the criterion's numbers (A's share).
    """
    values = criterion.scale.values
    if set(values) <= {0.0, 0.5, 1.0}:
        return Scale(labels={k: v for k, v in PREFERENCE.items() if v in values})
    return Scale(explicit=values)
