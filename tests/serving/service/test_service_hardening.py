"""The service under a hostile client and a trainer's traffic (#50), in-process: the ingress's
app (build_app over a ScoringService) served through ASGI on this test's event loop, with the
judges in this process behind stand-ins for their Serve handles (the replay jury's real
tokenizers and recorded answers). An event loop held by a request shows as a bystander's
/healthz that waits: every attack runs beside one, which must be answered within a second
throughout. What needs Ray Serve's proxy (slow bodies and connections over real sockets) is in
test_service.py."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

import httpx
import pytest
from judging_helpers import write_replay_jury
from service_helpers import LocalJudge

from jurybox.judges.parsing import REASON_CODES
from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.deployments import JudgeServer
from jurybox.serving.service.ingress import build_app
from jurybox.serving.service.scoring import ScoringService

ITEM = {
    "id": "a",
    "question": "Why brown rings on tomato leaves?",
    "response": "Early blight, a fungus.",
    "reference": "Early blight (Alternaria).",
}
PROMPT = "<|im_start|>user\nWhy brown rings?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def judges(tmp_path_factory) -> dict[str, JudgeServer]:
    """The replay judges, loaded once (their tokenizers), each generate taking 0.3 s."""
    jury = write_replay_jury(tmp_path_factory.mktemp("hardening") / "jury.yaml", delay_s=0.3)
    from jurybox.judges import load_jury_spec

    servers: dict[str, Any] = {
        j.name: JudgeServer(j.model_dump(mode="json")) for j in load_jury_spec(str(jury)).judges
    }
    servers["_jury"] = jury

    async def warm():  # what a replica imports on its first requests, before any test times it
        async with client(service(servers)) as http:
            await http.post("/v1/score", json={"rubric": "general", "items": [ITEM]})
            await http.post("/v1/score", json={"rubric": inline(), "items": [ITEM]})
            await http.get("/metrics")

    asyncio.run(warm())
    return servers


STARTED: dict[str, ScoringService] = {}


@pytest.fixture(scope="module", autouse=True)
def _workers_closed():
    """The render workers of every service made here are killed at the end."""
    yield
    for scoring in STARTED.values():
        scoring.workers.close()


def service(judges: dict[str, Any], **config: Any) -> ScoringService:
    """A service over ``judges`` with ``config``'s settings; each setting's service is made
    once (its render worker starting, which takes seconds) and its judges' counts reset."""
    key = repr(sorted(config.items()))
    scoring = STARTED.get(key)
    if scoring is None:
        limits = Limits(**config.pop("limits", {}))
        plan = ServiceConfig(jury=str(judges["_jury"]), limits=limits, **config).resolve()
        handles = {name: LocalJudge(s) for name, s in judges.items() if name != "_jury"}
        scoring = STARTED[key] = ScoringService(plan.model_dump(mode="json"), handles)
    for handle in scoring.judges.values():
        handle.counts.clear()
    return scoring


def client(scoring: ScoringService) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=build_app(scoring)),
        base_url="http://jurybox",
        timeout=120,
    )


async def beside(http: httpx.AsyncClient, attack: Any) -> tuple[Any, float]:
    """Run ``attack`` (a coroutine) with a bystander asking /healthz every 50 ms; its answer
    and the bystander's slowest wait (seconds)."""
    slowest = 0.0
    task = asyncio.ensure_future(attack)
    while not task.done():
        began = time.perf_counter()
        assert (await http.get("/healthz")).status_code == 200
        slowest = max(slowest, time.perf_counter() - began)
        await asyncio.sleep(0.05)
    return task.result(), slowest


