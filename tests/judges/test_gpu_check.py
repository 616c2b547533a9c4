"""perf/gpu_check.py in its tiny-shape mode on the CPU, so the GPU check cannot rot between the
sessions that have a GPU: same script, same code path, toy sizes of the same architectures."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.models  # reads the tiny jury's SmolLM2 tokenizer


def test_gpu_check_runs_the_small_gpu_architectures_at_toy_size():
    from jurybox.judges import load_jury_spec
    from jurybox.judges.weights import resolve

    resolve(
        load_jury_spec("tiny").judges[0].model
    )  # a missing model fails the test: CI installs it
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "perf" / "gpu_check.py"),
            "--tiny",
            "--items",
            "2",
            "--batch-size",
            "2",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(report["judges"]) == {"deepseek-r1-distill-llama-8b", "qwen3-8b", "phi-4-reasoning"}
    for name, r in report["judges"].items():
        # Random weights, but the grammar still forces a valid answer on the scale every time.
        assert r["votes"] == 2 * 4 and r["scored_votes"] == r["votes"], (name, r)
        assert r["with_distribution"] == r["votes"], (name, r)
        assert r["judgments_per_s"] > 0
    assert report["jury_judgments_per_s"] > 0
    assert "judgments/s per GPU" in run.stdout
