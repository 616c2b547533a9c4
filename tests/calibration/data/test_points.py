"""Agreement per checklist point (#63): human point labels joined with checklist verdicts,
pooled as units (``item::key``) on ``met``, and each item's score; `jurybox agree` and
`jurybox calibrate` on them. The verdicts are built by `units`/`assemble` from made-up votes
(checklist_helpers): the join and the statistics are the subject."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from checklist_helpers import checklist_item, judged_records, write_jsonl
from typer.testing import CliRunner

from jurybox.calibration.data.points import (
    MET,
    SCORE,
    item_output,
    load_point_labels,
    point_join,
    pooled_output,
)
from jurybox.calibration.data.verdicts import load_judge_output
from jurybox.rubrics.checklist import points_score
from jurybox.rubrics.points import read_points
from jurybox.serving.runs.agree import agreement_with_humans
from jurybox.serving.runs.calibrate import fit_map

YES = {1: "yes", 0: "no"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """24 items of 3 to 5 points (a pitfall in some), the truth per point, two judges (x: 10%
    of points flipped, y: 35%), their verdict file, and two raters' labels: alice the truth,
    bob the truth with 10% flipped and the last point of every third item left empty."""
    rng = np.random.default_rng(63)
    folder = tmp_path_factory.mktemp("points")
    items, truth, votes = [], {}, {"x": {}, "y": {}}
    for k in range(24):
        n = 3 + k % 3
        weights = [float(rng.integers(1, 10)) for _ in range(n)]
        if k % 4 == 0:
            weights[-1] = -float(rng.integers(1, 6))
        item = checklist_item(f"q{k:02d}", weights)
        items.append(item)
        truth[item.id] = [int(rng.random() < 0.6) for _ in range(n)]
        for judge, flip in (("x", 0.1), ("y", 0.35)):
            votes[judge][item.id] = [1 - t if rng.random() < flip else t for t in truth[item.id]]
    records = judged_records(items, votes)
    judged = write_jsonl(folder / "judged.jsonl", records)
    rows = []
    for item in items:
        t = truth[item.id]
        rows.append(
            {"id": item.id, "rater": "alice", **{f"p{k + 1}": YES[v] for k, v in enumerate(t)}}
        )
        bob = [1 - v if rng.random() < 0.1 else v for v in t]
        labels = {f"p{k + 1}": YES[v] for k, v in enumerate(bob)}
        if int(item.id[1:]) % 3 == 0:
            labels[f"p{len(t)}"] = ""
        rows.append({"id": item.id, "rater": "bob", **labels})
    human = write_jsonl(folder / "human.jsonl", rows)
    return {"items": items, "truth": truth, "judged": judged, "human": human, "records": records}


def test_point_labels_join_pooled_by_item_and_key(tmp_path):
    # p1 of a and p1 of b are different points: their labels and votes stay with their item.
    items = [checklist_item("a", [5, 3]), checklist_item("b", [2, 4, 1])]
    votes = {"x": {"a": [1, 0], "b": [0, 1, 1]}, "y": {"a": [1, 1], "b": [0, 1, 0]}}
    judged = write_jsonl(tmp_path / "j.jsonl", judged_records(items, votes))
    human = write_jsonl(
        tmp_path / "h.jsonl",
        [
            {"id": "b", "rater": "r", "p1": "no", "p2": "yes", "p3": "no"},
            {"id": "a", "rater": "r", "p1": "yes", "p2": "no"},
        ],
    )
    output = load_judge_output(judged)
    joined = point_join(load_point_labels(human, output), output)
    met = joined.criteria[MET]
    assert met.ids == ["a::p1", "a::p2", "b::p1", "b::p2", "b::p3"]
    assert met.human[0].tolist() == [1, 0, 0, 1, 0]
    assert met.judges["x"].tolist() == [1, 0, 0, 1, 1]
    assert met.judges["y"].tolist() == [1, 1, 0, 1, 0]
    assert met.jury.tolist() == [1, 0.5, 0, 1, 0.5]
    assert met.categorical and met.scale.labels == {"yes": 1, "no": 0}
    assert joined.summary.human_only == [] and joined.summary.judge_only == []


def test_human_item_score_from_point_labels(tmp_path):
    item = checklist_item("a", [5, -4, 3])
    judged = write_jsonl(tmp_path / "j.jsonl", judged_records([item], {"x": {"a": [1, 1, 0]}}))
    human = write_jsonl(
        tmp_path / "h.jsonl",
        [
            {"id": "a", "rater": "every", "p1": "yes", "p2": "yes", "p3": "yes"},
            {"id": "a", "rater": "partial", "p1": "yes", "p2": "", "p3": "yes"},
            {"id": "a", "rater": "scored", "p1": "no", "score": 0.3},
        ],
    )
    output = load_judge_output(judged)
    labels = load_point_labels(human, output)
    scores = dict(zip(labels.score.raters, labels.score.values[SCORE]))
    expected, _ = points_score(read_points(item.checklist), {"p1": 1, "p2": 1, "p3": 1})
    assert scores["every"] == pytest.approx(expected) == pytest.approx(4 / 8)
    assert math.isnan(scores["partial"])  # a point unlabelled: no score made up
    assert scores["scored"] == 0.3  # the rater's own score
    assert (labels.from_points, labels.from_column) == (1, 1)
    # each judge's item score is the rule on its own votes; the jury's is the verdict's
    (record,) = item_output(output).records
    assert record.scores == {SCORE: pytest.approx(1 / 8)}  # p1 and the pitfall met: 5 - 4
    assert [(v.judge, v.score) for v in record.votes] == [("x", pytest.approx(1 / 8))]
    with pytest.raises(Exception, match=r"score 1.5 not in \[0, 1\]"):
        write_jsonl(tmp_path / "bad.jsonl", [{"id": "a", "p1": "yes", "score": 1.5}])
        load_point_labels(tmp_path / "bad.jsonl", output)


def test_unlabelled_points_stay_missing(bench):
    output = load_judge_output(bench["judged"])
    labels = load_point_labels(bench["human"], output)
    joined = point_join(labels, output)
    met = joined.criteria[MET]
    bobs = met.human[met.human_raters.index("bob")]
    # bob left the last point of q00, q03 ... empty: missing there, never "no"
    for k in range(0, 24, 3):
        n = 3 + k % 3
        unit = met.ids.index(f"q{k:02d}::p{n}")
        assert math.isnan(bobs[unit])
        assert met.human[met.human_raters.index("alice")][unit] == bench["truth"][f"q{k:02d}"][-1]
    n_points = sum(len(t) for t in bench["truth"].values())
    assert int((~np.isnan(bobs)).sum()) == n_points - 8
    # and those items have no score of bob's
    score = joined.criteria[SCORE]
    bob_scores = score.human[score.human_raters.index("bob")]
    assert [math.isnan(v) for v in bob_scores] == [k % 3 == 0 for k in range(24)]


def test_agree_reports_met_and_score_with_intervals(bench):
    found = agreement_with_humans(bench["human"], bench["judged"], resamples=200)
    report = found.report
    assert set(report.criteria) == {MET, SCORE}
    met, score = report.criteria[MET], report.criteria[SCORE]
    assert met.n_items == sum(len(t) for t in bench["truth"].values())
    assert score.n_items == 24
    for crit in (met, score):
        jury = crit.judge_human["jury"]
        assert all(s.ci is not None for k, s in jury.items() if k in ("exact", "alpha"))
        assert crit.human_human and next(iter(crit.human_human.values())).value is not None
    # the less noisy judge agrees more with the humans, per point and per item score
    assert met.judge_human["x"]["exact"].value > met.judge_human["y"]["exact"].value
    assert score.judge_human["x"]["mae"].value < score.judge_human["y"]["mae"].value
    # the jury's item score against alice's (the truth) is the verdict's against the rule's
    mine = {
        r["id"]: points_score(
            read_points(
                [
                    {"key": k, "text": p["text"], "points": p["points"]}
                    for k, p in r["points"].items()
                ]
            ),
            {f"p{k + 1}": v for k, v in enumerate(bench["truth"][r["id"]])},
        )[0]
        for r in bench["records"]
    }
    data = report.joined.criteria[SCORE]
    alice = data.human[data.human_raters.index("alice")]
    assert alice.tolist() == pytest.approx([mine[i] for i in data.ids])
    payload = found.to_dict()
    assert payload["join"]["item_scores"]["from_point_labels"] == 48 - 8
    assert any("the intervals resample items" in n for n in found.notes)
    json.dumps(payload)  # plain data


def test_agree_command_prints_met_and_score(bench):
    from jurybox.serving.cli import app

    run = CliRunner().invoke(
        app, ["agree", str(bench["human"]), str(bench["judged"]), "--resamples", "50", "--json"]
    )
    assert run.exit_code == 0, run.output
    payload = json.loads(run.stdout)
    assert set(payload["criteria"]) == {MET, SCORE}


def test_calibrate_fits_met_over_points(bench, tmp_path):
    fitted = fit_map(bench["human"], bench["judged"], folds=3)
    assert fitted.map.criteria == [MET]
    assert fitted.map.provenance_ == "checklist-prov"
    output = load_judge_output(bench["judged"])
    pooled = pooled_output(output)
    assert fitted.map.fitted_on_["join"]["n_joined"] == len(pooled.records)
    # the map's per-judge calibrator maps each judge's met onto the humans'
    cv = fitted.map.cv_[MET]
    assert cv["n_items"] == len(pooled.records) and "before" in cv
    fitted.map.save(tmp_path / "map.yaml")
    assert "met" in (tmp_path / "map.yaml").read_text()
    with pytest.raises(Exception, match="calibrated on met"):
        fit_map(bench["human"], bench["judged"], criteria=["p1"])


def test_met_intervals_resample_items_with_all_their_points(tmp_path):
    """Errors that come by item (a judge wrong on every point of 6 items of 20) are one error
    per item, not five: the interval over items is wider than one over points would be."""
    from jurybox.calibration import agreement_report

    items = [checklist_item(f"i{k:02d}", [3, 2, 2, 1, 1]) for k in range(20)]
    truth = {it.id: [1, 0, 1, 1, 0] if k % 2 else [0, 1, 1, 0, 1] for k, it in enumerate(items)}
    wrong = {it.id for k, it in enumerate(items) if k % 10 in (1, 4, 7)}
    votes = {
        "x": {i: [1 - v for v in t] if i in wrong else t for i, t in truth.items()},
        "y": truth,
    }
    judged = write_jsonl(tmp_path / "j.jsonl", judged_records(items, votes))
    human = write_jsonl(
        tmp_path / "h.jsonl",
        [{"id": i, **{f"p{k + 1}": YES[v] for k, v in enumerate(t)}} for i, t in truth.items()],
    )
    found = agreement_with_humans(human, judged, resamples=400)
    by_item = found.report.criteria[MET].judge_human["x"]["exact"]
    assert by_item.value == pytest.approx(1 - 30 / 100)
    assert by_item.details["ci_method"].startswith("percentile bootstrap over items")
    output = load_judge_output(judged)
    labels = load_point_labels(human, output)
    by_point = agreement_report(labels.met, pooled_output(output), n_resamples=400)
    per_point = by_point.criteria[MET].judge_human["x"]["exact"]
    assert per_point.value == by_item.value
    width = by_item.ci[1] - by_item.ci[0]
    assert width > 1.6 * (per_point.ci[1] - per_point.ci[0])


def test_what_is_not_built_for_points_is_refused_saying_so(bench):
    from jurybox.serving.runs.agree import benchmark_means
    from jurybox.serving.runs.calibrate import fit_conformal_map

    for call, what in ((benchmark_means, "--ppi"), (fit_conformal_map, "--conformal")):
        with pytest.raises(Exception, match=f"{what} is not built for checklist verdicts"):
            call(bench["human"], bench["judged"])
    with pytest.raises(Exception, match="--length-control is not built for checklist"):
        agreement_with_humans(bench["human"], bench["judged"], length_control=bench["judged"])
    # labels plan would plan on the rubric's one criterion (met), the votes on p1..pN
    from jurybox.serving.runs.label_plan import plan_labels

    with pytest.raises(Exception, match="`jurybox labels plan` is not built for checklist"):
        plan_labels(bench["human"], bench["judged"], 0.1)
    with pytest.raises(Exception, match="`jurybox labels plan` is not built for checklist"):
        plan_labels(bench["human"], bench["judged"], 0.5, goal="benchmark-mean")


@pytest.mark.models  # judging the examples on the replay jury takes about a minute on CI's CPU
def test_agree_and_calibrate_on_what_jurybox_judge_wrote(tmp_path):
    """The examples' checklists judged by `jurybox judge` (the tiny jury's recorded answers:
    the replay jury with the checklist recording), point labels for them, then `jurybox agree`
    (on the judges' expected met too) and `jurybox calibrate` as a user runs them."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from judging_helpers import CHECKLISTS_RECORDING, RECORDING, write_replay_jury

    jurybox = str(Path(sys.executable).with_name("jurybox"))
    examples = Path(__file__).resolve().parents[3] / "examples" / "checklists.jsonl"
    jury = write_replay_jury(tmp_path / "jury.yaml", recordings=(RECORDING, CHECKLISTS_RECORDING))
    judged = tmp_path / "judged.jsonl"
    run = subprocess.run(
        [jurybox, "judge", str(examples), "--rubric", "checklist", "--jury", str(jury)]
        + ["--out", str(judged)],
        capture_output=True,
        text=True,
        timeout=1800,
        env=os.environ,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    records = [json.loads(x) for x in judged.read_text().splitlines()]
    assert records and all(r["points"] for r in records)
    rng = np.random.default_rng(5)
    rows = [
        {"id": r["id"], "rater": rater, **{k: YES[int(rng.random() < 0.7)] for k in r["points"]}}
        for r in records
        for rater in ("ana", "ben")
    ]
    human = write_jsonl(tmp_path / "human.jsonl", rows)
    for value in ("score", "expected"):
        run = subprocess.run(
            [jurybox, "agree", str(human), str(judged), "--json", "--value", value]
            + ["--resamples", "50"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        payload = json.loads(run.stdout)
        assert set(payload["criteria"]) == {MET, SCORE}
        n_points = sum(len(r["points"]) for r in records)
        assert payload["criteria"][MET]["n_items"] == n_points
        assert payload["criteria"][SCORE]["n_items"] == len(records)
    run = subprocess.run(
        [jurybox, "calibrate", str(human), str(judged), "-o", str(tmp_path / "map.yaml")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "map.yaml").exists()


def test_calibration_map_applied_point_by_point_and_the_item_rescored(tmp_path):
    """A map fitted on pooled points (`jurybox calibrate`) calibrates each point of a checklist
    verdict, and the item's score is HealthBench's rule on the calibrated points. Judge y says
    every point is met, x and the humans agree: where they split, the map sides with x."""
    from jurybox.calibration import AppliedCalibration
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    rng = np.random.default_rng(11)
    items = [checklist_item(f"i{k:02d}", [4, 3, 2, -3]) for k in range(30)]
    truth = {it.id: [int(rng.random() < 0.5) for _ in range(4)] for it in items}
    votes = {"x": dict(truth), "y": {i: [1, 1, 1, 1] for i in truth}}
    # one more item whose p2 no judge scored: it stays unscored, calibrated or not
    items.append(checklist_item("gap", [4, 3, 2, -3]))
    votes["x"]["gap"], votes["y"]["gap"] = [1, None, 0, 0], [1, None, 1, 1]
    records = judged_records(items, votes)
    judged = write_jsonl(tmp_path / "j.jsonl", records)
    human = write_jsonl(
        tmp_path / "h.jsonl",
        [{"id": i, **{f"p{k + 1}": YES[v] for k, v in enumerate(t)}} for i, t in truth.items()],
    )
    fitted = fit_map(human, judged, folds=3)
    applied = AppliedCalibration(fitted.map, "map.yaml:0")
    rubric = load_rubric("checklist")
    changed = 0
    for record in records[:-1]:
        out = applied.apply(record, rubric)
        calibrated = out["calibrated"]
        assert out["scores"] == record["scores"]  # the raw values are kept
        keys = list(record["points"])
        assert set(calibrated) == {*keys, "score"}
        for key in keys:
            raw = record["scores"][key]
            if raw == 0.5:  # x says no, y yes: the humans side with x
                assert calibrated[key] < 0.1
            else:  # both say met
                assert raw == 1.0 and calibrated[key] > 0.9
        points = read_points(
            [{"criterion": p["text"], "points": p["points"]} for p in record["points"].values()]
        )
        assert calibrated["score"] == pytest.approx(points_score(points, calibrated)[0])
        assert record["scores"]["score"] == pytest.approx(points_score(points, record["scores"])[0])
        changed += abs(calibrated["score"] - record["scores"]["score"]) > 0.01
        # a calibrated reward reads the calibrated item score
        reward = RewardSpec(calibrated=True).bind(rubric).value(out)
        assert reward == pytest.approx(calibrated["score"])
    assert changed > 10
    gap = applied.apply(records[-1], rubric)["calibrated"]
    assert gap["p2"] is None and gap["score"] is None and gap["p1"] > 0.9


def test_a_map_of_another_rubric_on_checklist_verdicts_says_so(bench, tmp_path):
    """A map fitted on an ordinary rubric's criterion, forced onto checklist verdicts, is
    refused naming what it calibrates and what a checklist needs; `jurybox judge` refuses a map
    fitted for another rubric before judging, naming the rubric it was fitted for."""
    from jurybox.calibration import CalibrationMap
    from jurybox.serving.cli import app

    data = fit_map(bench["human"], bench["judged"], folds=3).map.to_dict()
    data["criteria"] = {"accuracy": data["criteria"][MET]}
    other = CalibrationMap.from_dict(data)
    with pytest.raises(Exception, match="calibrates accuracy .*calibrated on met"):
        other.apply_to_record(bench["records"][0])
    fitted = fit_map(bench["human"], bench["judged"], folds=3)
    path = fitted.map.save(tmp_path / "map.yaml")
    preds = write_jsonl(tmp_path / "p.jsonl", [bench["items"][0].model_dump(mode="json")])
    result = CliRunner().invoke(
        app,
        ["judge", str(preds), "--rubric", "checklist-all", "--jury", "tiny"]
        + ["--out", str(tmp_path / "out.jsonl"), "--calibration", str(path)],
    )
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert "on rubric checklist's verdicts" in message and "--force-calibration" in message
    assert not (tmp_path / "out.jsonl").exists()
