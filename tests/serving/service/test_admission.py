"""What a score request must pass before a judge sees it (jurybox.serving.service.admission), without
Ray: the limits, the checks of text and nesting, and the worker processes that validate and
render a client's inline rubric under a time budget and a memory cap. The same paths on the
real service are in test_service_isolation.py."""

from __future__ import annotations

import asyncio
import pickle
import time
from types import SimpleNamespace

import pytest
from starlette.testclient import TestClient

from jurybox.rubrics import load_rubric
from jurybox.rubrics.prompts import _compile
from jurybox.serving.errors import RequestProblem, TooLarge
from jurybox.serving.problems import HTTPProblem, problem_for
from jurybox.serving.service.admission import check_text, inline_rubric, prepare
from jurybox.serving.service.config import Limits
from jurybox.serving.service.gate import Clients
from jurybox.serving.service.workers import Workers

LIMITS = Limits()
ITEM = {
    "id": "a",
    "question": "Why brown rings?",
    "response": "Early blight.",
    "reference": "Alternaria solani.",
}


def criterion(name: str, scale: object = None) -> dict:
    return {"name": name, "description": f"How {name}.", "scale": scale or {"min": 1, "max": 5}}


def inline(
    template: str = "{{ question }} {{ response }} {{ output_format }}",
    criteria: list | None = None,
    mode: str = "joint",
) -> dict:
    return {
        "name": "inline",
        "mode": mode,
        "template": template,
        "criteria": criteria or [criterion("accuracy")],
    }


def problem(call) -> HTTPProblem:
    """The answer to the problem ``call`` raises."""
    with pytest.raises(RequestProblem) as info:
        call()
    return problem_for(info.value)


def test_a_known_rubric_and_good_items_become_the_judges_requests():
    rubric, items, requests = prepare(
        load_rubric("general"), [ITEM, {**ITEM, "id": 7}], LIMITS, False
    )
    assert [it.id for it in items] == ["a", "7"] and requests.item_ids == ("a", "7")
    assert len(requests.requests) == 2 * len(rubric.calls())
    assert "Early blight." in requests.requests[0].messages[-1]["content"]


@pytest.mark.parametrize(
    "rubric,field,words",
    [
        (
            inline(criteria=[criterion(f"c{k}") for k in range(33)]),
            "rubric.criteria",
            ["33 criteria", "max_criteria"],
        ),
        (
            inline(template="{{ question }}" + "x" * 50_001),
            "rubric.template",
            ["max_template_chars"],
        ),
        (
            inline(criteria=[criterion("a", {"values": list(range(102))})]),
            "rubric.criteria[0].scale",
            ["102 points", "max_scale_points"],
        ),
        (
            inline(criteria=[criterion("a", {"labels": {f"l{k}": k for k in range(200)}})]),
            "rubric.criteria[0].scale",
            ["200 points"],
        ),
        (
            inline(criteria=[criterion("a", [0.5] * 102)]),
            "rubric.criteria[0].scale",
            ["102 points"],
        ),
    ],
)
def test_inline_rubrics_beyond_the_size_limits_are_413_naming_the_limit(rubric, field, words):
    got = problem(lambda: prepare(rubric, [ITEM], LIMITS, False))
    assert got.status == 413 and got.field == field, got.message
    assert all(w in got.message for w in words), got.message


@pytest.mark.parametrize("scale", [{"levels": 1.5, "labels": None}, 7, "1-5", {"values": "x"}])
def test_a_malformed_scale_is_a_422_from_validation_not_a_crash_of_the_size_check(scale):
    got = problem(lambda: prepare(inline(criteria=[criterion("a", scale)]), [ITEM], LIMITS, False))
    assert got.status == 422 and got.field.startswith("rubric.criteria"), got.message


def test_ten_thousand_criteria_are_refused_before_any_is_validated():
    # Criteria that would not validate (no description): the 413 comes from counting the raw
    # request, before any of them is parsed, let alone rendered.
    rubric = inline(criteria=[{"name": f"c{k}"} for k in range(10_000)], mode="per_criterion")
    got = problem(lambda: prepare(rubric, [ITEM], LIMITS, False))
    assert got.status == 413 and "10000 criteria" in got.message and "max_criteria" in got.message


def test_repeated_criterion_names_are_still_found():
    from jurybox.rubrics import Rubric

    criteria = [criterion(f"c{k}") for k in range(3)]
    with pytest.raises(ValueError, match=r"criteria names repeat: \['c0', 'c2'\]"):
        Rubric.model_validate(inline(criteria=criteria + [criteria[2], criteria[0]]))


def test_judge_calls_per_request_are_bounded():
    rubric = inline(criteria=[criterion(f"c{k}") for k in range(4)], mode="per_criterion")
    limits = Limits(max_judge_calls=8)
    items = [{**ITEM, "id": f"i{k}"} for k in range(3)]
    got = problem(lambda: prepare(rubric, items, limits, False))
    assert got.status == 413 and got.field == "items"
    assert "12 judge calls" in got.message and "max_judge_calls" in got.message
    assert len(prepare(rubric, items[:2], limits, False)[2].requests) == 8  # 8 is allowed


