"""`plan_labels`: ``jurybox labels plan``, called from Python."""

from __future__ import annotations

import json

import pytest
from test_calibrate_run import _files
from typer.testing import CliRunner

from jurybox.rubrics.errors import InputError
from jurybox.serving.cli import app
from jurybox.serving.runs.label_plan import plan_labels


def test_plan_labels_is_what_the_command_prints(tmp_path):
    human, judged, rubric = _files(tmp_path)
    found = plan_labels(human, judged, 0.05, rubric=str(rubric))
    assert found.items == 30 and found.goal == "agreement"
    assert found.criteria["accuracy"]["labelled"] > 0
    got = CliRunner().invoke(
        app,
        ["labels", "plan", str(human), str(judged), "--rubric", str(rubric)]
        + ["--target-width", "0.05", "--json"],
    )
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout) == json.loads(json.dumps(found.to_dict()))


def test_plan_labels_for_the_mean_and_its_refusals(tmp_path):
    human, judged, rubric = _files(tmp_path)
    mean = plan_labels(
        tmp_path / "none.jsonl", judged, 0.2, goal="benchmark-mean", rubric=str(rubric)
    )
    assert "designs" in mean.criteria["accuracy"]  # before any label, the designs compared
    with pytest.raises(InputError, match="between 0 and 0.5"):
        plan_labels(human, judged, 0.7, rubric=str(rubric))
    with pytest.raises(InputError, match="goal review has nothing to plan"):
        plan_labels(human, judged, 0.05, goal="review", rubric=str(rubric))
