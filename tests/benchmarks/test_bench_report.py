"""Metrics say how every item was counted; the JSON form has one key per metric, fractions in
0..1, and no NaN."""

import json

import pytest

from jurybox.benchmarks.report import (
    NOT_APPLICABLE,
    UNANSWERED,
    UNSCORED,
    BenchReport,
    Metric,
    Table,
    by_group,
    mean_metric,
    undefined,
)


def test_unanswered_count_as_zero_and_unscored_follow_the_policy():
    values = [1.0, 0.0, 1.0, UNANSWERED, UNSCORED, NOT_APPLICABLE]
    m = mean_metric(values, kind="share", wrong="wrong")
    assert m.value == pytest.approx(2 / 4) and m.n == 4
    assert m.counted == "1 unanswered counted as wrong; 1 unscored left out of the mean"
    z = mean_metric(values, kind="share", unscored="zero", wrong="wrong")
    assert z.value == pytest.approx(2 / 5) and z.n == 5
    assert "1 unscored counted as wrong" in z.counted
    out = mean_metric(values, unanswered=None)
    assert out.value == pytest.approx(2 / 3) and "1 unanswered left out" in out.counted


def test_ci_brackets_the_mean_and_is_absent_for_one_value():
    m = mean_metric([0.0, 1.0, 1.0, 1.0, 0.0, 1.0])
    assert m.ci is not None and m.ci[0] <= m.value <= m.ci[1]
    assert mean_metric([3.0]).ci is None
    assert mean_metric([UNSCORED]).value is None


def test_groups_keep_the_given_order_then_the_order_of_appearance():
    groups = by_group([1.0, 0.0, 1.0, 1.0], ["b", "a", "c", "b"], order=["a", "b"])
    assert list(groups) == ["a", "b", "c"]
    assert groups["b"].value == 1.0 and groups["a"].value == 0.0


def test_json_has_one_key_per_metric_and_markdown_says_how_items_were_counted(tmp_path):
    acc = mean_metric([1.0, UNANSWERED], kind="share", wrong="wrong")
    report = BenchReport(
        "demo",
        "Demo",
        {"accuracy": acc, "by": {"x": acc}, "gone": undefined("no data")},
        counts={"items": 2},
        lists={"unanswered_ids": ["q2"]},
        tables=[Table("t", ["Accuracy"], [("model", [acc])])],
        artifacts={"items": [{"id": "q1", "score": float("nan")}]},
    )
    data = report.to_dict()
    assert data["accuracy"] == 0.5 and data["by"] == {"x": 0.5} and data["gone"] is None
    assert data["counted"]["accuracy"] == "1 unanswered counted as wrong"
    assert data["undefined"] == {"gone": "no data"} and data["unanswered_ids"] == ["q2"]
    assert data["n"]["accuracy"] == 2 and data["ci"]["accuracy"] == [0.0, 1.0]
    text = report.to_markdown()
    assert "| model | 50.0" in text and "accuracy: 1 unanswered counted as wrong" in text
    assert "gone: no data" in text
    written = report.save(tmp_path)
    assert [p.name for p in written] == ["report.md", "report.json", "items.jsonl"]
    assert json.loads((tmp_path / "items.jsonl").read_text())["score"] is None


def test_cells_show_shares_in_percent_and_scores_with_their_digits():
    assert Metric(0.4412, (0.41, 0.47), 10, "share").cell() == "44.1 [41.0, 47.0]"
    assert Metric(0.75, None, 1, "score", 4).cell() == "0.7500"
    assert undefined("x").cell() == "n/a"
