"""An anytime-valid drift monitor for a stream of per-step values on [0, 1].

A trainer's reward can be gamed quietly: the policy finds what the reward judge likes and a
second judge (the sentinel) does not. Per sampled completion the gap ``g = (1 + reward -
sentinel) / 2`` is on [0, 1] and its mean stays put while both judges agree; a canary's reward
(an exploit answer the jury should floor) stays put while the jury does not change. The monitor
watches such a stream, one step (several values) at a time, and raises an alarm when its mean
rises above the level of its first steps, with a false-alarm probability that holds however
often it is read (every step, as a trainer does).

**The baseline.** The values of the first ``baseline_steps`` steps (``n`` of them) give the
level ``u0 = U + margin``, where ``U`` is the upper end of the betting confidence sequence for
their mean at ``alpha / 2`` (`jurybox.calibration.stats.sequences.betting_interval` with
``horizon=n`` and ``grid=GRID``: Waudby-Smith and Ramdas 2023).

**The monitor.** After the baseline, for each bet ``lam`` of ``bets`` (capped at ``0.9 / u0``,
so that every factor ``1 + lam (x - u0)`` is at least 0.1), with ``D_s`` the sum over the values
``x`` of step ``s`` of ``log(1 + lam (x - u0))`` (steps counted from the first after the
baseline), the statistic

    E_t = max(E_{t-1}, -p_t) + D_t,  E_0 = -inf,
    that is  E_t = max_{k <= t} (D_k + ... + D_t - p_k)

is a CUSUM of betting processes (an e-detector: Shin, Ramdas and Rinaldo, "E-detectors: a
nonparametric framework for sequential change detection"), each restarted at a step ``k`` and
bet against ``u0``. The alarm comes at the first step where ``max_lam E_t``
reaches the threshold ``c``:

- with ``horizon`` (the stream's number of steps, the trainer's ``max_steps``): ``p_k = 0`` and
  ``c = log(R |bets| 2 / alpha)``, ``R = max(horizon - baseline_steps, 1)`` the restarts;
- without: ``alpha`` is spent over the restarts as ``6 / (pi^2 k^2)`` (which sums to 1):
  ``p_k = log(pi^2 k^2 / 6)`` and ``c = log(|bets| 2 / alpha)``. A late drift then needs more
  evidence than with a horizon: a restart at the 500th step needs 17.7 (at alpha 0.05 and
  three bets) against 11.0 with a horizon of 500 steps after the baseline.

**The guarantee.** Suppose (the null) that there is a level ``mu0`` such that every value of the
baseline steps has conditional mean ``mu0`` given everything before it (the earlier steps and the
earlier values of its own step), and every later value has conditional mean at most ``mu0 +
margin``; and that the number of values in each step does not depend on the values. Then the
probability of any alarm (at any step within ``horizon``, or ever without one) is at most
``alpha``:

1. Under the null the hedged betting process at ``mu0`` is a nonnegative martingale, so by
   Ville's inequality ``P(U < mu0) <= alpha / 2`` (the grid's bounds rounded outwards, as
   ``betting_interval`` has them).
2. Given the baseline's values, on ``U >= mu0`` every later conditional mean is at most ``mu0 +
   margin <= u0``; for a restart ``k`` and a bet ``lam`` (both fixed once the baseline is known)
   the product of ``1 + lam (x - u0)`` over the values from step ``k`` on is a nonnegative
   supermartingale starting at 1 (each factor's conditional mean is ``1 + lam (mean - u0) <=
   1``), so by Ville's inequality it ever reaches ``exp(c + p_k)`` with probability at most
   ``exp(-c - p_k)``.
3. The alarm means some restart's and bet's process reached that level; a union bound over
   the ``|bets|`` bets and the restarts (``R`` of them, or all with weights ``6 / (pi^2 k^2)``)
   gives at most ``alpha / 2``; with step 1, ``alpha``.

So the guarantee is conditional on that null, which says nothing of how the stream got there: a
rise smaller than ``margin`` (plus the baseline's width) is allowed by it and may never alarm,
and a benign rise (a reward and a sentinel with different rubrics that part ways honestly)
alarms by design. Steps past ``horizon`` are still watched, but their alarms are outside the
guarantee. The baseline's width sets the delay: ``baseline_steps`` times the values per step is
the knob (perf/RESULTS.md, "Reward drift").

`drift_alarms` is the same monitor over many runs at once (the simulations), equal to
`DriftMonitor` run by run; `baseline_uppers` is ``betting_interval``'s upper end for many rows
at once.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .sequences import predictable_bets

#: The baseline search's grid: its bound is found to about ``1 / GRID**2`` (2.5e-5), at a fifth
#: of the cost of `jurybox.calibration.stats.sequences.GRID`'s.
GRID = 200
#: The largest bet is ``BET_CAP / u0``: every factor ``1 + lam (x - u0)`` is at least 0.1.
BET_CAP = 0.9


@dataclass(frozen=True)
class DriftState:
    """Where a monitor stands after a step.

    Attributes:
        step: The steps seen so far (1 after the first).
        baseline: The baseline's mean; None until its steps are in.
        upper: The level watched, ``u0`` (the baseline's upper end plus the margin); None until
            the baseline's steps are in.
        recent_mean: The mean of the values of the last ``baseline_steps`` steps (None before
            any value).
        evidence: The CUSUM's log wealth, ``max(max_lam E_t, 0)`` (0 during the baseline).
        threshold: The evidence that raises the alarm, ``c``.
        alarm: Whether the alarm has been raised (at this step or before: it stays raised).
        alarm_step: The step of the first alarm; None without one.
    """

    step: int
    baseline: float | None
    upper: float | None
    recent_mean: float | None
    evidence: float
    threshold: float
    alarm: bool
    alarm_step: int | None


def _checked_settings(
    alpha: float, baseline_steps: int, margin: float, horizon: int | None, bets: Sequence[float]
) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1); got {alpha}")
    if baseline_steps < 1:
        raise ValueError(f"baseline_steps must be at least 1; got {baseline_steps}")
    if not margin >= 0.0:
        raise ValueError(f"the margin must be at least 0; got {margin}")
    if horizon is not None and horizon < 1:
        raise ValueError(f"the horizon must be at least 1 step; got {horizon}")
    if len(bets) == 0 or not all(b > 0 for b in bets):
        raise ValueError(f"the bets must be positive, at least one; got {tuple(bets)}")


def _threshold_and_restart(
    alpha: float, baseline_steps: int, horizon: int | None, n_bets: int
) -> tuple[float, bool]:
    """The alarm's threshold ``c``, and whether each restart pays ``p_k`` (no horizon)."""
    if horizon is None:
        return math.log(n_bets * 2.0 / alpha), True
    restarts = max(horizon - baseline_steps, 1)
    return math.log(restarts * n_bets * 2.0 / alpha), False


def _penalty(k: int, spend: bool) -> float:
    """``p_k``: the restart at the ``k``-th step after the baseline (1-based)."""
    return math.log(math.pi**2 * k * k / 6.0) if spend else 0.0


def _checked_values(values: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(x)) or np.any((x < 0.0) | (x > 1.0)):
        raise ValueError("a drift monitor takes values in [0, 1]")
    return x


def baseline_uppers(x: np.ndarray, alpha: float, grid: int = GRID) -> np.ndarray:
    """The upper end of ``betting_interval(row, alpha, horizon=len(row), grid=grid)`` per row.

    The same search as `jurybox.calibration.stats.sequences.betting_interval` (a grid, then a
    grid within the last admitted cell, rounded outwards), many rows at once.

    Args:
        x: Values in [0, 1], one row per run: shape (runs, n).
        alpha: The sequence's level.
        grid: Candidate means on [0, 1] (the bound is found to about ``1 / grid**2``).

    Returns:
        The upper ends, shape (runs,): 1 where a row is empty.
    """
    x = np.atleast_2d(np.asarray(x, dtype=float))
    runs, n = x.shape
    if n == 0:
        return np.ones(runs)
    threshold = np.log(1.0 / alpha)
    bets = np.stack([predictable_bets(row, alpha / 2.0, n) for row in x])
    chunk = max(1, 4_000_000 // ((grid + 1) * n))

    def admitted(candidates: np.ndarray) -> np.ndarray:
        # candidates: (runs, C) -> admitted (runs, C), as sequences.log_wealth's last column.
        out = np.empty(candidates.shape, dtype=bool)
        for start in range(0, runs, chunk):
            rows = slice(start, start + chunk)
            mu = candidates[rows, :, None]
            b, v = bets[rows, None, :], x[rows, None, :]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                diff = v - mu
                up = np.clip(b, -0.5 / (1.0 - mu), 0.5 / mu)
                down = np.clip(b, -0.5 / mu, 0.5 / (1.0 - mu))
                log_up = np.log1p(up * diff).sum(axis=2)
                log_down = np.log1p(-down * diff).sum(axis=2)
            wealth = np.log(0.5) + np.maximum(log_up, log_down)
            m = candidates[rows]
            wealth[(m < 0.0) | (m > 1.0) | np.isnan(wealth)] = np.inf
            out[rows] = wealth < threshold
        return out

    coarse = np.linspace(0.0, 1.0, grid + 1)
    ok = admitted(np.broadcast_to(coarse, (runs, grid + 1)))
    some = ok.any(axis=1)
    last = grid - np.argmax(ok[:, ::-1], axis=1)
    step = 1.0 / grid
    start = coarse[last]
    fine = np.linspace(start, np.minimum(1.0, start + step), grid + 1, axis=1)
    fine_ok = admitted(fine)
    high = fine[np.arange(runs), grid - np.argmax(fine_ok[:, ::-1], axis=1)]
    return np.where(some, np.minimum(1.0, high + step / grid), 1.0)


def _capped_bets(bets: Sequence[float], upper: float | np.ndarray) -> np.ndarray:
    """The bets against ``u0``, each at most ``BET_CAP / u0``: shape (..., |bets|)."""
    u = np.asarray(upper, dtype=float)[..., None]
    return np.minimum(np.asarray(bets, dtype=float), BET_CAP / u)


class DriftMonitor:
    """Flags a rise of a stream's mean above its first steps' level, however often it is read.

    Feed it one step's values at a time (`update`); it learns the level from the first
    ``baseline_steps`` steps and then raises an alarm, with a false-alarm probability of at most
    ``alpha`` under the module's null, once the values' mean has risen above that level plus
    ``margin``. The statistic and the guarantee's proof are in the module's text.

    Args:
        alpha: The false-alarm probability: half for the baseline's bound, half for the
            monitor.
        baseline_steps: The steps whose values set the level. More values (steps times values
            per step) give a narrower bound and a shorter delay.
        margin: How far above the baseline's upper bound the mean may go without an alarm.
        horizon: The stream's number of steps (a trainer's ``max_steps``), when known: the
            threshold is then that of ``horizon - baseline_steps`` restarts; without one,
            ``alpha`` is spent over the restarts as ``6 / (pi^2 k^2)``.
        bets: The betting fractions tried at once (each capped at ``0.9 / u0``); small bets
            catch small rises, large ones large rises sooner.
        grid: The baseline search's grid (`baseline_uppers`).

    Raises:
        ValueError: A setting out of its range, or (from `update`) a value outside [0, 1].
    """

    def __init__(
        self,
        alpha: float = 0.05,
        baseline_steps: int = 10,
        margin: float = 0.02,
        horizon: int | None = None,
        bets: Sequence[float] = (0.5, 1.0, 2.0),
        grid: int = GRID,
    ) -> None:
        _checked_settings(alpha, baseline_steps, margin, horizon, bets)
        self.alpha, self.baseline_steps, self.margin = alpha, baseline_steps, margin
        self.horizon, self.bets, self.grid = horizon, tuple(bets), grid
        self.threshold, self._spend = _threshold_and_restart(
            alpha, baseline_steps, horizon, len(self.bets)
        )
        self.step = 0
        self.baseline_: float | None = None
        self.upper_: float | None = None
        self.alarm_step_: int | None = None
        self._baseline_values: list[np.ndarray] = []
        self._lam = np.zeros(0)
        self._evidence = np.full(len(self.bets), -np.inf)
        self._recent: deque[tuple[float, int]] = deque(maxlen=baseline_steps)

    def update(self, values: Sequence[float] | np.ndarray) -> DriftState:
        """Add one step's values (any number, none included); the state after it.

        Unscored values are the caller's to leave out (and count): the monitor takes numbers
        only, and a step without any still counts as a step.

        Args:
            values: The step's values, each in [0, 1].

        Returns:
            The monitor's state after the step.

        Raises:
            ValueError: A value outside [0, 1] (or not finite).
        """
        x = _checked_values(values).ravel()
        self.step += 1
        self._recent.append((float(x.sum()), x.size))
        if self.step <= self.baseline_steps:
            self._baseline_values.append(x)
            if self.step == self.baseline_steps:
                self._set_baseline(np.concatenate(self._baseline_values))
        else:
            assert self.upper_ is not None
            k = self.step - self.baseline_steps
            d = x - self.upper_
            gains = np.log1p(self._lam[:, None] * d[None, :]).sum(axis=1)
            self._evidence = np.maximum(self._evidence, -_penalty(k, self._spend)) + gains
            if self.alarm_step_ is None and self._evidence.max() >= self.threshold:
                self.alarm_step_ = self.step
        return self.state()

    def _set_baseline(self, values: np.ndarray) -> None:
        self.baseline_ = float(values.mean()) if values.size else None
        upper = float(baseline_uppers(values[None, :], self.alpha / 2.0, self.grid)[0])
        self.upper_ = upper + self.margin
        self._lam = _capped_bets(self.bets, self.upper_)
        self._baseline_values = []

    def state(self) -> DriftState:
        """The monitor's state after the last step."""
        total = sum(s for s, _ in self._recent)
        count = sum(c for _, c in self._recent)
        return DriftState(
            step=self.step,
            baseline=self.baseline_,
            upper=self.upper_,
            recent_mean=total / count if count else None,
            evidence=max(float(self._evidence.max()), 0.0),
            threshold=self.threshold,
            alarm=self.alarm_step_ is not None,
            alarm_step=self.alarm_step_,
        )

    def describe(self) -> str:
        """The monitor in plain words, for a log."""
        where = (
            f"within {self.horizon} steps" if self.horizon is not None else "however long it runs"
        )
        guarantee = (
            f"a false alarm {where} has probability at most {self.alpha:g} while the mean stays "
            f"within the margin {self.margin:g} of the first {self.baseline_steps} steps' mean"
        )
        s = self.state()
        if s.upper is None:
            return (
                f"drift monitor: learning the level from the first {self.baseline_steps} steps "
                f"({s.step} so far); then it alarms when the mean rises above that level's upper "
                f"bound plus {self.margin:g} ({guarantee})"
            )
        level = (
            f"the level {s.upper:.3f} (the baseline's upper bound "
            f"{s.upper - self.margin:.3f}, mean "
            f"{'none' if s.baseline is None else f'{s.baseline:.3f}'}, plus the margin "
            f"{self.margin:g})"
        )
        recent = "none" if s.recent_mean is None else f"{s.recent_mean:.3f}"
        if s.upper >= 1.0:
            return (
                f"drift monitor at step {s.step}: the baseline's values leave the level "
                f"{s.upper:.3f} at or above the largest value, 1, so it cannot alarm"
            )
        if s.alarm:
            return (
                f"drift monitor: ALARM at step {s.alarm_step}: the values' mean rose above "
                f"{level}; recent mean {recent}, evidence {s.evidence:.1f} against the "
                f"threshold {s.threshold:.1f} ({guarantee})"
            )
        past = (
            f"; past the horizon ({self.horizon} steps) an alarm is outside that guarantee"
            if self.horizon is not None and s.step > self.horizon
            else ""
        )
        return (
            f"drift monitor at step {s.step}: watching for a rise above {level}; recent mean "
            f"{recent}, evidence {s.evidence:.1f} of {s.threshold:.1f} needed ({guarantee}{past})"
        )


def drift_alarms(
    x: np.ndarray,
    alpha: float = 0.05,
    baseline_steps: int = 10,
    margin: float = 0.02,
    horizon: int | None = None,
    bets: Sequence[float] = (0.5, 1.0, 2.0),
    grid: int = GRID,
    uppers: np.ndarray | None = None,
) -> np.ndarray:
    """The alarm step of each run of ``x`` (runs, steps, values per step); -1 where none.

    `DriftMonitor` (the same settings) run on each run, its steps ``x[run, s]``, at once: the
    steps are numbered from 1, as `DriftState.step`.

    Args:
        x: Values in [0, 1], shape (runs, steps, values per step).
        alpha: As `DriftMonitor`'s.
        baseline_steps: As `DriftMonitor`'s.
        margin: As `DriftMonitor`'s.
        horizon: As `DriftMonitor`'s.
        bets: As `DriftMonitor`'s.
        grid: As `DriftMonitor`'s.
        uppers: The baseline's upper ends per run, when known: ``baseline_uppers(x[:,
            :baseline_steps].reshape(runs, -1), alpha / 2, grid)``, computed once for runs that
            share their baseline steps (simulated scenarios that part ways later).

    Returns:
        The first alarm's step per run (int), -1 where there is none.

    Raises:
        ValueError: ``x`` not three-dimensional, a value outside [0, 1], or a setting out of
            its range.
    """
    _checked_settings(alpha, baseline_steps, margin, horizon, bets)
    x = _checked_values(x)
    if x.ndim != 3:
        raise ValueError(f"x must have shape (runs, steps, values per step); got {x.shape}")
    runs, steps, _ = x.shape
    alarms = np.full(runs, -1, dtype=int)
    if steps <= baseline_steps:
        return alarms
    threshold, spend = _threshold_and_restart(alpha, baseline_steps, horizon, len(bets))
    if uppers is None:
        uppers = baseline_uppers(x[:, :baseline_steps].reshape(runs, -1), alpha / 2.0, grid)
    upper = np.asarray(uppers, dtype=float) + margin
    lam = _capped_bets(bets, upper)  # (runs, |bets|)
    evidence = np.full(lam.shape, -np.inf)
    for s in range(baseline_steps, steps):
        d = x[:, s, :] - upper[:, None]  # (runs, m)
        gains = np.log1p(lam[:, :, None] * d[:, None, :]).sum(axis=2)
        evidence = np.maximum(evidence, -_penalty(s - baseline_steps + 1, spend)) + gains
        new = (alarms < 0) & (evidence.max(axis=1) >= threshold)
        alarms[new] = s + 1
    return alarms
