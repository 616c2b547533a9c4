"""The scoring service with images (#55), in-process: the ingress's app over a ScoringService
served through ASGI, the judges in this process behind stand-ins for their Serve handles (the
vision replay jury: a judge that sees images beside a text-only one). An image sent inline gets
the verdict a local run gives for its file; a path, a malformed or an oversized image is
refused with the field at fault before any judge runs."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
from service_helpers import LocalJudge
from vision_helpers import LEAF, ROWS, SPOTS, items, write_vision_replay_jury

from jurybox.judges import Jury, load_jury_spec
from jurybox.rubrics import load_rubric
from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.deployments import JudgeServer
from jurybox.serving.service.ingress import build_app
from jurybox.serving.service.scoring import ScoringService


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    jury = write_vision_replay_jury(tmp_path_factory.mktemp("vision-service") / "jury.yaml")
    limits = Limits(max_image_bytes=1200, max_image_pixels=7000)  # the leaf fits, not the spots
    plan = ServiceConfig(jury=str(jury), limits=limits).resolve()
    handles = {
        j.name: LocalJudge(JudgeServer(j.model_dump(mode="json")))
        for j in load_jury_spec(str(jury)).judges
    }
    scoring = ScoringService(plan.model_dump(mode="json"), handles)
    yield jury, scoring
    scoring.workers.close()


def post(scoring: ScoringService, body: dict[str, Any]) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=build_app(scoring))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://jurybox", timeout=60
        ) as http:
            return await http.post("/v1/score", json=body)

    return asyncio.run(go())


def inline(path: Any, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}"


def test_an_inline_image_gets_the_verdict_of_its_file(service):
    jury, scoring = service
    row = {k: v for k, v in ROWS[0].items() if k != "images"}
    got = post(scoring, {"rubric": "mirage-id", "items": [{**row, "images": [inline(LEAF)]}]})
    assert got.status_code == 200, got.text
    (served,) = got.json()["verdicts"]
    with Jury.load(jury) as local:
        (here,) = local.score(load_rubric("mirage-id"), items(ROWS[:1]))
    assert served["scores"] == here.scores
    seen = {v["judge"]: v.get("images") for v in served["votes"]}
    assert seen == {
        "tiny-idefics3": next(v.images for v in here.votes if v.judge == "tiny-idefics3"),
        "smollm2-135m": None,
    }
    bare = base64.b64encode(LEAF.read_bytes()).decode()  # base64 without the data: prefix
    again = post(scoring, {"rubric": "mirage-id", "items": [{**row, "images": [bare]}]})
    assert again.status_code == 200 and again.json()["verdicts"][0]["scores"] == here.scores


@pytest.mark.parametrize(
    "image,status,says",
    [
        (str(LEAF), 422, "only inline images"),  # a path: no file is read on a client's word
        ("data:image/png;base64,bm90IGFuIGltYWdl", 422, "not an image"),
        ("data:image/png;base64,%%%", 422, "not valid base64"),
        ("SPOTS", 413, "more than the limit of 1,200"),  # 1,339 bytes
    ],
)
def test_a_bad_image_is_refused_naming_the_field(service, image, status, says):
    _, scoring = service
    image = inline(SPOTS, "image/jpeg") if image == "SPOTS" else image
    row = {k: v for k, v in ROWS[0].items() if k != "images"}
    got = post(
        scoring, {"rubric": "mirage-id", "items": [{**row, "id": "ok"}, {**row, "images": [image]}]}
    )
    assert got.status_code == status, got.text
    error = got.json()["error"]
    assert error["field"] == "items[1].images[0]" and says in error["message"], error
    assert json.dumps(error).count("base64,") <= 1  # an image is named, never echoed whole


def test_judge_url_sends_the_items_image_files_inline(service, tmp_path):
    """``jurybox judge --url``'s jury (a RemoteJury) reads the items' image files on the
    client's side and sends them inline: the service, which reads no file, gives the verdict a
    local run gives; the record's ``input`` is the item as read here (so a rerun resumes)."""
    from starlette.testclient import TestClient

    from jurybox.rubrics import input_hash
    from jurybox.serving.runs.plan import image_policy
    from jurybox.serving.service.client import Client, RemoteJury

    jury, scoring = service
    client = Client("http://jurybox")
    client._http = TestClient(build_app(scoring), base_url="http://jurybox")
    rows = [{**ROWS[0], "images": [LEAF.name]}]  # a path relative to the predictions' folder
    remote = RemoteJury(client, image_policy(LEAF.parent / "predictions.jsonl"))
    item = items(rows)[0]
    (record,) = remote.score_records(load_rubric("mirage-id"), [item])
    with Jury.load(jury) as local:
        (here,) = local.score(load_rubric("mirage-id"), items(ROWS[:1]))
    assert record["scores"] == here.scores and record["input"] == input_hash(item)
    # A file that is not there is refused here, naming the item and the image.
    gone = item.model_copy(update={"images": ["missing.png"]})
    with pytest.raises(Exception, match=r"item 'v1': images\[0\] missing.png"):
        remote.score_records(load_rubric("mirage-id"), [gone])
