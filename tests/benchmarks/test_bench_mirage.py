"""MIRAGE: routing by category, the paper's metrics for the jury and each judge checked by hand
against scripted verdicts, how unanswered and unscored items are counted, the Contextual set,
and MMMT's decisions and goals."""

import json

import pytest
from bench_helpers import scripted_judge

from jurybox.benchmarks import mirage, run_benchmark
from jurybox.rubrics.errors import InputError

ID = ("identification_accuracy", "reasoning_accuracy")
MG = ("accuracy", "relevance", "completeness", "parsimony")


def id_votes(ident, reasoning):
    return dict(zip(ID, (ident, reasoning)))


def mg_votes(*scores):
    return dict(zip(MG, scores))


MMST_VOTES = {
    "#868133": {"j0": id_votes(1, 4), "j1": id_votes(1, 2)},  # jury: 1, 3
    "#870585": {"j0": id_votes(0, 1), "j1": id_votes(0, 1)},  # jury: 0, 1
    "#873026": {"j0": id_votes(1, None), "j1": id_votes(0, None)},  # jury: 0.5, unscored
    "#874336": {"j0": mg_votes(4, 4, 3, 3), "j1": mg_votes(2, 4, 3, 1)},  # jury 3, 4, 3, 2
    "#874043": {"j0": mg_votes(4, 4, 4, 4), "j1": mg_votes(None, None, None, None)},
    # "#789132" has no prediction
}


def mmst(examples, **kwargs):
    calls = []
    report = mirage.evaluate_mmst(
        examples / "mirage_mmst.json",
        examples / "mirage_mmst.predictions.jsonl",
        judge=scripted_judge(MMST_VOTES, calls),
        **kwargs,
    )
    return report, calls


def test_items_are_routed_by_category():
    assert mirage.route("Plant Disease Identification") == "id"
    assert mirage.route("Insect and Pest Identification") == "id"
    assert mirage.route("Plant Care and Gardening Guidance") == "mg"
    assert mirage.route("Weeds/Invasive Plants Management") == "mg"
    assert mirage.route("Recipes") is None


