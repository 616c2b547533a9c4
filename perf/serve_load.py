"""The scoring service under load, against offline judging of the same items, in one run.

1. offline: the jury judges N items in-process (``Jury.score``, the same path as ``jurybox
   judge``), engines loaded first and not timed;
2. service: ``jurybox serve``'s application with the same jury (Ray Serve, the ingress, one
   deployment per judge); a second process sends the same N items as R requests (N/R items
   each) from C concurrent clients over HTTP on 127.0.0.1;
3. with ``--latency-requests L``: before that, the same client process sends L requests of
   ``--per-request`` items one after another (one client), for the latency alone.

Prints both throughputs and their ratio (target: service/offline >= 0.7 on an engine), and the
latency the service adds to a request over the judges' own time (request latency minus the
longest ``latency_s`` among its votes, the time the judges themselves needed), at p50 and p99:
of the sequential requests when there are any, else of the concurrent ones.

``--backend engine`` (the default) runs the real models of ``--jury`` (``tiny-vllm``).
``--backend replay`` measures the service's own overhead without a model: the ``tiny`` jury's
judges (their real tokenizers) on one :class:`~jurybox.judges.backends.replay.ReplayBackend` each,
built from ``perf/data/tiny-mirage-mg.json.gz``, offline and in the service's judge replicas
alike (``jury_app(..., backend_factory=...)``), on the recorded items cycled with fresh
ids, so every prompt replays its own recording. A replayed vote's ``latency_s`` is 0: the added
latency is then the whole request, the backends' tokenizing and detokenizing (which the offline
path pays too) included. Targets on 2 cores: p50 <= 15 ms, p99 <= 50 ms, throughput >= 0.6.
Both modes check that the service's verdicts equal the offline ones (latency aside).

``--floor`` (with replay) then measures what Ray Serve itself costs for the same shape, with the
same client: the same deployments (the ingress's replicas and Ray options, one deployment per
judge, the replicas' Serve settings) serving a FastAPI ingress that decodes the request, sends
its items to every judge through their handles at once, and answers with each judge's canned
votes (the size of real ones), encoded once; no validation, rendering, tokenizing, parsing or
deciding. The service's added latency minus this floor is what jurybox's own code adds.

    python perf/serve_load.py [--items 200] [--per-request 8] [--clients 8] [--jury tiny-vllm]
    python perf/serve_load.py --backend replay [--items 1600] [--latency-requests 250] [--json]
    python perf/serve_load.py --backend replay --floor --json

``--json``: one JSON object of every number, as the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "perf"))
sys.path.insert(0, str(ROOT / "tests"))
RECORDING = ROOT / "perf" / "data" / "tiny-mirage-mg.json.gz"
RUBRIC = "mirage-mg"

# Reads {"url", "phases": [{"rows", "per_request", "clients", "keep"}]} on stdin; prints, per
# phase, its wall time, each request's (seconds, longest vote latency_s), and with "keep" the
# verdicts in the rows' order.
CLIENT = r"""
import asyncio, json, sys, time
import httpx

job = json.loads(sys.stdin.read())
url = job["url"]

async def phase(http, rows, per_request, clients, keep):
    batches = [rows[i:i + per_request] for i in range(0, len(rows), per_request)]
    queue = asyncio.Queue()
    for k, b in enumerate(batches):
        queue.put_nowait((k, b))
    results, verdicts = [], [None] * len(batches)

    async def worker():
        while not queue.empty():
            k, batch = queue.get_nowait()
            began = time.perf_counter()
            r = await http.post(url + "/v1/score", json={"rubric": job["rubric"], "items": batch})
            took = time.perf_counter() - began
            r.raise_for_status()
            got = r.json()["verdicts"]
            engine = max(v["latency_s"] or 0.0 for verdict in got for v in verdict["votes"])
            results.append((took, engine))
            if keep:
                verdicts[k] = got
    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    wall = time.perf_counter() - began
    out = {"wall": wall, "requests": results}
    if keep:
        out["verdicts"] = [v for part in verdicts for v in part]
    return out

async def main():
    async with httpx.AsyncClient(timeout=1800) as http:
        return [await phase(http, p["rows"], p["per_request"], p["clients"], p.get("keep"))
                for p in job["phases"]]

print(json.dumps(asyncio.run(main())))
"""


def replay_factory(spec):  # pickled by value into the judge replicas (this is __main__)
    from jurybox.judges.backends.replay import Recording, ReplayBackend

    return ReplayBackend(spec, Recording.load(RECORDING))


def replay_items(n: int, tag: str) -> list:
    """``n`` items cycling through the recorded ones, with fresh ids (each replays its own)."""
    from jurybox.judges.backends.replay import Recording
    from jurybox.rubrics import Item

    base = [Item.model_validate(d) for d in Recording.load(RECORDING).items]
    return [base[i % len(base)].model_copy(update={"id": f"{tag}{i:06d}"}) for i in range(n)]


def row(item) -> dict:
    """An item as a request's JSON object (a prediction-file row: extra fields at the top)."""
    out = {
        k: v
        for k, v in item.model_dump(mode="json").items()
        if k != "extra" and v not in (None, [], {})
    }
    out.update(item.extra or {})
    return out


