"""`agreement_with_humans` and `benchmark_means`: ``jurybox agree``, called from Python."""

from __future__ import annotations

import json

import pytest
from test_calibrate_run import _files
from typer.testing import CliRunner

from jurybox.calibration.estimates.active import MeanEstimate
from jurybox.rubrics.errors import InputError
from jurybox.serving.cli import app
from jurybox.serving.runs.agree import agreement_with_humans, benchmark_means


def test_agreement_with_humans_is_what_the_command_prints(tmp_path):
    human, judged, rubric = _files(tmp_path)
    found = agreement_with_humans(
        human, judged, rubric=str(rubric), criteria=["accuracy"], resamples=50
    )
    assert list(found.report.criteria) == ["accuracy"]
    assert found.rubric is not None and found.rubric.name == "synthetic"
    assert found.length_control is None and "length_control" not in found.to_dict()
    got = CliRunner().invoke(
        app,
        ["agree", str(human), str(judged), "--rubric", str(rubric), "-c", "accuracy"]
        + ["--resamples", "50", "--json"],
    )
    assert got.exit_code == 0, got.output
    printed = json.loads(got.stdout)
    assert printed["rubric"] == "synthetic" and printed["warnings"] == found.notes
    assert printed["criteria"].keys() == found.to_dict()["criteria"].keys()


def test_few_labelled_items_are_a_note(tmp_path):
    human, judged, rubric = _files(tmp_path)
    lines = human.read_text().splitlines()
    ids = sorted({json.loads(line)["id"] for line in lines})[:4]
    human.write_text("".join(x + "\n" for x in lines if json.loads(x)["id"] in ids))
    found = agreement_with_humans(human, judged, rubric=str(rubric), resamples=20)
    assert any("only 4 labelled items joined; the CIs are wide" in n for n in found.notes)


def test_length_control_needs_a_rubric_jurybox_knows(tmp_path):
    human, judged, _ = _files(tmp_path)
    with pytest.raises(InputError, match="give --rubric"):
        agreement_with_humans(human, judged, resamples=20, length_control=judged)


def test_benchmark_means_per_criterion(tmp_path):
    human, judged, rubric = _files(tmp_path)
    found = benchmark_means(human, judged, rubric=str(rubric), criteria=["accuracy"])
    assert found.design == "uniform" and found.pool == 30 and found.confidence == 0.95
    (estimate,) = found.estimates.values()
    assert isinstance(estimate, MeanEstimate) and estimate.criterion == "accuracy"
    got = CliRunner().invoke(
        app,
        ["agree", str(human), str(judged), "--rubric", str(rubric), "-c", "accuracy"]
        + ["--ppi", "--json"],
    )
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout)["criteria"] == json.loads(json.dumps(found.to_dict()))["criteria"]