def inline(**changes: Any) -> dict[str, Any]:
    rubric = {
        "name": "inline",
        "inputs": ["question", "response"],
        "template": "{{ question }} {{ response }} {{ output_format }}",
        "criteria": [{"name": "accuracy", "description": "Right?", "scale": {"min": 1, "max": 5}}],
    }
    rubric.update(changes)
    return rubric


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize(
    "response",
    [
        "<|a|> " * 10666 + "x",  # 64 KB: held the ingress ~21 s
        " " * 48_000 + "x",  # a degenerate policy output: 4 s
    ],
)
def test_a_degenerate_openrlhf_query_does_not_hold_the_ingress(judges, response):
    async def main():
        async with client(service(judges)) as http:
            body = {"query": [PROMPT + response], "prompts": [PROMPT], "labels": ["Blight."]}
            r, slowest = await beside(
                http, http.post("/v1/openrlhf/general?unscored=0&score=accuracy", json=body)
            )
            assert r.status_code == 200, r.text
            assert r.json()["extra_logs"]["jurybox/unscored"] in (0.0, 1.0)
            return slowest

    assert run(main()) < 1.0


def test_a_small_template_cannot_buy_a_huge_prompt(judges):
    # 2.8 KB of body rendered one 10 MB prompt, judged for 48.7 s; now a 413 from the render
    # worker, before any judge sees it.
    template = (
        "{% for i in range(10000) %}{{ response }}{{ question }}{% endfor %}{{ output_format }}"
    )
    item = {**ITEM, "response": "x" * 1000}

    async def main():
        scoring = service(judges)
        async with client(scoring) as http:
            r, slowest = await beside(
                http,
                http.post("/v1/score", json={"rubric": inline(template=template), "items": [item]}),
            )
            assert r.status_code == 413, r.text
            assert r.json()["error"]["field"] == "items[0]"
            assert "max_prompt_chars" in r.json()["error"]["message"]
            assert all(h.counts.get("votes", 0) == 0 for h in scoring.judges.values())
            # Under the per-prompt bound, the request's prompts together are bounded too.
            small = Limits(max_prompt_chars=50_000, max_request_prompt_chars=100_000)
            scoring = service(judges, limits=small.model_dump())
            async with client(scoring) as http2:
                items = [{**ITEM, "id": f"i{k}", "response": "y" * 30_000} for k in range(4)]
                r = await http2.post("/v1/score", json={"rubric": "general", "items": items})
                assert r.status_code == 413 and "max_request_prompt_chars" in r.text, r.text
            return slowest

    assert run(main()) < 1.0


@pytest.mark.parametrize(
    "field,change,limit",
    [
        (
            "criteria",
            [{"name": "accuracy", "description": "d" * 120_000, "scale": {"min": 1, "max": 5}}],
            "max_rubric_chars",
        ),
        ("description", "d" * 120_000, "max_rubric_chars"),
        ("version", "v" * 120_000, "max_rubric_chars"),
        ("inputs", ["question", "response"] + [f"x{k}" for k in range(6000)], "max_rubric_values"),
        (
            "criteria",
            [
                {
                    "name": "accuracy",
                    "description": "Right?",
                    "scale": {
                        "labels": {"yes": 1, "no": 0},
                        "label_descriptions": {"yes": "y" * 120_000},
                    },
                }
            ],
            "max_rubric_chars",
        ),
    ],
)
def test_every_field_of_an_inline_rubric_is_bounded(judges, field, change, limit):
    async def main():
        async with client(service(judges)) as http:
            return await http.post(
                "/v1/score", json={"rubric": inline(**{field: change}), "items": [ITEM]}
            )

    r = run(main())
    assert r.status_code == 413, r.text
    assert limit in r.json()["error"]["message"]


