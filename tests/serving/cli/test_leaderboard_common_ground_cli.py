"""`jurybox leaderboard`'s table with human labels and a system lacking items (#60): the PPI++
column is on the ranked items, the own-item PPI++ means are apart, and each pair's
human-corrected difference is printed; on synthetic judged files (the general rubric's
accuracy) of a system B worse than A on every item and lacking the 30 hardest."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from jurybox.serving.cli import app


def write_systems(tmp_path, n=200, hardest=30, seed=60):
    """A's and B's judged files and label files (half of each system's items labelled)."""
    rng = np.random.default_rng(seed)
    human_a = np.where(
        np.arange(n) < hardest, 0, rng.choice([2, 3, 4], n, p=[0.1, 0.4, 0.5])
    ).astype(float)
    human_b = human_a - (rng.random(n) < 0.4) * (human_a >= 1)
    paths = []
    for name, human, keep in (("A", human_a, np.arange(n)), ("B", human_b, np.arange(hardest, n))):
        jury = np.clip(human + (rng.random(n) < 0.3) * rng.choice([-1, 1], n), 0, 4)
        records = [
            {
                "id": f"i{k}",
                "status": "scored",
                "provenance": "p",
                "rubric": "general",
                "jury": "j",
                "scores": {"accuracy": float(jury[k])},
                "votes": [],
            }
            for k in keep
        ]
        labelled = rng.choice(keep, keep.size // 2, replace=False)
        labels = [{"id": f"i{k}", "rater": "r", "accuracy": int(human[k])} for k in labelled]
        judged, human_file = tmp_path / f"{name}.judged.jsonl", tmp_path / f"{name}.human.jsonl"
        judged.write_text("".join(json.dumps(r) + "\n" for r in records))
        human_file.write_text("".join(json.dumps(r) + "\n" for r in labels))
        paths.append((name, judged, human_file))
    return paths


def test_the_table_prints_ppi_on_the_ranked_items_and_the_pair_s_corrected_difference(tmp_path):
    systems = write_systems(tmp_path)
    args = ["leaderboard", *(str(j) for _, j, _ in systems)]
    for name, _, human in systems:
        args += ["--name", name, "--human", f"{name}={human}"]
    as_json = CliRunner().invoke(app, [*args, "--json", "--resamples", "200"])
    assert as_json.exit_code == 0, as_json.output
    board = json.loads(as_json.stdout)
    narrow = CliRunner().invoke(app, [*args, "--resamples", "200"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80, narrow.stdout
    # Wide: one line per row. Rich reads COLUMNS when a console is made, and pytest-xdist's
    # workers set it to 80 before the CLI's consoles are made, so the width is set on them.
    from jurybox.serving.cli import console

    before = console.out._width
    console.out.width = 200
    try:
        got = CliRunner().invoke(app, [*args, "--resamples", "200"], env={"COLUMNS": "200"})
    finally:
        console.out._width = before
    lines = got.stdout.splitlines()
    entry = {s["name"]: s["criteria"]["accuracy"] for s in board["systems"]}
    a, b = entry["A"]["human_corrected"], entry["B"]["human_corrected"]
    assert a["pool"] == b["pool"] == 170 and a["mean"] > b["mean"]

    def shown(mean, ci, sign=""):
        return f"{mean:{sign}.3f} [{ci[0]:{sign}.3f}, {ci[1]:{sign}.3f}]"

    ranked = next(line for line in lines if line.startswith("│ ") and " A " in line)
    assert shown(a["mean"], a["ci"]) in ranked  # the ranked row's PPI++ is the common one
    own = entry["A"]["own"]["human_corrected"]
    assert own["pool"] == 200
    assert any(shown(own["mean"], own["ci"]) in line for line in lines)  # apart, own items
    (pair,) = board["pairs"]
    corrected = pair["human_corrected"]
    assert corrected["difference"] is not None
    assert "human-corrected" in got.stdout
    row = next(
        line
        for line in lines
        if "A - B" in line and shown(corrected["difference"], corrected["ci"], "+") in line
    )
    assert str(corrected["labelled"]) in row


def write_judged(path, scores):
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "status": "scored",
                    "provenance": "p",
                    "rubric": "general",
                    "jury": "j",
                    "scores": {"accuracy": v},
                    "votes": [],
                }
            )
            + "\n"
            for i, v in scores.items()
        )
    )
    return path


def test_a_sparse_system_is_named_and_left_out_on_request(tmp_path):
    rng = np.random.default_rng(3)
    files = [
        write_judged(
            tmp_path / f"{n}.jsonl", {f"q{k}": float(rng.integers(0, 5)) for k in range(30)}
        )
        for n in ("one", "two")
    ]
    files.append(write_judged(tmp_path / "few.jsonl", {"q0": 0.0, "q1": 3.0, "q2": 4.0}))
    env = {"COLUMNS": "80"}
    got = CliRunner().invoke(app, ["leaderboard", *map(str, files), "--resamples", "200"], env=env)
    assert got.exit_code == 0, got.output
    assert "ranked by accuracy on the 3 items every system scored" in got.stdout
    assert "few has 3 scored item(s)" in got.stderr and "--exclude few" in got.stderr
    means = got.stdout.split("pairs on")[0]
    assert "│ few " in means and "[-" not in means  # the means' intervals on the 0-4 scale
    for how in (["--exclude", "few"], ["--min-items", "4"]):
        apart = CliRunner().invoke(
            app, ["leaderboard", *map(str, files), "--resamples", "200", *how], env=env
        )
        assert apart.exit_code == 0, apart.output
        out = apart.stdout
        assert "on the 30 items every system scored\n(1 left out)" in out
        ranked, rest = out.split("Left out of the common ground, not ranked")
        assert "few" not in ranked and "│ few" in rest.split("pairs on")[0]
        assert "few -" not in out and "- few" not in out  # in no pair
        assert max(len(line) for line in out.splitlines()) <= 80, out
    refused = CliRunner().invoke(app, ["leaderboard", *map(str, files), "--exclude", "nobody"])
    assert refused.exit_code == 2 and "--exclude nobody: no such system" in refused.output


def test_the_page_in_chromium_lists_the_left_out_system_apart(browser, tmp_path):
    rng = np.random.default_rng(3)
    files = [
        write_judged(
            tmp_path / f"{n}.jsonl", {f"q{k}": float(rng.integers(0, 5)) for k in range(30)}
        )
        for n in ("one", "two")
    ]
    files.append(write_judged(tmp_path / "few.jsonl", {"q0": 0.0, "q1": 3.0, "q2": 4.0}))
    page_path = tmp_path / "leaderboard.html"
    args = ["leaderboard", *map(str, files), "--resamples", "200", "--exclude", "few"]
    got = CliRunner().invoke(app, [*args, "--html", str(page_path)])
    assert got.exit_code == 0, got.output
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(page_path.as_uri())
    page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
    ground = page.locator("p.ground").first.inner_text()
    assert "Ranked on the 30 items every system scored" in ground
    assert "left out of the common ground, not ranked: few (--exclude)" in ground
    forest = page.locator("svg.forest").first
    assert forest.locator("circle").count() == 2 and "few" not in forest.text_content()
    assert page.locator("table.pairs").first.locator("tr").count() == 3  # one, two
    own = page.locator("table.own").first.inner_text()
    assert "few" in own and "2.333 [0.000, 4.000]" in own
    page.close()
