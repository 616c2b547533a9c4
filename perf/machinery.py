"""Judgments per second through jurybox's own machinery, on one core, with a free model.

On a GPU a small judge on vLLM answers hundreds of judgments per second, so what jurybox does
per judgment besides the model (render the prompt, tokenize it, detokenize the answer, parse it,
read score distributions, aggregate, serialize, append to the results file) must cost far less.
This runs that whole path with :class:`ReplayBackend`, which answers with recorded generations
of the tiny jury's judges (the model costs nothing; the real tokenizers do all the rest), pinned
to one CPU, and reports judgments per second (a judgment: one judge's joint call on one item)
with a per-stage breakdown. Target (#24): >= 2,500 judgments/s per core.

    python perf/machinery.py [--items 2000] [--warmup 300] [--cpu 0]
    python perf/machinery.py --json      # and the median round as one JSON object, last line
    python perf/machinery.py --record    # re-record perf/data/tiny-mirage-mg.json.gz

The recording: the tiny jury's two judges (SmolLM2-135M-Instruct, chat; Gemma-3-270M, plain)
through jurybox's transformers backend (greedy, xgrammar-constrained, top-20 logprobs) on 36
distinct mirage-mg items: the 3 questions of examples/mirage_mg.jsonl, each with each of the 6
responses there, whole and cut to their first sentence.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

# One core, one thread: set before tokenizers / torch start their thread pools.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "mirage_mg.jsonl"
RECORDING = Path(__file__).resolve().parent / "data" / "tiny-mirage-mg.json.gz"
RUBRIC = "mirage-mg"
TARGET = 2500.0


# -- the items and the recording ---------------------------------------------------------------


def recorded_items() -> list:
    """36 distinct items: each question of the examples with each response, whole and cut."""
    import json

    from jurybox.rubrics import Item

    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    questions = {}
    for row in rows:
        questions.setdefault(row["question"], row)
    items = []
    for q, base in enumerate(questions.values()):
        for r, row in enumerate(rows):
            for cut in (False, True):
                response = row["response"]
                if cut:
                    response = response.split(". ")[0].rstrip(".") + "."
                extra = {
                    k: v
                    for k, v in base.items()
                    if k not in ("id", "question", "response", "reference")
                }
                items.append(
                    Item(
                        id=f"q{q + 1}-r{r + 1}{'-cut' if cut else ''}",
                        question=base["question"],
                        reference=base["reference"],
                        response=response,
                        extra=extra,
                    )
                )
    return items


def record(path: Path) -> None:
    """Judge the items with the tiny jury's transformers backends, keeping token ids and top-k
    logprobs (``jurybox.judges.backends.replay.record``)."""
    from jurybox.judges import Jury
    from jurybox.judges.backends.replay import Recording
    from jurybox.judges.backends.replay import record as record_generations
    from jurybox.rubrics import load_rubric

    items = recorded_items()
    jury = Jury.load("tiny")
    judges = record_generations(
        jury, load_rubric(RUBRIC), items, lambda line: print(line, file=sys.stderr)
    )
    jury.close()
    Recording(
        rubric=RUBRIC,
        items=[it.model_dump(mode="json") for it in items],
        judges=judges,
        specs={j.name: j.model_dump(mode="json") for j in jury.spec.judges},
        produced_by="python perf/machinery.py --record (jurybox transformers backend, tiny jury)",
    ).save(path)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)


# -- the measurement ---------------------------------------------------------------------------


def pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


class GCTimer:
    """Seconds spent in the cyclic garbage collector (it runs inside whichever stage allocates)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._began = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began

    def __enter__(self) -> GCTimer:
        import gc

        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        import gc

        gc.callbacks.remove(self)


