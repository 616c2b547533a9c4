"""MicroVQA: accuracy overall and per task checked by hand on the example files, the judge
fallback reported apart, and bad input named by file, row and field."""

import json

import pytest
from bench_helpers import public_microvqa, scripted_judge

from jurybox.benchmarks import microvqa, run_benchmark
from jurybox.rubrics.errors import InputError


def run(examples, **kwargs):
    return microvqa.evaluate(
        examples / "microvqa.json", examples / "microvqa.predictions.jsonl", **kwargs
    )


def test_accuracy_by_task_and_unparseable_share_by_hand(examples):
    # 101 "Answer: 2" right; 102 corrects itself to (1), right; 103 "(10)" right; 104
    # "**Final Answer:** (1)" right; 105 names no option (unparseable); 106 has no prediction.
    report = run(examples)
    data = report.to_dict()
    assert data["accuracy"] == pytest.approx(4 / 6)
    assert data["accuracy_by_task"] == pytest.approx({"1": 1.0, "2": 0.5, "3": 0.5})
    assert data["unparseable"] == pytest.approx(1 / 6) and data["unanswered"] == pytest.approx(
        1 / 6
    )
    assert data["unparseable_ids"] == ["105"] and data["unanswered_ids"] == ["106"]
    assert data["items"] == 6 and data["n"]["accuracy"] == 6
    assert data["counted"]["accuracy"] == "1 unanswered counted as wrong"
    assert data["task_names"]["2"] == "hypothesis generation"
    assert "accuracy_with_fallback" not in data
    rows = {r["id"]: r for r in report.artifacts["items"]}
    assert rows["102"]["answer"] == "1" and rows["103"]["answer"] == "10"
    assert rows["105"]["status"] == "none" and rows["106"]["status"] == "unanswered"


def test_the_public_rule_would_score_these_predictions_zero(examples):
    items = json.loads((examples / "microvqa.json").read_text())
    preds = {
        json.loads(line)["id"]: json.loads(line)["response"]
        for line in (examples / "microvqa.predictions.jsonl").read_text().splitlines()
    }
    public = [
        public_microvqa(preds.get(str(it["key_question"]), "")) == it["correct_index"]
        for it in items
    ]
    assert sum(public) == 0  # jurybox: 4 of 6


def test_judge_fallback_is_reported_beside_the_rules(examples):
    calls = []
    judge = scripted_judge({"105": {"j0": {"answer": 1}, "j1": {"answer": 1}}}, calls)
    data = run(examples, judge=judge).to_dict()
    assert calls == [("microvqa-extract", ["105"])]  # only the unparseable response
    assert data["accuracy"] == pytest.approx(4 / 6)  # the headline stays rules-only
    assert data["accuracy_with_fallback"] == pytest.approx(5 / 6)
    assert data["accuracy_by_task_with_fallback"]["2"] == 1.0
    assert data["unparseable_after_fallback"] == 0.0 and data["judge_extracted"] == 1


@pytest.mark.parametrize(
    "votes",
    [
        {"j0": {"answer": 2}, "j1": {"answer": 3}},  # judges disagree: mean 2.5
        {"j0": {"answer": 0}, "j1": {"answer": 0}},  # no single answer
        {"j0": {"answer": 9}},  # not an option of the item
        {"j0": {"answer": None}},  # no verdict
    ],
)
def test_a_fallback_that_names_no_single_option_leaves_the_item_unparseable(examples, votes):
    data = run(examples, judge=scripted_judge({"105": votes})).to_dict()
    assert data["unparseable_after_fallback"] == pytest.approx(1 / 6)


def _write(tmp_path, items, preds, data_name="d.json", pred_name="p.jsonl"):
    data = tmp_path / data_name
    if data_name.endswith(".jsonl"):
        data.write_text("".join(json.dumps(i) + "\n" for i in items))
    else:
        data.write_text(json.dumps(items))
    p = tmp_path / pred_name
    p.write_text("".join(json.dumps(r) + "\n" for r in preds))
    return data, p


ITEM = {
    "key_question": 1,
    "question": "q",
    "choices": ["a", "b", "c"],
    "correct_index": 2,
    "task": 1,
}


def test_jsonl_data_and_csv_predictions(tmp_path):
    data, _ = _write(
        tmp_path, [ITEM, {**ITEM, "key_question": 2, "task": "3"}], [], data_name="d.jsonl"
    )
    csv = tmp_path / "p.csv"
    csv.write_text('id,response\n1,"The answer is (3)"\n2,\n')
    report = run_benchmark("microvqa", data, csv)
    assert report.to_dict()["accuracy"] == 0.5 and report.to_dict()["unanswered_ids"] == ["2"]


@pytest.mark.parametrize(
    "items,preds,message,field",
    [
        (
            [{k: v for k, v in ITEM.items() if k != "correct_index"}],
            [],
            "row 1: no field 'correct_index'",
            "correct_index",
        ),
        ([{**ITEM, "correct_index": 3}], [], "0-based index into the 3 choices", "correct_index"),
        ([{**ITEM, "task": 4}], [], "task must be 1, 2 or 3", "task"),
        ([{**ITEM, "choices": "a, b"}], [], "choices must be a list", "choices"),
        ([ITEM, ITEM], [], "duplicate key_question: '1' (rows 1 and 2)", "key_question"),
        ([ITEM], [{"id": "9", "response": "x"}], "ids that", "id"),
        (
            [ITEM],
            [{"id": "1", "response": "x"}, {"id": "1", "response": "y"}],
            "duplicate id: '1' (rows 1 and 2)",
            "id",
        ),
        ([ITEM], [{"id": "1"}], "row 1: no field 'response'", "response"),
        ([ITEM], [{"response": "x"}], "row 1: no field 'id'", "id"),
        ([ITEM], [{"id": "1", "response": ["x"]}], "response must be text", "response"),
    ],
)
def test_bad_input_names_file_row_and_field(tmp_path, items, preds, message, field):
    data, p = _write(tmp_path, items, preds)
    with pytest.raises(InputError) as err:
        run_benchmark("microvqa", data, p)
    assert message in str(err.value) and err.value.field == field


def test_limit_is_a_trial_run_and_says_so(examples):
    report = run(examples, limit=2)
    assert report.counts["items"] == 2
    assert any("first 2 of 6" in n for n in report.notes)