@pytest.mark.parametrize(
    "expression",
    [
        " + ".join("accuracy" for _ in range(2000)),  # 17 KB: was a 500 (RecursionError)
        "-" * 5000 + "accuracy",  # was a 500
        "-" * 1500 + "accuracy",  # within the characters, beyond the depth
        "(" * 16 + " + ".join(["accuracy"] * 4) + ")" * 16 + " * 1" * 70_000,  # 720 KB: 39.5 s
    ],
)
def test_a_client_s_formula_is_a_422_at_once(judges, expression):
    async def main():
        async with client(service(judges, limits={"max_body_bytes": 2 << 20})) as http:
            rubric = inline(formula={"name": "f", "expression": expression})
            items = [{**ITEM, "id": f"i{k}"} for k in range(8)]
            return await beside(
                http, http.post("/v1/score", json={"rubric": rubric, "items": items})
            )

    r, slowest = run(main())
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"].startswith("rubric.formula"), r.json()
    assert slowest < 1.0


def test_an_inline_rubric_nested_500_deep_is_a_422_not_a_500(judges):
    nested: Any = "x"
    for _ in range(500):
        nested = [nested]

    async def main():
        async with client(service(judges)) as http:
            return await http.post(
                "/v1/score", json={"rubric": inline(notes=nested), "items": [ITEM]}
            )

    r = run(main())
    assert r.status_code == 422 and "max_nesting" in r.json()["error"]["message"], r.text


def test_inline_rubrics_wait_for_the_render_workers_in_a_bounded_queue(judges):
    # 12 looping templates held both workers for 61 s and an innocent inline request got a 504
    # after 60 s; now those beyond the queue are told to come back (429, Retry-After) at once.
    looping = inline(
        template="{% for a in range(100000) %}{% for b in range(100000) %}"
        "{% endfor %}{% endfor %}{{ question }} {{ output_format }}"
    )

    async def main():
        scoring = service(judges, limits={"max_render_s": 4, "max_render_queued": 2})
        async with client(scoring) as http:
            calls = [
                http.post("/v1/score", json={"rubric": looping, "items": [ITEM]}) for _ in range(6)
            ]
            answers = await asyncio.gather(*calls)
            statuses = sorted(r.status_code for r in answers)
            refused = [r for r in answers if r.status_code == 429]
            assert statuses == [422] * 4 + [429] * 2, statuses
            assert all(int(r.headers["retry-after"]) >= 1 for r in refused)
            assert refused[0].json()["error"]["type"] == "overloaded"
            # The workers killed for running over are replaced: an innocent one is judged.
            r = await http.post("/v1/score", json={"rubric": inline(), "items": [ITEM]})
            assert r.status_code == 200, r.text

    run(main())


def test_unscored_reasons_in_the_metrics_are_a_closed_set(judges):
    # A reason's text can hold an item's text (the key a template looked up, a judge's output):
    # as a metric label it grew /metrics without bound. Now only codes are labels.
    # (valid on the placeholder item a rubric is checked with; fails on the real ones)
    template = "{{ {'<response>': 1}[response] }} {{ output_format }}"

    async def main():
        scoring = service(judges)
        async with client(scoring) as http:
            for k in range(5):
                item = {**ITEM, "id": f"i{k}", "response": f"item text number {k} " * 20}
                r = await http.post(
                    "/v1/score", json={"rubric": inline(template=template), "items": [item]}
                )
                assert r.status_code == 200, r.text
                assert r.json()["verdicts"][0]["status"] == "unscored"
            return (await http.get("/metrics")).text

    text = run(main())
    reasons = {
        line.split('reason="')[1].split('"')[0]
        for line in text.splitlines()
        if line.startswith("jurybox_unscored_votes_total{")
    }
    assert reasons and reasons <= set(REASON_CODES), reasons
    assert "item text" not in text


def test_a_client_that_leaves_is_counted_as_499(judges):
    async def main():
        scoring = service(judges)
        async with client(scoring) as http:
            task = asyncio.ensure_future(
                http.post("/v1/score", json={"rubric": "general", "items": [ITEM]})
            )
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return scoring.metrics.text().decode()

    text = run(main())
    assert 'jurybox_requests_total{route="/v1/score",status="499"} 1.0' in text, text


