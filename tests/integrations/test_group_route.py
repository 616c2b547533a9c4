"""POST /v1/groups in-process: the ingress's app over a ScoringService whose judges are the
replay jury's (the tiny jury's real tokenizers and recorded answers) behind stand-ins for
their Serve handles, as tests/serving/service/test_service_hardening.py serves them. The route's
rewards equal the in-process job's on the same groups; its bounds refuse a request before any
judge runs; the listwise design asks each judge once for all the groups; the session's real
``jurybox serve`` answers the route in test_trl.py (URL mode)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from judging_helpers import ITEMS, QUESTION, REFERENCE
from service_helpers import LocalJudge

from jurybox.judges import load_jury_spec
from jurybox.judges.groups import Group, GroupJob, GroupResult, GroupSpec, judge_groups
from jurybox.rubrics import load_rubric
from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.deployments import JudgeServer
from jurybox.serving.service.ingress import build_app
from jurybox.serving.service.scoring import ScoringService

TEXTS = [ITEMS[0].response, ITEMS[1].response, "Early blight.", "A virus; spray water."]
GROUP = {"id": "g0", "question": QUESTION, "reference": REFERENCE, "completions": TEXTS}


@pytest.fixture(scope="module")
def served(replay_jury, replay_tiny):
    """The replay jury's file and its judges (the session's ``replay_tiny`` backends, their
    tokenizers loaded once per session, each behind a replica's own ``JudgeServer``); services
    are made per test."""
    jury = replay_jury
    servers = {
        j.name: JudgeServer(j.model_dump(mode="json"), backend_factory=replay_tiny.backend)
        for j in load_jury_spec(str(jury)).judges
    }
    made: list[ScoringService] = []

    def service(cache: str | None = None, **limits: Any) -> ScoringService:
        plan = ServiceConfig(jury=str(jury), limits=Limits(**limits), verdict_cache=cache).resolve()
        scoring = ScoringService(
            plan.model_dump(mode="json"), {n: LocalJudge(s) for n, s in servers.items()}
        )
        made.append(scoring)
        return scoring

    yield jury, service
    for scoring in made:
        scoring.workers.close()


def post(scoring: ScoringService, body: dict[str, Any]) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(scoring))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://jurybox", timeout=120
        ) as http:
            return await http.post("/v1/groups", json=body)

    return asyncio.run(go())


def calls(scoring: ScoringService) -> int:
    return sum(h.counts.get("votes", 0) for h in scoring.judges.values())


@pytest.mark.parametrize(
    "design,rubric,pointwise",
    [
        ("round_robin", "pairwise", None),
        ("swiss", "pairwise", None),
        ("anchor", "pairwise", "mirage-mg"),
        ("pointwise", "mirage-mg", None),
    ],
)
def test_the_route_answers_what_the_in_process_job_gives(
    served, replay_tiny, design, rubric, pointwise
):
    _, service = served
    scoring = service()
    body = {
        "rubric": rubric,
        "pointwise": pointwise,
        "design": {"design": design, "per_completion": 2},
        "groups": [GROUP],
    }
    r = post(scoring, body)
    assert r.status_code == 200, r.text
    (got,) = [GroupResult.model_validate(g) for g in r.json()["groups"]]
    job = GroupJob(
        GroupSpec(design=design, per_completion=2),
        load_rubric(rubric),
        replay_tiny.spec,
        [Group("g0", {"question": QUESTION, "reference": REFERENCE}, TEXTS)],
        load_rubric(pointwise) if pointwise else None,
    )
    (want,) = judge_groups(replay_tiny, job)
    assert got.rewards == pytest.approx(want.rewards)
    assert got.model_dump(exclude={"rewards", "completions"}) == want.model_dump(
        exclude={"rewards", "completions"}
    )
    assert [len(c.comparisons) for c in got.completions] == [
        len(c.comparisons) for c in want.completions
    ]
    assert got.asked == got.calls and None not in got.rewards


def test_a_design_over_max_judge_calls_is_refused_before_any_judge_runs(served):
    _, service = served
    scoring = service(max_judge_calls=20)
    groups = [{**GROUP, "id": f"g{k}"} for k in range(2)]
    r = post(scoring, {"rubric": "pairwise", "groups": groups})  # 2 x 12 calls
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["field"] == "design" and "max_judge_calls" in error["message"]
    assert error["message"].startswith(
        "the round_robin design of these 2 groups asks 24 judge "
        "calls per judge (12 judge calls per judge per group of "
        "4 (round robin: 6 pairs x 2 calls (both orders)))"
    )
    assert calls(scoring) == 0
    r = post(
        scoring,
        {
            "rubric": "pairwise",
            "design": {"design": "regular", "per_completion": 1},
            "groups": groups,
        },
    )  # 2 pairs x 2 orders x 2 groups: within it
    assert r.status_code == 200, r.text
    assert calls(scoring) == 2  # one call per judge for both groups' pairs


def test_completions_over_max_items_are_refused(served):
    _, service = served
    scoring = service(max_items=6)
    r = post(scoring, {"rubric": "pairwise", "groups": [GROUP, {**GROUP, "id": "g1"}]})
    assert r.status_code == 413 and r.json()["error"]["field"] == "groups"
    assert "8 completions in 2 groups" in r.json()["error"]["message"]
    assert calls(scoring) == 0


@pytest.mark.parametrize(
    "body,field,words",
    [
        ({"rubric": "mirage-mg"}, "rubric", "needs a pairwise rubric"),
        (
            {"rubric": "pairwise", "groups": [{**GROUP, "completions": ["only one"]}]},
            "groups[0].completions",
            "a group of one is rewarded pointwise, which needs a pointwise rubric",
        ),
        ({"rubric": "pairwise", "design": {"design": "anchor"}}, "pointwise", "median"),
        (
            {"rubric": "pairwise", "design": {"design": "nonesuch"}},
            "design.design",
            "Input should be",
        ),
        ({"rubric": "pairwise", "groups": [GROUP, GROUP]}, "groups[1].id", "duplicate id"),
        (
            {"rubric": "pairwise", "groups": [{**GROUP, "completions": ["x" * 6000, "y"]}]},
            "groups[0].completions[0]",
            "max_field_chars",
        ),
        (
            {
                "rubric": {
                    "name": "inline",
                    "template": "{{ question }} {{ answers }}",
                    "inputs": ["question", "answers"],
                    "criteria": [
                        {"name": "ok", "description": "ok?", "scale": {"min": 1, "max": 5}}
                    ],
                },
                "design": {"design": "listwise"},
            },
            "rubric",
            "by name",
        ),
    ],
)
def test_bad_group_requests_are_422_naming_the_field(served, body, field, words):
    _, service = served
    scoring = service(max_field_chars=5000)
    r = post(scoring, {"groups": [GROUP], **body})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field and words in r.json()["error"]["message"]
    assert calls(scoring) == 0


def test_a_group_of_one_with_a_pointwise_rubric_falls_back_saying_so(served):
    _, service = served
    r = post(
        service(),
        {
            "rubric": "pairwise",
            "pointwise": "mirage-mg",
            "groups": [{**GROUP, "id": "g1", "completions": ["Early blight."]}, GROUP],
        },
    )
    assert r.status_code == 200, r.text
    one, four = r.json()["groups"]
    assert one["design"] == "pointwise" and "a group of one completion" in one["fallback"]
    assert four["design"] == "round_robin" and four["fallback"] is None


def test_listwise_asks_each_judge_once_for_every_group(served):
    """The replay jury has no recorded listwise answer (its answers are of other schemas), so
    every completion is unscored, with the judges' own reason: the plumbing is what is tested
    here (one call per judge for all the groups); tests/judges/test_groups.py tests listwise
    judging with simulated judges."""
    _, service = served
    scoring = service()
    groups = [{**GROUP, "id": f"g{k}", "question": f"{QUESTION} ({k})"} for k in range(3)]
    r = post(scoring, {"rubric": "mirage-mg", "design": {"design": "listwise"}, "groups": groups})
    assert r.status_code == 200, r.text
    assert {name: h.counts.get("votes") for name, h in scoring.judges.items()} == {
        "smollm2-135m": 1,
        "gemma3-270m": 1,
    }
    for group in r.json()["groups"]:
        assert group["calls"] == group["asked"] == 1
        assert all(
            c["reward"] is None and "no answer for" in c["reason"] for c in group["completions"]
        )


def test_the_route_caches_a_pair_in_either_order_as_one_entry(served, tmp_path):
    _, service = served
    scoring = service(cache=str(tmp_path / "v.sqlite"))
    pair = {**GROUP, "completions": TEXTS[:2]}
    first = post(scoring, {"rubric": "pairwise", "groups": [pair]})
    assert calls(scoring) == 2
    again = post(scoring, {"rubric": "pairwise", "groups": [{**pair, "completions": TEXTS[1::-1]}]})
    assert calls(scoring) == 2  # answered from the cache
    assert again.json()["groups"][0]["rewards"] == pytest.approx(
        first.json()["groups"][0]["rewards"][::-1]
    )
    assert scoring.cache is not None and scoring.cache.stats().entries == 1
