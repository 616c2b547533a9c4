"""Checklist rubrics on the service (#63): ``/v1/score``, the group route and OpenRLHF's, in-process.

A ScoringService (the ingress's app through ASGI) over two judges of a scripted backend
registered through the backend registry: it meets every point but those marked ``[no]``, gives
7 on a whole checklist, and counts the prompts it is given, so what each request asks the judges
is exact. The service's answer is compared with the in-process path's (`Jury.score`) on the same
items, and with `judge_file`'s on the tiny jury's recorded answers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from judging_helpers import CHECKLISTS_RECORDING, RECORDING, write_replay_jury
from service_helpers import LocalJudge

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.protocol import Generation
from jurybox.rubrics import Item, input_hash, load_rubric
from jurybox.rubrics.checklist import checklist_calls
from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.deployments import JudgeServer
from jurybox.serving.service.ingress import build_app
from jurybox.serving.service.scoring import ScoringService

BACKEND = "checklist-for-tests"
POINTS = [
    {"criterion": "Names the cause", "points": 5, "tag": "essential"},
    {"criterion": "Gives a remedy [no]", "points": 3},
    {"criterion": "Recommends something harmful [no]", "points": -4},
    {"criterion": "Says when to act", "points": 2},
]
QUESTION = "Brown rings on my tomato leaves?"


class Scripted:
    """Meets every point but those marked ``[no]`` (none for an answer holding ``[bad]``); 7 on
    a whole checklist; counts prompts."""

    asked = 0  # every instance's prompts (each judge server makes its own)

    def __init__(self, spec: Any = None) -> None:
        self.name = getattr(spec, "name", "scripted")

    def generate(self, requests: Any, cancelled: Any = None) -> list[Generation]:
        Scripted.asked += len(requests)
        return [self._answer(r) for r in requests]

    @staticmethod
    def _answer(request: Any) -> Generation:
        text = request.messages[-1]["content"]
        keys = list(request.schema["properties"])
        if keys == ["score"]:
            return Generation(text='{"score": 7}')
        if keys == ["met"]:
            answer, point = text.split("Checklist point", 1)
            lines = {"met": point}
        else:
            answer = text.split("Checklist", 1)[0]
            lines = {k: re.search(rf"^{k}: (.*)$", text, re.M)[1] for k in keys}
        bad = "[bad]" in answer  # an answer that meets nothing
        return Generation(
            text=json.dumps(
                {k: "no" if bad or "[no]" in line else "yes" for k, line in lines.items()}
            )
        )

    def close(self) -> None:
        pass


def spec() -> JurySpec:
    """Two judges of the scripted backend (register it first: the ``scripted`` fixture)."""
    return JurySpec.model_validate(
        {
            "name": "scripted",
            "aggregation": {"method": "mean"},
            "judges": [
                {"name": "a", "model": "org/not-a-model", "backend": BACKEND},
                {"name": "b", "model": "org/not-a-model", "backend": BACKEND},
            ],
        }
    )


@pytest.fixture
def scripted(monkeypatch):
    """The scripted backend registered for one test (undone after it); its count reset."""
    from jurybox.judges.backends import registry

    monkeypatch.setattr(registry, "_registered", {})
    registry.register(BACKEND, Scripted)
    Scripted.asked = 0
    return Scripted


@pytest.fixture
def service(scripted, tmp_path):
    """Services over the scripted jury (``service(**limits)``), closed after the test."""
    jury = tmp_path / "scripted.yaml"
    judges = spec()
    jury.write_text(yaml.safe_dump(judges.model_dump(mode="json", exclude_defaults=True)))
    made: list[ScoringService] = []

    def make(cache: bool = False, **limits: Any) -> ScoringService:
        config = ServiceConfig(
            jury=str(jury),
            limits=Limits(**limits),
            verdict_cache=str(tmp_path / "cache.sqlite") if cache else None,
        )
        handles = {
            j.name: LocalJudge(JudgeServer(j.model_dump(mode="json"))) for j in judges.judges
        }
        scoring = ScoringService(config.resolve().model_dump(mode="json"), handles)
        made.append(scoring)
        return scoring

    yield make
    for scoring in made:
        scoring.workers.close()


def post(scoring: ScoringService, route: str, body: Any, **kw: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(scoring), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://jurybox") as http:
            return await http.post(route, json=body, **kw)

    return asyncio.run(go())


def row(id: str, points: list[dict[str, Any]] = POINTS, **kw: Any) -> dict[str, Any]:
    return {
        "id": id,
        "question": QUESTION,
        "response": "Blight; spray in the morning.",
        "checklist": points,
        **kw,
    }


def in_process(rubric_name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdict records the in-process path (`Jury.score`) gives for ``rows``."""
    items = [Item.model_validate(r) for r in rows]
    made = Jury(spec()).score(load_rubric(rubric_name), items)
    return [v.to_record(input=input_hash(it)) for v, it in zip(made, items)]


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs run to run (each vote's latency)."""
    out = dict(record)
    out["votes"] = [{k: v for k, v in vote.items() if k != "latency_s"} for vote in out["votes"]]
    return out


def error(r: httpx.Response) -> dict[str, Any]:
    return r.json()["error"]


@pytest.mark.parametrize("rubric", ["checklist", "checklist-all", "checklist-implicit"])
def test_score_answer_equals_files_verdict(service, rubric):
    rows = [row("x"), row("y", POINTS[:3]), row("z", POINTS[1:])]
    r = post(service(), "/v1/score", {"rubric": rubric, "items": rows})
    assert r.status_code == 200, r.text
    got = r.json()["verdicts"]
    asked = Scripted.asked
    assert asked == 2 * checklist_calls(load_rubric(rubric), [Item.model_validate(x) for x in rows])
    want = in_process(rubric, rows)
    assert [comparable(g) for g in got] == [comparable(w) for w in want]
    if rubric != "checklist-implicit":
        x = got[0]
        assert x["scores"] == {"p1": 1.0, "p2": 0.0, "p3": 0.0, "p4": 1.0, "score": 7 / 10}
        assert x["points"]["p3"]["points"] == -4 and x["points"]["p3"]["met"] == 0.0
        assert sorted({(v["judge"], v["criterion"]) for v in x["votes"]}) == [
            (j, p) for j in ("a", "b") for p in ("p1", "p2", "p3", "p4")
        ]
    else:
        assert got[0]["scores"] == {"score": 7.0}
        assert [p["text"] for p in got[0]["points"].values()] == [p["criterion"] for p in POINTS]


def test_points_cached_one_by_one_an_edited_point_rejudged_alone(service):
    scoring = service(cache=True)
    assert post(scoring, "/v1/score", {"rubric": "checklist", "items": [row("x")]}).is_success
    assert Scripted.asked == 2 * 4
    edited = [*POINTS[:3], {"criterion": "Says when to act, and why", "points": 2}]
    r = post(scoring, "/v1/score", {"rubric": "checklist", "items": [row("x", edited)]})
    assert r.status_code == 200, r.text
    assert Scripted.asked == 2 * 5  # only the edited point, by each judge
    assert r.json()["verdicts"][0]["points"]["p4"]["text"] == "Says when to act, and why"


def test_inline_checklist_rubric_and_canary_units(service):
    scoring = service(cache=True)
    inline = load_rubric("checklist").model_dump(mode="json", by_alias=True)
    by_name = post(scoring, "/v1/score", {"rubric": "checklist", "items": [row("x")]}).json()
    r = post(scoring, "/v1/score", {"rubric": inline, "items": [row("x")]})
    assert r.status_code == 200, r.text
    assert [comparable(v) for v in r.json()["verdicts"]] == [
        comparable(v) for v in by_name["verdicts"]
    ]
    assert Scripted.asked == 2 * 4  # the inline rubric's units are the named one's: cached
    # a canary's units are judged afresh (never looked up), and its verdict says so
    r = post(scoring, "/v1/score", {"rubric": "checklist", "items": [row("x", canary=True)]})
    assert r.status_code == 200, r.text
    assert Scripted.asked == 2 * 4 * 2 and r.json()["verdicts"][0]["canary"] is True


def test_points_over_max_points_is_413_before_any_judge_runs(service):
    rows = [row("x", POINTS[:2]), row("y")]
    r = post(service(max_points=3), "/v1/score", {"rubric": "checklist", "items": rows})
    assert r.status_code == 413, r.text
    assert error(r)["field"] == "items[1].checklist[3]"
    assert "max_points" in error(r)["message"]
    # the rubric's own bound, where it is the smaller
    inline = load_rubric("checklist").model_dump(mode="json", by_alias=True)
    inline["checklist"]["max_points"] = 2
    r = post(service(), "/v1/score", {"rubric": inline, "items": rows})
    assert r.status_code == 413, r.text
    assert error(r)["field"] == "items[1].checklist[2]"
    assert "checklist: max_points" in error(r)["message"]
    assert Scripted.asked == 0


@pytest.mark.parametrize(
    "point, field, words",
    [
        ({"criterion": "x" * 1001, "points": 1}, "items[1].checklist[2]", "1,001 characters"),
        ({"criterion": "y", "points": 0}, "items[1].checklist[2]", "other than 0"),
        ({"criterion": "y"}, "items[1].checklist[2]", "points: missing"),
    ],
)
def test_point_too_long_is_422_naming_the_point(service, point, field, words):
    rows = [row("x"), row("y", [*POINTS[:2], point])]
    r = post(service(max_field_chars=1000), "/v1/score", {"rubric": "checklist", "items": rows})
    assert r.status_code == 422, r.text
    assert error(r)["field"] == field and words in error(r)["message"], r.text
    assert Scripted.asked == 0


def test_calls_counted_per_point_against_max_judge_calls(service):
    rows = [row("x", POINTS[:3]), row("y", POINTS[:3])]
    scoring = service(max_judge_calls=5)
    r = post(scoring, "/v1/score", {"rubric": "checklist", "items": rows})
    assert r.status_code == 413, r.text
    assert error(r)["field"] == "items[1].checklist[2]"  # the sixth call
    assert "6 judge calls" in error(r)["message"] and "max_judge_calls" in error(r)["message"]
    assert Scripted.asked == 0
    # all of an item's points in one call: two calls per judge
    r = post(scoring, "/v1/score", {"rubric": "checklist-all", "items": rows})
    assert r.status_code == 200, r.text
    assert Scripted.asked == 2 * 2
    # five points: within the bound
    r = post(
        scoring, "/v1/score", {"rubric": "checklist", "items": [rows[0], row("y", POINTS[:2])]}
    )
    assert r.status_code == 200, r.text


def test_a_checklist_rubric_needs_each_items_checklist(service):
    r = post(service(), "/v1/score", {"rubric": "checklist", "items": [row("x"), row("y", None)]})
    assert r.status_code == 422, r.text
    assert error(r)["field"] == "items[1].checklist"
    assert Scripted.asked == 0


def test_openapi_documents_checklist_field(service):
    async def go() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=build_app(service()))
        async with httpx.AsyncClient(transport=transport, base_url="http://jurybox") as http:
            return (await http.get("/openapi.json")).json()

    schema = asyncio.run(go())
    field = schema["components"]["schemas"]["ScoreItem"]["properties"]["checklist"]
    assert "max_points" in field["description"] and "items[i].checklist[k]" in field["description"]
    (listed,) = [s for s in field["anyOf"] if s.get("type") == "array"]
    point = listed["items"]
    assert point["title"] == "ChecklistPoint"
    assert set(point["properties"]) == {"key", "criterion", "points", "tag", "tags"}
    assert point["required"] == ["criterion", "points"]


