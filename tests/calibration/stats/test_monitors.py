"""The drift monitor (#62): its vectorised form equals the class run by run, its baseline is the
betting sequence's upper end, and by simulation its false alarms stay within alpha and a jump is
caught.

The false-alarm runs sit on the null's boundary: the baseline steps' mean is 0.5, every later
value's mean 0.5 plus the margin. At 300 runs the standard error of a 5% rate is 1.26 points;
the tests allow alpha plus three of them (8.8%). The values are Beta(4, 4) (a gap ``(1 + reward
- sentinel) / 2`` of two judges that mostly agree), 8 per step."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jurybox.calibration.stats.monitors import (
    GRID,
    DriftMonitor,
    _penalty,
    baseline_uppers,
    drift_alarms,
)
from jurybox.calibration.stats.sequences import betting_interval

ALPHA = 0.05
RUNS, STEPS, M = 300, 500, 8
BASELINE = 10
JUMP_AT, JUMP = 100, 0.2
#: A jump of 0.2 at step 100 is caught within this many steps in at least 95% of runs.
DELAY = 25
SE = math.sqrt(ALPHA * (1 - ALPHA) / RUNS)


@pytest.fixture(scope="module")
def streams():
    """(clean, jumped, the baseline's upper ends): clean on the null's boundary, the same noise
    jumped by 0.2 at step 100; both share their baseline steps."""
    z = np.random.default_rng(62).beta(4, 4, (RUNS, STEPS, M))
    steps = np.arange(STEPS)[None, :, None]
    clean = np.clip(z + np.where(steps < BASELINE, 0.0, 0.02), 0, 1)
    jumped = np.clip(z + np.where(steps < JUMP_AT, 0.0, JUMP), 0, 1)
    uppers = baseline_uppers(z[:, :BASELINE].reshape(RUNS, -1), ALPHA / 2)
    return clean, jumped, uppers


def run_class(x: np.ndarray, **settings) -> int:
    monitor = DriftMonitor(**settings)
    for values in x:
        state = monitor.update(values)
    return -1 if state.alarm_step is None else state.alarm_step


def test_the_baseline_is_the_betting_sequence_s_upper_end():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.beta(2, 5, (6, 40)), rng.integers(0, 2, (4, 40)), np.ones((1, 40))])
    want = [betting_interval(row, ALPHA / 2, horizon=40, grid=GRID)[1] for row in x]
    assert baseline_uppers(x, ALPHA / 2).tolist() == want
    assert baseline_uppers(np.zeros((2, 0)), ALPHA / 2).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("horizon", [60, None])
def test_the_vectorised_form_equals_the_class_run_by_run(horizon):
    rng = np.random.default_rng(1)
    x = rng.beta(3, 3, (24, 60, 6))
    x[::2, 25:] = np.clip(x[::2, 25:] + rng.uniform(0.25, 0.5, (12, 1, 1)), 0, 1)  # half drift
    settings = dict(baseline_steps=8, horizon=horizon)
    alarms = drift_alarms(x, **settings)
    assert alarms.tolist() == [run_class(run, **settings) for run in x]
    assert (alarms > 0).sum() >= 6 and (alarms < 0).sum() >= 6  # both outcomes are compared


def test_false_alarms_stay_within_alpha_on_the_null_s_boundary(streams):
    clean, _, uppers = streams
    for horizon in (STEPS, None):
        alarms = drift_alarms(clean, horizon=horizon, uppers=uppers)
        assert (alarms > 0).mean() <= ALPHA + 3 * SE, horizon


def test_a_jump_of_0_2_is_caught_within_the_stated_steps(streams):
    _, jumped, uppers = streams
    alarms = drift_alarms(jumped, horizon=STEPS, uppers=uppers)
    assert not np.any((alarms > 0) & (alarms <= JUMP_AT))  # none before the jump
    assert np.mean((alarms > JUMP_AT) & (alarms <= JUMP_AT + DELAY)) >= 0.95
    # Without a horizon the same jump still gets caught, later (alpha spent over the restarts).
    late = drift_alarms(jumped, horizon=None, uppers=uppers)
    assert np.mean(late > JUMP_AT) >= 0.95
    assert np.median(late[late > 0]) >= np.median(alarms[alarms > 0])


def test_the_thresholds_spend_half_of_alpha_over_the_restarts_and_bets():
    bets = (0.5, 1.0, 2.0)
    with_horizon = DriftMonitor(ALPHA, BASELINE, horizon=STEPS, bets=bets)
    restarts = STEPS - BASELINE
    assert len(bets) * restarts * math.exp(-with_horizon.threshold) == pytest.approx(ALPHA / 2)
    without = DriftMonitor(ALPHA, BASELINE, horizon=None, bets=bets)
    penalties = np.array([_penalty(k, True) for k in range(1, 100_001)])
    spent = np.exp(-without.threshold - penalties).sum()
    assert len(bets) * spent == pytest.approx(ALPHA / 2, rel=1e-4)
    # The module's text: a restart at the 500th step needs 17.7 without a horizon, 11.0 with
    # one of 500 steps after the baseline.
    assert without.threshold + _penalty(500, True) == pytest.approx(17.7, abs=0.05)
    assert DriftMonitor(ALPHA, BASELINE, horizon=500 + BASELINE).threshold == pytest.approx(
        11.0, abs=0.05
    )


def test_the_state_and_describe_say_where_the_monitor_stands():
    monitor = DriftMonitor(alpha=0.05, baseline_steps=3, margin=0.02, horizon=20)
    first = monitor.update([0.5, 0.5])
    assert (first.step, first.upper, first.alarm, first.evidence) == (1, None, False, 0.0)
    assert monitor.describe().startswith(
        "drift monitor: learning the level from the first 3 steps (1 so far)"
    )
    for _ in range(2):
        state = monitor.update([0.4, 0.6, 0.5])
    assert state.baseline == pytest.approx(0.5)
    assert state.upper == pytest.approx(
        betting_interval([0.5, 0.5, 0.4, 0.6, 0.5, 0.4, 0.6, 0.5], 0.025, horizon=8, grid=GRID)[1]
        + 0.02
    )
    words = monitor.describe()
    assert f"watching for a rise above the level {state.upper:.3f}" in words
    assert "a false alarm within 20 steps has probability at most 0.05" in words
    assert "within the margin 0.02 of the first 3 steps' mean" in words
    for _ in range(17):
        state = monitor.update([1.0] * 8)
    assert state.alarm and state.alarm_step is not None and state.alarm_step <= 20
    assert state.recent_mean == 1.0 and state.evidence >= state.threshold
    assert monitor.describe().startswith(f"drift monitor: ALARM at step {state.alarm_step}:")
    monitor.update([0.0])
    assert monitor.state().alarm_step == state.alarm_step  # the alarm stays raised
    assert "past the horizon" not in monitor.describe()  # (alarmed: the alarm's words)


def test_describe_says_where_the_guarantee_ends():
    quiet = DriftMonitor(baseline_steps=2, horizon=4)
    for _ in range(5):
        quiet.update([0.4, 0.5, 0.6])
    assert not quiet.state().alarm
    assert "past the horizon (4 steps) an alarm is outside that guarantee" in quiet.describe()
    endless = DriftMonitor(baseline_steps=2, horizon=None)
    assert "a false alarm however long it runs has probability at most 0.05" in endless.describe()


def test_a_baseline_at_the_top_cannot_alarm_and_says_so():
    monitor = DriftMonitor(baseline_steps=2)
    for _ in range(5):
        state = monitor.update([1.0, 1.0])
    assert state.upper is not None and state.upper >= 1.0 and not state.alarm
    assert "so it cannot alarm" in monitor.describe()


def test_bad_values_and_settings_are_errors():
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        DriftMonitor().update([0.5, 1.5])
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        DriftMonitor().update([float("nan")])
    with pytest.raises(ValueError, match="alpha"):
        DriftMonitor(alpha=1.0)
    with pytest.raises(ValueError, match="bets"):
        DriftMonitor(bets=())
    with pytest.raises(ValueError, match="shape"):
        drift_alarms(np.zeros((3, 4)))
