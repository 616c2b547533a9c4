"""`jurybox leaderboard` over `jurybox bench --out` runs of several systems: the pack's per-item
results compared as judged files are (MicroVQA's accuracy and MRMR's nDCG@10 here: packs that
need no jury). Each system's mean equals the pack's own number; the pairs are scipy's paired
t tests on the per-item results."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from jurybox.serving.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "benchmarks"


def bench(tmp_path, name, data, rows, *extra):
    preds = tmp_path / f"{name}.predictions.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / name
    got = CliRunner().invoke(
        app,
        [
            "bench",
            "microvqa" if data.suffix == ".json" else "mrmr",
            "--data",
            str(data),
            "--predictions",
            str(preds),
            "--out",
            str(out),
            "--json",
            *extra,
        ],
    )
    assert got.exit_code == 0, got.output
    return out


def microvqa_runs(tmp_path):
    rows = [
        json.loads(line)
        for line in (EXAMPLES / "microvqa.predictions.jsonl").read_text().splitlines()
    ]
    data = EXAMPLES / "microvqa.json"
    return {
        "model-a": bench(tmp_path, "model-a", data, rows),
        "always-1": bench(
            tmp_path,
            "always-1",
            data,
            [{"id": r["id"], "response": "The answer is (1)."} for r in rows],
        ),
        "silent": bench(
            tmp_path, "silent", data, [{"id": r["id"], "response": ""} for r in rows[:2]] + rows[2:]
        ),
    }


def test_benchmark_runs_are_ranked_on_their_per_item_results(tmp_path):
    runs = microvqa_runs(tmp_path)
    got = CliRunner().invoke(app, ["leaderboard", *map(str, runs.values()), "--json"])
    assert got.exit_code == 0, got.output
    board = json.loads(got.stdout)
    assert board["rank_by"] == "accuracy" and board["criteria"] == ["accuracy"]
    correct = {}
    for name, directory in runs.items():
        report = json.loads((directory / "report.json").read_text())
        system = next(s for s in board["systems"] if s["name"] == name)
        entry = system["criteria"]["accuracy"]
        assert entry["mean"] == pytest.approx(report["accuracy"])  # the pack's own number
        assert entry["scored"] == report["items"] and entry["unscored"] == 0
        rows = [json.loads(line) for line in (directory / "items.jsonl").read_text().splitlines()]
        correct[name] = np.array([float(r["correct"]) for r in rows])
    for pair in board["pairs"]:
        a, b = correct[pair["a"]], correct[pair["b"]]
        assert pair["difference"] == pytest.approx(float(np.mean(a - b)))
        if np.std(a - b) > 0:
            assert pair["p"] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    text = CliRunner().invoke(app, ["leaderboard", *map(str, runs.values())])
    assert text.exit_code == 0 and "ranked by accuracy" in text.stdout
    assert "microvqa: per-item results of `jurybox bench`" in text.output


def test_runs_of_different_benchmarks_or_kinds_are_refused(tmp_path):
    runs = microvqa_runs(tmp_path)
    mrmr = tmp_path / "mrmr-run"
    got = CliRunner().invoke(
        app,
        [
            "bench",
            "mrmr",
            "--data",
            str(EXAMPLES / "mrmr.qrels.jsonl"),
            "--predictions",
            str(EXAMPLES / "mrmr.run.json"),
            "--out",
            str(mrmr),
            "--json",
        ],
    )
    assert got.exit_code == 0, got.output
    mixed = CliRunner().invoke(app, ["leaderboard", str(runs["model-a"]), str(mrmr)])
    assert mixed.exit_code == 2 and "different benchmarks (microvqa, mrmr)" in mixed.output
    judged = tmp_path / "v.jsonl"
    judged.write_text("")
    odd = CliRunner().invoke(app, ["leaderboard", str(runs["model-a"]), str(judged)])
    assert odd.exit_code == 2 and "not a `jurybox bench --out` directory" in odd.output
    human = CliRunner().invoke(
        app, ["leaderboard", *map(str, runs.values()), "--human", str(judged)]
    )
    assert human.exit_code == 2 and "take judged files, not benchmark runs" in human.output


def test_a_run_on_fewer_items_is_ranked_on_the_items_both_runs_have(tmp_path):
    """#52 defect 1 for benchmark runs: `full` answers all six items, right on the first four;
    `subset` was run without the two items `full` gets wrong (a data file of four) and is right
    on three of them. Each on its own items, `subset` (3/4) came before `full` (4/6); on the
    four items both runs have, `full` (4/4) is first, and the board says two items were
    dropped because `subset` lacks them."""
    data = json.loads((EXAMPLES / "microvqa.json").read_text())
    right = {str(d["key_question"]): d["correct_index"] + 1 for d in data}

    def answers(ids, wrong):
        picked = {i: right[i] % 2 + 1 if i in wrong else right[i] for i in ids}
        return [{"id": i, "response": f"The answer is ({k})."} for i, k in picked.items()]

    ids = list(right)
    subset_data = tmp_path / "microvqa-4.json"
    subset_data.write_text(json.dumps(data[:4]))
    runs = {
        "full": bench(tmp_path, "full", EXAMPLES / "microvqa.json", answers(ids, {"105", "106"})),
        "subset": bench(tmp_path, "subset", subset_data, answers(ids[:4], {"104"})),
    }
    got = CliRunner().invoke(
        app,
        ["leaderboard", *map(str, runs.values()), "--name", "full", "--name", "subset", "--json"],
    )
    assert got.exit_code == 0, got.output
    board = json.loads(got.stdout)
    first, second = board["systems"]
    assert (first["name"], first["rank"]) == ("full", 1)
    assert (second["name"], second["rank"]) == ("subset", 2)
    assert board["ranked_on"]["accuracy"] == {
        "items": 4,
        "scored_by_any": 6,
        "dropped": 2,
        "lacking": {"subset": 2},
        "unranked": [],
    }
    assert first["criteria"]["accuracy"]["mean"] == 1.0
    assert second["criteria"]["accuracy"]["mean"] == 0.75
    # Each run's own number is still there, labelled: the pack's own accuracy.
    for name, directory in runs.items():
        report = json.loads((directory / "report.json").read_text())
        system = next(s for s in board["systems"] if s["name"] == name)
        assert system["criteria"]["accuracy"]["own"]["mean"] == pytest.approx(report["accuracy"])
    text = CliRunner().invoke(
        app,
        ["leaderboard", *map(str, runs.values()), "--name", "full", "--name", "subset"],
        env={"COLUMNS": "80"},
    )
    assert text.exit_code == 0, text.output
    flat = " ".join(text.stdout.split())
    assert "ranked by accuracy on the 4 items every system scored" in flat
    assert "2 of 6 items dropped from the ranking (subset lacks 2)" in flat
    assert max(len(line) for line in text.stdout.splitlines()) <= 80
