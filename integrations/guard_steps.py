"""What the trainers' guard does per step: its spec, each step's share, and what a step saw.

`GuardSpec` says what the guard (`jurybox.integrations.guard.RewardGuard`) does around each
batch. A share of a batch (the canaries' ``canaries=0.03``, the sentinel's ``sentinel_share``)
is not rounded up per step: `StepShares` gives each step its whole items and carries the
fraction to the next (`Carry`), so over a run the canaries and the sentinel's completions are the
configured shares of the completions at any batch size, a batch of one included, where one item
per step at the least would cost a batch of 16 an eighth more judge calls and a batch of one
three times as many. A step may then judge no canary or send no completion to the sentinel;
its drift test is updated only on steps that have values.

`StepReport` is what one step saw, which the adapters log.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.exploits import DEFAULT_CANARIES

if TYPE_CHECKING:
    from jurybox.calibration.stats.monitors import DriftMonitor, DriftState
    from jurybox.judges.jurors import JurorCheck, JurorFlag

__all__ = [
    "DEFAULT_CANARY_SHARE",
    "Carry",
    "GuardSpec",
    "StepReport",
    "StepShares",
    "asks_for_guard",
    "guard_spec",
]

#: The canaries' share of a batch when they are switched on without saying how many
#: (``canaries=True``), carried across steps.
DEFAULT_CANARY_SHARE = 0.03


@dataclass(frozen=True)
class GuardSpec:
    """What the guard does around each batch of a reward (all off by default).

    Attributes:
        prechecks: Do not send empty, punctuation-only, echoed and master-key answers to the
            judges (`jurybox.rubrics.exploits.precheck`).
        precheck_reward: A pre-checked answer's reward: ``"unscored"`` (the reward's unscored
            policy, with the pre-check as the reason) or a number (the floor you choose).
        canaries: Exploit canaries per step: a share of the completions sent (a float below 1,
            its fraction carried across steps: `StepShares`), a count per step (an int), or 0
            for none.
        canary_kinds: The canaries' kinds, each step's first drawn at random (`jurybox.rubrics.
            exploits.canary_items`).
        sentinel_share: The share of the completions sent the sentinel scores (its fraction
            carried across steps), when the guard has a sentinel.
        alpha: The drift tests' error rate: the chance of any false alarm over the run.
        baseline_steps: The first steps with values whose level each drift test compares with.
        margin: How far above its baseline level a statistic may rise before it is a drift.
        horizon: The run's steps, where known (a tighter threshold than an open-ended run's).
        juror_checks: Flag failing jurors per batch (`jurybox.judges.jurors.JurorCheck`), or None.
        stop_on_alarm: Stop training at an alarm (TRL: at the end of the step; verl: raise
            `jurybox.integrations.guard.RewardDrift`).
        seed: Seeds the guard's draws (where each share's carry starts, the completions the
            sentinel scores, each step's first canary kind): the same seed and batches give
            the same steps.
    """

    prechecks: bool = False
    precheck_reward: Literal["unscored"] | float = "unscored"
    canaries: float | int = 0
    canary_kinds: tuple[str, ...] = DEFAULT_CANARIES
    sentinel_share: float = 0.05
    alpha: float = 0.05
    baseline_steps: int = 10
    margin: float = 0.02
    horizon: int | None = None
    juror_checks: JurorCheck | None = None
    stop_on_alarm: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.precheck_reward, str):
            if self.precheck_reward != "unscored":
                raise InputError(
                    f"jurybox: precheck_reward={self.precheck_reward!r}: give 'unscored' (the "
                    "reward's unscored policy) or a number",
                    field="precheck_reward",
                )
        elif not math.isfinite(float(self.precheck_reward)):
            raise InputError("jurybox: precheck_reward must be finite", field="precheck_reward")
        if isinstance(self.canaries, bool) or self.canaries < 0:
            raise InputError(
                f"jurybox: canaries={self.canaries!r}: give a share of the batch (a float below "
                "1), a count (an int) or 0",
                field="canaries",
            )
        if isinstance(self.canaries, float) and self.canaries >= 1:
            raise InputError(
                f"jurybox: canaries={self.canaries!r}: a share is below 1; a count is an int",
                field="canaries",
            )
        if not 0 <= self.sentinel_share <= 1:
            raise InputError(
                f"jurybox: sentinel_share={self.sentinel_share!r}: a share of the batch, in [0, 1]",
                field="sentinel_share",
            )

    def canary_count(self, batch: int) -> int:
        """The most canaries a step of ``batch`` completions judges (a share: rounded up)."""
        if not self.canaries or batch < 1:
            return 0
        if isinstance(self.canaries, float):
            return math.ceil(self.canaries * batch)
        return int(self.canaries)

    def canary_mean(self, batch: int) -> float:
        """The canaries per step of ``batch`` completions over a run (a share: its mean)."""
        if not self.canaries or batch < 1:
            return 0.0
        if isinstance(self.canaries, float):
            return self.canaries * batch
        return float(self.canaries)

    def sentinel_count(self, batch: int) -> int:
        """The most completions of a step of ``batch`` the sentinel scores (rounded up)."""
        if self.sentinel_share <= 0 or batch < 1:
            return 0
        return min(batch, math.ceil(self.sentinel_share * batch))

    def sentinel_mean(self, batch: int) -> float:
        """The completions per step of ``batch`` the sentinel scores over a run."""
        return max(0.0, self.sentinel_share) * batch if batch >= 1 else 0.0

    def shares(self) -> StepShares:
        """Each step's canaries and sentinel completions, from this spec's seed."""
        return StepShares(self)

    def monitor(self) -> DriftMonitor:
        """A drift test of these parameters."""
        from jurybox.calibration.stats.monitors import DriftMonitor

        return DriftMonitor(
            alpha=self.alpha,
            baseline_steps=self.baseline_steps,
            margin=self.margin,
            horizon=self.horizon,
        )


class Carry:
    """A share of each step's items in whole items, the fraction carried to the next step.

    Step t takes ``floor(u + share * N_t) - floor(u + share * N_{t-1})`` of its items, where
    ``N_t`` counts the items of steps 1 to t and ``u`` in [0, 1) is drawn once from ``rng``. So
    after any step the items taken are within one of ``share * N_t`` (the long-run share is
    ``share`` at any batch size), a step of n items takes ``floor(share * n)`` or
    ``ceil(share * n)``, and each step's expected count, over ``u``, is ``share * n``.

    Args:
        share: The share, in [0, 1].
        rng: Draws ``u`` (where the carry starts).
    """

    def __init__(self, share: float, rng: random.Random) -> None:
        self.share = share
        self.start = rng.random()
        self.seen = 0
        self.taken = 0

    def take(self, items: int) -> int:
        """The items a step of ``items`` takes."""
        self.seen += max(0, items)
        due = math.floor(self.start + self.share * self.seen) - self.taken
        due = max(0, min(items, due))
        self.taken += due
        return due


class StepShares:
    """Each step's canaries and sentinel completions, as a `GuardSpec` says.

    A share carries its fraction across steps (`Carry`); a count of canaries is that many every
    step. Each share's carry starts where a draw from the spec's seed says.
    """

    def __init__(self, spec: GuardSpec) -> None:
        self.spec = spec
        rng = random.Random(f"jurybox-guard-{spec.seed}-carry")
        share = spec.canaries
        self.canaries = Carry(share, rng) if isinstance(share, float) and share > 0 else None
        self.sentinel = Carry(spec.sentinel_share, rng)

    def canary_count(self, sent: int) -> int:
        """The canaries of a step that sends ``sent`` completions to the judges."""
        if sent < 1 or not self.spec.canaries:
            return 0
        if self.canaries is None:
            return int(self.spec.canaries)
        return self.canaries.take(sent)

    def sentinel_count(self, sent: int) -> int:
        """The completions the sentinel scores of a step that sends ``sent``."""
        return self.sentinel.take(sent) if sent >= 1 else 0

    def next(self, sent: int) -> tuple[int, int]:
        """The canaries and the sentinel's completions of the next step, which sends ``sent``."""
        return self.canary_count(sent), self.sentinel_count(sent)