def timeless(record: dict) -> dict:
    """A verdict record without its votes' latencies (all that two runs may differ in)."""
    return {
        **record,
        "votes": [{k: v for k, v in vote.items() if k != "latency_s"} for vote in record["votes"]],
    }


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


class FloorJudge:
    """A judge deployment of the floor: what a vote list weighs, without judging."""

    def __init__(self, judge: str, criteria: list[str]) -> None:
        dist = {str(k): 0.2 for k in range(5)}
        self.vote = [
            {
                "judge": judge,
                "criterion": c,
                "score": 2.0,
                "label": "2",
                "expected": 2.0,
                "distribution": dist,
                "error": None,
                "latency_s": 0.0,
                "raw": '{"accuracy": 2, "relevance": 2, "completeness": 2, "parsimony": 2}',
            }
            for c in criteria
        ]

    async def votes(self, items: list) -> list:
        return [self.vote for _ in items]


class FloorIngress:
    """The floor's ingress: the request's items to every judge at once, their votes back."""

    def __init__(self, judges: dict) -> None:
        self.judges = judges

    def __serve_build_asgi_app__(self):
        import asyncio

        import msgspec
        from fastapi import FastAPI
        from starlette.responses import JSONResponse, Response

        async def score(request):  # a plain Starlette endpoint: nothing for FastAPI to inject
            items = msgspec.json.decode(await request.body())["items"]
            votes = await asyncio.gather(*(h.votes.remote(items) for h in self.judges.values()))
            verdicts = [
                {"id": it.get("id"), "votes": [v for per in votes for v in per[i]]}
                for i, it in enumerate(items)
            ]
            return Response(
                msgspec.json.encode({"verdicts": verdicts}), media_type="application/json"
            )

        async def healthz(request):
            return JSONResponse({"status": "ok"})

        app = FastAPI()
        app.add_route("/v1/score", score, methods=["POST"])
        app.add_route("/healthz", healthz, methods=["GET"])
        return app


def run_floor(config, criteria: list[str], phases: list[dict]) -> list[dict]:
    """``phases`` sent by the client to the floor app deployed as ``config``'s service is."""
    import ray
    from ray import serve
    from service_helpers import QUIET, free_port, wait_healthy

    from jurybox.serving.service.builder import ingress_options, judge_options

    plan = config.resolve()
    spec = plan.jury_spec()
    judges = {
        j.name: serve.deployment(FloorJudge).options(**judge_options(j)).bind(j.name, criteria)
        for j in spec.judges
    }
    options = ingress_options(config, plan.ingress_replicas)
    options.pop("deployment_actors")  # the ingress's shared state: jurybox's, not Serve's
    app = serve.deployment(serve.ingress()(FloorIngress)).options(**options).bind(judges)
    port = free_port()
    ray.init(num_cpus=8, include_dashboard=False, logging_level="WARNING")
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config=QUIET)
        serve.run(app, name="floor", route_prefix="/", logging_config=QUIET)
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, 300)
        return client(url, phases, warm=5)
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()


