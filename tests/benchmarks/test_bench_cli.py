"""``jurybox bench``: options, output forms, exit codes, and judging through the resumable bulk
runner (with a jury whose backends answer by rule, so no model runs here)."""

import json

import pytest
import typer
from bench_helpers import RuleBackend, bottom_of, rule_jury, top_of
from typer.testing import CliRunner

from jurybox.benchmarks import PACKS
from jurybox.serving.cli.bench import bench
from jurybox.serving.runs import bench as runs_bench

# Registered as serving/cli.py registers it: app.command()(bench), beside other commands.
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
app.command()(bench)


@app.command()
def other() -> None:  # a second command, so `bench` is a subcommand as in the real CLI
    pass


runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, ["bench", *[str(a) for a in args]])


def test_help_lists_the_packs_and_is_readable_at_80_columns():
    r = runner.invoke(app, ["bench", "--help"], terminal_width=80)
    assert r.exit_code == 0
    for name in PACKS:
        assert name in r.output
    for option in ("--data", "--predictions", "--jury", "--out", "--json", "--queries"):
        assert option in r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80


def test_json_has_one_key_per_metric_with_fractions(examples):
    r = invoke(
        "microvqa",
        "--data",
        examples / "microvqa.json",
        "--predictions",
        examples / "microvqa.predictions.jsonl",
        "--json",
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["benchmark"] == "microvqa"
    assert data["accuracy"] == pytest.approx(4 / 6)
    assert set(data["accuracy_by_task"]) == {"1", "2", "3"}
    assert 0 <= data["unparseable"] <= 1


def test_table_by_default_and_out_keeps_table_and_items(examples, tmp_path):
    out = tmp_path / "run"
    r = invoke(
        "mir",
        "--data",
        examples / "mir.json",
        "--predictions",
        examples / "mir.predictions.jsonl",
        "--out",
        out,
    )
    assert r.exit_code == 0, r.output
    assert "| accuracy (%) | 50.0" in r.stdout
    assert {p.name for p in out.iterdir()} == {"report.md", "report.json", "items.jsonl"}
    assert json.loads((out / "report.json").read_text())["accuracy"] == 0.5
    assert len((out / "items.jsonl").read_text().splitlines()) == 6


def test_mrmr_with_a_query_file(examples):
    r = invoke(
        "mrmr",
        "--data",
        examples / "mrmr.qrels.jsonl",
        "--predictions",
        examples / "mrmr.run.json",
        "--queries",
        examples / "mrmr.queries.jsonl",
        "--json",
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["missing_queries"] == ["knowledge-2"] and "ndcg@10_by_category" in data


@pytest.mark.parametrize(
    "args,message",
    [
        (["nope"], "unknown benchmark 'nope'"),
        (["microvqa", "--queries", "q.jsonl"], "--queries does not apply to microvqa"),
        (["microvqa", "--subset", "contextual"], "--subset does not apply to microvqa"),
    ],
)
def test_wrong_names_and_options_exit_2(examples, args, message):
    r = invoke(
        *args,
        "--data",
        examples / "microvqa.json",
        "--predictions",
        examples / "microvqa.predictions.jsonl",
    )
    assert r.exit_code == 2 and message in r.output


def test_bad_input_exits_2_naming_file_row_and_field(examples, tmp_path):
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "101", "response": "Answer: 2"}\n{"id": "999", "response": "x"}\n')
    r = invoke("microvqa", "--data", examples / "microvqa.json", "--predictions", preds)
    assert r.exit_code == 2
    assert "p.jsonl: 1 prediction for ids that" in r.output and "'999' (row 2)" in r.output
    r = invoke("microvqa", "--data", tmp_path / "missing.json", "--predictions", preds)
    assert r.exit_code == 2 and "no such file" in r.output


@pytest.fixture
def jury(monkeypatch):
    """The rule jury the command judges with, instead of loading models."""
    made = rule_jury(top_of, bottom_of)
    monkeypatch.setattr(runs_bench, "make_jury", lambda spec: made)
    return made


def test_judged_pack_goes_through_the_resumable_runner_and_resumes(examples, tmp_path, jury):
    out = tmp_path / "mmst"
    args = [
        "mirage-mmst",
        "--data",
        examples / "mirage_mmst.json",
        "--predictions",
        examples / "mirage_mmst.predictions.jsonl",
        "--jury",
        "tiny",
        "--out",
        out,
        "--json",
    ]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    # j0 gives every top score, j1 every bottom one: the jury's mean is half-way
    assert data["id_accuracy"] == pytest.approx(0.5)
    assert data["judges"]["j0"]["id_accuracy"] == 1.0 and data["judges"]["j1"]["id_accuracy"] == 0
    assert data["weighted_sum"] == pytest.approx((0.5 + 0.5 + 0) / 3)  # one MG unanswered
    names = {p.name for p in out.iterdir()}
    assert {
        "mirage-id.items.jsonl",
        "mirage-id.judged.jsonl",
        "mirage-id.judged.jsonl.manifest.json",
        "mirage-mg.items.jsonl",
        "mirage-mg.judged.jsonl",
        "report.md",
        "report.json",
        "items.jsonl",
    } <= names
    assert len((out / "mirage-id.judged.jsonl").read_text().splitlines()) == 3
    prompts = len(jury._backends["j0"].prompts)
    again = invoke(*args)
    assert again.exit_code == 0 and json.loads(again.stdout)["id_accuracy"] == pytest.approx(0.5)
    assert len(jury._backends["j0"].prompts) == prompts  # resumed: nothing judged again


def test_judged_records_go_to_a_default_directory(examples, tmp_path, jury, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke(
        "mirage-mmmt",
        "--data",
        examples / "mirage_mmmt_decomp.json",
        "--predictions",
        examples / "mirage_mmmt.predictions.jsonl",
        "--quiet",
    )
    assert r.exit_code == 0, r.output
    assert "jury: " in r.stderr and "(default; pass --jury to choose)" in r.stderr
    assert (
        tmp_path / "mirage_mmmt.predictions.mirage-mmmt.bench" / "mirage-mmmt.judged.jsonl"
    ).exists()
    assert "| jury |" in r.stdout


def test_an_interrupted_run_says_how_to_resume(examples, tmp_path, monkeypatch):
    class Stop(RuleBackend):
        def generate(self, requests, cancelled=None):
            raise KeyboardInterrupt

    made = rule_jury(top_of)
    made._backends["j0"] = Stop("j0", top_of)
    monkeypatch.setattr(runs_bench, "make_jury", lambda spec: made)
    r = invoke(
        "microvqa",
        "--data",
        examples / "microvqa.json",
        "--predictions",
        examples / "microvqa.predictions.jsonl",
        "--jury",
        "tiny",
        "--out",
        tmp_path / "o",
    )
    assert r.exit_code == 130 and "run the same command again to resume" in r.output


def test_resumable_judge_reports_rows_the_runner_rejects(tmp_path, jury):
    from jurybox.rubrics import Item, load_rubric

    judge = runs_bench.ResumableJudge(jury, tmp_path)
    items = [
        Item(id="a", question="q", response="r", reference="ref"),
        Item(id="b", question="q", response="r" * 100_001, reference="ref"),
    ]
    judged = judge("general", load_rubric("general"), items)
    assert set(judged.records) == {"a"}
    assert "100,001 characters" in judged.failed["b"]
