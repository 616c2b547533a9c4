"""What this machine's CPU can do: for an engine's precision, and recorded beside results.

It is recorded beside every benchmark result and test run (these machines are not always the
same CPU: an AVX-512 Xeon, an EPYC with or without AVX-512).

bfloat16 is native only with ``avx512_bf16`` or ``amx_bf16``; elsewhere vLLM on CPU emulates it
(converting every value to float32 and back), which is far slower than float32 itself, so a
judge on vLLM with ``dtype: auto`` runs in bfloat16 only where it is native
(`vllm_cpu_dtype`).

vLLM on CPU also pins each engine's compute threads by default (``VLLM_CPU_OMP_THREADS_BIND=auto``:
every core but one, the same cores for every engine). A jury runs one engine per judge on the
same machine, so every engine's threads land on the same cores while the others idle: on 2 cores
both tiny judges computed on core 0. jurybox's engines on a CPU leave their threads to the
operating system instead (`VLLM_CPU_ENV`), unless the environment says otherwise.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class CPU:
    """The CPU's model name and the instruction sets that decide the engines' speed."""

    model: str
    cores: int
    avx512: bool
    avx512_bf16: bool
    amx_bf16: bool

    @property
    def native_bf16(self) -> bool:
        """bfloat16 arithmetic in hardware (else emulated)."""
        return self.avx512_bf16 or self.amx_bf16

    def describe(self) -> str:
        """One line, e.g. ``AMD EPYC 9R14 (2 cores; AVX-512: yes, bf16: native (avx512_bf16))``."""
        kinds = [
            k for k, on in (("avx512_bf16", self.avx512_bf16), ("amx_bf16", self.amx_bf16)) if on
        ]
        bf16 = f"native ({', '.join(kinds)})" if kinds else "emulated"
        return (
            f"{self.model} ({self.cores} cores; AVX-512: {'yes' if self.avx512 else 'no'}, "
            f"bf16: {bf16})"
        )

    def to_dict(self) -> dict[str, object]:
        """The CPU as plain data (for a benchmark's JSON)."""
        return {
            "model": self.model,
            "cores": self.cores,
            "avx512": self.avx512,
            "avx512_bf16": self.avx512_bf16,
            "amx_bf16": self.amx_bf16,
        }


@cache
def cpu() -> CPU:
    """This machine's CPU, from /proc/cpuinfo.

    That is on Linux; elsewhere the platform's name and no flags.
    """
    import os

    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return CPU(platform.processor() or platform.machine(), cores, False, False, False)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
        if not line.strip() and fields:
            break  # the first processor is enough
    flags = set(fields.get("flags", "").split())
    model = fields.get("model name") or platform.processor() or platform.machine()
    return CPU(model, cores, "avx512f" in flags, "avx512_bf16" in flags, "amx_bf16" in flags)


# Set (where not set already) before a vLLM engine starts on a CPU: its worker's threads unpinned,
# so the engines of a jury spread over the cores. Measured with the tiny vLLM jury, 40 items
# on 2 cores (perf/RESULTS.md): 36.7 s pinned ("auto"), 28.5 and 32.2 s unpinned.
VLLM_CPU_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "nobind"}


def vllm_cpu_dtype(requested: str) -> str:
    """The precision a vLLM engine on this CPU runs with for a judge's ``dtype``.

    ``auto`` is bfloat16 where the CPU has it natively, else float32 (the weights up-cast once at
    load); anything else as given.
    """
    if requested != "auto":
        return requested
    return "bfloat16" if cpu().native_bf16 else "float32"
