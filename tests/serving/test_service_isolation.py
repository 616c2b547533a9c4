"""One client's failure is not another's verdict, on the real service (Ray, Serve, HTTP on
127.0.0.1, the tiny jury), started once for this module with room for concurrent requests.

The transformers judges merge the requests that arrive together into one generate. A request
that keeps a judge busy first makes the next two requests queue up and share a batch: one of
them the request under test, the other a neighbour that poisons the batch (text the tokenizer
refuses) or whose client leaves while the batch runs. The request under test must get exactly
the verdicts it gets alone."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from jurybox.serving.config import Limits, ServiceConfig

from service_helpers import assert_same_verdicts, running_service

pytestmark = pytest.mark.models

QUESTION = "What causes brown rings on tomato leaves?"
REFERENCE = "Early blight (Alternaria solani)."


def item(id_: str, response: str) -> dict:
    return {"id": id_, "question": QUESTION, "response": response, "reference": REFERENCE}


MINE = item("mine", "Early blight, a fungal disease; remove infected leaves.")
BUSY = item("busy", "Probably a virus, or too much water; hard to say without a photo.")


@pytest.fixture(scope="module")
def service():
    config = ServiceConfig(jury="tiny", limits=Limits(max_concurrent=4, max_queued=8))
    with running_service(config) as url:
        yield url


def score(url: str, items: list[dict], timeout: float = 600) -> httpx.Response:
    # json.dumps escapes a lone surrogate as \ud800, as any JSON client may send it.
    return httpx.post(f"{url}/v1/score", content=json.dumps({"rubric": "general", "items": items}),
                      headers={"content-type": "application/json"}, timeout=timeout)


def vote_errors(verdicts: list[dict]) -> list[str]:
    return [v["error"] for r in verdicts for v in r["votes"] if v["error"]]


def alone(url: str) -> tuple[list[dict], float]:
    began = time.monotonic()
    r = score(url, [MINE])
    assert r.status_code == 200, r.text
    return r.json()["verdicts"], time.monotonic() - began


def behind_a_busy_judge(url: str, neighbour: dict, neighbour_timeout: float) -> dict:
    """BUSY first; then the neighbour and MINE while BUSY is judged (so that they share the
    next batch, the neighbour's call first). Returns every response or error by name."""
    results: dict = {}

    def send(name, items, timeout, delay):
        time.sleep(delay)
        try:
            results[name] = score(url, items, timeout)
        except httpx.HTTPError as exc:
            results[name] = exc

    threads = [threading.Thread(target=send, args=args) for args in (
        ("busy", [BUSY], 600, 0.0),
        ("neighbour", [neighbour], neighbour_timeout, 0.3),
        ("mine", [MINE], 600, 0.4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    return results


def test_a_poisoned_neighbour_leaves_my_request_fully_scored(service):
    want, _ = alone(service)
    results = behind_a_busy_judge(service, item("poison", "Early \ud800 blight"), 600)
    mine = results["mine"]
    assert isinstance(mine, httpx.Response) and mine.status_code == 200, mine
    assert vote_errors(mine.json()["verdicts"]) == vote_errors(want)
    assert_same_verdicts(mine.json()["verdicts"], want)
    assert results["busy"].status_code == 200
    # The poisoned request itself fails, and says so: never a 200 of unscored votes. (The
    # ingress now refuses lone surrogates before any judge sees them, 422; the batch's own
    # isolation, for what a judge cannot take, is tested in test_deployments.py.)
    poison = results["neighbour"]
    assert poison.status_code in (422, 503) and "error" in poison.json(), poison.text


def test_a_neighbour_whose_client_leaves_leaves_my_request_fully_scored(service):
    want, seconds = alone(service)
    # The neighbour's client gives up while its batch (shared with mine) is being judged.
    results = behind_a_busy_judge(service, item("leaver", "Early blight, I think."),
                                  neighbour_timeout=seconds * 1.5)
    assert isinstance(results["neighbour"], httpx.TimeoutException), results["neighbour"]
    mine = results["mine"]
    assert isinstance(mine, httpx.Response) and mine.status_code == 200, mine
    assert vote_errors(mine.json()["verdicts"]) == vote_errors(want)
    assert_same_verdicts(mine.json()["verdicts"], want)
    # And the service goes on as before.
    again, _ = alone(service)
    assert_same_verdicts(again, want)