def test_client_chunks_a_checklist_rubrics_items_by_their_points(scripted):
    from jurybox.serving.service.client import Client, RemoteJury

    sent: list[list[dict[str, Any]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/jury":
            info = {"spec": spec().model_dump(mode="json"), "max_items": 8, "max_judge_calls": 6}
            return httpx.Response(200, json=info)
        if request.url.path == "/v1/score":
            items = json.loads(request.content)["items"]
            sent.append(items)
            return httpx.Response(200, json={"verdicts": [{"id": it["id"]} for it in items]})
        return httpx.Response(200, json={"name": "not the same rubric"})

    client = Client("http://service.test")
    client._http = httpx.Client(
        base_url="http://service.test", transport=httpx.MockTransport(handler)
    )
    jury = RemoteJury(client)
    sizes = [4, 2, 3, 3, 1, 4, 2]  # points per item: 6 calls per request at most
    items = [Item.model_validate(row(f"i{k}", POINTS[:n])) for k, n in enumerate(sizes)]
    jury.score_records(load_rubric("checklist"), items)
    assert [[len(it["checklist"]) for it in chunk] for chunk in sent] == [
        [4, 2],
        [3, 3],
        [1, 4],
        [2],
    ]
    # every field of a point travels (its tags too: the service hashes the item as given)
    tagged = Item.model_validate(row("t", [{**POINTS[0], "tags": ["axis:accuracy"]}]))
    sent.clear()
    jury.score_records(load_rubric("checklist"), [tagged])
    assert Item.model_validate(sent[0][0]) == tagged
    # all of an item's points in one call: items chunked by the service's max_items
    sent.clear()
    jury.score_records(load_rubric("checklist-all"), items)
    assert [len(chunk) for chunk in sent] == [6, 1]


def group(completions: list[str], points: Any = POINTS, **kw: Any) -> dict[str, Any]:
    return {"id": "g0", "question": QUESTION, "checklist": points, "completions": completions, **kw}


def test_group_route_with_checklist(service):
    scoring = service()
    body = {
        "rubric": "checklist",
        "design": {"design": "pointwise"},
        "groups": [
            group(["Blight; spray.", "No idea [bad]."]),
            group(["Blight."], POINTS[:2], id="g1"),
        ],
    }
    r = post(scoring, "/v1/groups", body)
    assert r.status_code == 200, r.text
    g0, g1 = r.json()["groups"]
    assert g0["rewards"] == [7 / 10, 0.0] and g1["rewards"] == [5 / 8]
    assert [g0["calls"], g1["calls"]] == [2 * 4, 1 * 2]  # per judge: a call per point
    assert Scripted.asked == 2 * (2 * 4 + 1 * 2)  # a call per point of each completion, per judge
    # the same completion on /v1/score: the same score
    r = post(
        scoring,
        "/v1/score",
        {"rubric": "checklist", "items": [row("x", response="Blight; spray.")]},
    )
    assert r.json()["verdicts"][0]["scores"]["score"] == g0["rewards"][0]


@pytest.mark.parametrize(
    "change, status, field",
    [
        ({"max_judge_calls": 9}, 413, "design"),  # 10 calls per judge
        ({"max_points": 3}, 413, "groups[0].checklist[3]"),
        ({"max_field_chars": 1000, "long": True}, 422, "groups[1].checklist[0]"),
        ({"bad_point": True}, 422, "groups[1].checklist[1]"),
        ({"no_checklist": True}, 422, "groups[1].checklist"),
        ({"design": "round_robin"}, 422, "rubric"),
    ],
)
def test_group_route_bounds_checklists_before_any_judge_runs(service, change, status, field):
    change = dict(change)
    second = POINTS[:2]
    if change.pop("long", False):
        second = [{"criterion": "x" * 1001, "points": 1}]
    if change.pop("bad_point", False):
        second = [POINTS[0], {"criterion": "y", "points": 0}]
    if change.pop("no_checklist", False):
        second = None
    design = change.pop("design", "pointwise")
    groups = [group(["Blight; spray.", "Hm."]), group(["Blight."], second, id="g1")]
    body = {"rubric": "checklist", "design": {"design": design}, "groups": groups}
    r = post(service(**change), "/v1/groups", json.loads(json.dumps(body)))
    assert r.status_code == status, r.text
    assert error(r)["field"] == field, r.text
    assert Scripted.asked == 0


def test_group_route_413_for_a_checklist_suggests_no_other_design(service):
    groups = [group(["Blight; spray.", "Hm."]), group(["Blight."], POINTS[:2], id="g1")]
    body = {"rubric": "checklist", "design": {"design": "pointwise"}, "groups": groups}
    r = post(service(max_judge_calls=9), "/v1/groups", body)
    assert r.status_code == 413, r.text
    message = error(r)["message"]
    assert "fewer groups" in message and "fewer points" in message, message
    # a checklist rubric takes only pointwise: no other design is suggested
    for design in ("regular", "swiss", "anchor", "listwise"):
        assert design not in message, message


def openrlhf(rows: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    return {
        "query": [r["question"] + r["response"] for r in rows],
        "prompts": [r["question"] for r in rows],
        "labels": labels,
    }


def test_openrlhf_label_carries_checklist(service):
    scoring = service()
    rows = [row("0"), row("1", POINTS[:2], response="No idea [bad].", reference="Blight.")]
    labels = [json.dumps(POINTS), json.dumps({"checklist": POINTS[:2], "reference": "Blight."})]
    r = post(scoring, "/v1/openrlhf/checklist?unscored=0", openrlhf(rows, labels))
    assert r.status_code == 200, r.text
    asked = Scripted.asked
    assert asked == 2 * (4 + 2)
    verdicts = post(scoring, "/v1/score", {"rubric": "checklist", "items": rows}).json()["verdicts"]
    assert Scripted.asked == 2 * asked  # (the same calls: the same items)
    assert r.json()["rewards"] == [v["scores"]["score"] for v in verdicts] == [7 / 10, 0.0]
    assert r.json()["extra_logs"]["jurybox/unscored"] == [0.0, 0.0]


@pytest.mark.parametrize(
    "label, field, words",
    [
        ("not json", "labels[1]", "not JSON"),
        (json.dumps({"points": POINTS}), "labels[1]", "an object with checklist"),
        (json.dumps({"checklist": POINTS, "ref": "x"}), "labels[1]", "'ref' is not a field"),
        (json.dumps([POINTS[0], {"criterion": "y"}]), "labels[1].checklist[1]", "points: missing"),
    ],
)
def test_openrlhf_label_that_is_no_checklist_is_422_naming_it(service, label, field, words):
    rows = [row("0"), row("1")]
    body = openrlhf(rows, [json.dumps(POINTS), label])
    r = post(service(), "/v1/openrlhf/checklist?unscored=0", body)
    assert r.status_code == 422, r.text
    assert error(r)["field"] == field and words in error(r)["message"], r.text
    assert Scripted.asked == 0


# -- the tiny jury's recorded answers: the service's answer equals `jurybox judge`'s file --------


def _recorded_items() -> list[Item]:
    path = Path(__file__).resolve().parents[2] / "data" / "record.py"
    spec_ = importlib.util.spec_from_file_location("record_checklists", path)
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module.checklist_items()


@pytest.mark.parametrize("rubric", ["checklist", "checklist-all"])
def test_service_answer_equals_judge_files_records(tmp_path, rubric):
    from service_helpers import assert_same_verdicts

    from jurybox.judges import load_jury_spec
    from jurybox.serving.runs.local import judge_file

    jury = write_replay_jury(tmp_path / "replay.yaml", recordings=(RECORDING, CHECKLISTS_RECORDING))
    items = _recorded_items()
    rows = [
        {
            "id": it.id,
            "question": it.question,
            "response": it.response,
            "reference": it.reference,
            "checklist": [p.model_dump(mode="json") for p in it.checklist or ()],
        }
        for it in items
    ]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "local.jsonl"
    local_jury = Jury.load(jury)
    judge_file(preds, load_rubric(rubric), local_jury, out)
    local = [json.loads(line) for line in out.read_text().splitlines()]
    assert local and all(r["points"] for r in local)
    judges = {
        j.name: LocalJudge(JudgeServer(j.model_dump(mode="json")))
        for j in load_jury_spec(str(jury)).judges
    }
    config = ServiceConfig(jury=str(jury)).resolve()
    scoring = ScoringService(config.model_dump(mode="json"), judges)
    try:
        r = post(scoring, "/v1/score", {"rubric": rubric, "items": rows})
    finally:
        scoring.workers.close()
    assert r.status_code == 200, r.text
    remote = r.json()["verdicts"]
    assert [v["id"] for v in remote] == [it.id for it in items]
    assert_same_verdicts(remote, local)  # same scores, points, votes, provenance and input


def test_openrlhf_canaries_on_a_checklist_fit_max_judge_calls(service):
    rows = [row("0"), row("1")]
    body = openrlhf(rows, [json.dumps(POINTS)] * 2)
    # 8 calls per judge for the samples; a canary of 4 points fits in 12, not in 11
    for limit, canaries in ((11, 0), (12, 1)):
        Scripted.asked = 0
        r = post(
            service(max_judge_calls=limit), "/v1/openrlhf/checklist?unscored=0&canaries=1", body
        )
        assert r.status_code == 200, r.text
        assert Scripted.asked == 2 * (8 + 4 * canaries)


def test_calibration_map_applied_by_judge_and_by_the_service(tmp_path):
    """`jurybox calibrate` on the replay jury's checklist verdicts and point labels, then
    `jurybox judge --calibration` and the service started with the map: both calibrate each
    point and rescore the item, and give the same records. The tiny judges call every point
    met; the humans say half of them are not, so the map moves every point and score down."""
    from service_helpers import assert_same_verdicts
    from typer.testing import CliRunner

    from jurybox.judges import load_jury_spec
    from jurybox.rubrics.checklist import points_score
    from jurybox.rubrics.points import read_points
    from jurybox.serving.cli import app

    def jurybox(*args: Any) -> None:
        result = CliRunner().invoke(app, [str(a) for a in args])
        assert result.exit_code == 0, result.output

    jury = write_replay_jury(tmp_path / "replay.yaml", recordings=(RECORDING, CHECKLISTS_RECORDING))
    rows = [
        {
            "id": it.id,
            "question": it.question,
            "response": it.response,
            "reference": it.reference,
            "checklist": [p.model_dump(mode="json") for p in it.checklist or ()],
        }
        for it in _recorded_items()
    ]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge = ("judge", preds, "--rubric", "checklist", "--jury", jury, "--out")
    jurybox(*judge, tmp_path / "raw.jsonl")
    raw = [json.loads(line) for line in (tmp_path / "raw.jsonl").read_text().splitlines()]
    assert all(r["scores"][k] == 1.0 for r in raw for k in r["points"])  # the judges' view
    labels = [
        {
            "id": r["id"],
            "rater": rater,
            **{k: "no" if n % 2 else "yes" for n, k in enumerate(r["points"])},
        }
        for r in raw
        for rater in ("ana", "ben")
    ]
    (tmp_path / "human.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    cmap = tmp_path / "map.yaml"
    jurybox("calibrate", tmp_path / "human.jsonl", tmp_path / "raw.jsonl", "-o", cmap)
    jurybox(*judge, tmp_path / "calibrated.jsonl", "--calibration", cmap)
    local = [json.loads(line) for line in (tmp_path / "calibrated.jsonl").read_text().splitlines()]
    for before, after in zip(raw, local):
        assert after["scores"] == before["scores"] and after["calibration"].startswith("map.yaml:")
        calibrated = after["calibrated"]
        assert set(calibrated) == {*after["points"], "score"}
        points = read_points(
            [{"criterion": p["text"], "points": p["points"]} for p in after["points"].values()]
        )
        assert all(calibrated[k] < 0.9 for k in after["points"])  # the humans' view: lower
        assert calibrated["score"] == pytest.approx(points_score(points, calibrated)[0])
        assert calibrated["score"] < before["scores"]["score"] - 0.1
    judges = {
        j.name: LocalJudge(JudgeServer(j.model_dump(mode="json")))
        for j in load_jury_spec(str(jury)).judges
    }
    config = ServiceConfig(jury=str(jury), calibration=[str(cmap)]).resolve()
    scoring = ScoringService(config.model_dump(mode="json"), judges)
    try:
        r = post(scoring, "/v1/score", {"rubric": "checklist", "items": rows})
    finally:
        scoring.workers.close()
    assert r.status_code == 200, r.text
    remote = r.json()["verdicts"]
    assert all(v["calibrated"] for v in remote)
    assert_same_verdicts(remote, local)  # the same calibrated values, under the same map
