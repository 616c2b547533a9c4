"""The price of stopping at will (#41, #52): labels a labeller needs when the page shows a
confidence sequence (valid whenever the labelling stops) against the fixed-sample rule it
replaced (an interval valid only at a count decided in advance, stopped on the first narrow
one), side by side in simulated sessions on the same kinds of pools, with each rule's coverage
(the sequences' time-uniform, over every visit of the session; the fixed rule's at its stop).

- agreement (goals agreement and cascade): pools of 2,000 items whose jury agrees with the
  humans on a share ``p``; the items labelled in a uniform order without replacement until the
  95% interval of the agreement has half-width 0.05: the betting sequence (the page) against
  Clopper-Pearson (the old page);
- benchmark mean (0-4 scale, half-width 0.1): a calibrated jury (30% of items uncertain),
  chosen actively and uniformly; an underconfident one; overconfident ones (0.999 on their
  own score, wrong on 1%, 3% or 10% of items, the lenient way): the betting sequence of the
  rectified mean, the asymptotic sequence (#52: Waudby-Smith et al. 2024, shown once 5 labels
  depart from the jury's score, the betting sequence before; tuned for the count a
  fixed-sample interval would need were the jury calibrated) and the weighted PPI++ interval
  from 30 labels on with the jury's variance floor (the old page).

Columns: the median labels (10th-90th percentiles; "never" where the sequence did not get there
within the pool), coverage with its Clopper-Pearson interval, and the ratios of the median
labels, each sequence over the fixed rule. The last lines say which design the plan picks under
each sequence for the calibrated jury (the fewer labels).

    python perf/sequences.py [--sessions 300]
"""

from __future__ import annotations

import argparse

import numpy as np

from jurybox.calibration.estimates.active import inclusion_probabilities, mean_horizon
from jurybox.calibration.estimates.selection import ALPHA, clopper_pearson, horizon
from jurybox.calibration.estimates.synthetic import (
    LabellingPool,
    overconfident_pool,
    sequence_session,
    simulate_mean_labelling,
)
from jurybox.calibration.stats.sequences import betting_cs


def agreement_sessions(
    p: float, sessions: int, rng: np.random.Generator, width: float = 0.05, pool: int = 2000
) -> tuple[list, list]:
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


def mean_sessions(
    draw, active: bool, sessions: int, rng: np.random.Generator, width: float = 0.1
) -> tuple[list, list, list]:
    """(betting sequence, asymptotic sequence, fixed rule) sessions: (labels, covered) each."""
    seq, asym, fixed = [], [], []
    for _ in range(sessions):
        got = sequence_session(draw(rng), rng, active=active, width=width, grid=1000)
        seq.append((got["labels"], got["covered"]))
        pool = draw(rng)
        pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
        horizon = mean_horizon(pool.score, pool.score, pool.uncertainty * 16, pi, width)
        got = sequence_session(
            pool, rng, active=active, width=width, grid=1000, method="asymptotic", horizon=horizon
        )
        asym.append((got["labels"], got["covered"]))
        old = simulate_mean_labelling(draw(rng), width, rng, active=active)
        fixed.append((old["labels"], old["covered"]))
    return seq, asym, fixed


def describe(runs: list) -> tuple[str, float | None]:
    labels = np.array([n if n is not None else np.inf for n, _ in runs], dtype=float)
    covered = sum(c for _, c in runs)
    low, high = clopper_pearson(covered, len(runs))
    median = float(np.median(labels))
    q10, q90 = np.quantile(labels, [0.1, 0.9])
    shown = "never" if not np.isfinite(median) else f"{median:.0f}"
    spread = f"({q10:.0f}-{q90:.0f})".replace("inf", "never")
    return (
        f"{shown:>5} {spread:<13} {covered / len(runs):6.1%} [{low:.3f}, {high:.3f}]",
        median if np.isfinite(median) else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-agreement", action="store_true")
    args = parser.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}; {args.sessions} sessions per row")
    rng = np.random.default_rng(args.seed)
    if not args.skip_agreement:
        print(
            f"{'setting':<27} {'sequence: labels, coverage':<42} "
            f"{'fixed: labels, coverage':<42} ratio"
        )
        for p in (0.6, 0.8, 0.95):
            seq, fixed = agreement_sessions(p, args.sessions, rng)
            (a, ma), (b, mb) = describe(seq), describe(fixed)
            ratio = f"{ma / mb:.2f}x" if ma is not None and mb else "-"
            print(f"{'agreement p=' + str(p):<27} {a:<42} {b:<42} {ratio}", flush=True)
    rows = [
        ("mean, calibrated, active", lambda r: LabellingPool.draw(r, 2000), True),
        ("mean, calibrated, uniform", lambda r: LabellingPool.draw(r, 2000), False),
        ("mean, underconfident x4", lambda r: LabellingPool.draw(r, 2000, stated=4.0), True),
        ("mean, overconfident 1%", lambda r: overconfident_pool(r, 2000, wrong=0.01), True),
        ("mean, overconfident 3%", lambda r: overconfident_pool(r, 2000), True),
        ("mean, overconfident 10%", lambda r: overconfident_pool(r, 2000, wrong=0.1), True),
    ]
    print(
        f"{'setting':<27} {'betting: labels, coverage':<42} "
        f"{'asymptotic: labels, coverage':<42} {'fixed: labels, coverage':<42} "
        "betting/fixed asymptotic/fixed"
    )
    medians = {}
    for name, draw, active in rows:
        seq, asym, fixed = mean_sessions(draw, active, args.sessions, rng)
        (a, ma), (b, mb), (c, mc) = describe(seq), describe(asym), describe(fixed)
        ratios = [f"{m / mc:.2f}x" if m is not None and mc else "-" for m in (ma, mb)]
        medians[name] = (ma, mb)
        print(f"{name:<27} {a:<42} {b:<42} {c:<42} {ratios[0]:<13} {ratios[1]}", flush=True)
    for k, method in enumerate(("betting", "asymptotic")):
        act = medians["mean, calibrated, active"][k]
        uni = medians["mean, calibrated, uniform"][k]
        pick = "uniform" if uni is not None and (act is None or uni < act) else "active"
        print(
            f"design under the {method} sequence (calibrated jury): active {act}, uniform "
            f"{uni} labels: the plan picks {pick}"
        )


if __name__ == "__main__":
    main()
