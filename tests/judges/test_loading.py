"""How a jury loads and releases its judges: vLLM engines side by side (an engine's start is
mostly its processes spawning and importing), except on a GPU an engine that sizes its KV cache
from the memory it finds free; other backends one after another. The backends here are
stand-ins that record when they load and close: the loading order is the subject (real engines
load side by side in the session's ``tiny_vllm`` jury)."""

from __future__ import annotations

import threading
import time

import pytest

import jurybox.judges.backends.vllm as vllm_backend
import jurybox.judges.jury as jury_module
from jurybox.judges import Jury, JurySpec
from jurybox.judges.jury import loads_side_by_side
from jurybox.judges.spec import JudgeSpec


def judge(name: str, backend: str = "vllm", **fields) -> JudgeSpec:
    if backend == "vllm":
        fields.setdefault("kv_cache_gib", 1.0)
    return JudgeSpec.model_validate(
        {"name": name, "model": f"org/{name}", "backend": backend, **fields}
    )


class StandIn:
    def __init__(self, spec: JudgeSpec, log: list[str]) -> None:
        self.spec, self.log = spec, log

    def close(self) -> None:
        self.log.append(f"closed {self.spec.name}")


@pytest.fixture(autouse=True)
def no_vllm_import(monkeypatch):
    """(vLLM itself is imported before engines load side by side: not here, for stand-ins.)"""
    monkeypatch.setattr(vllm_backend, "import_engine", lambda: None)


def test_vllm_engines_load_side_by_side_and_close_side_by_side(monkeypatch):
    both_loading = threading.Barrier(2, timeout=10)  # broken unless the two load at once
    both_closing = threading.Barrier(2, timeout=10)
    log: list[str] = []

    def make(spec):
        both_loading.wait()
        return StandIn(spec, log)

    monkeypatch.setattr(jury_module, "make_backend", make)
    monkeypatch.setattr(
        StandIn, "close", lambda self: (both_closing.wait(), log.append(f"closed {self.spec.name}"))
    )
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


def test_what_loads_side_by_side(monkeypatch):
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: False)
    measuring = judge("gpu", gpu_memory_utilization=0.4, kv_cache_gib=None)
    assert not loads_side_by_side(measuring)
    assert loads_side_by_side(judge("sized", kv_cache_gib=2.0))
    assert loads_side_by_side(
        judge(
            "sized-by-kwargs", kv_cache_gib=None, engine_kwargs={"kv_cache_memory_bytes": 1 << 30}
        )
    )
    assert not loads_side_by_side(judge("hf", "transformers"))
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: True)
    assert loads_side_by_side(measuring)  # on a CPU the KV cache is a share of RAM, set up front


@pytest.mark.parametrize(
    "judges",
    [
        [judge("gpu", kv_cache_gib=None), judge("gpu2", kv_cache_gib=None)],
        [judge("hf", "transformers"), judge("hf2", "transformers")],
        [judge("hf", "transformers"), judge("sized")],  # one engine: nothing to load beside it
    ],
    ids=["gpu-measuring", "transformers", "one-engine"],
)
def test_the_others_load_one_after_another(monkeypatch, judges):
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
    jury = Jury(JurySpec(name="one-by-one", judges=judges))
    jury.load_backends()
    assert loading == [j.name for j in judges]
