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
  from 30 labels on with the jury's variance floor (the old page);
- #60: juries calibrated on most items but 0.999 sure of 4 where the label is 0 on 2% or 5%
  of them (`synthetic.sure_errors_pool`), uniform and active; the asymptotic sequence with
  the rare-error allowance for the items the jury is sure of (now) beside it without (today,
  before #60: "asymptotic today"), labels and time-uniform coverage; for the earlier juries
  the two are the same sequence (no item sure, or every departure on a sure item).

Columns: the median labels (10th-90th percentiles; "never" where the sequence did not get there
within the pool), coverage with its Clopper-Pearson interval, and the ratios of the median
labels, each sequence over the fixed rule. The last lines say which design the plan picks under
each sequence for the calibrated jury (the fewer labels).

With ``--coverage N``: only the asymptotic sequence's time-uniform coverage, now and today,
over N sessions per jury and design (no labels counted: fast), with its Monte Carlo standard
error.

    python perf/sequences.py [--sessions 300] [--skip-agreement] [--rows sure]
    python perf/sequences.py --coverage 2000
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
    sure_errors_pool,
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
) -> tuple[list, list, list, list]:
    """(betting, asymptotic, asymptotic today, fixed rule) sessions: (labels, covered) each."""
    seq, asym, today, fixed = [], [], [], []
    for _ in range(sessions):
        got = sequence_session(draw(rng), rng, active=active, width=width, grid=1000)
        seq.append((got["labels"], got["covered"]))
        pool = draw(rng)
        pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
        horizon = mean_horizon(pool.score, pool.score, pool.uncertainty * 16, pi, width)
        for allowance, out in ((True, asym), (False, today)):
            got = sequence_session(
                pool,
                np.random.default_rng(rng.integers(2**32)),
                active=active,
                width=width,
                grid=1000,
                method="asymptotic",
                horizon=horizon,
                allowance=allowance,
            )
            out.append((got["labels"], got["covered"]))
        old = simulate_mean_labelling(draw(rng), width, rng, active=active)
        fixed.append((old["labels"], old["covered"]))
    return seq, asym, today, fixed


COVERAGE_JURIES = {
    "calibrated": lambda r: LabellingPool.draw(r, 2000),
    "underconfident x4": lambda r: LabellingPool.draw(r, 2000, stated=4.0),
    "overconfident 1%": lambda r: overconfident_pool(r, 2000, wrong=0.01),
    "overconfident 3%": lambda r: overconfident_pool(r, 2000, wrong=0.03),
    "sure-wrong 2%": lambda r: sure_errors_pool(r, 2000, wrong=0.02),
    "sure-wrong 5%": lambda r: sure_errors_pool(r, 2000, wrong=0.05),
}


def coverage_table(
    sessions: int, rng: np.random.Generator, juries: str = "", width: float = 0.1
) -> None:
    """The asymptotic sequence's time-uniform coverage with and without the allowance (#60).

    Over the juries whose name holds ``juries``.
    """
    print(f"{'jury':<20} {'design':<8} {'now':<16} {'today':<16}")
    for name, draw in COVERAGE_JURIES.items():
        if juries not in name:
            continue
        for active in (False, True):
            hits = np.zeros(2)
            for _ in range(sessions):
                pool = draw(rng)
                pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(2000)
                horizon = mean_horizon(pool.score, pool.score, pool.uncertainty * 16, pi, width)
                seed = rng.integers(2**32)
                for k, allowance in enumerate((True, False)):
                    hits[k] += sequence_session(
                        pool,
                        np.random.default_rng(seed),
                        active=active,
                        method="asymptotic",
                        horizon=horizon,
                        allowance=allowance,
                    )["covered"]
            cells = []
            for share in hits / sessions:
                se = np.sqrt(max(share * (1 - share), 0.95 * 0.05) / sessions)
                cells.append(f"{share:6.1%} +-{se:4.1%}")
            design = "active" if active else "uniform"
            print(f"{name:<20} {design:<8} {cells[0]:<16} {cells[1]:<16}", flush=True)


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
    parser.add_argument("--rows", default="", help="only the rows (juries) whose name holds this")
    parser.add_argument("--coverage", type=int, default=0, help="sessions: coverage only")
    args = parser.parse_args()
    from jurybox.judges.cpu import cpu

    rng = np.random.default_rng(args.seed)
    if args.coverage:
        print(f"cpu: {cpu().describe()}; {args.coverage} sessions per jury and design")
        coverage_table(args.coverage, rng, args.rows)
        return
    print(f"cpu: {cpu().describe()}; {args.sessions} sessions per row")
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
        ("mean, sure-wrong 2%, unif.", lambda r: sure_errors_pool(r, 2000, wrong=0.02), False),
        ("mean, sure-wrong 5%, unif.", lambda r: sure_errors_pool(r, 2000, wrong=0.05), False),
        ("mean, sure-wrong 2%, active", lambda r: sure_errors_pool(r, 2000, wrong=0.02), True),
        ("mean, sure-wrong 5%, active", lambda r: sure_errors_pool(r, 2000, wrong=0.05), True),
    ]
    print(
        f"{'setting':<27} {'betting: labels, coverage':<42} "
        f"{'asymptotic: labels, coverage':<42} {'asymptotic today: labels, coverage':<42} "
        f"{'fixed: labels, coverage':<42} betting/fixed asymptotic/fixed now/today"
    )
    medians = {}
    for name, draw, active in rows:
        if args.rows not in name:
            continue
        runs = mean_sessions(draw, active, args.sessions, rng)
        (a, ma), (b, mb), (t, mt), (c, mc) = (describe(r) for r in runs)
        ratios = [f"{m / mc:.2f}x" if m is not None and mc else "-" for m in (ma, mb)]
        ratios.append(f"{mb / mt:.2f}x" if mb is not None and mt else "-")
        medians[name] = (ma, mb)
        print(
            f"{name:<27} {a:<42} {b:<42} {t:<42} {c:<42} {ratios[0]:<13} {ratios[1]:<15} "
            f"{ratios[2]}",
            flush=True,
        )
    if "mean, calibrated, active" not in medians or "mean, calibrated, uniform" not in medians:
        return
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