def run(
    n_items: int,
    warmup: int,
    chunk: int,
    recording_path: Path,
    profile: Path | None = None,
    freeze: bool = False,
) -> dict:
    """The whole path over ``n_items`` (after ``warmup`` items not counted); seconds per stage."""
    from jurybox.judges import Jury
    from jurybox.judges.backends.replay import Recording, ReplayBackend
    from jurybox.judges.judging import decide_verdicts, judge_votes, render_requests
    from jurybox.rubrics import Item, input_hash, load_rubric
    from jurybox.serving.runs.results import ResultsFile

    recording = Recording.load(recording_path)
    rubric = load_rubric(recording.rubric)
    spec = Jury.load("tiny").spec
    backends = {j.name: ReplayBackend(j, recording) for j in spec.judges}
    jury = Jury(spec, backends)
    prov = jury.provenance(rubric)
    base = [Item.model_validate(d) for d in recording.items]

    def items(n: int, tag: str) -> list[Item]:
        # Distinct ids, content cycling through the recorded items (whose answers replay).
        return [base[i % len(base)].model_copy(update={"id": f"{tag}{i}"}) for i in range(n)]

    def one_pass(batch: list[Item], out: Path) -> dict[str, float]:
        t = dict.fromkeys(("render", "generate", "parse", "decide", "write"), 0.0)
        for b in backends.values():
            b.timings = dict.fromkeys(b.timings, 0.0)
        clock, cpu = time.perf_counter, time.process_time
        t.update({"cpu": 0.0, "cpu.render": 0.0, "cpu.calls": 0.0})
        began = cpu()
        with GCTimer() as gc_time, ResultsFile(out, prov) as results:
            for start in range(0, len(batch), chunk):
                part = batch[start : start + chunk]
                t0, c0 = clock(), cpu()
                requests = render_requests(rubric, part)
                t1, c1 = clock(), cpu()
                votes = [judge_votes(j, backends[j.name], requests) for j in spec.judges]
                t2 = clock()
                t["cpu.render"] += c1 - c0
                t["cpu.calls"] += cpu() - c1
                verdicts = decide_verdicts(rubric, spec, prov, requests.item_ids, votes)
                t3 = clock()
                hashes = {it.id: input_hash(it) for it in part}
                results.append([{**v.to_record(), "input": hashes[v.id]} for v in verdicts])
                t4 = clock()
                t["render"] += t1 - t0
                t["parse"] += t2 - t1  # minus the backend's share, below
                t["decide"] += t3 - t2
                t["write"] += t4 - t3
        gen = {
            k: sum(b.timings.get(k, 0.0) for b in backends.values())
            for k in ("prompt", "tokenize", "steps")
        }
        t["generate"] = sum(gen.values())
        t["parse"] -= t["generate"]
        t.update({f"generate.{k}": v for k, v in gen.items()})
        t["total"] = sum(t[k] for k in ("render", "generate", "parse", "decide", "write"))
        t["gc"] = gc_time.seconds
        t["cpu"] = cpu() - began
        return t

    with tempfile.TemporaryDirectory() as tmp:
        one_pass(items(warmup, "w"), Path(tmp) / "warmup.jsonl")
        if freeze:  # what a server does after loading (vLLM's freeze_gc_heap)
            import gc

            gc.collect()
            gc.freeze()
        measured = items(n_items, "i")
        if profile is not None:
            import cProfile

            with cProfile.Profile() as prof:
                timing = one_pass(measured, Path(tmp) / "results.jsonl")
            prof.dump_stats(profile)
        else:
            timing = one_pass(measured, Path(tmp) / "results.jsonl")
        with open(Path(tmp) / "results.jsonl", "rb") as fh:
            lines = sum(1 for _ in fh)
    assert lines == n_items, (lines, n_items)
    # Every prompt should have found the recording of its own item (same tokens).
    timing["matched"] = min(b.replayed for b in backends.values()) / (warmup + n_items)
    timing["judges"] = len(spec.judges)
    return timing


