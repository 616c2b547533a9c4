"""An anytime-valid drift monitor for a stream of per-step values on [0, 1].

(Interface committed first for #62.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DriftState:
    """Where a monitor stands after a step."""

    step: int
    baseline: float | None
    upper: float | None
    recent_mean: float | None
    evidence: float
    threshold: float
    alarm: bool
    alarm_step: int | None


class DriftMonitor:
    """Flags a rise of a stream's mean above its first steps' level, however often it is read."""

    def __init__(
        self,
        alpha: float = 0.05,
        baseline_steps: int = 10,
        margin: float = 0.02,
        horizon: int | None = None,
        bets: Sequence[float] = (0.5, 1.0, 2.0),
    ) -> None:
        self.alpha, self.baseline_steps, self.margin = alpha, baseline_steps, margin
        self.horizon, self.bets = horizon, tuple(bets)

    def update(self, values: Sequence[float] | np.ndarray) -> DriftState:
        """Add one step's values; the state after it."""
        raise NotImplementedError

    def describe(self) -> str:
        """The monitor in plain words, for a log."""
        raise NotImplementedError


def drift_alarms(x: np.ndarray, **monitor: float | int | None) -> np.ndarray:
    """The alarm step of each run of ``x`` (runs, steps, values per step); -1 where none."""
    raise NotImplementedError
