"""The judged packs end to end. The MIRAGE MMST pack from the command line runs on the real
tiny jury (the packs' real path); the other packs run on the tiny jury's recorded real answers
to exactly their prompts (``bench_jury``: tests/data/tiny-bench-recorded.json.gz, recorded from
bench_cases.py by tests/data/record.py), which fails a test when one of its prompts was not
recorded. The tiny models are poor judges: these tests check that every path runs and every
number is either on its scale or reported as undefined with a reason, not what the numbers are."""

import json

import pytest
import typer
from bench_cases import microvqa, mir, mirage_mmmt, mrmr, subset
from typer.testing import CliRunner

from jurybox.serving.cli import bench as cli_bench
from jurybox.serving.runs import bench as runs_bench


@pytest.fixture(scope="module")
def bench_jury(tmp_path_factory):
    """The tiny jury's judges replaying their recorded answers to the packs' prompts; after
    each test, every judge must have found every prompt it was asked in the recording (else
    rerun ``python tests/data/record.py bench``)."""
    from judging_helpers import BENCH_RECORDING, write_replay_jury

    from jurybox.judges import Jury

    path = write_replay_jury(
        tmp_path_factory.mktemp("bench") / "bench-replay.yaml", recordings=(BENCH_RECORDING,)
    )
    jury = Jury.load(path)
    jury.load_backends()
    yield jury
    jury.close()


@pytest.fixture
def replayed(bench_jury):
    backends = [bench_jury.backend(j) for j in bench_jury.spec.judges]
    before = [(b.replayed, b.unrecorded) for b in backends]
    yield bench_jury
    for backend, (replayed, unrecorded) in zip(backends, before):
        assert backend.unrecorded == unrecorded, (
            f"{backend.name}: {backend.unrecorded - unrecorded} prompts not in "
            "tests/data/tiny-bench-recorded.json.gz: rerun python tests/data/record.py bench"
        )
        assert backend.replayed > replayed, f"{backend.name} was asked nothing"


def keep(judge):
    return judge


def in_range_or_explained(data, key, low, high):
    value = data[key]
    if value is None:
        assert data["undefined"][key], key
    else:
        assert low <= value <= high, (key, value)


@pytest.mark.models
def test_mirage_mmst_from_the_command_line_judges_and_resumes(
    examples, tmp_path, tiny_jury, monkeypatch
):
    # one identification item, one management item
    data, preds = subset(
        examples, tmp_path, "mirage_mmst.json", "mirage_mmst.predictions.jsonl", [0, 3]
    )
    monkeypatch.setattr(runs_bench, "make_jury", lambda spec: tiny_jury)
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(cli_bench.bench)
    app.command("other")(lambda: None)
    out = tmp_path / "out"
    args = [
        "bench",
        "mirage-mmst",
        "--data",
        str(data),
        "--predictions",
        str(preds),
        "--jury",
        "tiny",
        "--out",
        str(out),
        "--json",
        "--quiet",
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    in_range_or_explained(result, "id_accuracy", 0, 1)
    in_range_or_explained(result, "reasoning", 0, 4)
    in_range_or_explained(result, "weighted_sum", 0, 1)
    assert set(result["judges"]) <= {"smollm2-135m", "gemma3-270m"}
    for task in ("mirage-id", "mirage-mg"):
        lines = (out / f"{task}.judged.jsonl").read_text().splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["jury"] == "tiny"
    again = CliRunner().invoke(app, args)  # everything is judged: resumes without judging
    assert (
        again.exit_code == 0 and json.loads(again.stdout)["weighted_sum"] == result["weighted_sum"]
    )


@pytest.mark.models
def test_mirage_mmmt(examples, tmp_path, replayed):
    result = mirage_mmmt(examples, tmp_path, replayed, keep).to_dict()
    assert result["decisions_from_predictions"] == 2  # both state their decision plainly
    assert result["decision_accuracy"] == 1.0
    for key in ("known_accuracy", "missing_coverage", "utterance_goal_relevance"):
        in_range_or_explained(result, key, 0, 4)
    in_range_or_explained(result, "perfect", 0, 1)
    assert (tmp_path / "out").is_dir()  # judged through the resumable runner


@pytest.mark.models
def test_microvqa_judge_fallback(examples, tmp_path, replayed):
    result = microvqa(examples, tmp_path, replayed, keep).to_dict()
    assert result["accuracy"] == pytest.approx(4 / 6)  # the rules' numbers do not move
    assert result["accuracy_with_fallback"] in (pytest.approx(4 / 6), pytest.approx(5 / 6))
    assert result["unparseable_after_fallback"] in (0.0, pytest.approx(1 / 6))


@pytest.mark.models
def test_mir_steps_and_fallback(examples, tmp_path, replayed):
    # one parsed answer, one unparseable
    result = mir(examples, tmp_path, replayed, keep).to_dict()
    assert result["accuracy"] == 0.5
    for key in ("step_summary", "step_img2img", "step_conclusion"):
        in_range_or_explained(result, key, 0, 4)
    in_range_or_explained(result, "step_mean", 0, 4)


@pytest.mark.models
def test_mrmr_relevance_grading(examples, tmp_path, replayed):
    report = mrmr(examples, tmp_path, replayed, keep)
    result = report.to_dict()
    assert result["graded_pairs"] == 2  # knowledge-1's two qrels documents (one is the top-1)
    assert len(report.artifacts["jury_qrels"]) == 2
    assert "grading_agreement" in result
    in_range_or_explained(result, "grading_exact", 0, 1)
