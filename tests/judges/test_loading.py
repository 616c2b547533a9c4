"""How a jury loads and releases its judges: side by side (a vLLM engine's start is mostly its
processes spawning and importing), one at a time only for a vLLM engine on a GPU that sizes its
KV cache from the memory it finds free. The backends here are stand-ins that record when they
load and close: the loading order is the subject (real engines load side by side in the
session's ``vllm_judged`` run)."""

from __future__ import annotations

import threading
import time

import pytest

import jurybox.judges.backends.vllm as vllm_backend
import jurybox.judges.jury as jury_module
from jurybox.judges import Jury, JurySpec
from jurybox.judges.jury import loads_alone
from jurybox.judges.spec import JudgeSpec


def judge(name: str, backend: str = "transformers", **fields) -> JudgeSpec:
    return JudgeSpec.model_validate({"name": name, "model": f"org/{name}", "backend": backend,
                                     **fields})


class StandIn:
    def __init__(self, spec: JudgeSpec, log: list[str]) -> None:
        self.spec, self.log = spec, log

    def close(self) -> None:
        self.log.append(f"closed {self.spec.name}")


def test_judges_load_side_by_side_and_close_side_by_side(monkeypatch):
    both_loading = threading.Barrier(2, timeout=10)  # broken unless the two load at once
    both_closing = threading.Barrier(2, timeout=10)
    log: list[str] = []

    def make(spec):
        both_loading.wait()
        return StandIn(spec, log)

    monkeypatch.setattr(jury_module, "make_backend", make)
    monkeypatch.setattr(StandIn, "close", lambda self: (both_closing.wait(),
                                                         log.append(f"closed {self.spec.name}")))
    jury = Jury(JurySpec(name="two", judges=[judge("a"), judge("b")]))
    ready: list[str] = []
    jury.load_backends(on_loaded=lambda what, seconds: ready.append(what))
    assert sorted(ready) == ["judge a", "judge b"]
    assert sorted(b.spec.name for b in jury._backends.values()) == ["a", "b"]
    jury.close()
    assert sorted(log) == ["closed a", "closed b"] and not jury._backends


def test_a_judge_that_fails_to_load_leaves_the_others_loaded_to_be_closed(monkeypatch):
    log: list[str] = []

    def make(spec):
        if spec.name == "broken":
            raise RuntimeError("broken: no such model")
        return StandIn(spec, log)

    monkeypatch.setattr(jury_module, "make_backend", make)
    jury = Jury(JurySpec(name="two", judges=[judge("fine"), judge("broken")]))
    with pytest.raises(RuntimeError, match="no such model"):
        jury.load_backends()
    assert list(jury._backends) == ["fine"]
    jury.close()
    assert log == ["closed fine"]


def test_a_vllm_engine_that_measures_free_gpu_memory_loads_alone(monkeypatch):
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: False)
    measuring = judge("gpu", "vllm", gpu_memory_utilization=0.4)
    assert loads_alone(measuring)
    assert not loads_alone(judge("sized", "vllm", kv_cache_gib=2.0))
    assert not loads_alone(judge("sized-by-kwargs", "vllm",
                                 engine_kwargs={"kv_cache_memory_bytes": 1 << 30}))
    assert not loads_alone(judge("hf"))
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: True)
    assert not loads_alone(measuring)  # on a CPU the KV cache is a share of RAM, set up front

    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: False)
    loading: list[str] = []
    at_once = threading.Lock()

    def make(spec):
        if not at_once.acquire(blocking=False):
            raise AssertionError(f"{spec.name} loaded beside another judge")
        try:
            loading.append(spec.name)
            time.sleep(0.2)  # time for a second load to start beside it, if it would
            return StandIn(spec, [])
        finally:
            at_once.release()

    monkeypatch.setattr(jury_module, "make_backend", make)
    jury = Jury(JurySpec(name="gpu", judges=[measuring, judge("gpu2", "vllm")]))
    jury.load_backends()
    assert loading == ["gpu", "gpu2"]
