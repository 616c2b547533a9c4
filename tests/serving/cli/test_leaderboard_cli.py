"""`jurybox leaderboard` on the tiny jury's real verdicts of three systems (the examples'
answers, their first sentences, and answers to the wrong question: ``leaderboard_systems``),
replayed from its recorded answers to exactly these prompts (tests/data/
tiny-leaderboard-recorded.json.gz; a prompt not in it fails the test). The JSON against an
independent computation from the judged files, the table within 80 columns, the refusals, and
the HTML page in headless Chromium. The tiny models are poor judges: they give these three
systems' answers the same scores (every item, every criterion), so the honest result is a
three-way tie, which is what these tests expect; the statistics' other outcomes are tested on
synthetic verdicts (tests/calibration/reports/test_leaderboard.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from typer.testing import CliRunner

from jurybox.rubrics import load_rubric
from jurybox.serving.cli import app

CRITERIA = ["accuracy", "relevance", "completeness", "parsimony", "weighted_sum"]


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """system name -> its judged file (``jurybox judge``'s output and manifest)."""
    from judging_helpers import LEADERBOARD_RECORDING, leaderboard_systems, write_replay_jury

    from jurybox.judges import Jury
    from jurybox.serving.runs.local import judge_file

    tmp = tmp_path_factory.mktemp("leaderboard")
    jury = Jury.load(write_replay_jury(tmp / "replay.yaml", recordings=(LEADERBOARD_RECORDING,)))
    jury.load_backends()
    out = {}
    try:
        for name, rows in leaderboard_systems().items():
            preds = tmp / f"{name}.jsonl"
            preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
            out[name] = tmp / f"{name}.judged.jsonl"
            judge_file(preds, load_rubric("mirage-mg"), jury, out[name])
        for judge in jury.spec.judges:
            backend = jury.backend(judge)
            assert backend.unrecorded == 0, (
                f"{backend.name}: {backend.unrecorded} prompts not in {LEADERBOARD_RECORDING.name}"
                ": rerun python tests/data/record.py leaderboard"
            )
    finally:
        jury.close()
    return out


def run(*args, **env):
    result = CliRunner().invoke(app, ["leaderboard", *map(str, args)], env=env or None)
    return result


def scores(path):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {r["id"]: r["scores"] for r in rows}


def test_the_json_is_what_the_judged_files_give(judged):
    got = run(*judged.values(), "--json", "--resamples", "500")
    assert got.exit_code == 0, got.output
    board = json.loads(got.stdout)
    assert board["criteria"] == CRITERIA and board["rank_by"] == "weighted_sum"
    # Names from the manifests' predictions files.
    assert sorted(s["name"] for s in board["systems"]) == ["brief", "full", "swapped"]
    values = {name: scores(path) for name, path in judged.items()}
    ids = list(values["full"])
    for system in board["systems"]:
        for c in CRITERIA:
            x = np.array(
                [
                    np.nan if values[system["name"]][i][c] is None else values[system["name"]][i][c]
                    for i in ids
                ]
            )
            s = x[~np.isnan(x)]
            entry = system["criteria"][c]
            assert entry["scored"] == s.size and entry["unscored"] == 6 - s.size
            assert entry["missing"] == 0
            if s.size:
                assert entry["mean"] == pytest.approx(s.mean())
    by_rank = sorted(
        board["systems"], key=lambda s: s["criteria"]["weighted_sum"]["mean"] or 0, reverse=True
    )
    assert by_rank[0]["rank"] == 1 and all(
        s["rank_ci"][0] <= s["rank"] <= s["rank_ci"][1] for s in board["systems"]
    )
    for c in CRITERIA:
        pairs = [p for p in board["pairs"] if p["criterion"] == c]
        assert len(pairs) == 3
        for p in pairs:
            a = np.array(
                [values[p["a"]][i][c] if values[p["a"]][i][c] is not None else np.nan for i in ids],
                dtype=float,
            )
            b = np.array(
                [values[p["b"]][i][c] if values[p["b"]][i][c] is not None else np.nan for i in ids],
                dtype=float,
            )
            both = ~np.isnan(a) & ~np.isnan(b)
            assert p["shared"] == both.sum()
            if both.sum() >= 2 and np.std(a[both] - b[both]) > 0:
                assert p["p"] == pytest.approx(stats.ttest_rel(a[both], b[both]).pvalue)
            # The same score on every shared item: a difference of exactly 0, not significant.
            if (a[both] == b[both]).all():
                assert p["difference"] == 0 and p["p"] == 1 and not p["significant"]
        defined = [p["p"] for p in pairs if p["p"] is not None]
        assert [p["p_holm"] for p in pairs if p["p"] is not None] == pytest.approx(
            list(multipletests(defined, method="holm")[1]) if defined else []
        )


def test_the_table_fits_80_columns_and_human_labels_correct_the_labelled_system(judged):
    from pathlib import Path

    human = Path(__file__).resolve().parents[3] / "examples" / "mirage_mg.human.jsonl"
    got = run(*judged.values(), "--human", f"full={human}", "--criterion", "accuracy", COLUMNS="80")
    assert got.exit_code == 0, got.output
    lines = got.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    assert "ranked by accuracy" in got.stdout and "PPI++ mean" in got.stdout
    assert "brief: no human labels" in got.output
    as_json = json.loads(run(*judged.values(), "--human", f"full={human}", "--json").stdout)
    full = next(s for s in as_json["systems"] if s["name"] == "full")
    corrected = full["criteria"]["accuracy"]["human_corrected"]
    # Every item labelled: the corrected mean is the humans' own mean.
    labels = [json.loads(line) for line in human.read_text().splitlines()]
    by_item: dict[str, list[float]] = {}
    for row in labels:
        by_item.setdefault(row["id"], []).append(row["accuracy"])
    assert corrected["mean"] == pytest.approx(np.mean([np.mean(v) for v in by_item.values()]))
    brief = next(s for s in as_json["systems"] if s["name"] == "brief")
    assert brief["criteria"]["accuracy"]["human_corrected"]["mean"] is None
    assert full["criteria"]["weighted_sum"]["human_corrected"]["reason"].startswith("a formula")


def test_length_control_with_too_few_items_says_why(judged):
    got = run(*judged.values(), "--length-control", "--json")
    assert got.exit_code == 0, got.output
    board = json.loads(got.stdout)
    entry = board["systems"][0]["criteria"]["accuracy"]["length_controlled"]
    assert entry["mean"] is None and "length control needs 10" in entry["reason"]
    assert board["length_control"]["accuracy"]["complete"] is False


def test_refusals_name_what_is_wrong(judged, replay_tiny, tmp_path):
    from judging_helpers import leaderboard_systems

    from jurybox.serving.runs.local import judge_file

    full, brief, _ = judged.values()
    one = run(full)
    assert one.exit_code == 2 and "at least 2 systems" in one.output
    names = run(full, brief, "--name", "x")
    assert names.exit_code == 2 and "1 --name for 2 judged files" in names.output
    preds = tmp_path / "full.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in leaderboard_systems()["full"]))
    general = tmp_path / "general.jsonl"
    judge_file(preds, load_rubric("general"), replay_tiny, general)
    mixed = run(full, general, "--name", "a", "--name", "b")
    assert (
        mixed.exit_code == 2
        and "b differs from a in the rubric (mirage-mg vs general)" in mixed.output
    )
    allowed = run(full, general, "--name", "a", "--name", "b", "--allow-mixed", "--json")
    assert allowed.exit_code == 0 and "compared although not judged alike" in allowed.output
    bad = tmp_path / "h.jsonl"
    bad.write_text(json.dumps({"id": "mg-001", "rater": "r", "accuracy": 3}) + "\n")
    unnamed = run(full, brief, "--human", bad)
    assert unnamed.exit_code == 2 and "has no `system` column" in unnamed.output
    bad.write_text(json.dumps({"id": "mg-001", "system": "nope", "accuracy": 3}) + "\n")
    stray = run(full, brief, "--human", bad)
    assert stray.exit_code == 2 and "names system 'nope'" in stray.output
    criterion = run(full, brief, "--criterion", "nope")
    assert criterion.exit_code == 2 and "--criterion nope" in criterion.output


def test_the_page_in_chromium_shows_the_forest_and_the_matrix(judged, browser, tmp_path):
    page_path = tmp_path / "leaderboard.html"
    got = run(*judged.values(), "--html", page_path, "--resamples", "500")
    assert got.exit_code == 0, got.output
    board = json.loads(run(*judged.values(), "--json", "--resamples", "500").stdout)
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(page_path.as_uri())
    page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
    assert page.locator("svg.forest").count() == len(CRITERIA)
    assert page.locator("table.pairs").count() == len(CRITERIA)
    first = page.locator("svg.forest").first
    scored = sum(s["criteria"]["weighted_sum"]["mean"] is not None for s in board["systems"])
    assert first.locator("circle").count() == scored
    # The ranking criterion first; each matrix has a row and a column per system.
    assert page.locator("h2").first.inner_text() == "weighted_sum"
    assert page.locator("table.pairs").first.locator("tr").count() == 4
    marked = page.locator("table.pairs").first.locator("td.sig-pos, td.sig-neg").count()
    significant = sum(p["significant"] for p in board["pairs"] if p["criterion"] == "weighted_sum")
    assert marked == 2 * significant
    box = first.bounding_box()
    assert box is not None and box["width"] > 400 and not math.isnan(box["height"])
    page.close()
