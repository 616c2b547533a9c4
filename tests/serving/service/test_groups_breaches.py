"""POST /v1/groups against the breaches of #59 (items 3, 4, 5, 6 and 9), in-process: the
ingress's app over a ScoringService whose judges are replay judges behind stand-ins for their
Serve handles (as tests/integrations/test_group_route.py serves them). Design numbers that
overflow are 422s naming the field; a request whose rounds would render more prompt text than
``max_request_prompt_chars`` is refused before any judge runs; images go to a jury that sees
them (the group's images reach every pair) and are refused, undecoded, by one that sees none;
every error names the client's own field; a group over a per-call bound is an unscored group,
not a failed request."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
import pytest
from judging_helpers import ITEMS, QUESTION, REFERENCE
from service_helpers import LocalJudge
from vision_helpers import LEAF, SPOTS, write_vision_replay_jury

from jurybox.judges import Jury, load_jury_spec
from jurybox.judges.groups import Group, GroupJob, GroupResult, GroupSpec, judge_groups
from jurybox.rubrics import load_rubric
from jurybox.rubrics.reward import RewardSpec
from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.deployments import JudgeServer
from jurybox.serving.service.ingress import build_app
from jurybox.serving.service.scoring import ScoringService

TEXTS = [ITEMS[0].response, ITEMS[1].response, "Early blight.", "A virus; spray water."]
GROUP = {"id": "g0", "question": QUESTION, "reference": REFERENCE, "completions": TEXTS}


class Spy:
    """A judge handle that counts its calls and keeps the requests it was sent."""

    def __init__(self, server: JudgeServer) -> None:
        self.local = LocalJudge(server)
        self.sent: list[Any] = []
        self.ping = self.local.ping
        self.votes = self

    def remote(self, requests: Any) -> Any:
        self.sent.append(requests)
        return self.local.votes.remote(requests)


def _services(jury: Any):
    servers = {
        j.name: JudgeServer(j.model_dump(mode="json")) for j in load_jury_spec(str(jury)).judges
    }
    made: list[ScoringService] = []

    def service(**limits: Any) -> ScoringService:
        plan = ServiceConfig(jury=str(jury), limits=Limits(**limits)).resolve()
        scoring = ScoringService(
            plan.model_dump(mode="json"), {n: Spy(s) for n, s in servers.items()}
        )
        made.append(scoring)
        return scoring

    return service, made


@pytest.fixture(scope="module")
def text_service(replay_jury):
    """Services over the replay jury (the tiny jury's judges: neither sees images)."""
    service, made = _services(replay_jury)
    yield service
    for scoring in made:
        scoring.workers.close()


@pytest.fixture(scope="module")
def vision_jury(tmp_path_factory):
    return write_vision_replay_jury(tmp_path_factory.mktemp("vision-groups") / "jury.yaml")


@pytest.fixture(scope="module")
def vision_service(vision_jury):
    """Services over the vision replay jury (a judge that sees images beside one that does not)."""
    service, made = _services(vision_jury)
    yield service
    for scoring in made:
        scoring.workers.close()


def post(scoring: ScoringService, body: dict[str, Any], route: str = "/v1/groups") -> Any:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(scoring), raise_app_exceptions=False)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://jurybox", timeout=120
        ) as http:
            return await http.post(route, json=body)

    return asyncio.run(go())


def calls(scoring: ScoringService) -> int:
    return sum(len(h.sent) for h in scoring.judges.values())


def error(r: Any) -> dict[str, Any]:
    return r.json()["error"]


def inline(path: Any) -> str:
    return f"data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}"


# -- item 3: design numbers that break the arithmetic ------------------------------------------


@pytest.mark.parametrize(
    "design,field",
    [
        ({"design": "swiss", "seed": -1}, "design.seed"),
        ({"design": "swiss", "seed": 2**64}, "design.seed"),
        ({"low": -1e308, "high": 1e308}, "design.high"),
        ({"low": -1e308, "high": 1e308, "centred": True}, "design.high"),
        ({"low": 0, "high": 1e300, "weight": 1e300}, "design.weight"),
    ],
)
def test_design_numbers_that_overflow_are_422_naming_the_field(text_service, design, field):
    scoring = text_service()
    body = {"rubric": "pairwise", "pointwise": "mirage-mg", "design": design, "groups": [GROUP]}
    r = post(scoring, body)
    assert r.status_code == 422, r.text
    assert error(r)["field"] == field, r.text
    assert calls(scoring) == 0


