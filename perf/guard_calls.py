"""The guard's extra judge calls per step (#62): canaries and a sentinel against a plain reward.

The same run (TRL's reward function called as GRPOTrainer calls it, ``STEPS`` steps of each batch
size) with and without the guard at its default settings (``canaries=True``: 3% of the batch, at
least one; a sentinel jury the size of the reward's scoring ``sentinel_share=0.05`` of the batch,
at least one), on fake judges that count the requests they get (tests/exploit_helpers.py's
honest judge). A third run adds the pre-checks to a batch with 1 in 8 completions a master key:
those are not sent, so the guard costs less than its canaries and sentinel there.

    PYTHONPATH=. python perf/guard_calls.py [--steps 8] [--judges 2]

Counts, not times: the ratio is exact for these settings (the canaries and the sentinel's
completions are whole items, each asked of every judge of their jury).
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

BATCHES = (16, 32, 64, 128, 256)
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
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--judges", type=int, default=2, help="judges per jury (the tiny jury: 2)")
    args = parser.parse_args()
    logging.getLogger("jurybox").setLevel(logging.ERROR)  # (the pre-checked keys' warnings)

    from exploit_helpers import Honest, fake_spec

    from jurybox.integrations.trl import jury_reward
    from jurybox.judges import Jury
    from jurybox.judges.backends import registry

    counts = {"n": 0}

    class Counting(Honest):
        def one(self, request):  # type: ignore[no-untyped-def]
            counts["n"] += 1
            return super().one(request)

    registry.register("counting-for-perf", Counting)

    def jury(name: str) -> Jury:
        return Jury(fake_spec(*["counting-for-perf"] * args.judges, name=name))

    def run(batch: int, keys: bool = False, **guard: object) -> int:
        reward = jury_reward(
            jury=jury("reward"), rubric="mirage-mg", fields={"reference": "answer"}, **guard
        )
        counts["n"] = 0
        with contextlib.redirect_stdout(io.StringIO()):  # (the guard's calls line)
            steps(reward, batch, keys)
        reward.rewards.close()  # type: ignore[union-attr]
        return counts["n"] // args.steps

    def steps(reward: object, batch: int, keys: bool) -> None:
        for step in range(args.steps):
            rows = [PROMPTS[(step + k) % len(PROMPTS)] for k in range(batch)]
            completions = [
                ":" if keys and k % 8 == 0 else answer for k, (_, _, answer) in enumerate(rows)
            ]
            reward(  # type: ignore[operator]
                prompts=[q for q, _, _ in rows],
                completions=completions,
                answer=[a for _, a, _ in rows],
            )

    defaults = {"canaries": True, "sentinel": None}
    print(
        f"judge calls per step ({args.judges} judges per jury, mirage-mg: 1 call per item and "
        f"judge; {args.steps} steps)"
    )
    print(
        f"{'batch':>6} {'plain':>7} {'guarded':>8} {'ratio':>7} {'+prechecks, 1/8 keys':>21} "
        f"{'ratio':>7}"
    )
    for batch in BATCHES:
        plain = run(batch)
        defaults["sentinel"] = jury("sentinel")
        guarded = run(batch, **defaults)
        defaults["sentinel"] = jury("sentinel")
        checked = run(batch, keys=True, prechecks=True, **defaults)
        print(
            f"{batch:>6} {plain:>7} {guarded:>8} {guarded / plain:>7.3f} {checked:>21} "
            f"{checked / plain:>7.3f}"
        )


if __name__ == "__main__":
    main()
