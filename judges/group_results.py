"""What group rewards start from and end in: a `Group` of completions, its `GroupResult`.

And whether a group's spread is signal: `sign_flip_test` (its comparisons against coin flips of
the same comparisons), `spread_signal`, `no_signal_share`. See `jurybox.judges.groups`, which
re-exports these names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from .group_spec import Design
from .resolution import Use


@dataclass(frozen=True)
class Group:
    """One prompt's completions.

    ``fields`` are the item fields they share (question, reference, context, and any the rubrics
    use), ``completions`` the responses; ``key`` names the group in ids and logs.
    """

    key: str
    fields: Mapping[str, Any]
    completions: Sequence[str]


class Comparison(BaseModel):
    """One comparison behind a completion's reward, from that completion's side."""

    other: int = Field(description="The other completion's position in the group.")
    share: float | None = Field(
        description="This completion's share of the win: 1 better, 0 "
        "worse, 0.5 a tie (a graded or expected share between); null "
        "when unscored."
    )
    winner: Literal["this", "other", "tie"] | None = Field(
        None, description="Which answer the jury found better (null when unscored)."
    )
    used: Use | None = Field(None, description="expected or score: what the share was read from.")
    reason: str | None = Field(
        None,
        description="Why the comparison is unscored, or why its "
        "chosen scores stood where expected ones were asked for.",
    )
    inconsistent: list[str] = Field(
        default_factory=list,
        description="Judges whose two orders pointed to different answers (counted as a tie).",
    )
    judged: bool = Field(True, description="False for identical answers: a tie, not asked.")


class CompletionReward(BaseModel):
    """One completion's reward and what it came from."""

    reward: float | None = Field(description="The reward (null when it has none: see reason).")
    reason: str | None = Field(None, description="Why it has no reward.")
    pointwise: float | None = Field(
        None, description="Its pointwise reward, where the design asked for one."
    )
    term: float | None = Field(
        None,
        description="The group term: relative value, listwise "
        "score or pointwise score on [low, high], centred as asked.",
    )
    strength: float | None = Field(
        None, description="Bradley-Terry log-strength (mean 0 in the group)."
    )
    win_share: float | None = Field(
        None, description="Mean share over its scored comparisons (ties half)."
    )
    used: Use | None = Field(
        None,
        description="expected when every verdict behind it was read "
        "from expected scores, else score.",
    )
    note: str | None = Field(
        None, description="Why chosen scores stood where expected ones were asked for."
    )
    comparisons: list[Comparison] = Field(default_factory=list)


class GroupResult(BaseModel):
    """The rewards of one group's completions, in order, with what each came from."""

    id: str = Field(description="The group's id.")
    design: Design = Field(description="The design used (pointwise for a group of one).")
    rewards: list[float | None] = Field(description="One reward per completion, in order.")
    completions: list[CompletionReward]
    calls: int = Field(description="Judge calls per judge the design plans for the group.")
    asked: int = Field(
        description="Judge calls per judge actually asked (identical answers "
        "and repeated items are not asked twice; cached ones count)."
    )
    fallback: str | None = Field(
        None,
        description="Why the group was judged otherwise than asked (a group of one: pointwise).",
    )
    position_effect: list[float | None] | None = Field(
        None,
        description="Listwise: per position shown (first letter first), the mean score "
        "there minus the call's mean (on [0, 1]); the shuffle makes it the position's effect.",
    )
    signal: bool | None = Field(
        None,
        description="Whether the group's spread is signal: false when its rewards all tie, or "
        "when its comparisons' spread is no larger than coin flips of the same comparisons make "
        "(null_p above 0.05); true when it is; null when the test cannot tell (too few "
        "comparisons to reach 0.05, a design without comparisons whose rewards differ, or a "
        "mixed reward whose comparisons show none: its pointwise part may). "
        "Groups with false carry no signal: drop them (as DAPO drops groups of zero spread).",
    )
    null_p: float | None = Field(
        None,
        description="Comparing designs: the share of sign flips of the comparisons (each pair's "
        "outcome a coin flip: its share s or 1 - s) whose win shares spread at least as far as "
        "the observed ones; exact up to 2^12 flips, else a seeded simulation of 4095.",
    )

    @property
    def unscored(self) -> list[tuple[int, str]]:
        """The completions without a reward and why."""
        return [
            (k, c.reason or "no reward") for k, c in enumerate(self.completions) if c.reward is None
        ]

    @property
    def spread(self) -> float | None:
        """The rewards' standard deviation (None with fewer than two rewards)."""
        known = [r for r in self.rewards if r is not None]
        return float(np.std(known)) if len(known) > 1 else None


