"""One-sample requests against batches, side by side in one run (#51 item 7): the throughput of
``--clients`` concurrent clients each sending one item per request (OpenRLHF's, verl's and
Inspect's shape), against the same items sent as requests of ``--batch`` (TRL's shape) from
enough clients to keep the same number of items in flight, on ``jurybox serve``'s application
over the replay backend (the tiny jury's judges, their real tokenizers, recorded answers: the
service's own work, no model's). The two shapes alternate, ``--rounds`` times each, on fresh
items. Target: one-sample / batches >= 0.5.

``--unmerged`` also measures the one-sample shape on a service with a slot for every client
(``max_concurrent`` = ``--clients``): no request ever waits, so none is merged with another,
as before requests were judged together.

``--floor`` also measures Ray Serve's own floor for the one-sample shape (serve_load.py's: the
same deployments serving an ingress that decodes the request, sends it to every judge's handle
at once and answers canned votes; no jurybox code), with the same client: where the floor
itself is below half the batches' throughput on this machine, the target is to come within
1.25x of the floor.

    python perf/coalescing.py [--items 512] [--clients 64] [--batch 16] [--rounds 3]
                              [--unmerged] [--floor]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "perf"))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=512, help="items per timed pass")
    ap.add_argument("--clients", type=int, default=64, help="one-sample clients at once")
    ap.add_argument("--batch", type=int, default=16, help="items per request of the batches")
    ap.add_argument("--rounds", type=int, default=3, help="alternating passes per shape")
    ap.add_argument(
        "--unmerged",
        action="store_true",
        help="also the one-sample shape with a slot for every client (nothing merged)",
    )
    ap.add_argument(
        "--floor", action="store_true", help="also Ray Serve's own floor for the one-sample shape"
    )
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from serve_load import client, replay_factory, replay_items, row, run_floor
    from service_helpers import running_service

    from jurybox.judges.cpu import cpu
    from jurybox.rubrics import load_rubric
    from jurybox.serving.service.config import Limits, ServiceConfig

    print(f"cpu: {cpu().describe()}", flush=True)
    batch_clients = max(1, args.clients // args.batch)
    limits = Limits(max_items=max(64, args.batch), max_queued=2 * args.clients)
    config = ServiceConfig(jury="tiny", limits=limits)
    counter = iter(range(1 << 30))

    def phases() -> list[dict]:
        out = []
        for _ in range(args.rounds):
            for per_request, clients in ((1, args.clients), (args.batch, batch_clients)):
                tag = f"r{next(counter)}-"
                out.append(
                    {
                        "rows": [row(it) for it in replay_items(args.items, tag)],
                        "per_request": per_request,
                        "clients": clients,
                    }
                )
        return out

    with running_service(config, backend_factory=replay_factory) as url:
        results = client(url, phases(), warm=5)
    single = [args.items / r["wall"] for r in results[0::2]]
    batched = [args.items / r["wall"] for r in results[1::2]]
    one, many = statistics.median(single), statistics.median(batched)
    print(f"{args.items} items per pass, {args.rounds} rounds, medians:")
    print(f"one item per request, {args.clients} clients   {one:7.1f} items/s")
    print(f"{args.batch} items per request, {batch_clients} clients   {many:7.1f} items/s")
    print(f"one-sample / batches = {one / many:.3f}  (target >= 0.5)")
    if args.unmerged:
        wide = Limits(
            max_items=limits.max_items, max_concurrent=args.clients, max_queued=2 * args.clients
        )
        with running_service(
            ServiceConfig(jury="tiny", limits=wide), backend_factory=replay_factory
        ) as url:
            (alone,) = client(
                url,
                [
                    {
                        "rows": [row(it) for it in replay_items(args.items, "u-")],
                        "per_request": 1,
                        "clients": args.clients,
                    }
                ],
                warm=5,
            )
        rate = args.items / alone["wall"]
        print(
            f"one item per request, {args.clients} clients, a slot each (none merged) "
            f"{rate:7.1f} items/s: merged / unmerged = {one / rate:.2f}"
        )
    if args.floor:
        rubric = load_rubric("mirage-mg")
        rows = [row(it) for it in replay_items(args.items, "floor-")]
        (floor,) = run_floor(
            config,
            [c.name for c in rubric.criteria],
            [{"rows": rows, "per_request": 1, "clients": args.clients}],
        )
        floor_rate = args.items / floor["wall"]
        print(
            f"Ray Serve's floor, one item per request, {args.clients} clients "
            f"{floor_rate:7.1f} items/s"
        )
        print(f"one-sample / floor = {one / floor_rate:.3f}  (target >= 0.8, i.e. within 1.25x)")


if __name__ == "__main__":
    main()