def test_the_widest_seed_and_range_taken_give_rewards(text_service):
    r = post(
        text_service(),
        {
            "rubric": "pairwise",
            "design": {"design": "swiss", "seed": 2**63 - 1, "low": -1e300, "high": 1e300},
            "groups": [GROUP],
        },
    )
    assert r.status_code == 200, r.text
    (got,) = r.json()["groups"]
    assert None not in got["rewards"] and all(abs(x) <= 1e300 for x in got["rewards"])


# -- item 4: the whole request's prompt text, rounds included, bounded before any judge -------


def _long_group(k: int = 8, chars: int = 1500) -> dict[str, Any]:
    texts = [
        f"Answer {c}: " + ("early blight, remove the leaves. " * 100)[: chars - c * 37]
        for c in range(k)
    ]
    return {**GROUP, "completions": texts}


def test_rounds_over_max_request_prompt_chars_are_refused_before_any_judge(text_service):
    """Each Swiss round renders within the bound; the request's rounds together do not."""
    group = _long_group()
    body = {
        "rubric": "pairwise",
        "design": {"design": "swiss", "per_completion": 4},
        "groups": [group],
    }
    probe = text_service()
    r = post(probe, body)
    assert r.status_code == 200, r.text
    sent = next(iter(probe.judges.values())).sent
    per_round = [_chars(s) for s in sent]
    total = sum(per_round)
    assert len(sent) == 4 and max(per_round) < total / 2, per_round
    limit = (max(per_round) + total) // 2  # every round within it, the whole request over it
    scoring = text_service(max_request_prompt_chars=limit)
    r = post(scoring, body)
    assert r.status_code == 413, r.text
    e = error(r)
    assert "max_request_prompt_chars" in e["message"] and f"{limit:,}" in e["message"]
    estimate = int(e["message"].split("about ")[1].split(" ")[0].replace(",", ""))
    # A bound for the worst pairing: which pairs a Swiss round makes depends on the jury's
    # answers, so the request's real text is at most the estimate (1.0-1.15x here).
    assert total <= estimate <= 1.2 * total, (total, estimate)
    assert calls(scoring) == 0


def _chars(requests: Any) -> int:
    from jurybox.rubrics.images import image_tokens
    from jurybox.serving.service.admission import CHARS_PER_IMAGE_TOKEN

    return sum(
        sum(len(m["content"]) for m in r.messages)
        + CHARS_PER_IMAGE_TOKEN * sum(image_tokens(im.width, im.height) for im in r.images)
        for r in requests.requests
        if r is not None
    )


@pytest.mark.parametrize(
    "design,rubric,pointwise",
    [
        ({"design": "round_robin"}, "pairwise", None),
        ({"design": "regular", "per_completion": 3}, "pairwise", None),
        ({"design": "swiss", "per_completion": 3}, "pairwise", None),
        ({"design": "anchor"}, "pairwise", "mirage-mg"),
        ({"design": "round_robin", "weight": 0.5}, "pairwise", "mirage-mg"),
        ({"design": "pointwise"}, "mirage-mg", None),
        ({"design": "listwise"}, "mirage-mg", None),
    ],
)
def test_the_estimate_bounds_what_the_rounds_render(text_service, design, rubric, pointwise):
    """The estimate is at least what every design's rounds render, and near it (the rounds'
    prompts as the judges were sent them)."""
    from jurybox.serving.service.groups import planned_prompt_chars

    scoring = text_service()
    groups = [_long_group(6, 900), {**_long_group(5, 400), "id": "g1"}]
    body = {"rubric": rubric, "pointwise": pointwise, "design": design, "groups": groups}
    r = post(scoring, body)
    assert r.status_code == 200, r.text
    sent = list(next(iter(scoring.judges.values())).sent)
    rendered = sum(_chars(s) for s in sent)
    if design["design"] == "listwise":
        rendered *= len(scoring.jury.judges)  # each judge its own prompt
    from jurybox.serving.service.groups_protocol import GroupRequest

    estimate = asyncio.run(planned_prompt_chars(scoring, GroupRequest.model_validate(body)))
    # exact for round robin, pointwise and listwise; 1.01-1.11 here for the others (a design's
    # completions meet at most so often; a Swiss round may find fewer pairs)
    assert rendered <= estimate <= 1.15 * rendered, (rendered, estimate)


