"""A cascade of the two tiny judges (their recorded real answers: the replay jury, whose judges
are the tiny jury's with its real tokenizers, no model's time), end to end: judge labelled
items with every
judge (stages without thresholds), fit (here: refused, six items cannot certify 0.9), run the
cascaded jury, and check each item left at the stage its confidence says, with the verdict that
stage's judges give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judging_helpers import split_threshold, stage_one_confidences, tiny_cascade
from typer.testing import CliRunner

from jurybox.judges import Jury
from jurybox.judges.judging import decide
from jurybox.rubrics import VerdictRecord, load_rubric
from jurybox.serving.cli import app
from jurybox.serving.runs.local import judge_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_cascade_of_the_two_tiny_judges(replay_tiny, replay_jury, tmp_path):
    rubric = load_rubric("mirage-mg")
    backends = replay_tiny._backends  # the loaded judges, shared
    unfitted = tiny_cascade(base=replay_jury)
    every = tmp_path / "every.jsonl"
    report = judge_file(EXAMPLES / "mirage_mg.jsonl", rubric, Jury(unfitted, backends), every)
    assert report.judged == 6
    full = {r["id"]: r for r in records(every)}
    assert all(
        {v["judge"] for v in r["votes"]} == {"smollm2-135m", "gemma3-270m"} and "stage" not in r
        for r in full.values()
    )

    # The fit's real path: six labelled items can never certify 0.9 at risk 0.1.
    result = CliRunner().invoke(
        app,
        [
            "calibrate",
            str(EXAMPLES / "mirage_mg.human.jsonl"),
            str(every),
            "--cascade",
            "--jury",
            "tiny",
            "--target-agreement",
            "0.9",
            "-o",
            str(tmp_path / "c.yaml"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "tiny has no stages" in result.output  # the shipped tiny jury has none
    jury_file = tmp_path / "tiny-cascade.yaml"
    import yaml

    jury_file.write_text(yaml.safe_dump(unfitted.model_dump(mode="json")))
    result = CliRunner().invoke(
        app,
        [
            "calibrate",
            str(EXAMPLES / "mirage_mg.human.jsonl"),
            str(every),
            "--cascade",
            "--jury",
            str(jury_file),
            "--target-agreement",
            "0.9",
            "-o",
            str(tmp_path / "c.yaml"),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "cannot support agreement 0.9" in result.output

    confidences = stage_one_confidences(full.values(), rubric, unfitted)
    threshold = split_threshold(confidences)
    cascade = tiny_cascade(threshold, base=replay_jury)
    out = tmp_path / "cascade.jsonl"
    report = judge_file(EXAMPLES / "mirage_mg.jsonl", rubric, Jury(cascade, backends), out)
    got = {r["id"]: r for r in records(out)}
    early = {i for i, c in confidences.items() if c >= threshold}
    assert early and len(early) < 6  # both stages decide something
    assert report.summary.stages == {1: len(early), 2: 6 - len(early)}
    stage_one = cascade.stage_jury(0)
    for item, record in got.items():
        before = VerdictRecord.from_record(full[item])
        if item in early:
            assert record["stage"]["stage"] == 1
            assert record["stage"]["confidence"] == pytest.approx(confidences[item])
            assert {v["judge"] for v in record["votes"]} == {"smollm2-135m"}
            alone = decide(
                rubric,
                stage_one,
                before.provenance,
                item,
                [v for v in before.votes if v.judge == "smollm2-135m"],
            )
            assert record["scores"] == pytest.approx(alone.scores)
        else:
            assert record["stage"]["stage"] == 2
            assert {v["judge"] for v in record["votes"]} == {"smollm2-135m", "gemma3-270m"}
            assert record["scores"] == pytest.approx(before.scores)
