"""Where a jury's vLLM engines run their threads on a CPU, and what it costs.

vLLM on CPU binds each engine's compute threads itself (``VLLM_CPU_OMP_THREADS_BIND=auto``: one
core reserved for the scheduler, the OpenMP threads pinned to the others), and every engine of
a jury makes the same choice: on 2 cores every judge's worker computes on core 0. jurybox starts
its engines with ``nobind`` unless the environment says otherwise
(``jurybox.judges.cpu.VLLM_CPU_ENV``). This judges the same items with the ``tiny-vllm`` jury
under one binding per run, in a fresh process each (an engine reads the binding when it starts):

  auto     vLLM's default
  nobind   the threads left to the operating system (jurybox's default)
  split    judge k's engine on core k (mod the cores)
  nobind1  unbound, and one OpenMP thread per engine

Engines are loaded and warmed on 4 items first, not timed; the time is ``Jury.score`` on the
items (the path of ``jurybox judge``). Run with nothing else on the machine.

    python perf/vllm_cpu_binding.py [--items 40] [--modes auto,nobind,auto,nobind] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "perf"))
MODES = ("auto", "nobind", "split", "nobind1")


def one(mode: str, n_items: int) -> dict:
    """Judge ``n_items`` with every engine bound as ``mode`` says (in this process)."""
    from judge_throughput import make_items

    import jurybox.judges.backends.vllm as vllm_backend
    from jurybox.judges import Jury
    from jurybox.rubrics import load_rubric

    started = [0]
    load = vllm_backend.VLLMBackend.__init__

    def bound(self, spec):  # the binding each engine reads as it starts
        if mode == "split":
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(started[0] % (os.cpu_count() or 1))
        else:
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "auto" if mode == "auto" else "nobind"
        if mode == "nobind1":
            os.environ["OMP_NUM_THREADS"] = "1"
        started[0] += 1
        load(self, spec)

    vllm_backend.VLLMBackend.__init__ = bound
    items = make_items(n_items)
    rubric = load_rubric("mirage-mg")
    jury = Jury.load("tiny-vllm")
    began = time.perf_counter()
    jury.load_backends()
    loaded = time.perf_counter() - began
    jury.score(rubric, [it.model_copy(update={"id": f"warm-{it.id}"}) for it in items[:4]])
    began = time.perf_counter()
    verdicts = jury.score(rubric, items)
    took = time.perf_counter() - began
    jury.close()
    return {
        "mode": mode,
        "load_s": loaded,
        "seconds": took,
        "items_per_s": n_items / took,
        "scored_votes": sum(v.score is not None for verdict in verdicts for v in verdict.votes),
        "votes": sum(len(verdict.votes) for verdict in verdicts),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument(
        "--modes",
        default="auto,nobind,auto,nobind",
        help=f"comma-separated, in order, one fresh process each: {', '.join(MODES)}",
    )
    ap.add_argument(
        "--json", action="store_true", help="print every run as one JSON object, the last line"
    )
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # a run's own process
    args = ap.parse_args()
    if args.one:
        print("RESULT " + json.dumps(one(args.one, args.items)), flush=True)
        return
    from jurybox.judges.cpu import cpu

    describe = cpu().describe()
    print(f"cpu: {describe}", flush=True)
    modes = args.modes.split(",")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown modes {unknown}; choose from {', '.join(MODES)}")
    runs = []
    print(f"{'binding':10} {'load s':>8} {'seconds':>8} {'items/s':>8}  votes scored")
    for mode in modes:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("VLLM_CPU_OMP_THREADS_BIND", "OMP_NUM_THREADS")
        }
        out = subprocess.run(
            [sys.executable, __file__, "--one", mode, "--items", str(args.items)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        if out.returncode != 0 or line is None:
            raise SystemExit(f"the {mode} run failed:\n{out.stderr[-3000:]}")
        run = json.loads(line.removeprefix("RESULT "))
        runs.append(run)
        print(
            f"{mode:10} {run['load_s']:8.1f} {run['seconds']:8.1f} {run['items_per_s']:8.2f}  "
            f"{run['scored_votes']}/{run['votes']}",
            flush=True,
        )
    if args.json:
        print(json.dumps({"items": args.items, "jury": "tiny-vllm", "cpu": describe, "runs": runs}))


if __name__ == "__main__":
    main()