def client(url: str, phases: list[dict], warm: int) -> list[dict]:
    """The client process's results for ``phases``, after ``warm`` warm-up requests."""
    import httpx

    rows = [{**r, "id": f"warm-{r['id']}"} for r in phases[-1]["rows"][: phases[-1]["per_request"]]]
    for _ in range(warm):
        httpx.post(
            f"{url}/v1/score", json={"rubric": RUBRIC, "items": rows}, timeout=1800
        ).raise_for_status()
    run = subprocess.run(
        [sys.executable, "-c", CLIENT],
        input=json.dumps({"url": url, "rubric": RUBRIC, "phases": phases}),
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise SystemExit(f"the client failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backend", choices=("engine", "replay"), default="engine")
    ap.add_argument(
        "--items",
        type=int,
        default=None,
        help="items of the concurrent run (default: 200; 1600 with replay)",
    )
    ap.add_argument(
        "--latency-requests",
        type=int,
        default=None,
        help="sequential requests from one client first (default: 0; 250 with replay)",
    )
    ap.add_argument("--per-request", type=int, default=8)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument(
        "--jury",
        default=None,
        help="the jury (default: tiny-vllm; replay: tiny, whose judges were recorded)",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="with replay: also measure Ray Serve's own floor for the same "
        "deployments and client (no judging), and jurybox's share above it",
    )
    ap.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object of the results as the last line of stdout",
    )
    args = ap.parse_args()
    replay = args.backend == "replay"
    if args.floor and not replay:
        ap.error("--floor goes with --backend replay (a model's time would drown it)")
    n_items = args.items if args.items is not None else (1600 if replay else 200)
    n_sequential = (
        args.latency_requests if args.latency_requests is not None else (250 if replay else 0)
    )
    jury_name = args.jury or ("tiny" if replay else "tiny-vllm")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # before any tokenizer loads
    from jurybox.judges.cpu import cpu

    cpu_text = cpu().describe()
    print(f"cpu: {cpu_text}", flush=True)  # results depend on it

    from service_helpers import assert_same_verdicts, running_service

    from jurybox.judges import Jury
    from jurybox.rubrics import input_hash, load_rubric
    from jurybox.serving.service.config import Limits, ServiceConfig

    rubric = load_rubric(RUBRIC)
    if replay:
        items = replay_items(n_items, "c")
        sequential = replay_items(n_sequential * args.per_request, "s")
        spec = Jury.load(jury_name).spec
        jury = Jury(spec, {j.name: replay_factory(j) for j in spec.judges})
    else:
        from judge_throughput import make_items

        items = make_items(n_items)
        sequential = [
            it.model_copy(update={"id": f"s-{it.id}"})
            for it in make_items(n_sequential * args.per_request)
        ]
        jury = Jury.load(jury_name)
        jury.load_backends()
    jury.score(rubric, items[:4])  # warm-up: grammar compiled, pools filled, caches warm
    began = time.perf_counter()
    offline_verdicts = jury.score(rubric, items)
    offline = time.perf_counter() - began
    want = [v.to_record(input=input_hash(it)) for v, it in zip(offline_verdicts, items)]
    jury.close()

    limits = Limits(
        max_concurrent=args.clients, max_queued=args.clients, max_items=max(256, args.per_request)
    )
    phases = []
    if sequential:
        phases.append(
            {"rows": [row(it) for it in sequential], "per_request": args.per_request, "clients": 1}
        )
    phases.append(
        {
            "rows": [row(it) for it in items],
            "per_request": args.per_request,
            "clients": args.clients,
            "keep": True,
        }
    )
    config = ServiceConfig(jury=jury_name, limits=limits)
    with running_service(config, backend_factory=replay_factory if replay else None) as url:
        *first, load = client(url, phases, warm=5 if replay else 1)
    got = load.pop("verdicts")
    if replay:  # deterministic: the very same records, latency aside
        assert [timeless(r) for r in got] == [timeless(r) for r in want], "verdicts differ"
    else:
        assert_same_verdicts(got, want, tolerance=0.15)
    served = load["wall"]
    timed = first[0]["requests"] if first else load["requests"]
    added = [took - engine for took, engine in timed]
    result = {
        "p50_added_ms": percentile(added, 0.5) * 1000,
        "p99_added_ms": percentile(added, 0.99) * 1000,
        "mean_added_ms": sum(added) / len(added) * 1000,
        "latency_of": f"{len(timed)} requests from "
        + ("one client, one after another" if first else f"{args.clients} clients"),
        "throughput_ratio": offline / served,
        "offline_items_per_s": n_items / offline,
        "service_items_per_s": n_items / served,
        "items": n_items,
        "per_request": args.per_request,
        "clients": args.clients,
        "latency_requests": len(first[0]["requests"]) if first else 0,
        "backend": args.backend,
        "jury": jury_name,
        "verdicts_equal_offline": True,
        "cpu": cpu_text,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
    }
    print(
        f"machine: {result['machine']}; jury {jury_name} ({args.backend}); {n_items} items, "
        f"{len(load['requests'])} requests of {args.per_request} from {args.clients} clients"
    )
    print(f"offline   {n_items / offline:7.2f} items/s ({offline:.1f} s)")
    print(f"service   {n_items / served:7.2f} items/s ({served:.1f} s)")
    print(
        f"service/offline throughput = {offline / served:.3f}  (target >= {0.6 if replay else 0.7})"
    )
    print(
        f"latency added by the service over the judges' own time ({result['latency_of']}): "
        f"p50 {result['p50_added_ms']:.1f} ms, p99 {result['p99_added_ms']:.1f} ms"
    )
    print("the service's verdicts equal the offline ones")
    if args.floor:
        *floor_first, floor_load = run_floor(
            config, [c.name for c in rubric.criteria], [{**p, "keep": False} for p in phases]
        )
        floor_timed = floor_first[0]["requests"] if floor_first else floor_load["requests"]
        floor = [took for took, _ in floor_timed]
        result.update(
            {
                "floor_p50_ms": percentile(floor, 0.5) * 1000,
                "floor_p99_ms": percentile(floor, 0.99) * 1000,
                "floor_items_per_s": n_items / floor_load["wall"],
                "p50_above_floor_ms": (percentile(added, 0.5) - percentile(floor, 0.5)) * 1000,
                "p99_above_floor_ms": (percentile(added, 0.99) - percentile(floor, 0.99)) * 1000,
            }
        )
        print(
            f"Ray Serve's floor, the same deployments without judging: p50 "
            f"{result['floor_p50_ms']:.1f} ms, p99 {result['floor_p99_ms']:.1f} ms, "
            f"{result['floor_items_per_s']:.1f} items/s with {args.clients} clients"
        )
        print(
            f"jurybox above the floor: p50 {result['p50_above_floor_ms']:.1f} ms, p99 "
            f"{result['p99_above_floor_ms']:.1f} ms"
        )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
