"""Rewards per second through ``POST /v1/groups`` beside ``POST /v1/score`` on the same
completions, in one run of ``jurybox serve``'s application on the replay backend (the tiny
jury's judges, their real tokenizers, recorded answers: ``perf/data/tiny-mirage-mg.json.gz``),
so that the service's own work, not a model's, is what is compared.

The completions are the recording's responses, each made distinct (a tag appended: no two
alike, so neither route answers one from another), in groups of ``--group`` under the
recording's questions; every request holds ``--batch`` completions (``--batch / --group``
groups), ``--clients`` requests at once. Each pass is timed ``--rounds`` times, alternating:

* ``/v1/score``: the completions scored one by one on mirage-mg (the pointwise reward);
* ``/v1/groups`` ``pointwise``: the same, through the group route (expected scores read,
  spreads and results built): the route's own cost;
* ``/v1/groups`` ``round_robin`` / ``regular`` (2 per completion) on the pairwise rubric:
  every pair (or 2 per completion) in both orders, which is judge calls, not overhead;
* ``/v1/groups`` ``listwise``: one call per judge per group.

    python perf/group_route.py [--completions 256] [--group 4] [--batch 32] [--clients 4] \\
        [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "perf"))
sys.path.insert(0, str(ROOT / "tests"))

DESIGNS = [
    ("pointwise", {"design": "pointwise"}, "mirage-mg"),
    ("round_robin", {"design": "round_robin"}, "pairwise"),
    ("regular", {"design": "regular", "per_completion": 2}, "pairwise"),
    ("listwise", {"design": "listwise"}, "mirage-mg"),
]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--completions", type=int, default=256, help="completions per timed pass")
    ap.add_argument("--group", type=int, default=4, help="completions per group")
    ap.add_argument("--batch", type=int, default=32, help="completions per request")
    ap.add_argument("--clients", type=int, default=4, help="requests at once")
    ap.add_argument("--rounds", type=int, default=3, help="alternating passes per route")
    ap.add_argument("--json", action="store_true", help="one JSON object as the last line")
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import httpx
    from serve_load import replay_factory, replay_items
    from service_helpers import running_service

    from jurybox.judges.cpu import cpu
    from jurybox.judges.groups import GroupSpec
    from jurybox.rubrics import load_rubric
    from jurybox.serving.service.config import Limits, ServiceConfig

    print(f"cpu: {cpu().describe()}", flush=True)
    calls = {
        name: GroupSpec(**spec).cost(args.group, load_rubric(rubric)).calls / args.group
        for name, spec, rubric in DESIGNS
    }
    limits = Limits(
        max_concurrent=args.clients,
        max_queued=args.clients * 2,
        max_items=max(64, args.batch),
        max_judge_calls=8192,
    )
    counter = iter(range(1 << 30))

    def requests() -> list[list[dict]]:
        """One pass's completions, as requests of --batch items in groups of --group."""
        tag = f"p{next(counter)}-"
        items = replay_items(args.completions, tag)
        out = []
        for start in range(0, len(items), args.batch):
            chunk = items[start : start + args.batch]
            out.append(
                [
                    {
                        "id": it.id,
                        "question": items[start].question,
                        "reference": items[start].reference,
                        "response": f"{it.response} [{it.id}]",
                    }
                    for it in chunk
                ]
            )
        return out

    def timed(fn, batches) -> float:
        began = time.perf_counter()
        asyncio.run(fn(batches))
        return time.perf_counter() - began

    rates: dict[str, float] = {}
    config = ServiceConfig(jury="tiny", limits=limits)
    with running_service(config, backend_factory=replay_factory) as url:

        async def many(bodies: list[tuple[str, dict]]) -> None:
            limit = asyncio.Semaphore(args.clients)
            async with httpx.AsyncClient(base_url=url, timeout=600) as http:

                async def one(path: str, body: dict) -> None:
                    async with limit:
                        r = await http.post(path, json=body)
                        r.raise_for_status()

                await asyncio.gather(*(one(p, b) for p, b in bodies))

        async def score(batches) -> None:
            await many(
                [
                    ("/v1/score", {"rubric": "mirage-mg", "items": b, "allow_empty": True})
                    for b in batches
                ]
            )

        def grouped(spec: dict, rubric: str):
            async def run(batches) -> None:
                bodies = []
                for b in batches:
                    groups = [
                        {
                            "id": b[k]["id"],
                            "question": b[k]["question"],
                            "reference": b[k]["reference"],
                            "completions": [x["response"] for x in b[k : k + args.group]],
                        }
                        for k in range(0, len(b), args.group)
                    ]
                    bodies.append(
                        (
                            "/v1/groups",
                            {
                                "rubric": rubric,
                                "design": spec,
                                "groups": groups,
                                "allow_empty": True,
                            },
                        )
                    )
                await many(bodies)

            return run

        routes = {
            "/v1/score": score,
            **{f"/v1/groups {name}": grouped(spec, rubric) for name, spec, rubric in DESIGNS},
        }
        for fn in routes.values():
            asyncio.run(fn(requests()[: args.clients]))  # warm-up: imports, connections
        times: dict[str, list[float]] = {name: [] for name in routes}
        for _ in range(args.rounds):
            for name, fn in routes.items():
                times[name].append(timed(fn, requests()))
        for name in routes:
            rates[name] = args.completions / statistics.median(times[name])
    base = rates["/v1/score"]
    print("| route | judge calls per reward (each judge) | rewards/s | vs /v1/score |")
    for name, rate in rates.items():
        per = 1.0 if name == "/v1/score" else calls[name.split()[1]]
        print(f"| {name} | {per:g} | {rate:.1f} | {rate / base:.2f} |", flush=True)
    if args.json:
        print(
            json.dumps(
                {
                    "completions": args.completions,
                    "group": args.group,
                    "batch": args.batch,
                    "clients": args.clients,
                    "rounds": args.rounds,
                    "rewards_per_s": {k: round(v, 1) for k, v in rates.items()},
                    "calls_per_reward": {
                        "/v1/score": 1.0,
                        **{f"/v1/groups {k}": v for k, v in calls.items()},
                    },
                }
            )
        )


if __name__ == "__main__":
    main()
