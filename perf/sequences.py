"""The price of stopping at will (#41): labels a labeller needs when the page shows a confidence
sequence (valid whenever the labelling stops) against the fixed-sample rule it replaced (an
interval valid only at a count decided in advance, stopped on the first narrow one), side by
side in simulated sessions on the same kinds of pools, with each rule's coverage at its stop.

- agreement (goals agreement and cascade): pools of 2,000 items whose jury agrees with the
  humans on a share ``p``; the items labelled in a uniform order without replacement until the
  95% interval of the agreement has half-width 0.05: the betting sequence (the page) against
  Clopper-Pearson (the old page);
- benchmark mean (0-4 scale, half-width 0.1): a calibrated jury (30% of items uncertain),
  chosen actively and uniformly; an underconfident one; an overconfident one (0.999 on its own
  score, wrong on 3% of items, the lenient way): the sequence of the rectified mean
  (``active.mean_sequences``) against the weighted PPI++ interval from 30 labels on with the
  jury's variance floor (the old page).

Columns: the median labels (10th-90th percentiles; "never" where the sequence did not get there
within the pool), coverage at the stop with its Clopper-Pearson interval, and the ratio of the
median labels, sequence over fixed.

    python perf/sequences.py [--sessions 300]
"""

from __future__ import annotations

import argparse

import numpy as np

from jurybox.calibration.estimates.selection import ALPHA, clopper_pearson, horizon
from jurybox.calibration.estimates.synthetic import (
    LabellingPool,
    overconfident_pool,
    sequence_session,
    simulate_mean_labelling,
)
from jurybox.calibration.stats.sequences import betting_cs


def agreement_sessions(p: float, sessions: int, rng: np.random.Generator, width: float = 0.05,
                       pool: int = 2000) -> tuple[list, list]:
    """(sequence, fixed) sessions: (labels, covered) each."""
    from scipy.stats import beta

    seq, fixed = [], []
    n = np.arange(1, pool + 1)
    for _ in range(sessions):
        agreed = (rng.random(pool) < p).astype(float)
        truth = agreed.mean()
        x = agreed[rng.permutation(pool)]
        low, high = betting_cs(x, ALPHA, pool, horizon(width))
        stop = int(np.argmax((high - low) / 2 <= width))
        seq.append((stop + 1, bool(low[stop] <= truth <= high[stop])))
        k = np.cumsum(x)
        with np.errstate(all="ignore"):
            lo = np.where(k > 0, beta.ppf(0.025, k, n - k + 1), 0.0)
            hi = np.where(k < n, beta.ppf(0.975, k + 1, n - k), 1.0)
        stop = int(np.argmax((hi - lo) / 2 <= width))
        fixed.append((stop + 1, bool(lo[stop] <= truth <= hi[stop])))
    return seq, fixed


def mean_sessions(draw, active: bool, sessions: int, rng: np.random.Generator,
                  width: float = 0.1) -> tuple[list, list]:
    seq, fixed = [], []
    for _ in range(sessions):
        got = sequence_session(draw(rng), rng, active=active, width=width, grid=1000)
        seq.append((got["labels"], got["covered"]))
        old = simulate_mean_labelling(draw(rng), width, rng, active=active)
        fixed.append((old["labels"], old["covered"]))
    return seq, fixed


def describe(runs: list) -> tuple[str, float | None]:
    labels = np.array([n if n is not None else np.inf for n, _ in runs], dtype=float)
    covered = sum(c for _, c in runs)
    low, high = clopper_pearson(covered, len(runs))
    median = float(np.median(labels))
    q10, q90 = np.quantile(labels, [0.1, 0.9])
    shown = "never" if not np.isfinite(median) else f"{median:.0f}"
    spread = f"({q10:.0f}-{q90:.0f})".replace("inf", "never")
    return (f"{shown:>5} {spread:<13} {covered / len(runs):6.1%} "
            f"[{low:.3f}, {high:.3f}]", median if np.isfinite(median) else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}; {args.sessions} sessions per row")
    rng = np.random.default_rng(args.seed)
    rows = [(f"agreement p={p}", lambda p=p: agreement_sessions(p, args.sessions, rng))
            for p in (0.6, 0.8, 0.95)]
    rows += [
        ("mean, calibrated, active", lambda: mean_sessions(
            lambda r: LabellingPool.draw(r, 2000), True, args.sessions, rng)),
        ("mean, calibrated, uniform", lambda: mean_sessions(
            lambda r: LabellingPool.draw(r, 2000), False, args.sessions, rng)),
        ("mean, underconfident x4", lambda: mean_sessions(
            lambda r: LabellingPool.draw(r, 2000, stated=4.0), True, args.sessions, rng)),
        ("mean, overconfident 3%", lambda: mean_sessions(
            lambda r: overconfident_pool(r, 2000), True, args.sessions, rng)),
    ]
    print(f"{'setting':<27} {'sequence: labels, coverage':<42} {'fixed: labels, coverage':<42} "
          "ratio")
    for name, run in rows:
        seq, fixed = run()
        (a, ma), (b, mb) = describe(seq), describe(fixed)
        ratio = f"{ma / mb:.2f}x" if ma is not None and mb else "-"
        print(f"{name:<27} {a:<42} {b:<42} {ratio}", flush=True)


if __name__ == "__main__":
    main()
