"""A request the service gives up on is given up at the judges too, on the real service (Ray,
Serve, HTTP on 127.0.0.1), started once for this module: past its deadline (504) or when its
client leaves, the judges stop generating for it, so no abandoned generate runs beside new work.

The judges are the replay jury (``judging_helpers.write_replay_jury``: the tiny jury's judges
answering with their recorded real answers, through their real tokenizers) with a delay: every
generate (one merged batch) takes DELAY_S, and stops early when nobody waits for it any more,
as the transformers backend's does. What is tested is the service's plumbing, not the models:
the real models' service path is tested end to end in test_service.py and test_service_vllm.py.

The judges' own account says so (``JudgeServer.activity``, read through Serve handles from this
process, the Serve driver): the request's merged generate ends *cancelled*, not run to its end
(which its counters would show as one more generate ``generated``). A lone request takes
DELAY_S, within the deadline; the request past its deadline is queued behind another's
generate, so that its own starts before its deadline passes and would end seconds after."""

from __future__ import annotations

import json
import socket
import threading
import time
from urllib.parse import urlparse

import httpx
import pytest
from judging_helpers import write_replay_jury
from service_helpers import running_service

from jurybox.judges import load_jury_spec
from jurybox.serving.service.config import Limits, ServiceConfig

pytestmark = pytest.mark.models

DEADLINE_S = 10.0
# Every generate of the replay judges takes this long, a lone request's within DEADLINE_S (the
# judges then score the next request) and two in a row past it (a request queued behind
# another's generate passes its deadline in the middle of its own).
DELAY_S = 7.0
QUESTION = "What causes brown rings on tomato leaves?"
REFERENCE = "Early blight (Alternaria solani)."
# 64 prompts per judge, in one merged generate (DELAY_S, whatever its size, with replay judges).
HEAVY = [
    {
        "id": f"h{k}",
        "question": QUESTION,
        "reference": REFERENCE,
        "response": f"Answer {k}: probably a virus, or too much water; hard to say.",
    }
    for k in range(64)
]
LIGHT = [
    {
        "id": "light",
        "question": QUESTION,
        "reference": REFERENCE,
        "response": "Early blight, a fungal disease; remove infected leaves.",
    }
]
# A request the judges finish within the deadline, while the next one waits for them.
FIRST = [{**LIGHT[0], "id": "first"}]
JUDGES = [j.name for j in load_jury_spec("tiny").judges]  # the replay jury's, by name


@pytest.fixture(scope="module")
def service(tmp_path_factory, shared_ray):
    jury = write_replay_jury(tmp_path_factory.mktemp("jury") / "slow-replay.yaml", delay_s=DELAY_S)
    # A render budget beyond the deadline, so that a slow template meets the deadline (504),
    # not the budget (a 422, tested in test_admission.py).
    config = ServiceConfig(
        jury=str(jury), limits=Limits(request_timeout_s=DEADLINE_S, max_render_s=600)
    )
    with running_service(config) as url:
        yield url


def body(items: list[dict]) -> bytes:
    return json.dumps({"rubric": "general", "items": items}).encode()


def activity() -> dict[str, dict]:
    """Every judge's ``activity()`` (one replica each), through its Serve handle."""
    from ray import serve

    from jurybox.serving.service.builder import APP_NAME, judge_deployment_name

    return {
        j: serve.get_deployment_handle(judge_deployment_name(j), app_name=APP_NAME)
        .activity.remote()
        .result(timeout_s=60)
        for j in JUDGES
    }


def wait_until(predicate, guard_s: float = 600.0, every_s: float = 0.5) -> dict[str, dict]:
    """Poll the judges until ``predicate(activity)``; the guard only keeps a broken service
    from hanging the test (a judge that never stops fails the counts below)."""
    deadline = time.monotonic() + guard_s
    while True:
        state = activity()
        if predicate(state) or time.monotonic() > deadline:
            return state
        time.sleep(every_s)


def all_busy(state: dict) -> bool:
    return all(s["busy"] for s in state.values())


def all_idle(state: dict) -> bool:
    return not any(s["busy"] for s in state.values())


