"""Judging throughput on vLLM, side by side in one run, one engine.

Three ways to judge the same N items (default 200, rubric mirage-mg: one joint call per item
with four 0-4 criteria) with the same judge (default: SmolLM2-135M-Instruct of the `tiny-vllm`
jury):

  raw     the vLLM engine alone: LLM.generate on the exact token ids and SamplingParams jurybox
          submits (schema, logprobs), all at once; no prompt rendering, parsing or aggregation
  jurybox Jury.score on the items: render prompts, run the vllm backend, parse answers, score
          distributions from logprobs, aggregate, build verdicts
  serial  one request at a time through the same engine, as the public MIRAGE evaluator loops
          over items (same prompts and parameters, parsed with json.loads)

The prefix cache is reset before each timed pass, so no pass reuses another's prompts; a short
warm-up first compiles the grammar and fills allocator pools. Prints items/s and the ratios
jurybox/raw (target >= 0.90) and jurybox/serial (target >= 5).

    python perf/judge_throughput.py [--items 200] [--jury tiny-vllm] [--judge smollm2-135m]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_items(n: int):
    """N distinct items built from the example file: each response is a shuffled selection of
    an example's sentences, so prompts share the rubric preamble but not their tails."""
    from jurybox.rubrics import Item

    rows = [
        json.loads(line)
        for line in (ROOT / "examples" / "mirage_mg.jsonl").read_text().splitlines()
        if line.strip()
    ]
    rng = random.Random(0)
    items = []
    for i in range(n):
        row = rows[i % len(rows)]
        sentences = [s.strip() for s in row["response"].replace("\n", " ").split(". ") if s.strip()]
        rng.shuffle(sentences)
        keep = sentences[: max(1, rng.randint(len(sentences) // 2, len(sentences)))]
        items.append(
            Item(
                id=f"b{i:04d}",
                question=row["question"],
                reference=row["reference"],
                response=". ".join(keep),
            )
        )
    return items


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument(
        "--serial-items",
        type=int,
        default=None,
        help="items for the one-at-a-time loop (default: all)",
    )
    ap.add_argument("--jury", default="tiny-vllm")
    ap.add_argument("--judge", default=None, help="judge name in the jury (default: the first)")
    ap.add_argument("--rubric", default="mirage-mg")
    args = ap.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}", flush=True)  # results depend on it

    import vllm
    from vllm.inputs import TokensPrompt

    from jurybox.judges import Jury, JurySpec, load_jury_spec
    from jurybox.judges.backends.vllm import VLLMBackend
    from jurybox.rubrics import load_rubric, output_schema, render_messages

    spec = load_jury_spec(args.jury)
    judge = next(j for j in spec.judges if args.judge in (None, j.name))
    jury_spec = JurySpec(name="bench", judges=[judge])
    rubric = load_rubric(args.rubric)
    items = make_items(args.items)
    serial_items = items[: args.serial_items or len(items)]

    began = time.perf_counter()
    backend = VLLMBackend(judge)
    load_s = time.perf_counter() - began
    jury = Jury(jury_spec, {judge.name: backend})
    llm = backend.llm

    # Exactly what the backend submits for each item.
    (criteria,) = rubric.calls()
    schema = output_schema(criteria)
    prompts = [
        TokensPrompt(prompt_token_ids=ids)
        for ids in backend._encode(
            [backend.prompt_text(render_messages(rubric, it, criteria)) for it in items]
        )
    ]
    params = backend._answer_params(schema)
    ids = [p["prompt_token_ids"] for p in prompts]
    shared = next(
        (k for k in range(min(map(len, ids))) if len({seq[k] for seq in ids}) > 1),
        min(map(len, ids)),
    )

    jury.score(rubric, make_items(8))  # warm-up: grammar compile, allocator pools

    def timed(fn):
        llm.reset_prefix_cache()
        t = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t

    raw, raw_s = timed(lambda: llm.generate(prompts, params, use_tqdm=False))
    verdicts, jb_s = timed(lambda: jury.score(rubric, items))
    # The raw engine again: run-to-run noise of the timing, and of the answers themselves
    # (batched bf16 kernels are not batch-invariant, so near-ties can flip between runs).
    raw2, raw2_s = timed(lambda: llm.generate(prompts, params, use_tqdm=False))

    def serial():
        out = []
        for p in prompts[: len(serial_items)]:
            (o,) = llm.generate([p], params, use_tqdm=False)
            ids = list(o.outputs[0].token_ids)
            text = backend.tokenizer.decode(ids, skip_special_tokens=True)
            try:
                out.append(json.loads(text))
            except json.JSONDecodeError:
                out.append(None)
        return out

    serial_out, serial_s = timed(serial)

    raw_tokens = sum(len(o.outputs[0].token_ids) for o in raw)
    scored = sum(v.status == "scored" for v in verdicts)
    with_dist = sum(v.distribution is not None for vd in verdicts for v in vd.votes)
    n_votes = sum(len(vd.votes) for vd in verdicts)

    # Same engine, same prompts, greedy: jurybox's answers should be the raw engine's answers.
    def answers(outs):
        return [
            json.loads(
                backend.tokenizer.decode(list(o.outputs[0].token_ids), skip_special_tokens=True)
            )
            for o in outs
        ]

    raw_answers = answers(raw)
    same = sum(
        a == {v.criterion: int(v.score) for v in vd.votes if v.score is not None}
        for a, vd in zip(raw_answers, verdicts)
    )
    same_raw = sum(a == b for a, b in zip(raw_answers, answers(raw2)))

    n, ns = len(items), len(serial_items)
    print(
        f"judge {judge.name} ({judge.model}) on vLLM {vllm.__version__}, {platform.processor() or platform.machine()}, "
        f"{__import__('os').cpu_count()} CPUs; engine load {load_s:.1f} s"
    )
    print(
        f"rubric {rubric.name}: {n} items, one joint call each ({len(criteria)} criteria), "
        f"max_tokens {judge.sampling.max_tokens}, top_logprobs {judge.top_logprobs}, temperature {judge.sampling.temperature}"
    )
    print(
        f"prompts: {sum(map(len, ids)) / n:.0f} tokens on average, the first {shared} shared by all "
        f"(system prompt + rubric criteria: served from vLLM's prefix cache after the first item)"
    )
    print(f"{'pass':<9}{'items':>6}{'seconds':>10}{'items/s':>10}{'out tok/s':>11}")
    print(f"{'raw':<9}{n:>6}{raw_s:>10.2f}{n / raw_s:>10.2f}{raw_tokens / raw_s:>11.1f}")
    print(f"{'jurybox':<9}{n:>6}{jb_s:>10.2f}{n / jb_s:>10.2f}{raw_tokens / jb_s:>11.1f}")
    print(f"{'raw again':<9}{n:>6}{raw2_s:>10.2f}{n / raw2_s:>10.2f}{raw_tokens / raw2_s:>11.1f}")
    print(f"{'serial':<9}{ns:>6}{serial_s:>10.2f}{ns / serial_s:>10.2f}{'':>11}")
    best_raw = min(raw_s, raw2_s)
    print(
        f"jurybox / raw    = {best_raw / jb_s:.3f}  (target >= 0.90; against the faster raw pass)"
    )
    print(f"jurybox / serial = {(n / jb_s) / (ns / serial_s):.2f}x (target >= 5)")
    print(
        f"jurybox verdicts scored: {scored}/{n}; votes with a score distribution: {with_dist}/{n_votes}; "
        f"answers identical to the raw engine's: {same}/{n} (raw vs raw again: {same_raw}/{n}); serial answers parsed: "
        f"{sum(o is not None for o in serial_out)}/{ns}"
    )
    backend.close()


if __name__ == "__main__":
    main()
