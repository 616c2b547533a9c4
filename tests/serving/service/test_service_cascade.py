"""A cascaded jury behind the scoring service: the same verdicts, stage by stage, as the jury
in-process (the cascade lives in the jury: ``judges.cascade.Steps`` in both). The judges are the
tiny jury's recorded real answers (the replay jury): the service's cascade plumbing is the
subject, not the models."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml
from judging_helpers import split_threshold, stage_one_confidences, tiny_cascade
from service_helpers import assert_same_verdicts, running_service

from jurybox.judges import Jury
from jurybox.rubrics import load_rubric
from jurybox.serving.runs.local import judge_file
from jurybox.serving.service.config import ServiceConfig

pytestmark = pytest.mark.models
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_service_runs_a_cascaded_jury_as_the_library_does(
    replay_tiny, replay_jury, tmp_path, shared_ray
):
    rubric = load_rubric("mirage-mg")
    every = tmp_path / "every.jsonl"
    unfitted = tiny_cascade(base=replay_jury)
    judge_file(EXAMPLES / "mirage_mg.jsonl", rubric, Jury(unfitted, replay_tiny._backends), every)
    rows = [json.loads(line) for line in every.read_text().splitlines()]
    cascade = tiny_cascade(
        split_threshold(stage_one_confidences(rows, rubric, unfitted)), base=replay_jury
    )
    local = tmp_path / "local.jsonl"
    judge_file(EXAMPLES / "mirage_mg.jsonl", rubric, Jury(cascade, replay_tiny._backends), local)
    want = [json.loads(line) for line in local.read_text().splitlines()]
    assert {r["stage"]["stage"] for r in want} == {1, 2}

    jury_file = tmp_path / "tiny-cascade.yaml"
    jury_file.write_text(yaml.safe_dump(cascade.model_dump(mode="json")))
    items = [json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()]
    config = ServiceConfig(jury=str(jury_file), verdict_cache=str(tmp_path / "cache.sqlite"))
    with running_service(config) as url:
        r = httpx.post(f"{url}/v1/score", json={"rubric": "mirage-mg", "items": items}, timeout=600)
        asked = judge_requests(httpx.get(f"{url}/metrics").text)
        # The same items again: every one from the verdict cache, no judge asked.
        again = httpx.post(
            f"{url}/v1/score", json={"rubric": "mirage-mg", "items": items}, timeout=600
        )
        metrics = httpx.get(f"{url}/metrics").text
    assert r.status_code == 200, r.text
    assert_same_verdicts(r.json()["verdicts"], want)
    assert again.status_code == 200 and again.json()["verdicts"] == r.json()["verdicts"]
    assert sum(asked.values()) >= 2 and judge_requests(metrics) == asked
    assert 'jurybox_verdict_cache_total{result="hit"} 6.0' in metrics
    assert 'jurybox_verdict_cache_total{result="miss"} 6.0' in metrics


def judge_requests(metrics: str) -> dict[str, float]:
    """``jurybox_judge_requests_total`` by judge, from /metrics."""
    return {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("jurybox_judge_requests_total{")
    }