def assert_stopped_for_nobody(before: dict, after: dict, others: int = 0) -> None:
    """Each judge's generate for the abandoned request was cancelled, none ran to its end
    (beside the ``others`` generates of requests whose clients waited for them)."""
    for j in JUDGES:
        assert not after[j]["busy"], (j, after[j])
        assert after[j]["cancelled"] == before[j]["cancelled"] + 1, (j, before[j], after[j])
        assert after[j]["generated"] == before[j]["generated"] + others, (j, before[j], after[j])


def assert_the_next_request_scores(url: str) -> None:
    r = httpx.post(
        f"{url}/v1/score",
        content=body(LIGHT),
        headers={"content-type": "application/json"},
        timeout=600,
    )
    assert r.status_code == 200, r.text
    (verdict,) = r.json()["verdicts"]
    assert {v["judge"] for v in verdict["votes"]} == set(JUDGES)
    assert all(v["error"] is None for v in verdict["votes"]), verdict


def test_a_request_past_its_deadline_is_a_504_and_stops_at_the_judges(service):
    before = wait_until(all_idle)
    result: dict = {}

    def send(name: str, items: list[dict]) -> None:
        result[name] = httpx.post(
            f"{service}/v1/score",
            content=body(items),
            headers={"content-type": "application/json"},
            timeout=DEADLINE_S + 120,
        )

    senders = [
        threading.Thread(target=send, args=("first", FIRST)),
        threading.Thread(target=send, args=("heavy", HEAVY)),
    ]
    senders[0].start()
    assert all_busy(wait_until(all_busy, DEADLINE_S))  # FIRST's generate runs
    senders[1].start()  # HEAVY waits for it: its own generate would end past its deadline

    def heavy_runs(state: dict) -> bool:  # FIRST's generate ran to its end, HEAVY's runs
        return all(
            state[j]["busy"] and state[j]["generated"] == before[j]["generated"] + 1 for j in JUDGES
        )

    assert heavy_runs(wait_until(heavy_runs, DEADLINE_S, every_s=0.1))  # the judges took it on
    for sender in senders:
        sender.join(timeout=DEADLINE_S + 180)
    assert result["first"].status_code == 200, result["first"].text
    r = result["heavy"]
    assert r.status_code == 504 and r.json()["error"]["type"] == "timeout", r.text
    assert_stopped_for_nobody(before, wait_until(all_idle), others=1)  # FIRST's, to its end
    assert_the_next_request_scores(service)


def timeouts(url: str) -> int:
    """How many 504s the ingress has answered on /v1/score (its Prometheus counter)."""
    text = httpx.get(f"{url}/metrics", timeout=60).text
    for line in text.splitlines():
        if (
            line.startswith("jurybox_requests_total{")
            and 'route="/v1/score"' in line
            and 'status="504"' in line
        ):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_a_client_that_leaves_stops_the_judges(service):
    before = wait_until(all_idle)
    timeouts_before = timeouts(service)
    address = urlparse(service)
    payload = body(HEAVY)
    conn = socket.create_connection((address.hostname, address.port), timeout=60)
    conn.sendall(
        b"POST /v1/score HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (address.netloc.encode(), len(payload)) + payload
    )
    busy = wait_until(all_busy, DEADLINE_S)  # well before the deadline
    conn.close()  # the client leaves while the judges generate
    assert all_busy(busy)
    assert_stopped_for_nobody(before, wait_until(all_idle))
    # Stopped by the client's leaving, not by the deadline: the ingress's handler was cancelled
    # with it, so no 504 was ever answered (to nobody) for this request.
    assert timeouts(service) == timeouts_before
    assert_the_next_request_scores(service)


def inline(template: str) -> dict:
    # The general rubric's criteria (names and 0-4 scales): the answer schema of recorded
    # answers, so that the replay judges' answers score.
    return {
        "name": "inline",
        "template": template,
        "criteria": [
            {"name": name, "description": f"How good the {name} is.", "scale": {"min": 0, "max": 4}}
            for name in ("accuracy", "relevance", "completeness", "parsimony")
        ],
    }


def inline_score(url: str, rubric: dict, timeout: float = 600) -> httpx.Response:
    return httpx.post(f"{url}/v1/score", json={"rubric": rubric, "items": LIGHT}, timeout=timeout)


def test_a_slow_template_gets_our_504_at_the_deadline_while_healthz_answers(service):
    slow = inline(
        "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}"
        "{% endfor %}{{ question }} {{ output_format }}"
    )
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
        time.sleep(1)
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