def asks_for_guard(
    prechecks: Any,
    canaries: Any,
    sentinel: Any,
    juror_checks: Any,
    stop_on_alarm: Any,
    precheck_reward: Any,
) -> bool:
    """Whether an adapter's keyword arguments switch any part of the guard on."""
    return bool(
        prechecks
        or canaries
        or sentinel is not None
        or juror_checks
        or stop_on_alarm
        or precheck_reward != "unscored"
    )


def guard_spec(
    *,
    prechecks: bool = False,
    precheck_reward: Literal["unscored"] | float = "unscored",
    canaries: bool | float | int = False,
    canary_kinds: Sequence[str] | None = None,
    sentinel_share: float = 0.05,
    juror_checks: JurorCheck | bool | None = None,
    stop_on_alarm: bool = False,
    drift: dict[str, Any] | None = None,
    seed: int = 0,
) -> GuardSpec:
    """A `GuardSpec` from an adapter's keyword arguments.

    ``canaries=True`` is `DEFAULT_CANARY_SHARE` of the batch; ``juror_checks=True`` is a default
    `jurybox.judges.jurors.JurorCheck`; ``drift`` holds the drift tests' ``alpha``,
    ``baseline_steps``, ``margin`` and ``horizon``.
    """
    if canaries is True:
        canaries = DEFAULT_CANARY_SHARE
    elif canaries is False:
        canaries = 0
    checks: JurorCheck | None
    if juror_checks is True:
        from jurybox.judges.jurors import JurorCheck

        checks = JurorCheck()
    else:
        checks = juror_checks or None
    unknown = sorted(set(drift or {}) - {"alpha", "baseline_steps", "margin", "horizon"})
    if unknown:
        raise InputError(
            f"jurybox: drift takes alpha, baseline_steps, margin and horizon; not {unknown[0]!r}",
            field="drift",
        )
    return GuardSpec(
        prechecks=prechecks,
        precheck_reward=precheck_reward,
        canaries=canaries,
        canary_kinds=tuple(canary_kinds) if canary_kinds is not None else DEFAULT_CANARIES,
        sentinel_share=sentinel_share,
        juror_checks=checks,
        stop_on_alarm=stop_on_alarm,
        seed=seed,
        **(drift or {}),
    )


