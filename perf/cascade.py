"""Cascade savings and guarantee on a simulated labelled set, against the full panel on every item.

The simulation (``jurybox.calibration.synthetic.CascadeSimulation``): 70% easy and 30% hard
items; stage 1 is one cheap, overconfident judge (right with probability confidence^2; confidence
Beta(12, 1) on easy items, Beta(3, 2) on hard ones); stage 2 is a 3-judge panel, right on 97% of
easy and 85% of hard items (93.4% overall). The population agreement of the cascade at any
threshold is computed exactly, so each fitted threshold's true agreement is known.

For each labelled-set size and target: the threshold is fitted ``--reps`` times on fresh labelled
sets (``jurybox.calibration.cascade_threshold.fit_threshold``, risk ``--risk``), and the table gives the mean
true agreement of the fitted cascades, the share of fits meeting the target (the guarantee says at
least 1 - risk), the refusals (target not supportable from that sample), the share of items the
cheap judge decides, and the judge calls saved against the panel alone on every item (3 calls per
item), counting a cheap-judge call as a full call and, in the last column, as 1/10 of one.

    python perf/cascade.py [--reps 200] [--risk 0.1] [--sizes 500,2000]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from jurybox.calibration.cascade_threshold import CascadeTargetError, fit_threshold
from jurybox.calibration.synthetic import CascadeSimulation


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--risk", type=float, default=0.1)
    ap.add_argument("--sizes", default="500,2000")
    ap.add_argument("--targets", default="0.80,0.85,0.88,0.90,0.92")
    args = ap.parse_args()
    sim = CascadeSimulation()
    panel = sim.agreement(math.inf)
    print(f"full panel on every item: agreement {panel:.4f}, 3 judge calls per item")
    print(f"risk {args.risk}, {args.reps} labelled sets per row")
    print(f"{'labelled':>8} {'target':>6} {'true agr':>8} {'met':>6} {'refused':>7} "
          f"{'cheap decides':>13} {'calls saved':>11} {'cost saved*':>11}")
    for n in (int(s) for s in args.sizes.split(",")):
        for target in (float(t) for t in args.targets.split(",")):
            rng = np.random.default_rng(0)
            agreement, met, refused, decided, saved, cost_saved = [], 0, 0, [], [], []
            for _ in range(args.reps):
                conf, agrees = sim.sample(n, rng)
                try:
                    fit = fit_threshold(conf, agrees, target_agreement=target, risk=args.risk,
                                        stage_calls=[1, 3], baseline_calls=3)
                except CascadeTargetError:
                    refused += 1
                    met += 1  # nothing is certified, so nothing false is
                    continue
                true = sim.agreement(fit.threshold)
                agreement.append(true)
                met += true >= target
                calls = sim.expected_calls(fit.threshold)  # population, not the labelled sample
                exits = (4.0 - calls) / 3.0  # calls = 1 + 3 * (1 - exits)
                decided.append(exits)
                saved.append(1.0 - calls / 3.0)
                cost_saved.append(1.0 - (0.1 + 3.0 * (1.0 - exits)) / 3.0)

            def mean(xs: list[float]) -> str:
                return f"{np.mean(xs):.1%}" if xs else "-"

            print(f"{n:>8} {target:>6.2f} {np.mean(agreement) if agreement else math.nan:>8.4f} "
                  f"{met / args.reps:>6.1%} {refused:>7} {mean(decided):>13} {mean(saved):>11} "
                  f"{mean(cost_saved):>11}", flush=True)
    print("* cost saved when a cheap-judge call costs 1/10 of a panel judge's call")


if __name__ == "__main__":
    main()
