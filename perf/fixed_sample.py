"""The benchmark mean's fixed-sample interval at the label counts users get (#52 defect 2): the
interval `jurybox agree --ppi`, the leaderboard's human-corrected mean and the page's mean show
now (the normal PPI++ interval once 5 labelled items depart from the jury's score, else the
betting interval at that count: jurybox.calibration.estimates.rectified) against the normal
interval alone (what they showed before), at a count decided in advance.

Juries (pools of 2,000 items on a 0-4 scale, `calibration/estimates/synthetic.py`): calibrated
(30% of items uncertain, the label drawn from the jury's distribution), underconfident (its
distributions four times too broad), and overconfident (0.999 on its own score, wrong the
lenient way on 1%, 3% or 10% of items); labels chosen in a uniform order or actively
(`--goal benchmark-mean`). Per count: the coverage of the pool's mean over the sessions, with
its Monte Carlo standard error, for the interval shown and the normal one; their mean
half-widths and the ratio (the width cost); and the share of sessions where the betting
interval was shown.

    python perf/fixed_sample.py [--sessions 2000]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from jurybox.calibration.estimates.synthetic import (
    LabellingPool,
    fixed_sample_session,
    overconfident_pool,
)

COUNTS = (30, 50, 100, 200)
JURIES = {
    "calibrated": lambda rng: LabellingPool.draw(rng, 2000),
    "underconfident x4": lambda rng: LabellingPool.draw(rng, 2000, stated=4.0),
    "overconfident 1%": lambda rng: overconfident_pool(rng, 2000, wrong=0.01),
    "overconfident 3%": lambda rng: overconfident_pool(rng, 2000, wrong=0.03),
    "overconfident 10%": lambda rng: overconfident_pool(rng, 2000, wrong=0.1),
}


def row(name: str, design: str, count: int, runs: list[dict]) -> str:
    shown = np.mean([r["covered"] for r in runs])
    normal = np.mean([r["normal_covered"] for r in runs])
    se = math.sqrt(max(shown * (1 - shown), 0.95 * 0.05) / len(runs))
    width, before = (np.mean([r[k] for r in runs]) for k in ("half_width", "normal_half_width"))
    betting = np.mean([r["interval"] == "betting" for r in runs])
    return (
        f"{name:<18} {design:<8} {count:>4}   {shown:6.1%} +-{se:5.1%}   {normal:6.1%}   "
        f"{width:6.3f}  {before:6.3f}  {width / before:5.2f}x   {betting:6.1%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}; {args.sessions} sessions per jury and design")
    print(
        f"{'jury':<18} {'design':<8} {'n':>4}   {'coverage now':<15} {'before':<8} "
        f"{'half-width now/before':<21} {'cost':<6} {'betting shown'}"
    )
    rng = np.random.default_rng(args.seed)
    for name, draw in JURIES.items():
        for design in ("uniform", "active"):
            start = time.time()
            sessions = [
                fixed_sample_session(draw(rng), rng, COUNTS, active=design == "active")
                for _ in range(args.sessions)
            ]
            for k, count in enumerate(COUNTS):
                print(row(name, design, count, [s[k] for s in sessions]), flush=True)
            print(f"  ({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
