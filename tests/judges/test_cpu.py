"""The CPU's description and the vLLM precision picked from it (#24: bfloat16 only where the CPU
has it natively; emulated bfloat16 is far slower than float32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jurybox.judges import cpu as cpu_module
from jurybox.judges.cpu import CPU, vllm_cpu_dtype


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ((True, True, False), "bfloat16"),  # AVX-512 with avx512_bf16 (Zen 4, Cooper Lake)
        ((True, False, True), "bfloat16"),  # AMX (Sapphire Rapids)
        ((True, False, False), "float32"),  # AVX-512 without bf16 (Skylake-X, Cascade Lake)
        ((False, False, False), "float32"),  # AVX2 only (EPYC before Zen 4)
    ],
)
def test_auto_is_bfloat16_only_where_the_cpu_has_it_natively(monkeypatch, flags, expected):
    monkeypatch.setattr(cpu_module, "cpu", lambda: CPU("test cpu", 2, *flags))
    assert vllm_cpu_dtype("auto") == expected
    assert vllm_cpu_dtype("float16") == "float16"  # an explicit choice stands
    assert ("bf16: native" in cpu_module.cpu().describe()) == (expected == "bfloat16")


def test_this_machines_cpu_is_read_from_proc_cpuinfo():
    here = cpu_module.cpu()
    text = Path("/proc/cpuinfo").read_text()
    flags = set(next(line for line in text.splitlines() if line.startswith("flags")).split())
    assert here.avx512 == ("avx512f" in flags) and here.avx512_bf16 == ("avx512_bf16" in flags)
    assert here.model in text and here.cores >= 1
    assert set(here.to_dict()) == {"model", "cores", "avx512", "avx512_bf16", "amx_bf16"}
