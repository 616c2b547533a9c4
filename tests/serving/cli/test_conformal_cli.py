"""Conformal intervals through the command line (#41, item 1): `jurybox calibrate --conformal`
fits a map on human labels and judged verdicts (here synthetic verdicts with score
distributions, 300 items, and then the replay jury's real recorded verdicts of the examples),
`jurybox judge --conformal MAP --route-width W` gives every verdict its intervals and routes the
wide ones to a human, counted in the summary. The statistics themselves are tested by
simulation in tests/calibration/maps/test_conformal.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from jurybox.serving.cli import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CRITERIA = ("accuracy", "relevance", "completeness", "parsimony")


def synthetic(tmp_path: Path, n: int = 300) -> tuple[Path, Path]:
    """Verdicts whose judges' distributions are right about their own uncertainty (the human
    label is drawn from them), half of the items of task "a" and half of "b"; labels on all."""
    rng = np.random.default_rng(3)
    verdicts, labels = [], []
    for k in range(n):
        votes, scores, human = [], {}, {"id": f"q{k}", "rater": "h", "task": "ab"[k % 2]}
        for c in CRITERIA:
            centre, spread = rng.uniform(0, 4), rng.uniform(0.3, 1.5)
            w = np.exp(-0.5 * ((np.arange(5) - centre) / spread) ** 2)
            w /= w.sum()
            for judge in ("j1", "j2"):
                votes.append(
                    {
                        "judge": judge,
                        "criterion": c,
                        "score": float(np.argmax(w)),
                        "distribution": {str(v): float(p) for v, p in enumerate(w)},
                    }
                )
            scores[c] = float(np.argmax(w))
            human[c] = int(rng.choice(5, p=w))
        scores["weighted_sum"] = None
        verdicts.append(
            {
                "id": f"q{k}",
                "status": "scored",
                "rubric": "mirage-mg",
                "jury": "sim",
                "provenance": "sim",
                "votes": votes,
                "scores": scores,
            }
        )
        labels.append(human)
    v, h = tmp_path / "v.jsonl", tmp_path / "h.jsonl"
    v.write_text("".join(json.dumps(r) + "\n" for r in verdicts))
    h.write_text("".join(json.dumps(r) + "\n" for r in labels))
    return v, h


def test_calibrate_conformal_reports_cross_validated_coverage_per_criterion_and_group(tmp_path):
    verdicts, human = synthetic(tmp_path)
    out = tmp_path / "conformal.yaml"
    got = CliRunner().invoke(
        app,
        [
            "calibrate",
            str(human),
            str(verdicts),
            "--conformal",
            "--alpha",
            "0.1",
            "--group",
            "task",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert got.exit_code == 0, got.output
    fitted = json.loads(got.stdout)
    assert fitted["kind"] == "conformal" and fitted["provenance"] == "sim"
    for c in CRITERIA:
        row = fitted["report"][c]
        assert row["labelled"] == 300 and 0.85 <= row["cv_coverage"] <= 0.97, row
        assert set(row["cv_coverage_by_group"]) == {"a", "b"}
        assert set(fitted["criteria"][c]["groups"]) == {"a", "b"}
        assert 0 < row["mean_width"] < 4  # informative: not the whole scale
    text = CliRunner().invoke(
        app,
        ["calibrate", str(human), str(verdicts), "--conformal", "--out", str(tmp_path / "c.json")],
    )
    assert text.exit_code == 0 and "cross-validated coverage" in text.stdout
    mixed = CliRunner().invoke(
        app, ["calibrate", str(human), str(verdicts), "--conformal", "--cascade", "--out", str(out)]
    )
    assert mixed.exit_code == 2 and "give one" in mixed.output


def test_calibrate_conformal_refuses_labels_chosen_for_the_benchmark_mean(tmp_path):
    """#52 defect 3: labels chosen actively (jurybox label --goal benchmark-mean, unequal
    inclusion probabilities) were accepted and taken as exchangeable, so the map undercovered
    new items (0.80 at 0.90 nominal, tests/calibration/maps/test_conformal.py) while its own
    cross-validation said 90%. Now refused, naming the row and the reason, as plain
    `calibrate` refuses them."""
    verdicts, human = synthetic(tmp_path, n=60)
    rows = [json.loads(line) for line in human.read_text().splitlines()]
    for k, row in enumerate(rows):
        if k >= 10:
            row["selection"] = {
                "strategy": "benchmark-mean",
                "probability": 0.4,
                "position": k,
                "pool": 60,
                "seed": 0,
            }
    human.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = CliRunner().invoke(
        app,
        ["calibrate", str(human), str(verdicts), "--conformal", "--out", str(tmp_path / "c.yaml")],
    )
    assert got.exit_code == 2, got.output
    assert "50 labels (the first on row 11) chosen actively for the benchmark's mean" in got.output
    assert "conformal maps" in got.output and not (tmp_path / "c.yaml").exists()


def test_calibrate_conformal_says_what_it_covers_and_what_each_route_width_keeps(tmp_path):
    """#52 item 5: the report says whose label an interval holds, offers the one-rater
    guarantee where items have several raters (with the width it would give), and gives the
    cross-validated coverage among the items each --route-width would keep."""
    verdicts, human = synthetic(tmp_path, n=200)
    rows = [json.loads(line) for line in human.read_text().splitlines()]
    rng = np.random.default_rng(4)
    second = [
        {**r, "rater": "g", **{c: int(np.clip(r[c] + rng.integers(-1, 2), 0, 4)) for c in CRITERIA}}
        for r in rows
    ]
    human.write_text("".join(json.dumps(r) + "\n" for r in rows + second))
    runs = {}
    for cover in ("every-rater", "one-rater"):
        got = CliRunner().invoke(
            app,
            [
                "calibrate",
                str(human),
                str(verdicts),
                "--conformal",
                "--cover",
                cover,
                "--out",
                str(tmp_path / f"{cover}.json"),
                "--json",
            ],
        )
        assert got.exit_code == 0, got.output
        runs[cover] = json.loads(got.stdout)
        assert runs[cover]["cover"] == cover
    for c in CRITERIA:
        every, one = runs["every-rater"]["report"][c], runs["one-rater"]["report"][c]
        assert every["covers"] == "every-rater" and every["raters_per_item"] == 2.0
        # Each report gives the other guarantee's width, which the other fit has.
        assert every["other_cover"]["covers"] == "one-rater"
        assert every["other_cover"]["mean_width"] <= every["mean_width"]
        assert one["mean_width"] <= every["mean_width"]
        widths = every["cv_by_route_width"]
        assert [w["route_width"] for w in widths] == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert widths[-1]["kept"] == 1.0
        assert widths[-1]["coverage"] == pytest.approx(every["cv_coverage"])
        assert all(a["kept"] <= b["kept"] for a, b in itertools.pairwise(widths))
    text = CliRunner().invoke(
        app,
        ["calibrate", str(human), str(verdicts), "--conformal", "--out", str(tmp_path / "c.json")],
    )
    assert text.exit_code == 0, text.output
    assert "holds every rater's label with probability >= 90%" in text.stdout
    assert "--cover one-rater would give a mean width of" in text.stdout
    assert "the items --route-width W keeps: W=0:" in text.stdout
    wrong = CliRunner().invoke(
        app,
        [
            "calibrate",
            str(human),
            str(verdicts),
            "--cover",
            "one-rater",
            "--out",
            str(tmp_path / "m.json"),
        ],
    )
    assert wrong.exit_code == 2 and "--cover is for --conformal" in wrong.output


@pytest.fixture(scope="module")
def routed_run(replay_tiny, replay_jury, tmp_path_factory):
    """The examples with a `task` column, judged by the replay jury (the tiny jury's real
    recorded answers), a conformal map fitted per task (alpha 0.5) on their human labels, and
    `jurybox judge --conformal MAP --route-width 0`'s verdicts."""
    from jurybox.rubrics import load_rubric
    from jurybox.serving.runs.local import judge_file

    tmp_path = tmp_path_factory.mktemp("routed")
    rows = [json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()]
    task = {r["id"]: "ab"[k % 2] for k, r in enumerate(rows)}
    predictions = tmp_path / "mg.jsonl"
    predictions.write_text("".join(json.dumps({**r, "task": task[r["id"]]}) + "\n" for r in rows))
    human = tmp_path / "human.jsonl"
    human.write_text(
        "".join(
            json.dumps({**row, "task": task[row["id"]]}) + "\n"
            for row in map(
                json.loads, (EXAMPLES / "mirage_mg.human.jsonl").read_text().splitlines()
            )
        )
    )
    judged = tmp_path / "judged.jsonl"
    judge_file(predictions, load_rubric("mirage-mg"), replay_tiny, judged)
    conformal = tmp_path / "conformal.yaml"
    runner = CliRunner()
    # Six labelled items, three per task: at alpha 0.5 the 2nd smallest of a task's three
    # nonconformities is its threshold.
    fit = runner.invoke(
        app,
        [
            "calibrate",
            str(human),
            str(judged),
            "--conformal",
            "--alpha",
            "0.5",
            "--group",
            "task",
            "--out",
            str(conformal),
        ],
    )
    assert fit.exit_code == 0, fit.output
    routed = tmp_path / "routed.jsonl"
    run = runner.invoke(
        app,
        [
            "judge",
            str(predictions),
            "--rubric",
            "mirage-mg",
            "--jury",
            str(replay_jury),
            "--out",
            str(routed),
            "--no-cache",
            "--quiet",
            "--conformal",
            str(conformal),
            "--route-width",
            "0",
        ],
    )
    assert run.exit_code == 0, run.output
    return {
        "predictions": predictions,
        "task": task,
        "conformal": conformal,
        "routed": routed,
        "output": run.output,
        "human": human,
        "folder": tmp_path,
    }


