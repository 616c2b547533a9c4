"""MIR: option letters read robustly, accuracy per group (spatial, sequential, analytical) by
hand on the example files, the gold option from answer or conclusion, and the reasoning steps
judged against the five reference steps."""

import json

import pytest
from bench_helpers import scripted_judge

from jurybox.benchmarks import mir
from jurybox.rubrics.errors import InputError

STEPS = ("summary", "caption", "text2img", "img2img", "conclusion")


def run(examples, **kwargs):
    return mir.evaluate(examples / "mir.json", examples / "mir.predictions.jsonl", **kwargs)


def test_accuracy_by_group_by_hand(examples):
    # 0001 "(a)" right (spatial); 0002 "option B is correct" right, gold B read from the
    # conclusion's text (sequential); 0003 by option text, right (analytical); 0004 C, wrong
    # (spatial, from its group field); 0005 no answer (sequential); 0006 unanswered (puzzle:
    # analytical).
    data = run(examples).to_dict()
    assert data["accuracy"] == pytest.approx(3 / 6)
    assert data["accuracy_by_group"] == pytest.approx(
        {"spatial": 0.5, "sequential": 0.5, "analytical": 0.5}
    )
    assert data["accuracy_by_scenario"]["motion detection"] == 1.0
    assert data["unparseable_ids"] == ["mir-0005"] and data["unanswered_ids"] == ["mir-0006"]
    assert data["unparseable"] == pytest.approx(1 / 6)


@pytest.mark.parametrize(
    "name,group",
    [
        ("perspective relation", "spatial"),
        ("forced perspective", "spatial"),
        ("multi-view 3D geometry", "spatial"),
        ("motion detection", "sequential"),
        ("cooking process", "sequential"),
        ("temporal order", "sequential"),
        ("chart analysis", "analytical"),
        ("something else", None),
        ("motion chart", None),  # two groups match: not placed
    ],
)
def test_sub_scenarios_map_to_groups_by_keyword(name, group):
    assert mir.group_of(name) == group


def _data(tmp_path, items, preds):
    data = tmp_path / "mir.json"
    data.write_text(json.dumps(items))
    p = tmp_path / "p.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in preds) or "\n")
    return data, p


BASE = {
    "question": "<image> <image> which?",
    "options": ["x", "y"],
    "conclusion": "A",
    **{s: f"{s} text" for s in STEPS[:-1]},
}


def test_unplaced_scenarios_are_grouped_unknown_and_listed(tmp_path):
    data, p = _data(
        tmp_path, [{**BASE, "sub_scenario": "mystery"}], [{"id": "0", "response": "Answer: A"}]
    )
    report = mir.evaluate(data, p)
    assert report.to_dict()["accuracy_by_group"] == {"unknown": 1.0}
    assert any("mystery" in n for n in report.notes)
    placed = mir.evaluate(data, p, groups={"Mystery": "spatial"}).to_dict()
    assert placed["accuracy_by_group"] == {"spatial": 1.0}


def test_items_without_id_are_numbered_from_zero_and_dict_options_keep_their_letters(tmp_path):
    items = [{**BASE, "options": {"A": "x", "B": "y"}, "conclusion": "B"}, BASE]
    data, p = _data(
        tmp_path,
        items,
        [{"id": "0", "response": "the answer is (b)"}, {"id": "1", "response": "The answer is x."}],
    )
    assert mir.evaluate(data, p).to_dict()["accuracy"] == 1.0


@pytest.mark.parametrize(
    "item,message,field",
    [
        ({**BASE, "conclusion": "Both could be right."}, "correct option cannot be told", "answer"),
        ({**BASE, "options": {"first": "x", "second": "y"}}, "single-letter keys", "options"),
        ({**BASE, "options": "x or y"}, "options must be a list", "options"),
        ({**BASE, "group": "spacial"}, "group must be one of", "group"),
        ({k: v for k, v in BASE.items() if k != "question"}, "no field 'question'", "question"),
    ],
)
def test_bad_data_is_named(tmp_path, item, message, field):
    data, p = _data(tmp_path, [item], [{"id": "0", "response": "A"}])
    with pytest.raises(InputError) as err:
        mir.evaluate(data, p)
    assert message in str(err.value) and err.value.field == field


def test_steps_are_judged_per_step_for_the_jury_and_each_judge(examples):
    calls = []
    votes = {
        "mir-0001": {"j0": dict.fromkeys(STEPS, 4), "j1": dict.fromkeys(STEPS, 2)},
        "mir-0002": {
            "j0": dict.fromkeys(STEPS, 2),
            "j1": {**dict.fromkeys(STEPS, 2), "img2img": None},
        },
    }
    report = run(examples, judge=scripted_judge(votes, calls))
    data = report.to_dict()
    # extraction fallback for the unparseable 0005, then the steps of the five answered items
    assert calls[0] == ("mir-extract", ["mir-0005"])
    assert calls[1] == ("mir-steps", ["mir-0001", "mir-0002", "mir-0003", "mir-0004", "mir-0005"])
    # 0001: jury 3 per step; 0002: 2; 0003-0005 no verdict (left out); 0006 unanswered (0)
    assert data["step_summary"] == pytest.approx((3 + 2 + 0) / 3)
    assert data["step_mean"] == pytest.approx((3 + 2 + 0) / 3)
    assert data["counted"]["step_summary"] == (
        "1 unanswered counted as 0; 3 unscored left out of the mean"
    )
    assert data["judges"]["j0"]["step_caption"] == pytest.approx((4 + 2 + 0) / 3)
    # j1's img2img on 0002 is unscored, so its step_mean there is too
    assert data["judges"]["j1"]["step_img2img"] == pytest.approx((2 + 0) / 2)
    assert data["judges"]["j1"]["step_mean"] == pytest.approx((2 + 0) / 2)
    zero = run(examples, judge=scripted_judge(votes), unscored="zero").to_dict()
    assert zero["step_summary"] == pytest.approx((3 + 2) / 6)
    assert "MIR reasoning steps" in report.to_markdown()


def test_judging_steps_needs_all_five_reference_steps(tmp_path):
    data, p = _data(
        tmp_path,
        [BASE | {"conclusion": None, "answer": "A"}],
        [{"id": "0", "response": "Answer: A"}],
    )
    assert mir.evaluate(data, p).to_dict()["accuracy"] == 1.0  # no jury: steps not needed
    with pytest.raises(InputError) as err:
        mir.evaluate(data, p, judge=scripted_judge({}))
    assert "no reference step 'conclusion'" in str(err.value)
