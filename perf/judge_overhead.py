"""jurybox's time per judgment divided by the raw backend's, on one loaded model.

Both sides judge the same prompts with the same model, the same xgrammar JSON constraint and the
same batching; jurybox additionally renders prompts, records logprobs, reads answers and score
distributions, and aggregates verdicts. Rounds alternate (raw, jurybox, raw, ...) so machine
noise hits both alike; the ratio of medians is reported. Target: <= 1.10.

    python perf/judge_overhead.py [--items 32] [--rounds 3] [--judge smollm2-135m]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from jurybox.judges import Jury, JurySpec
from jurybox.rubrics import Item, load_rubric, output_schema, render_messages

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "mirage_mg.jsonl"


def items(n: int) -> list[Item]:
    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines()]
    out = []
    for i in range(n):
        row = dict(rows[i % len(rows)])
        row["id"] = f"{row['id']}-{i}"
        out.append(
            Item(
                id=row.pop("id"),
                question=row.pop("question"),
                response=row.pop("response"),
                reference=row.pop("reference"),
                extra=row,
            )
        )
    return out


def raw_judgments(backend, prompts: list[str], schema: dict) -> list[str]:
    """What a script calling transformers + xgrammar directly does: batch, generate, decode."""
    import xgrammar.contrib.hf

    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    texts: list[str] = [""] * len(prompts)
    tok, model = backend.tokenizer, backend.model
    grammar = backend.grammar(schema)
    size = backend.spec.execution.batch_size
    for start in range(0, len(order), size):
        batch = order[start : start + size]
        enc = tok(
            [prompts[i] for i in batch], return_tensors="pt", padding=True, add_special_tokens=False
        )
        with torch.inference_mode():
            out = model.generate(
                **enc,
                max_new_tokens=backend.spec.sampling.max_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                logits_processor=[xgrammar.contrib.hf.LogitsProcessor(grammar)],
                pad_token_id=tok.pad_token_id,
                eos_token_id=backend._stop_ids,
            )
        for i, seq in zip(batch, out[:, enc["input_ids"].shape[1] :]):
            texts[i] = tok.decode(seq, skip_special_tokens=True)
    return texts


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--judge", default="smollm2-135m", help="a judge of the tiny jury")
    ap.add_argument("--rubric", default="mirage-mg")
    args = ap.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}", flush=True)  # results depend on it

    tiny = Jury.load("tiny")
    judge = next(j for j in tiny.spec.judges if j.name == args.judge)
    spec = JurySpec(name="bench", judges=[judge])
    jury = Jury(spec)
    backend = jury.backend(judge)
    rubric = load_rubric(args.rubric)
    batch = items(args.items)
    schema = output_schema(rubric.criteria)
    prompts = [backend.prompt_text(render_messages(rubric, it, rubric.criteria)) for it in batch]

    raw_judgments(
        backend, prompts[: backend.spec.execution.batch_size], schema
    )  # warm-up, both paths
    jury.score(rubric, batch[: backend.spec.execution.batch_size])
    raw_t, jb_t = [], []
    for r in range(args.rounds):
        t = time.perf_counter()
        texts = raw_judgments(backend, prompts, schema)
        raw_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        verdicts = jury.score(rubric, batch)
        jb_t.append(time.perf_counter() - t)
        same = sum(
            t_raw.strip() == next(v.raw for v in vd.votes if v.raw is not None).strip()
            for t_raw, vd in zip(texts, verdicts)
        )
        print(
            f"round {r + 1}: raw {raw_t[-1]:.2f} s, jurybox {jb_t[-1]:.2f} s, "
            f"ratio {jb_t[-1] / raw_t[-1]:.3f}; identical outputs {same}/{len(batch)}"
        )
    raw_med, jb_med = statistics.median(raw_t), statistics.median(jb_t)
    n = len(batch)
    print(
        f"\njudge {args.judge}, rubric {args.rubric}, {n} judgments per round, {args.rounds} rounds, "
        f"torch threads {torch.get_num_threads()}"
    )
    print(f"raw backend: {raw_med / n * 1000:.1f} ms per judgment (median round)")
    print(f"jurybox:     {jb_med / n * 1000:.1f} ms per judgment (median round)")
    print(f"ratio jurybox / raw = {jb_med / raw_med:.3f}  (target <= 1.10)")


if __name__ == "__main__":
    main()