def report(t: dict, n_items: int, n_judges: int) -> str:
    judgments = n_items * n_judges

    def us(seconds: float) -> float:
        return seconds / judgments * 1e6

    lines = [
        (
            f"{judgments / t['total']:,.0f} judgments/s per core, {us(t['total']) / 1e3:.3f} ms per "
            f"judgment ({n_items} items x {n_judges} judges; target >= {TARGET:,.0f}/s)"
        ),
        "  per judgment:  "
        + ", ".join(
            f"{k} {us(t[k]):.0f} us" for k in ("render", "generate", "parse", "decide", "write")
        ),
        "  generate = "
        + ", ".join(
            f"{k} {us(t['generate.' + k]):.0f} us" for k in ("prompt", "tokenize", "steps")
        ),
        f"  garbage collection, inside the stages above: {us(t['gc']):.0f} us",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--chunk", type=int, default=256, help="items per step (a vLLM jury's default)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="measured passes (each with fresh backends); the median is reported",
    )
    ap.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the last)")
    ap.add_argument("--recording", type=Path, default=RECORDING)
    ap.add_argument("--record", action="store_true", help="re-record the generations and exit")
    ap.add_argument("--profile", type=Path, help="write a cProfile of one pass here")
    ap.add_argument(
        "--json",
        action="store_true",
        help="also print the median round as one JSON object (the last line)",
    )
    ap.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() after loading and warm-up, as vLLM's server does",
    )
    args = ap.parse_args()
    from jurybox.judges.cpu import cpu

    describe = cpu().describe()
    print(f"cpu: {describe}", flush=True)  # results depend on it

    if args.record:
        args.recording.parent.mkdir(parents=True, exist_ok=True)
        record(args.recording)
        return
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    pin(cpu)
    if args.profile:
        run(
            args.items,
            args.warmup,
            args.chunk,
            args.recording,
            args.profile,
            args.gc_freeze,
        )
        print(f"wrote {args.profile} (python -m pstats {args.profile})")
        return
    rounds = [
        run(
            args.items,
            args.warmup,
            args.chunk,
            args.recording,
            freeze=args.gc_freeze,
        )
        for _ in range(args.rounds)
    ]
    rounds.sort(key=lambda t: t["total"])
    median = rounds[len(rounds) // 2]
    judges = median["judges"]
    print(
        f"jurybox machinery, rubric {RUBRIC}, tiny jury replayed, CPU {cpu} of "
        f"{os.cpu_count()}, Python {platform.python_version()}; chunk {args.chunk}; "
        f"{median['matched']:.0%} of prompts replayed their own recording"
        + ("; gc frozen after warm-up" if args.gc_freeze else "")
    )
    print(
        "rounds, fastest first (judgments/s): "
        + ", ".join(f"{args.items * judges / t['total']:,.0f}" for t in rounds)
    )
    # CPU time of this process alone: what to compare on a machine others load.
    least = min(rounds, key=lambda t: t["cpu"])
    n_judged = args.items * judges
    print(
        f"CPU time, least of the rounds: {n_judged / least['cpu']:,.0f} judgments per "
        f"CPU-second; per judgment: render {least['cpu.render'] / n_judged * 1e6:.0f} us, "
        f"judge calls (prompts, ids, answers, parsing) {least['cpu.calls'] / n_judged * 1e6:.0f} us"
    )
    print(report(median, args.items, judges))
    if args.json:
        import json

        n = args.items * judges
        print(
            json.dumps(
                {
                    "judgments_per_s": n / median["total"],
                    "cpu_judgments_per_s": n / least["cpu"],
                    "cpu_us_per_judgment": {
                        k: least[k] / n * 1e6 for k in ("cpu", "cpu.render", "cpu.calls")
                    },
                    "ms_per_judgment": median["total"] / n * 1e3,
                    "rounds_judgments_per_s": [n / t["total"] for t in rounds],
                    "us_per_judgment": {
                        k: median[k] / n * 1e6
                        for k in (
                            "render",
                            "generate",
                            "generate.prompt",
                            "generate.tokenize",
                            "generate.steps",
                            "parse",
                            "decide",
                            "write",
                            "gc",
                        )
                    },
                    "items": args.items,
                    "judges": judges,
                    "chunk": args.chunk,
                    "gc_frozen": args.gc_freeze,
                    "replayed": median["matched"],
                    "target": TARGET,
                    "cpu": describe,
                }
            )
        )


if __name__ == "__main__":
    main()