@dataclass
class StepReport:
    """What the guard saw in one step (one batch).

    Attributes:
        step: The step (the guard's count of batches, from 1).
        batch: The batch's completions.
        prechecked: The completions not sent, as (sample, reason).
        canaries: The canaries judged (0 is a step like any other where the share carries).
        canary_reward: Their mean reward (unit scale), None where none was scored.
        sentinel: The completions sent to the sentinel (0: none this step).
        sentinel_gap: The mean of ``(1 + reward - sentinel) / 2`` over those both scored, None
            where none was (no completion sent, or the sentinel failed).
        canary_state: The canary rate's drift test after its last update (None: none yet).
        sentinel_state: The sentinel gap's drift test after its last update (None: none yet).
        alarm: Whether either test has raised an alarm, at this step or before.
        flags: The jurors flagged in this batch.
    """

    step: int
    batch: int
    prechecked: list[tuple[str, str]] = field(default_factory=list)
    canaries: int = 0
    canary_reward: float | None = None
    sentinel: int = 0
    sentinel_gap: float | None = None
    canary_state: DriftState | None = None
    sentinel_state: DriftState | None = None
    alarm: bool = False
    flags: list[JurorFlag] = field(default_factory=list)

    @property
    def evidence(self) -> float | None:
        """The larger drift evidence of the two tests (None: neither runs)."""
        states = [s for s in (self.canary_state, self.sentinel_state) if s is not None]
        return max(s.evidence for s in states) if states else None
