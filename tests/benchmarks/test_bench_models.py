"""The judged packs end to end with the real tiny jury, on two or three items each. The tiny
models are poor judges: these tests check that every path runs and every number is either on
its scale or reported as undefined with a reason, not what the numbers are."""

import json

import pytest
import typer
from typer.testing import CliRunner

from jurybox.benchmarks import jury_judge, run_benchmark
from jurybox.serving.cli import bench as cli_bench

pytestmark = pytest.mark.models


def subset(examples, tmp_path, data_name, preds_name, keep):
    """The data items at positions ``keep`` and their predictions, as files."""
    items = json.loads((examples / data_name).read_text())
    chosen = [items[i] for i in keep]
    ids = {str(it.get("id", it.get("key_question"))) for it in chosen}
    data = tmp_path / data_name
    data.write_text(json.dumps(chosen))
    lines = (examples / preds_name).read_text().splitlines()
    preds = tmp_path / preds_name
    preds.write_text("".join(line + "\n" for line in lines if json.loads(line)["id"] in ids))
    return data, preds


def in_range_or_explained(data, key, low, high):
    value = data[key]
    if value is None:
        assert data["undefined"][key], key
    else:
        assert low <= value <= high, (key, value)


def test_mirage_mmst_from_the_command_line_judges_and_resumes(examples, tmp_path, tiny_jury,
                                                              monkeypatch):
    # one identification item, one management item
    data, preds = subset(examples, tmp_path, "mirage_mmst.json", "mirage_mmst.predictions.jsonl",
                         [0, 3])
    monkeypatch.setattr(cli_bench, "make_jury", lambda spec: tiny_jury)
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(cli_bench.bench)
    app.command("other")(lambda: None)
    out = tmp_path / "out"
    args = ["bench", "mirage-mmst", "--data", str(data), "--predictions", str(preds),
            "--jury", "tiny", "--out",
            str(out), "--json", "--quiet"]
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
    assert again.exit_code == 0 and json.loads(again.stdout)["weighted_sum"] == result["weighted_sum"]


def test_mirage_mmmt(examples, tmp_path, tiny_jury):
    data, preds = subset(examples, tmp_path, "mirage_mmmt_decomp.json",
                         "mirage_mmmt.predictions.jsonl", [0, 1])
    judge = cli_bench.ResumableJudge(tiny_jury, tmp_path / "out")
    result = run_benchmark("mirage-mmmt", data, preds, judge=judge).to_dict()
    assert result["decisions_from_predictions"] == 2  # both state their decision plainly
    assert result["decision_accuracy"] == 1.0
    for key in ("known_accuracy", "missing_coverage", "utterance_goal_relevance"):
        in_range_or_explained(result, key, 0, 4)
    in_range_or_explained(result, "perfect", 0, 1)


def test_microvqa_judge_fallback(examples, tiny_jury):
    result = run_benchmark("microvqa", examples / "microvqa.json",
                           examples / "microvqa.predictions.jsonl",
                           jury=tiny_jury).to_dict()
    assert result["accuracy"] == pytest.approx(4 / 6)  # the rules' numbers do not move
    assert result["accuracy_with_fallback"] in (pytest.approx(4 / 6), pytest.approx(5 / 6))
    assert result["unparseable_after_fallback"] in (0.0, pytest.approx(1 / 6))


def test_mir_steps_and_fallback(examples, tmp_path, tiny_jury):
    # one parsed answer, one unparseable
    data, preds = subset(examples, tmp_path, "mir.json", "mir.predictions.jsonl", [0, 4])
    report = run_benchmark("mir", data, preds, judge=jury_judge(tiny_jury))
    result = report.to_dict()
    assert result["accuracy"] == 0.5
    for key in ("step_summary", "step_img2img", "step_conclusion"):
        in_range_or_explained(result, key, 0, 4)
    in_range_or_explained(result, "step_mean", 0, 4)


def test_mrmr_relevance_grading(examples, tiny_jury):
    report = run_benchmark("mrmr", examples / "mrmr.qrels.jsonl", examples / "mrmr.run.json",
                           queries=examples / "mrmr.queries.jsonl",
                           corpus=examples / "mrmr.corpus.jsonl", jury=tiny_jury, limit=1,
                           depth=1)
    result = report.to_dict()
    assert result["graded_pairs"] == 2  # knowledge-1's two qrels documents (one is the top-1)
    assert len(report.artifacts["jury_qrels"]) == 2
    assert "grading_agreement" in result
    in_range_or_explained(result, "grading_exact", 0, 1)
