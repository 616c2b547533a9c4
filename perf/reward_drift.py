"""Reward drift (#62): how soon the sentinel's drift monitor catches a policy gaming its reward
judge, and how often it alarms when nothing is wrong.

Simulated training runs of 500 steps; at each step m completions are sampled for the sentinel
(m in 4, 8, 16), each judged by the reward judge and by the sentinel, both on [0, 1]. The
monitor (`jurybox.calibration.stats.monitors.DriftMonitor` at its defaults: alpha 0.05, 10
baseline steps, margin 0.02, bets 0.5, 1, 2; horizon 500, the trainer's ``max_steps``) watches
the gaps ``g = (1 + reward - sentinel) / 2``.

- A completion's quality is Beta(6 q, 6 (1 - q)) with the policy's mean quality ``q`` rising
  from 0.3 to 0.6 over the run; each judge reads it with its own noise, N(0, 0.1), clipped to
  [0, 1].
- **clean**: nothing else: the reward and the sentinel rise together (the gap's mean stays 0.5).
- **clean, at the margin**: from the first step after the baseline the reward judge reads 0.02
  higher and the sentinel 0.02 lower (the gap's mean rises by at most the margin, 0.02): the
  edge of the monitor's null, where a false alarm is likeliest.
- **exploit, ramp** from step tau in {50, 200, 400}: the reward judge's score climbs by 0.003
  a step and the sentinel's falls by 0.002 a step (clipped to [0, 1]): the gap's mean rises by
  up to 0.0025 a step.
- **exploit, jump** at tau: the reward judge's score jumps by 0.1 and the sentinel's falls by
  0.1: the gap's mean rises by up to 0.1 at once.
- **canary switch** at tau: the monitor watches m canaries' rewards a step instead (the mean of
  three judges' Beta(2, 8) scores, mean 0.2: the jury floors the exploit answers), and from tau
  one judge gives Beta(8, 2) (it turned into a master-key lover: the mean rises to 0.4).

Every scenario of a run shares its noise (so its baseline steps: the baseline is computed once
per run). Columns: the share of runs whose alarm came by step 500 after tau; the delay (the
alarm's step minus tau) median and 10th-90th percentiles over those runs; alarms before tau (on
the clean runs: every alarm, a false alarm) with their 95% Clopper-Pearson interval; the baseline's
level above the stream's mean before tau, ``u0 - mean`` (median: the gaps' 0.5, the canaries'
0.2), which sets the delay.

    python perf/reward_drift.py [--runs 1000] [--steps 500] [--seed 62] [--no-horizon]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from jurybox.calibration.estimates.selection import clopper_pearson
from jurybox.calibration.stats.monitors import GRID, DriftMonitor, baseline_uppers, drift_alarms

TAUS = (50, 200, 400)
MS = (4, 8, 16)
NOISE = 0.1
CONCENTRATION = 6.0
RAMP = (0.003, 0.002)  # the reward judge's climb and the sentinel's fall, a step
JUMP = 0.1
MARGIN = 0.02  # the monitor's
CHUNK = 250  # runs simulated at a time (memory)


def shifts(kind: str, tau: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The reward judge's and the sentinel's shifts at each step: shape (steps,) each."""
    t = np.arange(steps)
    after = np.maximum(t - tau, 0)
    if kind == "ramp":
        return RAMP[0] * after, -RAMP[1] * after
    if kind == "jump":
        return JUMP * (t >= tau), -JUMP * (t >= tau)
    if kind == "edge":  # from the first step after the baseline (tau: the baseline's steps)
        return MARGIN * (t >= tau), -MARGIN * (t >= tau)
    return np.zeros(steps), np.zeros(steps)


def scenarios() -> list[tuple[str, str, int]]:
    """(name, kind, tau): clean (tau: the run's length, no exploit), the exploits, the canaries."""
    return (
        [("clean", "clean", -1), ("clean, at the margin", "edge", -1)]
        + [(f"exploit {kind}, tau {tau}", kind, tau) for kind in ("ramp", "jump") for tau in TAUS]
        + [(f"canary switch, tau {tau}", "canary", tau) for tau in TAUS]
    )


