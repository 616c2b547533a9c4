"""A request the service gives up on is given up at the judges too, on the real service (Ray,
Serve, HTTP on 127.0.0.1, the tiny jury), started once for this module: past its deadline (504)
or when its client leaves, the judges stop generating for it, so no abandoned generate runs
beside new work.

The judges' own account says so (``JudgeServer.activity``, read through Serve handles from this
process, the Serve driver): the request's merged generate ends *cancelled*, not run to its end.
Nothing here is timed but the deadline itself; a request heavy enough to keep both judges busy
for minutes makes "it ran to its end anyway" impossible to mistake for a stop."""

from __future__ import annotations

import json
import socket
import threading
import time
from urllib.parse import urlparse

import httpx
import pytest
from service_helpers import running_service

from jurybox.judges import Jury
from jurybox.serving.service.config import Limits, ServiceConfig

pytestmark = pytest.mark.models

DEADLINE_S = 20.0
QUESTION = "What causes brown rings on tomato leaves?"
REFERENCE = "Early blight (Alternaria solani)."
# 64 prompts per judge: minutes of generating on a CPU (8 sub-batches of 8), far past the deadline.
HEAVY = [{"id": f"h{k}", "question": QUESTION, "reference": REFERENCE,
          "response": f"Answer {k}: probably a virus, or too much water; hard to say."}
         for k in range(64)]
LIGHT = [{"id": "light", "question": QUESTION, "reference": REFERENCE,
          "response": "Early blight, a fungal disease; remove infected leaves."}]
JUDGES = [j.name for j in Jury.load("tiny").spec.judges]


@pytest.fixture(scope="module")
def service():
    # A render budget beyond the deadline, so that a slow template meets the deadline (504),
    # not the budget (a 422, tested in test_admission.py).
    config = ServiceConfig(jury="tiny", limits=Limits(request_timeout_s=DEADLINE_S,
                                                      max_render_s=600))
    with running_service(config) as url:
        yield url


def body(items: list[dict]) -> bytes:
    return json.dumps({"rubric": "general", "items": items}).encode()


def activity() -> dict[str, dict]:
    """Every judge's ``activity()`` (one replica each), through its Serve handle."""
    from ray import serve

    from jurybox.serving.service.builder import APP_NAME, judge_deployment_name

    return {j: serve.get_deployment_handle(judge_deployment_name(j), app_name=APP_NAME)
            .activity.remote().result(timeout_s=60) for j in JUDGES}


def wait_until(predicate, guard_s: float = 600.0) -> dict[str, dict]:
    """Poll the judges until ``predicate(activity)``; the guard only keeps a broken service
    from hanging the test (a judge that never stops fails the counts below)."""
    deadline = time.monotonic() + guard_s
    while True:
        state = activity()
        if predicate(state) or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def all_busy(state: dict) -> bool:
    return all(s["busy"] for s in state.values())


def all_idle(state: dict) -> bool:
    return not any(s["busy"] for s in state.values())


def assert_stopped_for_nobody(before: dict, after: dict) -> None:
    """Each judge's generate for the abandoned request was cancelled, none ran to its end."""
    for j in JUDGES:
        assert not after[j]["busy"], (j, after[j])
        assert after[j]["cancelled"] == before[j]["cancelled"] + 1, (j, before[j], after[j])
        assert after[j]["generated"] == before[j]["generated"], (j, before[j], after[j])


def assert_the_next_request_scores(url: str) -> None:
    r = httpx.post(f"{url}/v1/score", content=body(LIGHT),
                   headers={"content-type": "application/json"}, timeout=600)
    assert r.status_code == 200, r.text
    (verdict,) = r.json()["verdicts"]
    assert {v["judge"] for v in verdict["votes"]} == set(JUDGES)
    assert all(v["error"] is None for v in verdict["votes"]), verdict


def test_a_request_past_its_deadline_is_a_504_and_stops_at_the_judges(service):
    before = wait_until(all_idle)
    result: dict = {}

    def send():
        result["r"] = httpx.post(f"{service}/v1/score", content=body(HEAVY),
                                 headers={"content-type": "application/json"},
                                 timeout=DEADLINE_S + 120)

    sender = threading.Thread(target=send)
    sender.start()
    assert all_busy(wait_until(all_busy, DEADLINE_S + 60))  # the judges took it on
    sender.join(timeout=DEADLINE_S + 180)
    r = result["r"]
    assert r.status_code == 504 and r.json()["error"]["type"] == "timeout", r.text
    assert_stopped_for_nobody(before, wait_until(all_idle))
    assert_the_next_request_scores(service)


def timeouts(url: str) -> int:
    """How many 504s the ingress has answered on /v1/score (its Prometheus counter)."""
    text = httpx.get(f"{url}/metrics", timeout=60).text
    for line in text.splitlines():
        if line.startswith("jurybox_requests_total{") and 'route="/v1/score"' in line \
                and 'status="504"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_a_client_that_leaves_stops_the_judges(service):
    before = wait_until(all_idle)
    timeouts_before = timeouts(service)
    address = urlparse(service)
    payload = body(HEAVY)
    conn = socket.create_connection((address.hostname, address.port), timeout=60)
    conn.sendall(b"POST /v1/score HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % (address.netloc.encode(), len(payload)) + payload)
    busy = wait_until(all_busy, DEADLINE_S)  # well before the deadline
    conn.close()  # the client leaves while the judges generate
    assert all_busy(busy)
    assert_stopped_for_nobody(before, wait_until(all_idle))
    # Stopped by the client's leaving, not by the deadline: the ingress's handler was cancelled
    # with it, so no 504 was ever answered (to nobody) for this request.
    assert timeouts(service) == timeouts_before
    assert_the_next_request_scores(service)


def inline(template: str) -> dict:
    return {"name": "inline", "template": template, "criteria": [
        {"name": "accuracy", "description": "How accurate.", "scale": {"min": 1, "max": 5}}]}


def inline_score(url: str, rubric: dict, timeout: float = 600) -> httpx.Response:
    return httpx.post(f"{url}/v1/score", json={"rubric": rubric, "items": LIGHT}, timeout=timeout)


def test_a_slow_template_gets_our_504_at_the_deadline_while_healthz_answers(service):
    slow = inline("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}"
                  "{% endfor %}{{ question }} {{ output_format }}")
    result: dict = {}

    def send():
        began = time.monotonic()
        result["r"] = inline_score(service, slow, timeout=DEADLINE_S + 60)
        result["s"] = time.monotonic() - began

    sender = threading.Thread(target=send)
    sender.start()
    health = []
    while sender.is_alive():
        began = time.monotonic()
        h = httpx.get(f"{service}/healthz", timeout=30)
        health.append((h.status_code, time.monotonic() - began))
        time.sleep(2)
    sender.join()
    r = result["r"]
    assert r.status_code == 504 and r.json()["error"]["type"] == "timeout", r.text
    assert DEADLINE_S - 1 <= result["s"] < DEADLINE_S + 15, result["s"]  # ours, not Ray's 408
    # The event loop kept answering: /healthz throughout, each answer within seconds.
    assert len(health) >= 5 and all(code == 200 for code, _ in health), health
    assert max(seconds for _, seconds in health) < 10, health
    # The worker that ran the template was killed; the next inline rubric renders and scores.
    ok = inline_score(service, inline("{{ question }} {{ response }} {{ output_format }}"))
    assert ok.status_code == 200, ok.text
    assert ok.json()["verdicts"][0]["status"] == "scored"