# -- item 5: images for a jury that sees none --------------------------------------------------


def test_images_for_a_jury_that_sees_none_are_refused_undecoded(text_service, monkeypatch):
    import jurybox.rubrics.images as images

    decoded: list[int] = []
    real = images.check_image
    monkeypatch.setattr(images, "check_image", lambda *a, **k: decoded.append(1) or real(*a, **k))
    scoring = text_service()
    item = {
        "id": "a",
        "question": QUESTION,
        "reference": REFERENCE,
        "response": "Early blight.",
        "images": [inline(LEAF)],
    }
    r = post(scoring, {"rubric": "mirage-mg", "items": [item]}, "/v1/score")
    assert r.status_code == 422, r.text
    assert error(r)["field"] == "items[0].images"
    assert "no judge of this jury sees images" in error(r)["message"]
    r = post(scoring, {"rubric": "pairwise", "groups": [{**GROUP, "images": [inline(LEAF)]}]})
    assert r.status_code == 422, r.text
    assert error(r)["field"] == "groups[0].images"
    assert "no judge of this jury sees images" in error(r)["message"]
    assert decoded == [] and calls(scoring) == 0
    r = post(scoring, {"rubric": "mirage-mg", "items": [{**item, "images": []}]}, "/v1/score")
    assert r.status_code == 200, r.text


# -- item 6: a group's images reach its pairs --------------------------------------------------


@pytest.mark.parametrize("design", ["round_robin", "pointwise"])
def test_a_groups_images_reach_every_item_built_from_it(vision_service, vision_jury, design):
    scoring = vision_service()
    rubric = "pairwise" if design == "round_robin" else "mirage-id"
    fields = {"id": "v", "question": "What is wrong with this leaf?", "entity_name": "tomato"}
    texts = ["A tomato leaf, healthy.", "Early blight.", "A virus."]
    group = {**fields, "images": [inline(LEAF), inline(SPOTS)], "completions": texts}
    score = None if design == "round_robin" else "identification_accuracy"
    body = {"rubric": rubric, "design": {"design": design}, "score": score, "groups": [group]}
    r = post(scoring, body)
    assert r.status_code == 200, r.text
    (got,) = [GroupResult.model_validate(g) for g in r.json()["groups"]]
    sent = [req for h in scoring.judges.values() for s in h.sent for req in s.requests]
    assert sent and all(len(req.images) == 2 for req in sent)  # every call, both images
    shown = {im.digest for req in sent for im in req.images}
    assert len(shown) == 2
    with Jury.load(vision_jury) as local:  # the same group, its images as files, in-process
        job = GroupJob(
            GroupSpec(design=design),
            load_rubric(rubric),
            local.spec,
            [
                Group(
                    "v",
                    {k: v for k, v in fields.items() if k != "id"}
                    | {"images": [str(LEAF), str(SPOTS)]},
                    texts,
                )
            ],
            reward=RewardSpec(score=score),
        )
        (want,) = judge_groups(local, job)
    assert got.rewards == pytest.approx(want.rewards)


def test_group_images_are_checked_naming_the_group(vision_service):
    scoring = vision_service(max_image_bytes=1200, max_image_pixels=7000)
    bad = {**GROUP, "images": [inline(LEAF), "data:image/png;base64,bm90IGFuIGltYWdl"]}
    r = post(scoring, {"rubric": "pairwise", "groups": [GROUP, {**bad, "id": "g1"}]})
    assert r.status_code == 422, r.text
    assert error(r)["field"] == "groups[1].images[1]" and "not an image" in error(r)["message"]
    r = post(scoring, {"rubric": "pairwise", "groups": [{**GROUP, "images": ["/etc/passwd"]}]})
    assert r.status_code == 422 and error(r)["field"] == "groups[0].images[0]", r.text
    assert calls(scoring) == 0
    # an image over a per-image limit: that group unscored with the reason, the others rewarded
    large = {**GROUP, "id": "g1", "images": [inline(SPOTS)]}
    r = post(
        scoring, {"rubric": "pairwise", "groups": [{**GROUP, "images": [inline(LEAF)]}, large]}
    )
    assert r.status_code == 200, r.text
    fine, bad = r.json()["groups"]
    assert None not in fine["rewards"] and bad["rewards"] == [None] * len(TEXTS)
    assert all("groups[1].images[0]" in c["reason"] for c in bad["completions"])
    assert all("max_image_bytes" in c["reason"] for c in bad["completions"])


