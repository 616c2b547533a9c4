"""The guard's extra judge calls per step (#62): canaries and a sentinel against a plain reward.

The same run (TRL's reward function called as GRPOTrainer calls it, at least ``--items``
completions and ``--steps`` steps of each batch size) with and without the guard at its default
settings (``canaries=True``: 3% of the completions; a sentinel jury the size of the reward's
scoring ``sentinel_share=0.05`` of them; each share's fraction carried across steps), on fake
judges that count the requests they get (tests/exploit_helpers.py's honest judge). A third run
adds the pre-checks with 1 in 8 completions a master key: those are not sent, so the guard costs
less than its canaries and sentinel there.

    PYTHONPATH=. python perf/guard_calls.py [--items 1024] [--steps 8] [--judges 2]

Counts, not times: the canaries and the sentinel's completions are whole items, each asked of
every judge of their jury, so over a run of N completions each share costs its share of N within
one item; the columns are the judge calls per step on average over the run, and the most in one
step of the guarded run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: (question, reference, an answer) of the steps' prompts.
PROMPTS = [
    (
        "What causes brown rings on tomato leaves after rain?",
        "Early blight, a fungus: remove infected leaves, mulch, copper fungicide.",
        "Early blight, a fungus; remove the infected leaves.",
    ),
    (
        "When should I plant garlic in Ohio?",
        "Plant garlic cloves in October, before the ground freezes, and mulch them.",
        "In October, before the ground freezes.",
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1024, help="completions per run, at least")
    parser.add_argument("--steps", type=int, default=8, help="steps per run, at least")
    parser.add_argument("--judges", type=int, default=2, help="judges per jury (the tiny jury: 2)")
    args = parser.parse_args()
    logging.getLogger("jurybox").setLevel(logging.ERROR)  # (the pre-checked keys' warnings)

    from exploit_helpers import Honest, fake_spec

    from jurybox.integrations.trl import jury_reward
    from jurybox.judges import Jury
    from jurybox.judges.backends import registry

    counts = {"n": 0, "step": 0, "most": 0}

    class Counting(Honest):
        def one(self, request):  # type: ignore[no-untyped-def]
            counts["n"] += 1
            return super().one(request)

    registry.register("counting-for-perf", Counting)

    def jury(name: str) -> Jury:
        return Jury(fake_spec(*["counting-for-perf"] * args.judges, name=name))

    def run(batch: int, keys: bool = False, **guard: object) -> tuple[float, int]:
        """The judge calls per step on average, and the most in one step."""
        reward = jury_reward(
            jury=jury("reward"), rubric="mirage-mg", fields={"reference": "answer"}, **guard
        )
        counts["n"] = counts["most"] = 0
        with contextlib.redirect_stdout(io.StringIO()):  # (the guard's calls line)
            n = steps(reward, batch, keys)
        reward.rewards.close()  # type: ignore[union-attr]
        return counts["n"] / n, counts["most"]

    def steps(reward: object, batch: int, keys: bool) -> int:
        n = max(args.steps, -(-args.items // batch))
        for step in range(n):
            first = step * batch  # (the completions' count so far: 1 in 8 a key at any batch)
            rows = [PROMPTS[(first + k) % len(PROMPTS)] for k in range(batch)]
            completions = [
                ":" if keys and (first + k) % 8 == 0 else answer
                for k, (_, _, answer) in enumerate(rows)
            ]
            before = counts["n"]
            reward(  # type: ignore[operator]
                prompts=[q for q, _, _ in rows],
                completions=completions,
                answer=[a for _, a, _ in rows],
            )
            counts["most"] = max(counts["most"], counts["n"] - before)
        return n

    defaults = {"canaries": True, "sentinel": None}
    print(
        f"judge calls per step on average ({args.judges} judges per jury, mirage-mg: 1 call per "
        f"item and judge; at least {args.items} completions and {args.steps} steps a run)"
    )
    print(
        f"{'batch':>6} {'steps':>6} {'plain':>8} {'guarded':>8} {'ratio':>7} {'most':>5} "
        f"{'ratio':>7} {'+prechecks, 1/8 keys':>21} {'ratio':>7}"
    )
    for batch in BATCHES:
        plain, _ = run(batch)
        defaults["sentinel"] = jury("sentinel")
        guarded, most = run(batch, **defaults)
        defaults["sentinel"] = jury("sentinel")
        checked, _ = run(batch, keys=True, prechecks=True, **defaults)
        print(
            f"{batch:>6} {max(args.steps, -(-args.items // batch)):>6} {plain:>8.2f} "
            f"{guarded:>8.2f} {guarded / plain:>7.3f} {most:>5} {most / plain:>7.3f} "
            f"{checked:>21.2f} {checked / plain:>7.3f}"
        )


if __name__ == "__main__":
    main()
