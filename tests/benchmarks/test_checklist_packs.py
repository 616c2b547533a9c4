"""The seed packs' checklist views: MIRAGE-MMMT's goal facts as checklist points, judged point
by point beside the paper's metrics, checked by hand against scripted point votes, and run
through the resumable runner with judges that answer by rule."""

from __future__ import annotations

import json

import pytest
from bench_helpers import bottom_of, rule_jury, scripted_judge, top_of
from test_bench_mirage import MMMT_VOTES

from jurybox.benchmarks import Judged, mir, mirage, run_benchmark
from jurybox.rubrics import VerdictRecord
from jurybox.rubrics.errors import InputError
from jurybox.serving.runs import bench as runs_bench
from jurybox.serving.runs.bench import Bench

# Point votes per item and judge (None: an unscored vote). #830625 has 3 missing facts (p1-p3)
# and 2 known ones (p4, p5); #834851 3 known (p1-p3); #826741 4 known (p1-p4).
POINT_VOTES = {
    "#830625": {"j0": [1, 1, 0, 1, 1], "j1": [1, 0, 0, 1, 0]},
    "#834851": {"j0": [1, 1, 1], "j1": [1, 1, 1]},
    "#826741": {"j0": [1, 1, 1, None], "j1": [1, 1, 0, None]},
}


def point_judge(seen, votes=POINT_VOTES):
    """A Judge of the checklist pass: each point's votes from ``votes`` (the mean, quorum 1),
    the item's score by HealthBench's rule written out here; items not in it get no verdict."""

    def judge(task, rubric, items):
        seen.append((task, rubric.name, list(items)))
        records = {}
        for it in items:
            if it.id not in votes:
                continue
            by_judge = votes[it.id]
            scores = {}
            for k, point in enumerate(it.checklist):
                scored = [v[k] for v in by_judge.values() if v[k] is not None]
                scores[point.key] = sum(scored) / len(scored) if scored else None
            unscored = [key for key, v in scores.items() if v is None]
            possible = sum(p.points for p in it.checklist if p.points > 0)
            earned = sum(p.points * (scores[p.key] or 0) for p in it.checklist)
            scores["score"] = None if unscored else min(max(earned / possible, 0), 1)
            records[it.id] = VerdictRecord(
                id=it.id,
                status="unscored" if unscored else "scored",
                rubric=rubric.name,
                jury="scripted",
                provenance="p0",
                scores=scores,
                reasons=[f"{key}: below quorum" for key in unscored],
                votes=[
                    {"judge": j, "criterion": p.key, "score": v[k]}
                    if v[k] is not None
                    else {"judge": j, "criterion": p.key, "error": "scripted failure"}
                    for j, v in by_judge.items()
                    for k, p in enumerate(it.checklist)
                ],
            )
        return Judged(records)

    return judge


def both(seen):
    main, points = scripted_judge(MMMT_VOTES), point_judge(seen)
    return lambda task, rubric, items: (
        points(task, rubric, items) if task.endswith("checklist") else main(task, rubric, items)
    )


def test_mirage_mmmt_missing_coverage_from_points(examples):
    seen = []
    report = mirage.evaluate_mmmt(
        examples / "mirage_mmmt_decomp.json",
        examples / "mirage_mmmt.predictions.jsonl",
        judge=both(seen),
        checklist=True,
    )
    data = report.to_dict()
    # the checklist pass: the answered items, each with its goal facts as points
    ((task, rubric, items),) = seen
    assert (task, rubric) == ("mirage-mmmt-checklist", "checklist")
    assert [it.id for it in items] == ["#830625", "#834851", "#826741"]
    rows = {r["id"]: r for r in json.loads((examples / "mirage_mmmt_decomp.json").read_text())}
    for it in items:
        facts = [*rows[it.id]["missing_goal"], *rows[it.id]["known_goal"]]
        assert [p.text for p in it.checklist] == [
            (mirage.MISSING_POINT if k < len(rows[it.id]["missing_goal"]) else mirage.KNOWN_POINT)
            .format(f)
            for k, f in enumerate(facts)
        ]  # fmt: skip
        assert rows[it.id]["dialog_context"].strip() in it.question
        assert it.response  # the model's turn is what the points are checked in
    # by hand: the jury's met is the mean of the votes
    # #830625: missing p1-p3 met 1, .5, 0 -> .5; known p4, p5: 1, .5 -> .75;
    #   score (5 * 1.5 + 3 * 1.5) / (5 * 3 + 3 * 2) = 12 / 21
    # #834851: no missing facts (not in missing_points); known 1; score 1
    # #826741: no missing facts; p4 unscored -> known and score unscored (left out)
    # #873528: unanswered, 3 missing and known facts: 0
    assert data["missing_points"] == pytest.approx((0.5 + 0) / 2)
    assert data["known_points"] == pytest.approx((0.75 + 1 + 0) / 3)
    assert data["checklist_score"] == pytest.approx((12 / 21 + 1 + 0) / 3)
    assert "1 unscored left out" in data["counted"]["known_points"]
    # one judge's view: its own votes
    j0 = data["judges"]["j0"]
    assert j0["missing_points"] == pytest.approx((2 / 3 + 0) / 2)
    assert j0["checklist_score"] == pytest.approx(((5 * 2 + 3 * 2) / 21 + 1 + 0) / 3)
    # the paper's metrics are as without the view
    plain = mirage.evaluate_mmmt(
        examples / "mirage_mmmt_decomp.json",
        examples / "mirage_mmmt.predictions.jsonl",
        judge=scripted_judge(MMMT_VOTES),
    ).to_dict()
    for name in ("missing_coverage", "known_accuracy", "perfect", "decision_accuracy"):
        assert data[name] == plain[name]
    assert "missing_points" not in plain
    text = report.to_markdown()
    assert "an added view, not the paper's" in text
    assert any("the paper's missing_coverage is one 0-4 judgment" in n for n in data["notes"])


