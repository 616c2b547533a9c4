"""A client that leaves while its body is read is a 499, not a failure of the service (#59).

The ingress's app in-process, called as an ASGI server calls it: the body's first chunk, then the
client's disconnect. No judge is asked (the body never arrives), so the service has none.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from judging_helpers import write_replay_jury

from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.ingress import build_app
from jurybox.serving.service.scoring import ScoringService


def statuses(scoring: ScoringService, route: str) -> dict[str, float]:
    """The service's request counts of ``route`` by status, as /metrics shows them."""
    counts: dict[str, float] = {}
    for family in scoring.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "jurybox_requests_total" and sample.labels["route"] == route:
                counts[sample.labels["status"]] = sample.value
    return counts


async def left_mid_body(app: Any) -> list[dict[str, Any]]:
    """POST /v1/score announcing 1,000 bytes, sending 10, then the client is gone."""
    incoming = [
        {"type": "http.request", "body": b'{"rubric":', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await asyncio.sleep(3600)  # a client that has left sends nothing more
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/score",
        "raw_path": b"/v1/score",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    await asyncio.wait_for(app(scope, receive, send), 30)
    return sent


def test_a_client_gone_while_its_body_is_read_counts_as_499_without_a_traceback(tmp_path, caplog):
    jury = write_replay_jury(tmp_path / "jury.yaml")
    plan = ServiceConfig(jury=str(jury), limits=Limits()).resolve()
    scoring = ScoringService(plan.model_dump(mode="json"), {})
    try:
        with caplog.at_level(logging.ERROR, logger="jurybox.serving"):
            sent = asyncio.run(left_mid_body(build_app(scoring)))
    finally:
        scoring.workers.close()
    assert statuses(scoring, "/v1/score") == {"499": 1.0}
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert [m["status"] for m in starts] in ([], [499])
