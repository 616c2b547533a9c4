"""Coverage of ``jurybox agree-groups``' intervals over few groups (issue 60, item 5).

Each group has ``--k`` completions of true quality q ~ N(0, 1). The humans rank them by
q + N(0, 0.5^2); the jury's rewards are q + N(0, 0.7^2), either kept (a ``fine`` jury) or
rounded to whole points (a ``coarse`` jury: its rewards often tie, some groups all tie), or
humans and jury both see q with noise 0.02 (a ``ceiling`` jury: nearly every group agrees). The
estimands are the population values, from ``--truth`` groups: the mean tau-b over groups whose
rewards do not all tie, the mean tau with those at 0, and the pair agreement (a jury tie half).
For each number of groups, ``--reps`` data sets; per data set the shipped report's intervals
(``jurybox.calibration.reports.group_agreement``: Student t over groups with one pseudo-group at
the midpoint, computed here at every
count: the report gives none below ``MIN_GROUPS``, which the table marks) and, side by side,
the percentile bootstrap over groups it replaced (1000 resamples, drawn here). Coverage is the share of
data sets whose 95% interval holds the estimand, with its Monte Carlo standard error
sqrt(c (1 - c) / reps).

    nice python perf/group_agreement_coverage.py [--reps 2000] [--k 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from jurybox.calibration.reports.group_agreement import MIN_GROUPS, group_mean, group_ratio

GROUPS = (5, 10, 20, 30, 60)


JURIES = ("fine", "coarse", "ceiling")


def simulate(rng: np.random.Generator, n: int, k: int, jury_kind: str) -> dict[str, np.ndarray]:
    """Per group: tau-b (NaN where the rewards all tie), tau with those at 0, agreement, pairs.

    ``ceiling``: humans and jury both see the quality with little noise (0.02), so nearly every
    group agrees fully (tau 1 in about 95% of groups).
    """
    q = rng.normal(size=(n, k))
    sharp = jury_kind == "ceiling"
    human = q + rng.normal(scale=0.02 if sharp else 0.5, size=(n, k))
    jury = q + rng.normal(scale=0.02 if sharp else 0.7, size=(n, k))
    if jury_kind == "coarse":
        jury = np.round(jury)
    a, b = np.triu_indices(k, 1)
    sj = np.sign(jury[:, a] - jury[:, b])
    sh = np.sign(human[:, a] - human[:, b])  # continuous: never 0
    nj = np.count_nonzero(sj, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = (sj * sh).sum(axis=1) / np.sqrt(nj * len(a))
    return {
        "tau": tau,
        "zeroed": np.where(nj == 0, 0.0, tau),
        "agree": np.where(sj == 0, 0.5, (sj == sh).astype(float)).sum(axis=1),
        "pairs": np.full(n, float(len(a))),
    }


def percentile(rng: np.random.Generator, d: dict[str, np.ndarray]) -> dict[str, tuple]:
    n = len(d["tau"])
    idx = np.stack([rng.integers(0, n, size=n) for _ in range(1000)])
    out = {}
    with np.errstate(invalid="ignore"):
        for key in ("tau", "zeroed"):
            draws = np.nanmean(d[key][idx], axis=1)
            draws = draws[~np.isnan(draws)]
            out[key] = tuple(np.quantile(draws, [0.025, 0.975])) if len(draws) >= 500 else None
        ratio = d["agree"][idx].sum(axis=1) / d["pairs"][idx].sum(axis=1)
        out["agree"] = tuple(np.quantile(ratio, [0.025, 0.975]))
    return out


def shipped(d: dict[str, np.ndarray]) -> dict[str, tuple | None]:
    tau = d["tau"][~np.isnan(d["tau"])]
    return {
        "tau": group_mean("t", list(tau), 0.95, least=2).ci,
        "zeroed": group_mean("t", list(d["zeroed"]), 0.95, least=2).ci,
        "agree": group_ratio("a", list(d["agree"]), list(d["pairs"].astype(int)), 0.95, least=2).ci,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--truth", type=int, default=2_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    print(
        "| jury | groups | statistic | truth | t (shipped) | no interval | percentile bootstrap |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    for kind in JURIES:
        big = simulate(np.random.default_rng(args.seed + 99), args.truth, args.k, kind)
        truth = {
            "tau": float(np.nanmean(big["tau"])),
            "zeroed": float(big["zeroed"].mean()),
            "agree": float(big["agree"].sum() / big["pairs"].sum()),
        }
        for g in GROUPS:
            rng = np.random.default_rng([args.seed, g, JURIES.index(kind)])
            hit = {m: dict.fromkeys(truth, 0) for m in ("t", "boot")}
            missing = dict.fromkeys(truth, 0)
            for _ in range(args.reps):
                d = simulate(rng, g, args.k, kind)
                for method, cis in (("t", shipped(d)), ("boot", percentile(rng, d))):
                    for key, ci in cis.items():
                        if ci is None:
                            missing[key] += method == "t"
                        elif ci[0] - 1e-12 <= truth[key] <= ci[1] + 1e-12:
                            hit[method][key] += 1
            for key in truth:
                given = args.reps - missing[key]
                cover = {m: hit[m][key] / max(1, given if m == "t" else args.reps) for m in hit}
                se = {m: math.sqrt(c * (1 - c) / max(1, args.reps)) for m, c in cover.items()}
                row = {
                    "jury": kind,
                    "groups": g,
                    "statistic": key,
                    "truth": round(truth[key], 4),
                    "t": round(cover["t"], 3),
                    "t_se": round(se["t"], 3),
                    "no_interval": missing[key],
                    "percentile": round(cover["boot"], 3),
                    "percentile_se": round(se["boot"], 3),
                }
                rows.append(row)
                print(
                    f"| {row['jury']} | {g} | {key} | {row['truth']:.3f} | "
                    f"{row['t']:.3f} ± {row['t_se']:.3f}{' (refused)' * (g < MIN_GROUPS)} | "
                    f"{missing[key]} | "
                    f"{row['percentile']:.3f} ± {row['percentile_se']:.3f} |",
                    flush=True,
                )
    if args.json:
        print(json.dumps({"reps": args.reps, "k": args.k, "rows": rows}))


if __name__ == "__main__":
    main()
