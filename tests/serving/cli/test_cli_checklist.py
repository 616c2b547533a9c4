"""`jurybox judge` with a checklist rubric (#63): a point-by-point verdict file, resumed; the
estimate counting a call per point. The replay jury answers with the tiny jury's recorded real
answers (tests/data/record.py's checklists); one test runs the real tiny models (``models``).
The Ray engine's checklists: tests/serving/runs/test_ray_engine.py."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from judging_helpers import CHECKLISTS_RECORDING, RECORDING, write_replay_jury
from typer.testing import CliRunner

from jurybox.rubrics import input_hash, load_rubric
from jurybox.rubrics.checklist import checklist_calls
from jurybox.serving.cli import app

DATA = Path(__file__).resolve().parents[2] / "data"
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def checklist_items():
    """tests/data/record.py's items with their checklists (the recording's)."""
    spec = importlib.util.spec_from_file_location("record_checklists", DATA / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.checklist_items()


@pytest.fixture(scope="module")
def items():
    return checklist_items()


@pytest.fixture
def predictions(tmp_path, items):
    path = tmp_path / "checklists.jsonl"
    rows = [
        {
            "id": it.id,
            "question": it.question,
            "response": it.response,
            "reference": it.reference,
            # HealthBench's own field names, read as they are
            "checklist": [
                {"criterion": p.text, "points": p.points, **({"tag": p.tag} if p.tag else {})}
                for p in it.checklist
            ],
        }
        for it in items
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def checklist_jury(tmp_path_factory):
    return write_replay_jury(
        tmp_path_factory.mktemp("ck") / "replay.yaml",
        recordings=(RECORDING, CHECKLISTS_RECORDING),
    )


def records(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_judge_file_writes_point_by_point_and_resumes(tmp_path, predictions, items, checklist_jury):
    out = tmp_path / "o.jsonl"
    common = ("--rubric", "checklist", "--jury", checklist_jury, "--out", out, "--no-cache")
    first = invoke("judge", predictions, *common, "--limit", 2, "-q")
    assert first.exit_code == 0, first.output
    assert [r["id"] for r in records(out)] == ["mg-001", "mg-002"]
    second = invoke("judge", predictions, *common)
    assert second.exit_code == 0, second.output
    assert "2 judged now, 2 already in" in second.output
    recs = {r["id"]: r for r in records(out)}
    assert sorted(recs) == sorted(it.id for it in items)
    judges = {"smollm2-135m", "gemma3-270m"}
    for it in items:
        r = recs[it.id]
        keys = [p.key for p in it.checklist]
        assert r["rubric"] == "checklist" and r["input"] == input_hash(it)
        assert list(r["points"]) == keys
        assert [r["points"][k]["text"] for k in keys] == [p.text for p in it.checklist]
        assert set(r["scores"]) == {*keys, "score"} and set(r["disagreement"]) == set(keys)
        assert {(v["judge"], v["criterion"]) for v in r["votes"]} == {
            (j, k) for j in judges for k in keys
        }
        # the recorded real answers are of the yes/no schema: every vote is scored
        assert all(v["score"] in (0.0, 1.0) for v in r["votes"]), r["votes"]
        met = {k: r["scores"][k] for k in keys}
        assert all(r["points"][k]["met"] == met[k] for k in keys)
        possible = sum(p.points for p in it.checklist if p.points > 0)
        earned = sum(p.points * met[p.key] for p in it.checklist)
        assert r["scores"]["score"] == pytest.approx(min(1, max(0, earned / possible)))
        assert r["status"] == "scored"
    # the summary is of the items' score
    assert "score" in second.output


def test_estimate_counts_a_call_per_point(predictions, items, checklist_jury):
    rubric = load_rubric("checklist")
    r = invoke(
        "judge",
        predictions,
        *("--rubric", "checklist", "--jury", checklist_jury, "--estimate", "--no-cache"),
    )
    assert r.exit_code == 0, r.output
    calls = checklist_calls(rubric, items)
    assert calls == 15
    for judge in ("smollm2-135m", "gemma3-270m"):  # each judge's row of the table: its calls
        assert re.search(rf"{judge}\W+-\W+{calls}\W", r.output), r.output
    assert "4 call(s) per item and judge (rubric checklist: one call per point" in r.output
    every = invoke(
        "judge",
        predictions,
        *("--rubric", "checklist-all", "--jury", checklist_jury, "--estimate", "--no-cache"),
    )
    assert every.exit_code == 0 and "1 call(s) per item and judge" in every.output


@pytest.mark.models
def test_judge_checklists_with_the_tiny_jury(tmp_path, predictions):
    """The real tiny jury on one item's checklist, point by point: a verdict file whose record
    has each point's decision and each judge's vote on it (the models' output may be poor: an
    unscored point must then say why)."""
    one = tmp_path / "one.jsonl"
    one.write_text(predictions.read_text().splitlines(True)[0])
    out = tmp_path / "o.jsonl"
    run = subprocess.run(
        [sys.executable, "-c", "from jurybox.serving.cli import main; main()"]
        + ["judge", str(one), "--rubric", "checklist", "--jury", "tiny", "--out", str(out)]
        + ["--no-cache"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (r,) = records(out)
    keys = list(r["points"])
    assert keys == ["p1", "p2", "p3"] and r["rubric"] == "checklist"
    assert {(v["judge"], v["criterion"]) for v in r["votes"]} == {
        (j, k) for j in ("smollm2-135m", "gemma3-270m") for k in keys
    }
    for k in keys:
        point = r["points"][k]
        assert (point["met"] is None) == bool(point["reason"])
    assert (r["scores"]["score"] is None) == (r["status"] == "unscored")
