"""Labels needed for a benchmark's mean: active choice (``jurybox label --goal benchmark-mean``)
against a uniform order, side by side on the same kinds of pools, in simulated sessions.

Each pool (``jurybox.calibration.estimates.synthetic.LabellingPool``) has 1,000 judged items on a 0-4 scale
with a calibrated jury: each item's human label is drawn from the jury's predictive
distribution; a share of the items (``--uncertain``) have a broad distribution, the rest a
sharp one (0 uncertain: every item alike, where active choice has nothing to exploit). Each
session labels in its goal's order until the 95% half-width of the weighted PPI++ mean is at
most ``--width`` (checked after every label from 30 on, as the page's progress does), on a fresh
pool and order. Columns per design: the median labels used (and the 10th-90th percentiles), the
coverage of the pool's true mean with its 95% Clopper-Pearson interval, and the ratio of the
median labels, active over uniform. ``--no-floor``: the variance from the labels alone, without
the floor the jury's own distributions give it (``jurybox.calibration.estimates.active``), to show why
the floor is there.

    python perf/labelling.py [--sessions 1000] [--width 0.06] [--uncertain 0,0.1,0.3,0.5] [--no-floor]
"""

from __future__ import annotations

import argparse

import numpy as np

from jurybox.calibration.estimates.selection import clopper_pearson
from jurybox.calibration.estimates.synthetic import LabellingPool, simulate_mean_labelling


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--width", type=float, default=0.06)
    parser.add_argument(
        "--uncertain",
        default="0,0.1,0.3,0.5",
        help="shares of broadly uncertain items, comma-separated",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="the labels' own variance only (no floor from the jury)",
    )
    args = parser.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}", flush=True)  # results depend on it
    print(
        f"{args.sessions} sessions per row and design; target half-width {args.width}; "
        "pools of 1,000 items on a 0-4 scale; variance "
        + ("from the labels alone" if args.no_floor else "floored by the jury's own")
    )
    print(
        f"{'uncertain':>9}  {'design':>7}  {'labels (p10-p90)':>18}  "
        f"{'coverage [95% CI]':>22}  active/uniform"
    )
    for share in (float(s) for s in args.uncertain.split(",")):
        medians = {}
        for active in (True, False):
            rng = np.random.default_rng([args.seed, int(share * 1000), active])
            runs = [
                simulate_mean_labelling(
                    LabellingPool.draw(rng, uncertain_share=share),
                    args.width,
                    rng,
                    active=active,
                    floor=not args.no_floor,
                )
                for _ in range(args.sessions)
            ]
            labels = np.array([r["labels"] for r in runs])
            covered = sum(r["covered"] for r in runs)
            low, high = clopper_pearson(covered, len(runs))
            medians[active] = float(np.median(labels))
            p10, p90 = np.percentile(labels, [10, 90])
            design = "active" if active else "uniform"
            ratio = f"{medians[True] / medians[False]:.2f}" if not active else ""
            print(
                f"{share:>9.2f}  {design:>7}  {medians[active]:>6.0f} ({p10:.0f}-{p90:.0f})"
                f"{'':>4}  {covered / len(runs):.3f} [{low:.3f}, {high:.3f}]  {ratio:>8}"
            )


if __name__ == "__main__":
    main()
