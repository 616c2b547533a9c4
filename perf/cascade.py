"""Cascade savings and guarantee on simulated labelled sets, against the panel on every item, for
the fallback procedure ``fit_threshold`` uses and the plain fixed sequence, side by side on the
same labelled sets.

Two populations (``jurybox.calibration.estimates.synthetic.CascadeSimulation``), each with exactly known
agreement at every threshold, so each fitted threshold's true agreement is known:

- ``steady``: 70% easy and 30% hard items; stage 1 is one cheap, overconfident judge (right with
  probability confidence^2; confidence Beta(12, 1) on easy items, Beta(3, 2) on hard ones);
  stage 2 is a 3-judge panel, right on 97% of easy and 85% of hard items (93.4% overall). The
  cascade's agreement falls steadily as the threshold drops.
- ``dip`` (``CascadeSimulation.with_dip()``): the cheap judge is confident (about 0.975) and
  wrong on 8% of items and calibrated elsewhere, where it beats a weak panel: the agreement
  (0.858 for the panel alone) rises to 0.872, dips to 0.833 between thresholds 0.985 and 0.93,
  and recovers to 0.865 at 0.85.

For each population, labelled-set size, target and procedure, the threshold is fitted ``--reps``
times on fresh labelled sets (risk ``--risk``). Columns: the share of fits whose true agreement
meets the target (the guarantee says at least 1 - risk; a refusal certifies nothing, so breaks
nothing) with its 95% Clopper-Pearson interval, the refusals, the mean true agreement of the
cascades fitted, and, averaged over **all** fits (a refusal, or a fit keeping the whole panel,
saves nothing), the share of items the cheap judge decides and the judge calls saved against
the panel alone on every item (3 calls per item; the cascade spends 1 + 3 per escalated item),
counting a cheap-judge call as a full call and, in the last column, as 1/10 of one.

    python perf/cascade.py [--reps 2000] [--risk 0.1] [--sizes 500,2000] [--populations steady,dip]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from jurybox.calibration.estimates.cascade_threshold import (
    DEFAULT_GRID,
    PROCEDURES,
    CascadeTargetError,
    fit_threshold,
)
from jurybox.calibration.estimates.selection import clopper_pearson
from jurybox.calibration.estimates.synthetic import CascadeSimulation

POPULATIONS = {
    "steady": (CascadeSimulation, "0.85,0.88,0.90,0.92"),
    "dip": (CascadeSimulation.with_dip, "0.83,0.84,0.85,0.86"),
}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--risk", type=float, default=0.1)
    ap.add_argument("--sizes", default="500,2000")
    ap.add_argument("--populations", default="steady,dip")
    ap.add_argument(
        "--targets",
        default=None,
        help="targets for every population (default: "
        "steady 0.85,0.88,0.90,0.92; dip 0.83,0.84,0.85,0.86)",
    )
    args = ap.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}", flush=True)  # results depend on it
    print(
        f"risk {args.risk}, {args.reps} labelled sets per row (the same sets for both procedures)"
    )
    header = (
        f"{'population':>10} {'labelled':>8} {'target':>6} {'procedure':>14} "
        f"{'met [95% CI]':>21} {'refused':>7} {'true agr':>8} {'cheap decides':>13} "
        f"{'calls saved':>11} {'cost saved*':>11}"
    )
    for name in args.populations.split(","):
        make, targets = POPULATIONS[name]
        sim = make()
        truth = {t: sim.agreement(t) for t in (math.inf, *DEFAULT_GRID)}
        calls = {t: sim.expected_calls(t) for t in (math.inf, *DEFAULT_GRID)}
        print(
            f"\n{name}: panel on every item: agreement {truth[math.inf]:.4f}, 3 judge calls "
            f"per item; best agreement of any threshold {max(truth.values()):.4f}"
        )
        print(header)
        for n in (int(s) for s in args.sizes.split(",")):
            for target in (float(t) for t in (args.targets or targets).split(",")):
                rng = np.random.default_rng(0)
                rows = {
                    p: {
                        "met": 0,
                        "refused": 0,
                        "agreement": [],
                        "decided": 0.0,
                        "saved": 0.0,
                        "cost": 0.0,
                    }
                    for p in PROCEDURES
                }
                for _ in range(args.reps):
                    conf, agrees = sim.sample(n, rng)
                    for procedure, row in rows.items():
                        try:
                            fit = fit_threshold(
                                conf,
                                agrees,
                                target_agreement=target,
                                risk=args.risk,
                                stage_calls=[1, 3],
                                baseline_calls=3,
                                procedure=procedure,
                            )
                        except CascadeTargetError:
                            row["refused"] += 1
                            row["met"] += 1  # nothing is certified, so nothing false is
                            continue
                        row["agreement"].append(truth[fit.threshold])
                        row["met"] += truth[fit.threshold] >= target
                        if math.isinf(fit.threshold):
                            continue  # the panel alone: nothing saved
                        c = calls[fit.threshold]  # population, not the labelled sample
                        exits = (4.0 - c) / 3.0  # calls = 1 + 3 * (1 - exits)
                        row["decided"] += exits
                        row["saved"] += 1.0 - c / 3.0
                        row["cost"] += 1.0 - (0.1 + 3.0 * (1.0 - exits)) / 3.0
                for procedure, row in rows.items():
                    low, high = clopper_pearson(row["met"], args.reps)
                    met = f"{row['met'] / args.reps:.1%} [{low:.1%}, {high:.1%}]"
                    agr = f"{np.mean(row['agreement']):.4f}" if row["agreement"] else "-"
                    print(
                        f"{name:>10} {n:>8} {target:>6.2f} {procedure:>14} {met:>21} "
                        f"{row['refused']:>7} {agr:>8} {row['decided'] / args.reps:>13.1%} "
                        f"{row['saved'] / args.reps:>11.1%} {row['cost'] / args.reps:>11.1%}",
                        flush=True,
                    )
    print("\n* cost saved when a cheap-judge call costs 1/10 of a panel judge's call")


if __name__ == "__main__":
    main()