# -- item 9: the client's own field paths, bad groups, strings for lists ----------------------


@pytest.mark.parametrize("route", ["/v1/groups", "/v1/score"])
def test_a_string_where_a_list_of_images_is_expected_is_422(text_service, route):
    scoring = text_service()
    if route == "/v1/groups":
        body: dict[str, Any] = {"rubric": "pairwise", "groups": [{**GROUP, "images": "x"}]}
        field = "groups[0].images"
    else:
        item = {"id": "a", "question": QUESTION, "response": "Early blight.", "images": "x"}
        body, field = {"rubric": "mirage-mg", "items": [item]}, "items[0].images"
    r = post(scoring, body, route)
    assert r.status_code == 422, r.text
    assert error(r)["field"] == field and "list" in error(r)["message"]


@pytest.mark.parametrize(
    "group,rubric,field,words",
    [
        (
            {**GROUP, "completions": ["Early blight.", "  "]},
            "pairwise",
            "groups[1].completions[1]",
            "empty",
        ),
        ({**GROUP, "question": None}, "pairwise", "groups[1].question", "missing"),
        (GROUP, "mirage-id", "groups[1].entity_name", "missing"),
        (
            {**GROUP, "completions": ["Early blight.", "  "]},
            "mirage-mg",
            "groups[1].completions[1]",
            "empty",
        ),
    ],
)
def test_errors_name_the_clients_field(text_service, group, rubric, field, words):
    scoring = text_service()
    design = "round_robin" if rubric == "pairwise" else "pointwise"
    first = {**GROUP, "entity_name": "early blight"}
    body = {
        "rubric": rubric,
        "design": {"design": design},
        "score": "identification_accuracy" if rubric == "mirage-id" else None,
        "groups": [first, {**group, "id": "g1"}],
    }
    r = post(scoring, body)
    assert r.status_code == 422, r.text
    e = error(r)
    assert e["field"] == field and words in e["message"], e
    for internal in ("pair-", "c-", "items[", "response_a", "response_b"):
        assert internal not in e["message"] and internal not in (e["field"] or ""), e
    assert calls(scoring) == 0


def test_a_group_over_the_per_call_prompt_bound_is_unscored_the_others_rewarded(text_service):
    scoring = text_service(max_prompt_chars=4000, max_field_chars=3000)
    long = {**GROUP, "id": "long", "completions": ["Early blight. " * 200, "A virus. " * 300]}
    r = post(scoring, {"rubric": "pairwise", "groups": [GROUP, long]})
    assert r.status_code == 200, r.text
    fine, bad = r.json()["groups"]
    assert None not in fine["rewards"]
    assert bad["id"] == "long" and bad["rewards"] == [None, None] and bad["asked"] == 0
    for c in bad["completions"]:
        assert "max_prompt_chars" in c["reason"] and "pair-" not in c["reason"], c
    # alone, the same group gets the same answer: its request is not refused
    r = post(scoring, {"rubric": "pairwise", "groups": [long]})
    assert r.status_code == 200 and r.json()["groups"][0]["rewards"] == [None, None], r.text


def test_a_round_that_renders_otherwise_than_its_probes_still_names_the_clients_field(
    text_service,
):
    """An inline template that blows up only long answers escapes the probes (SHORT and LONG
    characters); the round's own per-call check refuses it (a 413: the fallback when the
    estimate cannot see a bound coming), and the error still names the group, not the pair the
    job built."""
    import yaml

    from jurybox.rubrics.loading import _library

    rubric = yaml.safe_load((_library() / "pairwise.yaml").read_text())
    rubric["name"] = "pairwise-amplified"
    rubric["template"] = rubric["template"].replace(
        "{{ first }}", "{{ first }}{% if first|length > 500 %}{{ first * 40 }}{% endif %}"
    )
    scoring = text_service(max_prompt_chars=20_000)
    long = {**GROUP, "id": "g1", "completions": ["Early blight. " * 60, "A virus. " * 70]}
    r = post(scoring, {"rubric": rubric, "groups": [GROUP, long]})
    assert r.status_code == 413, r.text
    e = error(r)
    assert e["field"] == "groups[1]" and e["message"].startswith("groups[1]: its prompt has"), e
    assert "max_prompt_chars" in e["message"] and "pair-" not in e["message"], e