def test_the_checklist_view_needs_the_goal_facts(examples, tmp_path):
    rows = json.loads((examples / "mirage_mmmt_decomp.json").read_text())
    direct = tmp_path / "direct.json"
    direct.write_text(
        json.dumps([{k: v for k, v in r.items() if not k.endswith("_goal")} for r in rows])
    )
    with pytest.raises(InputError, match="use the decomp file") as caught:
        run_benchmark(
            "mirage-mmmt",
            direct,
            examples / "mirage_mmmt.predictions.jsonl",
            judge=both([]),
            checklist=True,
        )
    assert caught.value.field == "checklist"


def test_bench_judges_the_goal_checklists_through_the_runner(examples, tmp_path, monkeypatch):
    # j0 says every point is met, j1 that none is: the jury's met is 0.5 on every point
    made = rule_jury(top_of, bottom_of)
    monkeypatch.setattr(runs_bench, "make_jury", lambda spec: made)
    bench = Bench(
        "mirage-mmmt",
        examples / "mirage_mmmt_decomp.json",
        examples / "mirage_mmmt.predictions.jsonl",
        out=tmp_path / "run",
        checklist=True,
    )
    data = bench.run().to_dict()
    written = [
        json.loads(line)
        for line in (tmp_path / "run" / "mirage-mmmt-checklist.items.jsonl")
        .read_text()
        .splitlines()
    ]
    assert [len(r["checklist"]) for r in written] == [5, 3, 4]
    assert (tmp_path / "run" / "mirage-mmmt-checklist.judged.jsonl").exists()
    assert data["missing_points"] == pytest.approx((0.5 + 0) / 2)
    assert data["known_points"] == pytest.approx((0.5 * 3 + 0) / 4)
    assert data["judges"]["j0"]["known_points"] == pytest.approx(3 / 4)
    assert data["judges"]["j1"]["known_points"] == pytest.approx(0)


def test_mir_reference_steps_as_five_equal_points(examples):
    votes = {
        "mir-0001": {"j0": [1, 1, 1, 1, 1], "j1": [1, 0, 1, 0, 1]},
        "mir-0002": {"j0": [0, 0, 0, 0, 1], "j1": [0, 0, 0, None, 1]},
    }
    seen = []
    steps, points = scripted_judge({}), point_judge(seen, votes)
    report = mir.evaluate(
        examples / "mir.json",
        examples / "mir.predictions.jsonl",
        judge=lambda task, rubric, items: (points if task == "mir-checklist" else steps)(
            task, rubric, items
        ),
        checklist=True,
    )
    data = report.to_dict()
    ((task, rubric, items),) = seen
    assert (task, rubric) == ("mir-checklist", "checklist")
    rows = {r["id"]: r for r in json.loads((examples / "mir.json").read_text())}
    first = items[0]
    assert [p.points for p in first.checklist] == [1] * 5
    assert all(
        mir.STEP_POINT.format(step=s, text="") in p.text
        for s, p in zip(mir.STEPS, first.checklist, strict=True)
    )
    assert rows[first.id]["summary"] in first.checklist[0].text
    # 0001: met 1, .5, 1, .5, 1 -> .8; 0002: 0, 0, 0, 0 (j0 alone), 1 -> .2;
    # 0003-0005: no verdict (left out); 0006 unanswered (0)
    assert data["steps_met"] == pytest.approx((0.8 + 0.2 + 0) / 3)
    assert data["met_caption"] == pytest.approx((0.5 + 0 + 0) / 3)
    # j1 on 0002: its img2img vote unscored, so its share there is too
    assert data["judges"]["j1"]["steps_met"] == pytest.approx((0.6 + 0) / 2)
    assert "an added view, not MIR's metric" in report.to_markdown()
    assert (
        data["accuracy"]
        == mir.evaluate(examples / "mir.json", examples / "mir.predictions.jsonl").to_dict()[
            "accuracy"
        ]
    )


def test_mir_checklist_view_needs_a_jury(examples):
    with pytest.raises(InputError, match="pass a jury"):
        mir.evaluate(examples / "mir.json", examples / "mir.predictions.jsonl", checklist=True)
