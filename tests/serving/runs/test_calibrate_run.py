"""`fit_map`: ``jurybox calibrate``'s map, fitted from Python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jurybox.calibration import CalibrationMap, simulate_judging
from jurybox.rubrics.errors import InputError
from jurybox.serving.runs.calibrate import fit_map

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
