"""`fit_map`: ``jurybox calibrate``'s map, fitted from Python."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jurybox.calibration import CalibrationMap, simulate_judging
from jurybox.rubrics.errors import InputError
from jurybox.serving.runs.calibrate import (
    fit_cascade_jury,
    fit_cascade_jury_by_group,
    fit_conformal_map,
    fit_map,
)

RUBRIC = """\
description: synthetic rubric matching jurybox.calibration.simulate_judging
inputs: [question, response]
template: "{{ question }} {{ response }} {{ output_format }}"
criteria:
  - name: accuracy
    description: how accurate
    scale: {min: 0, max: 4}
  - name: supported
    description: is it supported
    scale:
      labels: {"yes": 1, "no": 0}
"""


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    records, humans = simulate_judging(30, seed=3)
    paths = []
    for name, rows in (("judged.jsonl", records), ("human.jsonl", humans)):
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        paths.append(path)
    rubric = tmp_path / "synthetic.yaml"
    rubric.write_text(RUBRIC)
    return paths[1], paths[0], rubric


def test_fit_map_fits_what_the_command_saves(tmp_path):
    human, judged, rubric = _files(tmp_path)
    fitted = fit_map(human, judged, rubric=str(rubric), folds=3, criteria=["accuracy"])
    assert fitted.map.criteria == ["accuracy"] and fitted.map.provenance_ == "prov-test"
    assert fitted.rubric is not None and fitted.rubric.name == "synthetic"
    assert fitted.map.fitted_on_["judge_output"] == str(judged)
    assert len(fitted.aggregations) == 1  # three judges: the aggregations are compared
    out = tmp_path / "map.yaml"
    fitted.map.save(out)
    assert CalibrationMap.load(out).criteria == ["accuracy"]
    assert fitted.to_dict(out)["map"] == str(out)
    assert fitted.advice(out).startswith(f"wrote {out} (provenance prov-test)")


def test_fit_map_refuses_labels_it_cannot_join(tmp_path):
    human, judged, rubric = _files(tmp_path)
    human.write_text('{"id": "nobody", "accuracy": 2}\n')
    with pytest.raises(InputError):
        fit_map(human, judged, rubric=str(rubric))


# The command's own test files make the cascade's labels and verdicts.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_cli_calibration import cascade_files, grouped_cascade_files  # noqa: E402, F401


def test_fit_cascade_jury_fits_the_threshold_and_writes_the_jury(cascade_files, tmp_path):  # noqa: F811
    from jurybox.judges import load_jury_spec

    f = cascade_files
    fitted = fit_cascade_jury(
        f["human"], f["judged"], jury=str(f["jury"]), target_agreement=0.8, rubric=str(f["rubric"])
    )
    assert fitted.fitted is not None and fitted.groups == []
    assert "certified" in fitted.describe()
    out = tmp_path / "fitted.yaml"
    fitted.save(out)
    assert load_jury_spec(out).cascaded and fitted.to_dict(out)["out"] == str(out)


def test_fit_cascade_jury_by_group_fits_each_group_alone(grouped_cascade_files, tmp_path):  # noqa: F811
    f = grouped_cascade_files
    fitted = fit_cascade_jury_by_group(
        f["human"],
        f["judged"],
        jury=str(f["jury"]),
        column="task",
        target_agreement=0.75,
        rubric=str(f["rubric"]),
    )
    assert not fitted.refused and fitted.fits["trap"][0] is None
    written = fitted.save(tmp_path / "fitted.yaml")
    assert written == [str(tmp_path / "fitted.plain.yaml")]
    assert "risk 0.1 / 2 = 0.05" in fitted.texts()[0]


def test_fit_conformal_map_gives_intervals_a_judge_can_apply(tmp_path):
    human, judged, rubric = _files(tmp_path)
    fitted = fit_conformal_map(human, judged, alpha=0.2, rubric=str(rubric), folds=3)
    assert set(fitted.map.report) == {"accuracy", "supported"}
    assert fitted.rubric.name == "synthetic"
    fitted.map.save(tmp_path / "conformal.json")