#: The level of the sign-flip test below which a group's spread counts as signal.
SIGNAL_ALPHA = 0.05
#: Sign flips enumerated exactly up to 2 ** EXACT_PAIRS; more comparisons are simulated.
EXACT_PAIRS = 12
#: Simulated sign flips beyond that (seeded by the group's generator).
SIMULATED_FLIPS = 4095


def sign_flip_test(
    k: int, i: Sequence[int], j: Sequence[int], share: Sequence[float], rng: np.random.Generator
) -> tuple[float | None, bool]:
    """Whether a group's comparisons spread its completions further than coin flips would.

    The null is that every comparison is a coin flip between its two answers (what a judge
    that contradicts itself under the order swap says): the share ``s`` of pair ``(i, j)`` is
    as likely as ``1 - s``. The statistic is the standard deviation of the completions' win
    shares (mean share over their comparisons); its null distribution flips the sign of each
    ``s - 0.5``, over all ``2^m`` patterns when ``m <= EXACT_PAIRS`` (exact), else over
    `SIMULATED_FLIPS` seeded draws (p counting the observed pattern once).

    Args:
        k: The group's size.
        i: Each scored comparison's first completion.
        j: Its second.
        share: The first completion's share of the win (1: it is better).
        rng: The group's generator (the simulation's seed).

    Returns:
        The p-value (None without a scored comparison) and whether the test can reach
        `SIGNAL_ALPHA` at all (the least p it can give is no larger: a round robin of fewer than
        six completions, one comparison per judge, cannot).

    >>> p, reachable = sign_flip_test(2, [0], [1], [1.0], np.random.default_rng(0))
    >>> p, reachable
    (1.0, False)
    """
    m = len(share)
    if m == 0:
        return None, False
    d = np.asarray(share, dtype=float) - 0.5
    degree = np.bincount(np.concatenate([i, j]).astype(int), minlength=k).astype(float)
    met = degree > 0
    incidence = np.zeros((m, k))
    incidence[np.arange(m), i] = 1.0 / degree[i]
    incidence[np.arange(m), j] = -1.0 / degree[j]
    exact = m <= EXACT_PAIRS
    if exact:
        signs = 1.0 - 2.0 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1)
        null = ((signs * d) @ incidence)[:, met].std(axis=1)
    else:  # in chunks: a large group's flips never held at once
        null = np.concatenate(
            [
                ((rng.choice([-1.0, 1.0], size=(n, m)) * d) @ incidence)[:, met].std(axis=1)
                for n in np.diff(np.r_[0:SIMULATED_FLIPS:512, SIMULATED_FLIPS])
            ]
        )
    observed = float((d @ incidence)[met].std())
    tol = 1e-12 * max(1.0, observed)
    hits = int(np.count_nonzero(null >= observed - tol))
    if exact:
        least = float(np.mean(null >= null.max() - tol))
        return hits / len(null), least <= SIGNAL_ALPHA
    return (hits + 1) / (len(null) + 1), True


def spread_signal(spread: float | None, null_p: float | None, reachable: bool) -> bool | None:
    """Whether a group's spread is signal: False when its rewards all tie, None when unknown.

    Otherwise, whether the sign-flip test's p-value (``null_p``) is at most `SIGNAL_ALPHA`;
    None when there is none or the test cannot reach that level (``reachable``).
    """
    if spread is not None and spread <= 1e-12:
        return False
    if null_p is None or not reachable:
        return None
    return null_p <= SIGNAL_ALPHA


def no_signal_share(results: Sequence[GroupResult]) -> float:
    """The share of groups whose spread is no signal (`GroupResult.signal` false), NaN for none.

    It counts the groups whose rewards all tie and those whose comparisons spread them no
    further than coin flips; every one of them is a group GRPO should not learn from.
    """
    return float(np.mean([r.signal is False for r in results])) if results else float("nan")
