"""Rewards per second through each integration against the service, beside /v1/score called
directly with the same items in the same shape, in one run: the adapters' own cost as a ratio
(target >= 0.9: an adapter costs its client at most a tenth of the service's throughput).

The service is ``jurybox serve``'s application on the replay backend (the tiny jury's judges,
their real tokenizers, recorded answers: ``perf/data/tiny-mirage-mg.json.gz``), so that the
service's own work, not a model's, is what the adapters are compared with. Each pair is timed
alternately, ``--rounds`` times, on fresh items of the same recorded prompts:

* **TRL**: ``jury_reward(...)`` called as GRPOTrainer calls it, batches of ``--batch`` items
  (prompts, completions, the reference column), against ``Client.score_records`` of the same
  batches turned into rewards.
* **OpenRLHF**: one sample per request (as its rollout actors send them), ``--clients`` at once,
  to /v1/openrlhf/{rubric}, against /v1/score with one item per request, as many at once.
* **verl**: ``compute_score`` per response, ``--clients`` at once on one event loop (as verl's
  reward manager awaits it), against /v1/score per item, as many at once.
* **Inspect AI**: the scorer awaited per sample (TaskStates built beforehand), ``--clients`` at
  once, against /v1/score per item, as many at once.

    python perf/integrations.py [--items 256] [--batch 16] [--clients 8] [--rounds 3] [--json]
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
RUBRIC = "mirage-mg"


def rows_of(items) -> list[dict]:
    return [
        {"id": it.id, "question": it.question, "response": it.response, "reference": it.reference}
        for it in items
    ]


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=256, help="items per timed pass")
    ap.add_argument("--batch", type=int, default=16, help="TRL's batch (items per call)")
    ap.add_argument(
        "--clients", type=int, default=8, help="requests at once (OpenRLHF, verl, Inspect)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="alternating passes per pair")
    ap.add_argument("--json", action="store_true", help="one JSON object as the last line")
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from serve_load import replay_factory, replay_items
    from service_helpers import running_service

    from jurybox.judges.cpu import cpu
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec
    from jurybox.serving import Client
    from jurybox.serving.service.config import Limits, ServiceConfig

    print(f"cpu: {cpu().describe()}", flush=True)
    reward = RewardSpec(unscored="none").bind(load_rubric(RUBRIC))
    limits = Limits(
        max_concurrent=args.clients, max_queued=args.clients * 2, max_items=max(64, args.batch)
    )
    config = ServiceConfig(jury="tiny", limits=limits)
    results: dict[str, dict[str, float]] = {}
    with running_service(config, backend_factory=replay_factory) as url:
        client = Client(url)
        counter = iter(range(1 << 30))

        def fresh() -> list[dict]:
            return rows_of(replay_items(args.items, f"p{next(counter)}-"))

        client.score_records(RUBRIC, fresh()[:8])  # warm-up: every replica's first request

        # -- TRL ---------------------------------------------------------------------------------
        from jurybox.integrations.trl import jury_reward

        trl_fn = jury_reward(url=url, rubric=RUBRIC, token_env="", unscored="none")

        def trl_direct(rows):
            for k in range(0, len(rows), args.batch):
                reward.values(client.score_records(RUBRIC, rows[k : k + args.batch]))

        def trl_adapter(rows):
            for k in range(0, len(rows), args.batch):
                batch = rows[k : k + args.batch]
                trl_fn(
                    prompts=[r["question"] for r in batch],
                    completions=[r["response"] for r in batch],
                    reference=[r["reference"] for r in batch],
                )

        # -- at most --clients at once on one event loop ----------------------------------------
        import httpx

        def concurrently(rows, one) -> None:
            """``await one(http, row)`` for every row, ``--clients`` at a time."""

            async def go():
                limit = asyncio.Semaphore(args.clients)
                async with httpx.AsyncClient(timeout=600) as http:

                    async def guarded(r):
                        async with limit:
                            await one(http, r)

                    await asyncio.gather(*(guarded(r) for r in rows))

            asyncio.run(go())

        # -- OpenRLHF ----------------------------------------------------------------------------
        async def openrlhf_one(http, r):
            q = r["question"]
            got = await http.post(
                f"{url}/v1/openrlhf/{RUBRIC}?unscored=0",
                json={"query": [q + r["response"]], "prompts": [q], "labels": [r["reference"]]},
            )
            got.raise_for_status()

        async def score_one(http, r):
            got = await http.post(
                f"{url}/v1/score",
                json={"rubric": RUBRIC, "items": [{**r, "id": "0"}], "allow_empty": True},
            )
            got.raise_for_status()
            reward.values(got.json()["verdicts"])

        # -- verl --------------------------------------------------------------------------------
        from jurybox.integrations.verl import compute_score

        async def verl_one(http, r):
            await compute_score(
                data_source="m",
                solution_str=r["response"],
                ground_truth=r["reference"],
                extra_info={"question": r["question"]},
                url=url,
                rubric=RUBRIC,
                token_env="",
                unscored=0.0,
            )

        # -- Inspect AI --------------------------------------------------------------------------
        from inspect_ai.model import ModelOutput
        from inspect_ai.scorer import Target
        from inspect_ai.solver import TaskState

        from jurybox.integrations.inspect import jury_scorer

        scorer = jury_scorer(rubric=RUBRIC, url=url, token_env="")

        def inspect_adapter(rows):
            states = {
                id(r): TaskState(
                    model="mockllm/model",
                    sample_id=f"s{k}",
                    epoch=1,
                    input=r["question"],
                    messages=[],
                    output=ModelOutput.from_content("mockllm/model", r["response"]),
                )
                for k, r in enumerate(rows)
            }

            async def one(http, r):
                await scorer(states[id(r)], Target(r["reference"]))

            concurrently(rows, one)

        pairs = {
            "trl": (trl_direct, trl_adapter),
            "openrlhf": (
                lambda rows: concurrently(rows, score_one),
                lambda rows: concurrently(rows, openrlhf_one),
            ),
            "verl": (
                lambda rows: concurrently(rows, score_one),
                lambda rows: concurrently(rows, verl_one),
            ),
            "inspect": (lambda rows: concurrently(rows, score_one), inspect_adapter),
        }
        for name, (direct, adapter) in pairs.items():
            adapter(fresh()[: args.clients])  # warm-up (imports, connections)
            times: dict[str, list[float]] = {"direct": [], "adapter": []}
            for _ in range(args.rounds):
                for side, fn in (("direct", direct), ("adapter", adapter)):
                    rows = fresh()
                    times[side].append(timed(lambda fn=fn, rows=rows: fn(rows)))
            direct_rate = args.items / statistics.median(times["direct"])
            adapter_rate = args.items / statistics.median(times["adapter"])
            results[name] = {
                "direct_per_s": round(direct_rate, 1),
                "adapter_per_s": round(adapter_rate, 1),
                "ratio": round(adapter_rate / direct_rate, 3),
            }
            print(
                f"{name:9s} /v1/score {direct_rate:7.1f}/s  adapter {adapter_rate:7.1f}/s  "
                f"ratio {adapter_rate / direct_rate:.3f}",
                flush=True,
            )
        client.close()
    if args.json:
        print(
            json.dumps(
                {
                    "items": args.items,
                    "batch": args.batch,
                    "clients": args.clients,
                    "rounds": args.rounds,
                    "results": results,
                }
            )
        )


if __name__ == "__main__":
    main()
