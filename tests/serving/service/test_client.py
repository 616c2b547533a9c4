"""The Python client's handling of the service's answers, against a scripted HTTP transport
(the real service is in test_service*.py): what it retries, and what each failure becomes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from jurybox.rubrics.errors import InputError
from jurybox.serving.service import client as client_module
from jurybox.serving.service.client import Client, ServiceError

VERDICTS = {"verdicts": []}


def scripted(answers: list[Any], monkeypatch) -> tuple[Client, list[httpx.Request]]:
    """A client whose requests get ``answers`` in turn; ``client.waits``: its sleeps."""
    seen: list[httpx.Request] = []
    waits: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = Client("http://service.test", token="t0k", retries=3)
    client._http = httpx.Client(
        base_url="http://service.test",
        headers=client._http.headers,
        transport=httpx.MockTransport(handler),
    )
    monkeypatch.setattr(client_module.time, "sleep", waits.append)
    client.waits = waits  # type: ignore[attr-defined]
    return client, seen


def problem(status: int, kind: str, message: str = "m", retry_after: str | None = None):
    headers = {"Retry-After": retry_after} if retry_after else {}
    return httpx.Response(
        status, json={"error": {"type": kind, "message": message, "field": None}}, headers=headers
    )


def test_busy_and_unavailable_are_retried_after_retry_after(monkeypatch):
    client, seen = scripted(
        [
            problem(429, "overloaded", retry_after="2"),
            problem(503, "unavailable", retry_after="7"),
            httpx.Response(200, json=VERDICTS),
        ],
        monkeypatch,
    )
    assert client.score_records("general", [{"id": "a"}]) == []
    assert len(seen) == 3 and client.waits == [2.0, 7.0]
    assert seen[0].headers["authorization"] == "Bearer t0k"


def test_a_dead_ingress_answered_by_rays_proxy_is_retried(monkeypatch):
    client, seen = scripted(
        [
            httpx.Response(500, text="Internal Server Error"),
            httpx.Response(502, text="Bad Gateway"),
            httpx.Response(200, json=VERDICTS),
        ],
        monkeypatch,
    )
    assert client.score_records("general", [{"id": "a"}]) == []
    assert len(seen) == 3 and client.waits == [1.0, 2.0]  # no Retry-After: backing off


ROUTE_NOT_FOUND = (
    "Path '/v1/score' not found. Ping http://127.0.0.1:8000/-/routes for available routes."
)


def test_rays_route_not_found_while_the_service_restarts_is_retried_with_backoff(monkeypatch):
    client, seen = scripted(
        [httpx.Response(404, text=ROUTE_NOT_FOUND)] * 3 + [httpx.Response(200, json=VERDICTS)],
        monkeypatch,
    )
    assert client.score_records("general", [{"id": "a"}]) == []
    assert len(seen) == 4 and client.waits == [1.0, 2.0, 4.0]


def test_rays_route_not_found_for_good_is_a_service_error_after_the_retries(monkeypatch):
    client, seen = scripted([httpx.Response(404, text=ROUTE_NOT_FOUND)] * 4, monkeypatch)
    with pytest.raises(ServiceError, match="HTTP 404: Path '/v1/score' not found"):
        client.score_records("general", [{"id": "a"}])
    assert len(seen) == 4 and client.waits == [1.0, 2.0, 4.0]


def test_a_service_not_listening_during_a_restart_is_retried_with_backoff(monkeypatch):
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    client, seen = scripted([refused, refused, httpx.Response(200, json=VERDICTS)], monkeypatch)
    assert client.score_records("general", [{"id": "a"}]) == []
    assert len(seen) == 3 and client.waits == [1.0, 2.0]


def test_a_service_that_never_listens_is_a_service_error_after_the_retries(monkeypatch):
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    client, seen = scripted([refused] * 4, monkeypatch)
    with pytest.raises(ServiceError, match="unreachable after 4 tries: ConnectError"):
        client.score_records("general", [{"id": "a"}])
    assert len(seen) == 4 and client.waits == [1.0, 2.0, 4.0]


def test_the_services_own_404_is_not_retried(monkeypatch):
    client, seen = scripted([problem(404, "not_found", "unknown rubric 'x'")], monkeypatch)
    assert client.rubric("x") is None
    assert len(seen) == 1


def test_retries_run_out_into_a_service_error_naming_the_judge(monkeypatch):
    client, seen = scripted(
        [problem(503, "unavailable", "judge g could not answer", retry_after="1")] * 4, monkeypatch
    )
    with pytest.raises(ServiceError, match="HTTP 503: judge g could not answer"):
        client.score_records("general", [{"id": "a"}])
    assert len(seen) == 4  # the first try and 3 retries


@pytest.mark.parametrize("answer", [problem(500, "internal"), problem(504, "timeout")])
def test_the_services_own_500_or_504_is_not_retried(monkeypatch, answer):
    client, seen = scripted([answer], monkeypatch)
    with pytest.raises(ServiceError):
        client.score_records("general", [{"id": "a"}])
    assert len(seen) == 1


def test_a_bad_request_is_an_input_error_naming_the_field_and_a_401_is_not(monkeypatch):
    bad = httpx.Response(
        422,
        json={
            "error": {
                "type": "invalid_request",
                "field": "items[0].id",
                "message": "items[0].id: duplicate id",
            }
        },
    )
    client, _ = scripted(
        [bad, problem(401, "unauthorized", "missing or wrong bearer token")], monkeypatch
    )
    with pytest.raises(InputError) as info:
        client.score_records("general", [{"id": "a"}])
    assert info.value.field == "items[0].id"
    with pytest.raises(ServiceError, match="token") as auth:
        client.score_records("general", [{"id": "a"}])
    assert not isinstance(auth.value, InputError)


def test_an_http_date_retry_after_is_no_crash(monkeypatch):
    client, _ = scripted(
        [
            problem(429, "overloaded", retry_after="Wed, 21 Oct 2026 07:28:00 GMT"),
            httpx.Response(200, json=VERDICTS),
        ],
        monkeypatch,
    )
    assert client.score_records("general", [{"id": "a"}]) == []
    assert client.waits == [5.0]