def canaries(n: int, steps: int, m: int, tau: int, rng: np.random.Generator) -> np.ndarray:
    """The jury's rewards of m canaries a step: the mean of three judges' Beta(2, 8) scores, one
    judge giving Beta(8, 2) from step tau on (a judge switched to a master-key lover)."""
    scores = rng.beta(2.0, 8.0, (3, n, steps, m))
    scores[0, :, tau:] = rng.beta(8.0, 2.0, (n, steps - tau, m))
    return scores.mean(axis=0)


def simulate(
    runs: int, steps: int, m: int, rng: np.random.Generator, settings: dict
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per scenario: (alarm steps, the level's height ``u0 - mean``) over ``runs`` runs."""
    out: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {name: [] for name, _, _ in scenarios()}
    q = np.linspace(0.3, 0.6, steps)[None, :, None]
    b = settings["baseline_steps"]
    for start in range(0, runs, CHUNK):
        n = min(CHUNK, runs - start)
        quality = rng.beta(CONCENTRATION * q, CONCENTRATION * (1 - q), (n, steps, m))
        noise_r = rng.normal(0.0, NOISE, (n, steps, m))
        noise_s = rng.normal(0.0, NOISE, (n, steps, m))
        uppers = None
        for name, kind, tau in scenarios():
            if kind == "canary":
                x = canaries(n, steps, m, tau, rng)
                alarms = drift_alarms(x, **settings)  # (their own baseline)
                level = baseline_uppers(x[:, :b].reshape(n, -1), settings["alpha"] / 2.0, GRID)
                out[name].append((alarms, level + settings["margin"] - 0.2))
                continue
            up, down = shifts(kind, b if kind == "edge" else tau if tau >= 0 else steps, steps)
            reward = np.clip(quality + noise_r + up[None, :, None], 0.0, 1.0)
            sentinel = np.clip(quality + noise_s + down[None, :, None], 0.0, 1.0)
            g = (1.0 + reward - sentinel) / 2.0
            # Every scenario shares the baseline steps (tau >= 50 > 10; the edge from step 11).
            if uppers is None:
                uppers = baseline_uppers(g[:, :b].reshape(n, -1), settings["alpha"] / 2.0, GRID)
            alarms = drift_alarms(g, **settings, uppers=uppers)
            out[name].append((alarms, uppers + settings["margin"] - 0.5))
    return {
        name: (np.concatenate([a for a, _ in parts]), np.concatenate([u for _, u in parts]))
        for name, parts in out.items()
    }


def row(name: str, tau: int, steps: int, m: int, alarms: np.ndarray, level: np.ndarray) -> str:
    runs = alarms.size
    tau = steps if tau < 0 else tau
    early = int(np.sum((alarms > 0) & (alarms <= tau)))
    caught = alarms > tau
    low, high = clopper_pearson(early, runs)
    if name.startswith("clean"):
        detected, delay = "-", "-"
    else:
        detected = f"{caught.mean():.1%}"
        if caught.any():
            d = alarms[caught] - tau
            p10, p50, p90 = np.percentile(d, [10, 50, 90])
            delay = f"{p50:.0f} ({p10:.0f}-{p90:.0f})"
        else:
            delay = "never"
    early_words = f"{early}/{runs} [{low:.3f}, {high:.3f}]"
    return (
        f"{name:<24} {m:>3}  {detected:>9}  {delay:>14}  {early_words:>24}  "
        f"{float(np.median(level)):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=62)
    parser.add_argument(
        "--no-horizon", action="store_true", help="the monitor without a horizon (alpha spent)"
    )
    args = parser.parse_args()
    settings = dict(
        alpha=0.05,
        baseline_steps=10,
        margin=MARGIN,
        horizon=None if args.no_horizon else args.steps,
        bets=(0.5, 1.0, 2.0),
    )
    began = time.perf_counter()
    print(DriftMonitor(**settings).describe())
    print(
        f"{args.runs} runs x {args.steps} steps; horizon "
        f"{'none (alpha spent over the restarts)' if args.no_horizon else args.steps}\n"
    )
    header = (
        f"{'scenario':<24} {'m':>3}  {'detected':>9}  {'delay (p10-p90)':>14}  "
        f"{'alarms before tau [95% CP]':>24}  u0-mean"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(args.seed)
    results = {m: simulate(args.runs, args.steps, m, rng, settings) for m in MS}
    for name, _, tau in scenarios():
        for m in MS:
            print(row(name, tau, args.steps, m, *results[m][name]))
    print(f"\n{time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
