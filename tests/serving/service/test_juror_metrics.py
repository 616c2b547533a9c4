"""The service's juror checks (#62): flags counted in /metrics, flagged jurors left out, in-process.

A ScoringService over fake judges (two honest, one flatterer) registered through the backend
registry, each judge a deployment in this process (as tests/serving/service/test_pace.py builds
one). A verdict decided without a juror depends on its request: the verdict cache keeps the
whole jury's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import yaml
from exploit_helpers import fake_judges, fake_spec  # noqa: F401
from service_helpers import LocalJudge

from jurybox.serving.service.config import ServiceConfig
from jurybox.serving.service.deployments import JudgeServer
from jurybox.serving.service.score_protocol import ScoreItem, ScoreRequest
from jurybox.serving.service.scoring import ScoringService

WORDS = "alpha bravo charlie delta"


def _service(tmp_path: Any, **options: Any) -> ScoringService:
    spec = fake_spec("honest-for-tests", "honest-for-tests", "flatterer-for-tests")
    jury = tmp_path / "fakes.yaml"
    if not jury.exists():
        jury.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True)))
    plan = ServiceConfig(
        jury=str(jury), verdict_cache=str(tmp_path / "cache.sqlite"), **options
    ).resolve()
    judges = {j.name: LocalJudge(JudgeServer(j.model_dump(mode="json"))) for j in spec.judges}
    return ScoringService(plan.model_dump(mode="json"), judges)


def _request(n: int = 16) -> ScoreRequest:
    held = [2, 2, 1, 2, 3, 2, 2, 1]  # of the reference's 4 words: the honest votes vary
    return ScoreRequest(
        rubric="mirage-mg",
        items=[
            ScoreItem(
                id=f"q{k}",
                question=f"Which words does item {k} need?",
                response=" ".join(WORDS.split()[: held[k % 8]]),
                reference=WORDS,
            )
            for k in range(n)
        ],
    )


def _flags(scoring: ScoringService) -> dict[tuple[str, str], float]:
    text = asyncio.run(scoring.replica.metrics_text()).decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("jurybox_juror_flags_total{"):
            labels, value = line.rsplit(" ", 1)
            parts = dict(
                p.split("=") for p in labels[len("jurybox_juror_flags_total{") : -1].split(",")
            )
            out[parts["judge"].strip('"'), parts["kind"].strip('"')] = float(value)
    return out


def test_a_flagged_juror_is_counted_and_left_out_but_never_cached(fake_judges, tmp_path):  # noqa: F811
    scoring = _service(tmp_path, juror_checks=True, leave_out_flagged=True)
    try:
        records = asyncio.run(scoring.score(_request()))
        assert _flags(scoring) == {
            ("flatterer-2", "collapsed"): 1.0,
            ("flatterer-2", "departed"): 1.0,
        }
        assert "jurybox_canary_items" in asyncio.run(scoring.replica.metrics_text()).decode()
    finally:
        scoring.workers.close()
    for r in records:
        assert len(r["left_out"]) == 1 and r["left_out"][0].startswith("flatterer-2: collapsed")
        assert {v["judge"] for v in r["votes"]} == {"honest-0", "honest-1", "flatterer-2"}
    # The honest pair's scores: on an item holding 2 of 4 words, 2 on every criterion.
    assert records[0]["scores"]["accuracy"] == 2.0

    plain = _service(tmp_path)  # no checks: the cache answers with the whole jury's verdicts
    try:
        cached = asyncio.run(plain.score(_request()))
        assert _flags(plain) == {}
        assert sum(h.counts.get("votes", 0) for h in plain.judges.values()) == 0
    finally:
        plain.workers.close()
    assert all("left_out" not in r and "flagged" not in r for r in cached)
    assert cached[0]["scores"]["accuracy"] == (2 + 2 + 4) / 3


def test_checks_without_leave_out_only_count(fake_judges, tmp_path):  # noqa: F811
    scoring = _service(tmp_path, juror_checks=True)
    try:
        records = asyncio.run(scoring.score(_request()))
        assert ("flatterer-2", "departed") in _flags(scoring)
    finally:
        scoring.workers.close()
    assert all("left_out" not in r for r in records)
    assert all(r["flagged"][0].startswith("flatterer-2: ") for r in records)


def test_one_item_requests_are_judged_over_a_window(fake_judges, tmp_path):  # noqa: F811
    scoring = _service(tmp_path, juror_checks=True)
    try:
        flagged = []
        for k in range(16):
            one = ScoreRequest(rubric="mirage-mg", items=[_request().items[k]])
            asyncio.run(scoring.score(one))
            flagged.append(_flags(scoring).get(("flatterer-2", "departed"), 0.0))
    finally:
        scoring.workers.close()
    assert flagged[0] == 0.0 and flagged[-1] > 0.0  # (no item alone says it)


def test_leaving_out_needs_the_checks(fake_judges, tmp_path):  # noqa: F811
    import pytest

    from jurybox.rubrics.errors import InputError

    with pytest.raises(InputError, match="--juror-checks"):
        _service(tmp_path, leave_out_flagged=True)


def test_one_client_s_traffic_never_flags_a_juror_in_another_s_verdicts(fake_judges, tmp_path):  # noqa: F811
    from jurybox.serving.service.gate import CLIENT

    scoring = _service(tmp_path, juror_checks=True, leave_out_flagged=True)
    items = _request().items
    try:
        CLIENT.set("10.0.0.1")  # client A: one-item requests until the flatterer is left out
        for k in range(16):
            (a,) = asyncio.run(scoring.score(ScoreRequest(rubric="mirage-mg", items=[items[k]])))
        assert a["left_out"][0].startswith("flatterer-2: ")
        CLIENT.set("10.0.0.2")  # client B's first request: its own history, one item long
        (b,) = asyncio.run(scoring.score(ScoreRequest(rubric="mirage-mg", items=[items[0]])))
        CLIENT.set("10.0.0.1")  # and A's history is still A's
        (again,) = asyncio.run(scoring.score(ScoreRequest(rubric="mirage-mg", items=[items[0]])))
    finally:
        CLIENT.set("")
        scoring.workers.close()
    assert "left_out" not in b and "flagged" not in b
    assert b["scores"]["accuracy"] == (2 + 2 + 4) / 3  # the whole jury's verdict
    assert again["left_out"][0].startswith("flatterer-2: ")


def test_the_ingress_keeps_each_client_address_apart(fake_judges, tmp_path):  # noqa: F811
    import httpx

    from jurybox.serving.service.ingress import build_app

    scoring = _service(tmp_path, juror_checks=True, leave_out_flagged=True)
    app = build_app(scoring)
    items = [i.model_dump(exclude_none=True, exclude={"canary"}) for i in _request().items]

    async def posts(address: str, ks: range) -> list[dict[str, Any]]:
        transport = httpx.ASGITransport(app=app, client=(address, 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://jurybox") as http:
            out = []
            for k in ks:
                body = {"rubric": "mirage-mg", "items": [items[k]]}
                answer = await http.post("/v1/score", json=body)
                assert answer.status_code == 200, answer.text
                out.append(answer.json()["verdicts"][0])
            return out

    try:
        a = asyncio.run(posts("10.0.0.1", range(16)))
        b = asyncio.run(posts("10.0.0.2", range(1)))
    finally:
        scoring.workers.close()
    assert "left_out" in a[-1]
    assert "left_out" not in b[0] and "flagged" not in b[0]