def test_mmst_metrics_for_the_jury_and_each_judge_by_hand(examples):
    report, calls = mmst(examples)
    assert calls == [
        ("mirage-id", ["#868133", "#870585", "#873026"]),
        ("mirage-mg", ["#874336", "#874043"]),
    ]  # #789132 unanswered: not judged
    data = report.to_dict()
    assert data["id_accuracy"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert data["reasoning"] == pytest.approx((3 + 1) / 2)  # #873026 unscored, left out
    assert data["counted"]["reasoning"] == "1 unscored left out of the mean"
    assert data["mg_accuracy"] == pytest.approx((3 + 4 + 0) / 3)  # unanswered counts 0
    assert data["mg_parsimony"] == pytest.approx((2 + 4 + 0) / 3)
    assert data["weighted_sum"] == pytest.approx((0.75 + 1.0 + 0) / 3)
    assert data["counted"]["weighted_sum"] == "1 unanswered counted as 0"
    j0, j1 = data["judges"]["j0"], data["judges"]["j1"]
    assert j0["id_accuracy"] == pytest.approx(2 / 3) and j1["id_accuracy"] == pytest.approx(1 / 3)
    assert j0["reasoning"] == pytest.approx(2.5) and j1["reasoning"] == pytest.approx(1.5)
    # a judge's weighted sum is the formula on its own votes: (2*4+4+3+3)/20, 1.0, 0
    assert j0["weighted_sum"] == pytest.approx((0.9 + 1.0 + 0) / 3)
    assert j1["weighted_sum"] == pytest.approx((0.6 + 0) / 2)  # #874043: j1 unscored
    assert data["unanswered_ids"] == ["#789132"] and data["unscored_ids"] == ["#873026"]
    assert (data["items"], data["id_items"], data["mg_items"]) == (6, 3, 3)
    assert data["ci"]["weighted_sum"][0] <= data["weighted_sum"] <= data["ci"]["weighted_sum"][1]
    text = report.to_markdown()
    assert "| jury | 50.0" in text and "| j1 |" in text and "Weighted sum" in text


def test_unscored_items_can_count_as_zero(examples):
    data = mmst(examples, unscored="zero")[0].to_dict()
    assert data["reasoning"] == pytest.approx((3 + 1 + 0) / 3)
    assert data["counted"]["reasoning"] == "1 unscored counted as 0"


def test_the_contextual_set_is_scored_on_mg_only(examples, tmp_path):
    items = json.loads((examples / "mirage_mmst.json").read_text())
    for it in items:
        it.update(location_related=True, location_related_analysis="...", time_related=False)
    data = tmp_path / "contextual.json"
    data.write_text(json.dumps(items))
    calls = []
    report = mirage.evaluate_mmst(
        data, examples / "mirage_mmst.predictions.jsonl", judge=scripted_judge({}, calls)
    )
    assert [task for task, _ in calls] == ["mirage-mg"] and len(calls[0][1]) == 5
    out = report.to_dict()
    assert out["id_accuracy"] is None
    assert out["undefined"]["id_accuracy"] == "the Contextual set is scored on MG only"
    assert "Contextual" in report.title


@pytest.mark.parametrize(
    "change,message,field",
    [
        ({"category": "Recipes"}, "neither identification nor management", "category"),
        ({"entity_name": ""}, "has no entity_name", "entity_name"),
        ({"answer": None}, "no field 'answer'", "answer"),
    ],
)
def test_bad_mmst_data_is_named(examples, tmp_path, change, message, field):
    items = json.loads((examples / "mirage_mmst.json").read_text())
    items[0].update(change)
    data = tmp_path / "d.json"
    data.write_text(json.dumps(items))
    with pytest.raises(InputError) as err:
        mirage.evaluate_mmst(
            data, examples / "mirage_mmst.predictions.jsonl", judge=scripted_judge({})
        )
    assert message in str(err.value) and err.value.field == field


def test_the_mirage_packs_need_a_jury(examples):
    with pytest.raises(InputError, match="judged by a jury"):
        run_benchmark(
            "mirage-mmst", examples / "mirage_mmst.json", examples / "mirage_mmst.predictions.jsonl"
        )


MMMT_VOTES = {
    # decisions of the first two are read from the predictions; their decision votes are ignored
    "#830625": {
        "j0": {
            "decision_accuracy": 0,
            "known_accuracy": 4,
            "missing_coverage": 4,
            "utterance_goal_relevance": 4,
            "spurious": 0,
        },
        "j1": {
            "decision_accuracy": 0,
            "known_accuracy": 4,
            "missing_coverage": 2,
            "utterance_goal_relevance": 4,
            "spurious": 0,
        },
    },
    "#834851": {
        j: {
            "decision_accuracy": 1,
            "known_accuracy": 4,
            "missing_coverage": 4,
            "utterance_goal_relevance": 4,
            "spurious": 0,
        }
        for j in ("j0", "j1")
    },
    "#826741": {
        "j0": {
            "decision_accuracy": 0,
            "known_accuracy": 2,
            "missing_coverage": 4,
            "utterance_goal_relevance": 3,
            "spurious": 1,
        },
        "j1": {
            "decision_accuracy": 1,
            "known_accuracy": 2,
            "missing_coverage": 4,
            "utterance_goal_relevance": 1,
            "spurious": 1,
        },
    },
    # "#873528" has no prediction
}


def test_mmmt_decisions_goals_spurious_and_perfect_by_hand(examples):
    seen = []

    def judge(task, rubric, items):
        seen.extend(items)
        return scripted_judge(MMMT_VOTES)(task, rubric, items)

    report = mirage.evaluate_mmmt(
        examples / "mirage_mmmt_decomp.json",
        examples / "mirage_mmmt.predictions.jsonl",
        judge=judge,
    )
    data = report.to_dict()
    # decisions: right (field), right (tag), jury 0.5 (split), unanswered 0
    assert data["decision_accuracy"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert (data["decisions_from_predictions"], data["decisions_judged"]) == (2, 1)
    assert data["known_accuracy"] == pytest.approx((4 + 4 + 2 + 0) / 4)
    assert data["missing_coverage"] == pytest.approx((3 + 4 + 4 + 0) / 4)
    assert data["utterance_goal_relevance"] == pytest.approx((4 + 4 + 2 + 0) / 4)
    assert data["spurious"] == pytest.approx(1 / 3)  # the unanswered item asserted nothing
    assert data["perfect"] == pytest.approx(1 / 4)  # only #834851: all 4s and not spurious
    assert data["judges"]["j0"]["decision_accuracy"] == pytest.approx(2 / 4)
    assert data["judges"]["j1"]["decision_accuracy"] == pytest.approx(3 / 4)
    # the judges see the gold goals, read from the fields that exist
    first = next(it for it in seen if it.id == "#830625")
    assert first.extra["known_goal"][0] == "location: woods on lot by Lake Michigan"
    assert first.extra["decision"] == "<Clarify>" and first.context.startswith("user:")


def test_the_direct_file_reports_no_goal_scores(examples, tmp_path):
    items = json.loads((examples / "mirage_mmmt_decomp.json").read_text())
    for it in items:
        del it["known_goal"], it["missing_goal"]
    data = tmp_path / "direct_test.json"
    data.write_text(json.dumps(items))
    report = mirage.evaluate_mmmt(
        data, examples / "mirage_mmmt.predictions.jsonl", judge=scripted_judge(MMMT_VOTES)
    )
    out = report.to_dict()
    assert out["known_accuracy"] is None and out["missing_coverage"] is None
    assert out["perfect"] is None and "direct file" in out["undefined"]["perfect"]
    assert out["utterance_goal_relevance"] == pytest.approx(2.5)


@pytest.mark.parametrize(
    "text,decision",
    [
        ("<Clarify> What variety is it?", "Clarify"),
        ("I will respond. <respond> Water it weekly.", "Respond"),
        ("<Clarify> or <Respond>?", None),
        ("Could you tell me more?", None),
    ],
)
def test_plain_decisions_from_tags(text, decision):
    assert mirage.plain_decision({}, text) == decision
    assert mirage.plain_decision({"decision": "Ask for clarification"}, text) == "Clarify"


@pytest.mark.parametrize(
    "change,message",
    [
        ({"decision": "<Maybe>"}, "decision must be <Clarify> or <Respond>"),
        ({"known_goal": None}, "(a mix of the direct and decomp files?)"),
    ],
)
def test_bad_mmmt_data_is_named(examples, tmp_path, change, message):
    items = json.loads((examples / "mirage_mmmt_decomp.json").read_text())
    items[1].update(change)
    if change.get("known_goal", 0) is None:
        del items[1]["known_goal"]
    data = tmp_path / "d.json"
    data.write_text(json.dumps(items))
    with pytest.raises(InputError, match="row 2") as err:
        mirage.evaluate_mmmt(
            data, examples / "mirage_mmmt.predictions.jsonl", judge=scripted_judge({})
        )
    assert message in str(err.value)