def test_judge_with_a_conformal_map_gives_intervals_and_routes_the_wide_ones(
    routed_run, replay_jury
):
    """A map fitted per group (a `task` column in the labels) applies each item's group's
    threshold at judge time (the same column in the predictions)."""
    from jurybox.calibration.data.labels import scales_from
    from jurybox.calibration.maps.conformal import ConformalMap
    from jurybox.rubrics import load_rubric

    run, task = routed_run, routed_run["task"]
    cmap = ConformalMap.load(run["conformal"])
    assert cmap.group_column == "task"
    assert all(set(k.groups) == {"a", "b"} for k in cmap.criteria.values())
    records = [json.loads(line) for line in run["routed"].read_text().splitlines()]
    assert len(records) == 6
    n_routed = 0
    for r in records:
        assert r["interval"] == cmap.intervals_of(
            r, scales_from(load_rubric("mirage-mg")), task[r["id"]]
        )
        wide = [c for c, iv in r["interval"].items() if iv is None or iv[1] > iv[0]]
        if wide:
            n_routed += 1
            assert r["route"]["to"] == "human" and len(r["route"]["reasons"]) == len(wide)
        else:
            assert "route" not in r
        assert r["calibration"].startswith("conformal conformal.yaml:")
    assert f"routed to a human: {n_routed}" in run["output"]
    # Without --conformal, --route-width has nothing to route by; another jury's map is refused.
    runner = CliRunner()
    lone = runner.invoke(
        app,
        [
            "judge",
            str(run["predictions"]),
            "--rubric",
            "mirage-mg",
            "--jury",
            str(replay_jury),
            "--route-width",
            "1",
        ],
    )
    assert lone.exit_code == 2 and "add --conformal" in lone.output
    other = runner.invoke(
        app,
        [
            "judge",
            str(run["predictions"]),
            "--rubric",
            "general",
            "--jury",
            str(replay_jury),
            "--out",
            str(run["folder"] / "g.jsonl"),
            "--conformal",
            str(run["conformal"]),
        ],
    )
    assert other.exit_code == 2 and "was fitted for provenance" in other.output


