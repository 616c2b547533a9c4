"""Group rewards against a known ranking: each design's Kendall tau with the true order of a
group's completions, its judge calls per group, and the share of groups whose rewards all tie
(GRPO learns nothing from such a group).

Every group has ``--k`` completions of known qualities: the prompt's own level (N(0, 1),
shared by its completions) plus each completion's own (N(0, ``--spread``): the completions of
one prompt are often alike, which is where a pointwise scale ties); a jury of ``--judges``
simulated judges (tests/group_helpers.py: SimJudge) answers every prompt from the qualities of
the answers the prompt shows, in the order it shows them: pairwise it prefers the answer shown
first when ``q_first - q_second + bias + noise > tie`` (a tie within ``tie``), pointwise it
gives the general rubric's accuracy point nearest ``q + noise`` (a 0-4 scale over [-2, 2]:
coarse, so ties), listwise each letter likewise with the first shown raised by ``bias``. Its
answers carry a distribution over the scale (logprobs at the value), so expected scores are
read as from a real judge. The designs run the whole judging path of ``jurybox.judges.groups``
on an in-process jury: the rubrics' prompts, both orders of every pair, parsing, the jury's
decision, Bradley-Terry; only the model is simulated.

Kendall's tau-b between a group's rewards and its true qualities (scipy.stats.kendalltau) is
averaged over groups, a group whose rewards all tie counting as 0 (it carries no order), with
a 95% interval over groups (normal, on the groups' taus); unscored rewards are left out.

    python perf/group_designs.py [--groups 300] [--k 8] [--spread 1] [--judges 2] \\
        [--bias 0.5] [--tie 0.3] [--noise 0.7] [--seed 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

#: (label, design options, the design's rubric, the pointwise rubric)
DESIGNS: list[tuple[str, dict, str, str | None]] = [
    ("pointwise, chosen scores", {"design": "pointwise", "use": "score"}, "general", None),
    ("pointwise, expected scores", {"design": "pointwise"}, "general", None),
    ("listwise", {"design": "listwise"}, "general", None),
    ("anchor (median)", {"design": "anchor"}, "pairwise", "general"),
    ("Swiss, 2 rounds", {"design": "swiss", "per_completion": 2}, "pairwise", None),
    ("regular, 2 per completion", {"design": "regular", "per_completion": 2}, "pairwise", None),
    ("regular, 3 per completion", {"design": "regular", "per_completion": 3}, "pairwise", None),
    ("Swiss, 3 rounds", {"design": "swiss", "per_completion": 3}, "pairwise", None),
    ("round robin", {"design": "round_robin"}, "pairwise", None),
    ("round robin, chosen scores", {"design": "round_robin", "use": "score"}, "pairwise", None),
    (
        "round robin, win shares",
        {"design": "round_robin", "relative": "win_share", "use": "score"},
        "pairwise",
        None,
    ),
    (
        "mixed: pointwise + 0.5 x round robin",
        {"design": "round_robin", "weight": 0.5, "centred": True},
        "pairwise",
        "general",
    ),
]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--groups", type=int, default=300, help="groups per design")
    ap.add_argument("--k", type=int, default=8, help="completions per group")
    ap.add_argument(
        "--spread",
        type=float,
        default=1.0,
        help="sd of the qualities within a group (the prompts' levels have sd 1)",
    )
    ap.add_argument("--judges", type=int, default=2, help="simulated judges")
    ap.add_argument("--bias", type=float, default=0.5, help="position bias (quality units)")
    ap.add_argument("--tie", type=float, default=0.3, help="a pairwise tie within this margin")
    ap.add_argument("--noise", type=float, default=0.7, help="each judgment's noise (sd)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="one JSON object as the last line")
    args = ap.parse_args()

    from group_helpers import sim_jury
    from scipy.stats import kendalltau

    from jurybox.judges.groups import Group, GroupJob, GroupSpec, judge_groups
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    rng = np.random.default_rng(args.seed)
    qualities = rng.normal(size=(args.groups, 1)) + args.spread * rng.normal(
        size=(args.groups, args.k)
    )
    quality = {
        f"[answer {g}.{c}]": float(qualities[g, c])
        for g in range(args.groups)
        for c in range(args.k)
    }
    groups = [
        Group(
            f"g{g}",
            {"question": f"Question {g}?", "reference": "The reference."},
            [f"[answer {g}.{c}]" for c in range(args.k)],
        )
        for g in range(args.groups)
    ]
    print(
        f"{args.groups} groups of {args.k} (quality sd {args.spread:g} within a group, 1 "
        f"between prompts), {args.judges} judges: position bias "
        f"{args.bias:g}, tie margin {args.tie:g}, noise {args.noise:g}",
        flush=True,
    )
    rows = []
    for label, options, rubric, pointwise in DESIGNS:
        jury = sim_jury(
            quality,
            judges=args.judges,
            bias=args.bias,
            tie=args.tie,
            noise=args.noise,
            seed=args.seed,
        )
        spec = GroupSpec(**options)
        job = GroupJob(
            spec,
            load_rubric(rubric),
            jury.spec,
            groups,
            load_rubric(pointwise) if pointwise else None,
            RewardSpec(score="accuracy"),
        )
        began = time.perf_counter()
        results = judge_groups(jury, job)
        seconds = time.perf_counter() - began
        taus, zero, unscored = [], 0, 0
        for g, result in enumerate(results):
            known = [(r, qualities[g, c]) for c, r in enumerate(result.rewards) if r is not None]
            unscored += args.k - len(known)
            values = np.array([r for r, _ in known])
            if len(values) < 2 or np.ptp(values) <= 1e-12:
                zero += 1
                taus.append(0.0)
                continue
            taus.append(float(kendalltau(values, [q for _, q in known]).statistic))
        tau = np.array(taus)
        half = 1.96 * tau.std(ddof=1) / math.sqrt(len(tau))
        calls = results[0].calls
        asked = sum(b.calls for b in jury._backends.values()) / args.judges / args.groups
        rows.append(
            {
                "design": label,
                "calls": calls,
                "asked": round(asked, 1),
                "tau": round(float(tau.mean()), 3),
                "tau_ci": [round(float(tau.mean() - half), 3), round(float(tau.mean() + half), 3)],
                "zero_spread": round(zero / args.groups, 3),
                "unscored": round(unscored / (args.groups * args.k), 3),
                "seconds": round(seconds, 1),
            }
        )
        r = rows[-1]
        print(
            f"| {label} | {calls} | {r['tau']:.3f} [{r['tau_ci'][0]:.3f}, {r['tau_ci'][1]:.3f}]"
            f" | {r['zero_spread']:.1%} |",
            flush=True,
        )
    if args.json:
        print(
            json.dumps(
                {
                    "groups": args.groups,
                    "k": args.k,
                    "spread": args.spread,
                    "judges": args.judges,
                    "bias": args.bias,
                    "tie": args.tie,
                    "noise": args.noise,
                    "seed": args.seed,
                    "rows": rows,
                }
            )
        )


if __name__ == "__main__":
    main()
