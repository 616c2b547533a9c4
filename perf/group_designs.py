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

Two judge models (``--judge-model``; ``both`` runs each on the same groups and prints one table
with a column per model), which differ only in a comparison's noise (so the pointwise and
listwise designs, which compare nothing, are run once and shown for both):

- ``difference``: the noise (sd ``--noise``) is on the difference a comparison judges, as on
  the one answer a pointwise call scores: the judge is as precise on a difference as on one
  answer (tests/group_helpers.py: SimJudge as it is);
- ``perception``: the judge perceives each answer it is shown with noise of sd ``--noise``, alone
  or beside another, and a comparison judges the difference of its two perceptions (Thurstone's
  case V): the difference's noise is ``--noise`` times sqrt(2), as two pointwise scores'
  difference would be.

Kendall's tau-b between a group's rewards and its true qualities (scipy.stats.kendalltau) is
averaged over groups, a group whose rewards all tie counting as 0 (it carries no order), with
a 95% interval over groups (normal, on the groups' taus); unscored rewards are left out.

    python perf/group_designs.py [--groups 300] [--k 8] [--spread 1] [--judges 2] \\
        [--bias 0.5] [--tie 0.3] [--noise 0.7] [--judge-model both] [--max-calls N] [--design LABEL ...] [--seed 0] \\
        [--json]
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


MODELS = ("difference", "perception")


def perceiving(base: type) -> type:
    """``base`` (SimJudge) judging a comparison as the difference of two noisy perceptions."""

    class Perceiving(base):  # type: ignore[misc, valid-type]
        def _pair(self, texts: list[str], shown: list[str]) -> tuple[str, dict[str, float]]:
            # Two independent perceptions of sd noise: their difference has sd noise * sqrt(2).
            noise, self.noise = self.noise, self.noise * math.sqrt(2.0)
            try:
                return super()._pair(texts, shown)
            finally:
                self.noise = noise

    return Perceiving


def make_jury(model: str, quality: dict[str, float], args: argparse.Namespace):
    """The simulated jury of ``model`` (module text): sim_jury's, its judges swapped for it."""
    from group_helpers import SimJudge, sim_jury

    from jurybox.judges import Jury

    kinds = {"difference": SimJudge, "perception": perceiving(SimJudge)}
    options = {"bias": args.bias, "tie": args.tie, "noise": args.noise}
    base = sim_jury(quality, judges=args.judges, seed=args.seed, **options)
    backends = {
        name: kinds[model](name, quality, seed=args.seed + k, **options)
        for k, name in enumerate(base._backends)
    }
    return Jury(base.spec, backends)


def run_design(model, label, options, rubric, pointwise, groups, qualities, quality, args):
    """One design's row under one judge ``model``: its tau, calls and zero-spread share."""
    from scipy.stats import kendalltau

    from jurybox.judges.groups import GroupJob, GroupSpec, judge_groups
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    jury = make_jury(model, quality, args)
    job = GroupJob(
        GroupSpec(**options),
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
    asked = sum(b.calls for b in jury._backends.values()) / args.judges / args.groups
    return {
        "design": label,
        "judge_model": model,
        "calls": results[0].calls,
        "asked": round(asked, 1),
        "tau": round(float(tau.mean()), 3),
        "tau_ci": [round(float(tau.mean() - half), 3), round(float(tau.mean() + half), 3)],
        "zero_spread": round(zero / args.groups, 3),
        "unscored": round(unscored / (args.groups * args.k), 3),
        "seconds": round(seconds, 1),
    }


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
    ap.add_argument(
        "--judge-model",
        choices=(*MODELS, "both"),
        default="both",
        help="how a comparison's noise relates to a pointwise score's (module text)",
    )
    ap.add_argument(
        "--max-calls",
        type=int,
        default=None,
        help="skip the designs of more judge calls per judge and group (at k = 16 the round "
        "robin's 240 calls take most of the time)",
    )
    ap.add_argument(
        "--design",
        action="append",
        default=[],
        help="run only this design (its label in the table; repeat)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="one JSON object as the last line")
    args = ap.parse_args()

    from jurybox.judges.groups import Group

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
    models = MODELS if args.judge_model == "both" else (args.judge_model,)
    print(
        f"{args.groups} groups of {args.k} (quality sd {args.spread:g} within a group, 1 "
        f"between prompts), {args.judges} judges: position bias "
        f"{args.bias:g}, tie margin {args.tie:g}, noise {args.noise:g}; judge models: "
        + ", ".join(models),
        flush=True,
    )
    from jurybox.judges.groups import GroupSpec
    from jurybox.rubrics import load_rubric

    unknown = set(args.design) - {d[0] for d in DESIGNS}
    if unknown:
        ap.error(f"--design {sorted(unknown)[0]!r}: not one of {[d[0] for d in DESIGNS]}")

    def calls(d: tuple) -> int:
        return GroupSpec(**d[1]).cost(args.k, load_rubric(d[2]), d[3] and load_rubric(d[3])).calls

    designs = [
        d
        for d in DESIGNS
        if (not args.design or d[0] in args.design)
        and (args.max_calls is None or calls(d) <= args.max_calls)
    ]
    rows = []
    for label, options, rubric, pointwise in designs:
        for model in models:
            if options["design"] in ("pointwise", "listwise") and model != models[0]:
                # No comparison: the judge models answer alike (same seeds, same answers).
                rows.append(dict(rows[-1], judge_model=model))
                continue
            row = run_design(
                model, label, options, rubric, pointwise, groups, qualities, quality, args
            )
            rows.append(row)
            print(
                f"  {model}: {label}: {row['calls']} calls, tau {row['tau']:.3f} "
                f"[{row['tau_ci'][0]:.3f}, {row['tau_ci'][1]:.3f}], zero spread "
                f"{row['zero_spread']:.1%} ({row['seconds']} s)",
                flush=True,
            )
    print("\n| design | calls | " + " | ".join(f"Kendall tau, {m}" for m in models), end="")
    print(" | " + " | ".join(f"zero spread, {m}" for m in models) + " |")
    print("|---" * (2 + 2 * len(models)) + "|")
    for label, *_ in designs:
        mine = [r for r in rows if r["design"] == label]
        cells = [f"{r['tau']:.3f} [{r['tau_ci'][0]:.3f}, {r['tau_ci'][1]:.3f}]" for r in mine]
        cells += [f"{r['zero_spread']:.1%}" for r in mine]
        print(f"| {label} | {mine[0]['calls']} | " + " | ".join(cells) + " |")
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
                    "judge_models": list(models),
                    "seed": args.seed,
                    "rows": rows,
                }
            )
        )


if __name__ == "__main__":
    main()