def test_the_labelling_page_s_review_goal_offers_the_routed_items_widest_first(routed_run, browser):
    """#41 item 2: `jurybox label --goal review` offers only the routed items, the widest
    interval first, says why in the page (Chromium), records each label as a review, is done
    when all are reviewed; every statistic refuses those labels, saying why."""
    import httpx
    from service_helpers import free_port, labelling

    records = {r["id"]: r for r in map(json.loads, routed_run["routed"].read_text().splitlines())}
    routed = [i for i, r in records.items() if r.get("route")]
    assert routed, "the fixture's map routes nothing: nothing to review"

    def widest(r):
        return max(float("inf") if iv is None else iv[1] - iv[0] for iv in r["interval"].values())

    labels = routed_run["folder"] / "review.jsonl"
    offered = []
    with (
        labelling(
            routed_run["predictions"], routed_run["routed"], labels, free_port(), "--goal", "review"
        ) as (url, _),
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(f"{url}/?rater=ann")
        page.wait_for_selector("#why:has-text('routed to a human')")
        assert "wider than 0" in page.inner_text("#why")
        page.screenshot(path=str(routed_run["folder"] / "review.png"), full_page=True)
        page.close()
        while (got := http.get("/api/next", params={"rater": "ann"})).status_code == 200:
            item = got.json()
            offered.append(item["id"])
            saved = http.post(
                "/api/labels", json={"id": item["id"], "rater": "ann", "labels": {"accuracy": 2}}
            )
            assert saved.status_code == 200, saved.text
        assert got.status_code == 204
        done = http.get("/api/progress").json()
    assert sorted(offered) == sorted(routed)
    assert [widest(records[i]) for i in offered] == sorted(
        (widest(records[i]) for i in offered), reverse=True
    )
    assert done["goal_met"] and done["review"] == {"reviewed": len(routed), "routed": len(routed)}
    lines = [json.loads(line) for line in labels.read_text().splitlines()]
    assert all(
        line["selection"]["strategy"] == "review" and line["selection"]["route"] for line in lines
    )
    runner = CliRunner()
    for refused in (
        ["agree", str(labels), str(routed_run["routed"])],
        ["agree", str(labels), str(routed_run["routed"]), "--ppi"],
        [
            "calibrate",
            str(labels),
            str(routed_run["routed"]),
            "--conformal",
            "--out",
            str(routed_run["folder"] / "x.yaml"),
        ],
    ):
        got = runner.invoke(app, refused)
        assert got.exit_code == 2 and "routed to a human for review" in got.output, got.output


def test_the_service_config_takes_one_conformal_map_per_rubric(replay_jury, tmp_path):
    """`jurybox serve --conformal`: checked when the service is built, as calibration maps are
    (a map for a rubric the service does not have, two for one rubric, --route-width alone)."""
    import pytest

    from jurybox.rubrics.errors import InputError
    from jurybox.serving.service.config import ServiceConfig

    verdicts, human = synthetic(tmp_path, n=40)  # provenance "sim": no rubric of this jury's
    foreign = tmp_path / "foreign.yaml"
    assert (
        CliRunner()
        .invoke(app, ["calibrate", str(human), str(verdicts), "--conformal", "--out", str(foreign)])
        .exit_code
        == 0
    )
    with pytest.raises(InputError, match="no rubric this service knows"):
        ServiceConfig(jury=str(replay_jury), conformal=[str(foreign)]).resolve()
    with pytest.raises(InputError, match="give --conformal MAP too"):
        ServiceConfig(jury=str(replay_jury), route_width=1.0).resolve()
    mine = tmp_path / "mine.yaml"
    from jurybox.calibration.maps.conformal import ConformalMap
    from jurybox.judges import load_jury_spec, provenance
    from jurybox.rubrics import load_rubric

    fitted = ConformalMap.load(foreign)
    fitted.provenance = provenance(load_rubric("mirage-mg"), load_jury_spec(replay_jury))
    fitted.save(mine)
    plan = ServiceConfig(jury=str(replay_jury), conformal=[str(mine)], route_width=0).resolve()
    (entry,) = plan.conformal
    assert entry["rubrics"] == ["mirage-mg"] and entry["identity"].startswith("conformal mine")
    twice = tmp_path / "twice.yaml"
    twice.write_bytes(mine.read_bytes())
    with pytest.raises(InputError, match="both for rubric mirage-mg"):
        ServiceConfig(jury=str(replay_jury), conformal=[str(mine), str(twice)]).resolve()