def test_a_locked_verdict_cache_is_skipped_not_waited_for(judges, tmp_path):
    cache = tmp_path / "verdicts.sqlite"

    async def main():
        scoring = service(judges, verdict_cache=str(cache))
        holder = sqlite3.connect(cache, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # another process's long write, or a VACUUM
        try:
            async with client(scoring) as http:
                began = time.perf_counter()
                r = await http.post("/v1/score", json={"rubric": "general", "items": [ITEM]})
                took = time.perf_counter() - began
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return r, took, scoring.metrics.text().decode()

    r, took, text = run(main())
    assert r.status_code == 200 and r.json()["verdicts"][0]["id"] == "a", r.text
    assert took < 15  # was a 504 after 60 s: two waits of at most CACHE_BUSY_S, and judging
    assert 'jurybox_verdict_cache_total{result="skipped"} 1.0' in text, text  # not stored


def test_healthz_pings_each_judge_once_for_many_callers(judges):
    async def main():
        scoring = service(judges)
        async with client(scoring) as http:
            answers = await asyncio.gather(*(http.get("/healthz") for _ in range(50)))
            assert {r.status_code for r in answers} == {200}
            return [h.counts.get("ping", 0) for h in scoring.judges.values()]

    assert run(main()) == [1, 1]


def test_bad_requests_are_refused_before_any_judge_runs(judges):
    async def main():
        scoring = service(judges, token_env=None)
        async with client(scoring) as http:
            two = await http.get(
                "/v1/jury", headers=[("authorization", "Bearer a"), ("authorization", "Bearer b")]
            )
            assert two.status_code == 400 and "2 Authorization headers" in two.text
            body = {"query": [PROMPT + "Fungus."], "prompts": [PROMPT], "labels": ["Blight."]}
            calibrated = await http.post(
                "/v1/openrlhf/general?unscored=0&calibrated=true&score=accuracy", json=body
            )
            assert calibrated.status_code == 422, calibrated.text
            assert calibrated.json()["error"]["field"] == "calibrated"
            # An item's field is named as OpenRLHF's body names it (a query over twice the
            # field bound: prompt and response; a lone surrogate is the policy's text, replaced
            # and judged: tests/integrations/test_policy_text.py).
            bad = {**body, "query": [PROMPT + "x" * 200_001]}
            r = await http.post("/v1/openrlhf/general?unscored=0&score=accuracy", json=bad)
            assert r.status_code == 422 and r.json()["error"]["field"] == "query[0]", r.text
            # No unscored policy in the URL nor the service: the user must choose.
            r = await http.post("/v1/openrlhf/general?score=accuracy", json=body)
            assert r.status_code == 422 and r.json()["error"]["field"] == "unscored"
            return [h.counts.get("votes", 0) for h in scoring.judges.values()]

    assert run(main()) == [0, 0]


def test_one_client_s_share_of_the_replica_is_bounded(judges):
    async def main():
        scoring = service(judges, limits={"max_client_requests": 2})
        async with client(scoring) as http:
            calls = [
                http.post(
                    "/v1/score", json={"rubric": "general", "items": [{**ITEM, "id": f"i{k}"}]}
                )
                for k in range(3)
            ]
            answers = await asyncio.gather(*calls)
            return sorted(r.status_code for r in answers), answers

    statuses, answers = run(main())
    assert statuses == [200, 200, 429], statuses
    refused = next(r for r in answers if r.status_code == 429)
    assert refused.headers["retry-after"] and "max_client_requests" in refused.text


def test_a_body_that_trickles_in_is_cut_off(judges):
    async def slowly():
        yield b'{"rubric": "general", '
        await asyncio.sleep(3)
        yield b'"items": []}'

    async def main():
        async with client(service(judges, limits={"body_timeout_s": 1})) as http:
            request = http.post(
                "/v1/score",
                content=slowly(),
                headers={"content-length": "34", "content-type": "application/json"},
            )
            return await beside(http, request)

    r, slowest = run(main())
    assert r.status_code == 408 and "body_timeout_s" in r.text, r.text
    assert slowest < 1.0


# -- one-sample requests judged together (#51 item 7) ------------------------------------------


def items_of(n: int, prefix: str = "i") -> list[dict]:
    return [
        {**ITEM, "id": f"{prefix}{k}", "response": f"Early blight, case {k}."} for k in range(n)
    ]


def test_requests_that_wait_together_are_judged_together(judges):
    async def main():
        scoring = service(judges, limits={"max_concurrent": 1, "max_queued": 64})
        async with client(scoring) as http:
            alone = [
                (await http.post("/v1/score", json={"rubric": "general", "items": [it]})).json()[
                    "verdicts"
                ]
                for it in items_of(3, "a")
            ]
            for handle in scoring.judges.values():
                handle.counts.clear()
            answers = await asyncio.gather(
                *(
                    http.post("/v1/score", json={"rubric": "general", "items": [it]})
                    for it in items_of(12)
                )
            )
            assert [r.status_code for r in answers] == [200] * 12
            calls = [h.counts["votes"] for h in scoring.judges.values()]
            return alone, [r.json()["verdicts"] for r in answers], calls

    alone, together, calls = run(main())
    # The first found the slot free and was judged alone; the other eleven waited for it, and
    # were judged together: two calls per judge in all, where there were twelve.
    assert calls == [2, 2], calls
    assert [v[0]["id"] for v in together] == [f"i{k}" for k in range(12)]
    for mine, want in zip(together[:3], alone):  # the same verdicts as judged alone
        assert mine[0]["scores"] == want[0]["scores"] and mine[0]["votes"] == want[0]["votes"]


def test_a_batch_a_judge_cannot_take_is_judged_request_by_request(judges):
    async def main():
        scoring = service(judges, limits={"max_concurrent": 1, "max_queued": 64, "max_items": 8})
        # One judge fails any call that holds the poisoned item, as a backend might.
        handle = next(iter(scoring.judges.values()))
        votes = handle.votes.fn

        async def poisoned(requests):
            if "poison" in requests.item_ids:
                raise RuntimeError("the backend cannot take this item")
            return await votes(requests)

        handle.votes.fn = poisoned
        try:
            async with client(scoring) as http:
                busy = asyncio.ensure_future(
                    http.post("/v1/score", json={"rubric": "general", "items": items_of(1, "busy")})
                )
                await asyncio.sleep(0.05)
                poison, mine = await asyncio.gather(
                    http.post(
                        "/v1/score", json={"rubric": "general", "items": [{**ITEM, "id": "poison"}]}
                    ),
                    http.post(
                        "/v1/score", json={"rubric": "general", "items": items_of(1, "mine")}
                    ),
                )
                assert (await busy).status_code == 200
                return poison, mine
        finally:
            handle.votes.fn = votes

    poison, mine = run(main())
    assert mine.status_code == 200 and mine.json()["verdicts"][0]["status"] == "scored", mine.text
    assert poison.status_code == 503 and "could not answer" in poison.text, poison.text


def test_a_batch_whose_clients_all_left_asks_no_judge(judges):
    async def main():
        scoring = service(judges, limits={"max_concurrent": 1, "max_queued": 64})
        async with client(scoring) as http:
            busy = asyncio.ensure_future(
                http.post("/v1/score", json={"rubric": "general", "items": items_of(1, "busy")})
            )
            await asyncio.sleep(0.05)
            leavers = [
                asyncio.ensure_future(
                    http.post("/v1/score", json={"rubric": "general", "items": [it]})
                )
                for it in items_of(3, "gone")
            ]
            await asyncio.sleep(0.05)
            for task in leavers:
                task.cancel()
            assert (await busy).status_code == 200
            await asyncio.sleep(0.5)
            return [h.counts["votes"] for h in scoring.judges.values()], scoring.gate.waiting

    calls, waiting = run(main())
    assert calls == [1, 1] and waiting == 0, (calls, waiting)