@pytest.mark.parametrize("depth,ok", [(19, True), (20, False), (50, False), (500, False)])
def test_nesting_beyond_max_nesting_is_a_422_naming_the_path(depth, ok):
    nested: dict = {}
    inner = nested
    for _ in range(depth - 1):
        inner["k"] = {}
        inner = inner["k"]
    item = {**ITEM, "notes": nested}  # the item is level 1, notes level 2 ...
    if ok:
        prepare(load_rubric("general"), [item], LIMITS, False)
        return
    got = problem(lambda: prepare(load_rubric("general"), [item], LIMITS, False))
    assert got.status == 422 and got.field.startswith("items[0].notes")
    assert "max_nesting" in got.message


@pytest.mark.parametrize(
    "value,path",
    [
        ({"a": ["ok", {"b": "x\ud800"}]}, "v.a[1].b"),
        ({"k\udcff": 1}, "v"),
    ],
)
def test_lone_surrogates_are_found_at_any_depth(value, path):
    got = problem(lambda: check_text(value, "v", 20))
    assert got.status == 422 and got.field == path and "lone surrogate" in got.message


def test_a_huge_product_or_power_in_a_template_is_refused_and_never_folded():
    for source, words in [
        ("{{ 'x' * 10**10 }}", "repetition of 10000000000"),
        ("{{ [0] * 2000000 }}", "repetition of 2000000"),
        ("{{ 7 ** 100000 }}", "power of about 84510 digits"),
    ]:
        template = _compile(source)  # compiling computes nothing (no constant folding)
        with pytest.raises(Exception, match=words):
            template.render()
    assert _compile("{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ 3 * 4 }}").render() == "ababab 1024 12"
    got = problem(lambda: inline_rubric(inline("{{ question }}{{ 'x' * 10**10 }}"), LIMITS))
    assert got.status == 422 and "at most 1000000" in got.message


def test_a_problem_crosses_a_process_boundary_intact():
    p = TooLarge("too big", "items", retry_after=3)
    q = problem_for(pickle.loads(pickle.dumps(p)))
    assert (q.status, q.kind, q.message, q.field, q.headers) == (
        413,
        "too_large",
        "too big",
        "items",
        {"Retry-After": "3"},
    )


SLOW = inline(
    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    "{{ question }} {{ output_format }}"
)


def test_workers_bound_a_templates_time_and_memory_and_recover():
    async def main():
        workers = Workers(workers=2)
        try:
            # Past its budget: 422 naming max_render_s, and its worker killed ...
            began = time.monotonic()
            with pytest.raises(RequestProblem) as info:
                await workers.run(2.0, prepare, SLOW, [ITEM], LIMITS, False)
            answer = problem_for(info.value)
            assert answer.status == 422 and "max_render_s" in answer.message
            assert time.monotonic() - began < 30
            # ... while a concurrent good call, in the other worker, is untouched.
            # A template that wants gigabytes fails alone (its worker's memory is capped).
            huge = inline(
                "{% set s = 'x' * 900000 %}{% for i in range(5000) %}{{ s }}"
                "{% endfor %}{{ question }} {{ output_format }}"
            )
            good = workers.run(60, prepare, inline(), [ITEM], LIMITS, False)
            bad = workers.run(60, prepare, huge, [ITEM], LIMITS, False)
            ok, failed = await asyncio.gather(good, bad, return_exceptions=True)
            assert isinstance(failed, RequestProblem), failed
            failed = problem_for(failed)
            assert isinstance(failed, HTTPProblem) and failed.status == 422, failed
            assert "MemoryError" in failed.message or "memory" in failed.message, failed.message
            rubric, _, requests = ok
            assert rubric.name == "inline" and "Early blight." in str(requests.requests[0])
            # A caller that stops waiting (deadline, client gone) kills the worker too.
            task = asyncio.ensure_future(workers.run(600, prepare, SLOW, [ITEM], LIMITS, False))
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # And the next call gets a fresh worker.
            assert (await workers.run(60, prepare, inline(), [ITEM], LIMITS, False))[0].name
        finally:
            workers.close()

    asyncio.run(main())


def test_a_500_is_json_and_counted_in_metrics():
    from jurybox.serving.service.ingress import build_app
    from jurybox.serving.service.metrics import Metrics

    async def broken():
        raise RuntimeError("boom")

    metrics = Metrics()
    ingress = SimpleNamespace(
        plan=SimpleNamespace(cors_origins=[]),
        token=None,
        limits=LIMITS,
        metrics=metrics,
        jury_info=broken,
        clients=Clients(8),
        metrics_text=lambda: None,
    )
    with TestClient(build_app(ingress), raise_server_exceptions=False) as client:
        r = client.get("/v1/jury")
    assert r.status_code == 500 and r.json()["error"]["type"] == "internal", r.text
    assert "boom" not in r.text  # the log has it, not the client
    text = metrics.text().decode()
    assert 'jurybox_requests_total{route="/v1/jury",status="500"} 1.0' in text, text
