"""The scoring service under load, against offline judging of the same items, in one run.

1. offline: the jury judges N items in-process (``Jury.score``, the same path as ``jurybox
   judge``), engines loaded first and not timed;
2. service: ``jurybox serve``'s application with the same jury; a second process sends the same
   N items as R requests (N/R items each) from C concurrent clients over HTTP on 127.0.0.1.

Prints both throughputs and their ratio (target: service/offline >= 0.7), and the latency the
service adds to a request over the engines' own time (request latency minus the longest
generation among its votes, the time the judges themselves needed), at p50 and p99.

    python perf/serve_load.py [--items 200] [--per-request 8] [--clients 8] [--jury tiny-vllm]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "perf"))
sys.path.insert(0, str(ROOT / "tests"))

CLIENT = r"""
import asyncio, json, sys, time
import httpx

url, per_request, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = json.loads(sys.stdin.read())
batches = [rows[i:i + per_request] for i in range(0, len(rows), per_request)]

async def main():
    queue = asyncio.Queue()
    for b in batches:
        queue.put_nowait(b)
    results = []
    async with httpx.AsyncClient(timeout=1800) as http:
        async def worker():
            while not queue.empty():
                batch = queue.get_nowait()
                began = time.perf_counter()
                r = await http.post(url + "/v1/score", json={"rubric": "mirage-mg", "items": batch})
                took = time.perf_counter() - began
                r.raise_for_status()
                engine = max(v["latency_s"] or 0.0 for verdict in r.json()["verdicts"]
                             for v in verdict["votes"])
                results.append((took, engine))
        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - began
    print(json.dumps({"wall": wall, "requests": results}))

asyncio.run(main())
"""


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--per-request", type=int, default=8)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--jury", default="tiny-vllm")
    args = ap.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}", flush=True)  # results depend on it

    from judge_throughput import make_items
    from service_helpers import running_service

    from jurybox.judges import Jury
    from jurybox.rubrics import load_rubric
    from jurybox.serving.service.config import Limits, ServiceConfig

    items = make_items(args.items)
    rubric = load_rubric("mirage-mg")

    jury = Jury.load(args.jury)
    jury.load_backends()
    jury.score(rubric, items[:4])  # warm-up: grammar compiled, pools filled
    began = time.perf_counter()
    jury.score(rubric, items)
    offline = time.perf_counter() - began
    jury.close()

    rows = [{"id": it.id, "question": it.question, "response": it.response,
             "reference": it.reference} for it in items]
    limits = Limits(max_concurrent=args.clients, max_queued=args.clients, max_items=args.items)
    with running_service(ServiceConfig(jury=args.jury, limits=limits)) as url:
        warm = [{**r, "id": f"warm-{r['id']}"} for r in rows[:4]]
        import httpx

        httpx.post(f"{url}/v1/score", json={"rubric": "mirage-mg", "items": warm},
                   timeout=1800).raise_for_status()
        run = subprocess.run([sys.executable, "-c", CLIENT, url, str(args.per_request),
                              str(args.clients)], input=json.dumps(rows), capture_output=True,
                             text=True, check=True)
    load = json.loads(run.stdout)
    served = load["wall"]
    added = [took - engine for took, engine in load["requests"]]
    print(f"machine: {platform.processor() or platform.machine()}, "
          f"{__import__('os').cpu_count()} CPUs; jury {args.jury}; {args.items} items, "
          f"{len(load['requests'])} requests of {args.per_request} from {args.clients} clients")
    print(f"offline   {args.items / offline:7.2f} items/s ({offline:.1f} s)")
    print(f"service   {args.items / served:7.2f} items/s ({served:.1f} s)")
    print(f"service/offline throughput = {offline / served:.3f}  (target >= 0.7)")
    print(f"latency added by the service over the engines' own time: "
          f"p50 {percentile(added, 0.5) * 1000:.0f} ms, p99 {percentile(added, 0.99) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
