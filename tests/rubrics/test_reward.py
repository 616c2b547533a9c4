"""The one reward definition the integrations share (jurybox.rubrics.reward): which number,
its range, and what an unscored item becomes."""

from __future__ import annotations

import pytest

from jurybox.rubrics import load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec, UnscoredReward
from jurybox.rubrics.rubric import Rubric


def record(item_id: str, scores: dict, reasons=(), calibrated=None) -> dict:
    return {
        "id": item_id,
        "status": "scored" if all(v is not None for v in scores.values()) else "unscored",
        "rubric": "r",
        "jury": "j",
        "provenance": "0" * 16,
        "scores": scores,
        "reasons": list(reasons),
        "calibrated": calibrated,
    }


def rubric_with(formula: dict | None, scales=((0, 4), (1, 5))) -> Rubric:
    criteria = [
        {"name": n, "description": n, "scale": {"min": lo, "max": hi}}
        for n, (lo, hi) in zip(("a", "b"), scales)
    ]
    return Rubric.model_validate(
        {
            "name": "r",
            "template": "{{ question }} {{ response }}",
            "criteria": criteria,
            "formula": formula,
        }
    )


def test_the_default_is_the_formula_on_its_range_mapped_to_the_unit_interval():
    reward = RewardSpec().bind(load_rubric("mirage-mg"))
    assert (reward.score, reward.low, reward.high) == ("weighted_sum", 0.0, 1.0)
    general = RewardSpec(score="accuracy").bind(load_rubric("general"))
    assert (general.low, general.high) == (0.0, 4.0)
    assert general.values([record("1", {"accuracy": 3.0})]) == [0.75]
    raw = RewardSpec(score="accuracy", scale="raw").bind(load_rubric("general"))
    assert raw.values([record("1", {"accuracy": 3.0})]) == [3.0]


def test_a_linear_formula_s_range_is_its_extremes_over_the_scales():
    # a on [0, 4], b on [1, 5]: 2a - b spans [0 - 5, 8 - 1]
    reward = RewardSpec().bind(rubric_with({"name": "f", "expression": "2*a - b"}))
    assert (reward.low, reward.high) == (-5.0, 7.0)
    assert reward.values([record("1", {"a": 4, "b": 1, "f": 7.0})]) == [1.0]
    assert reward.values([record("1", {"a": 0, "b": 5, "f": -5.0})]) == [0.0]
    rounded = RewardSpec().bind(
        rubric_with({"name": "f", "expression": "(a + b) / 3", "digits": 2})
    )
    assert (rounded.low, rounded.high) == (0.33, 3.0)


def test_a_formula_that_is_not_linear_needs_its_range_stated():
    nonlinear = rubric_with({"name": "f", "expression": "a * b"})
    with pytest.raises(InputError, match="not linear") as err:
        RewardSpec().bind(nonlinear)
    assert err.value.field == "low"
    reward = RewardSpec(low=0, high=20).bind(nonlinear)
    assert reward.values([record("1", {"a": 2, "b": 5, "f": 10.0})]) == [0.5]


def test_a_score_the_rubric_lacks_or_an_ambiguous_default_is_refused_by_name():
    with pytest.raises(InputError, match="no score 'fluency'") as err:
        RewardSpec(score="fluency").bind(load_rubric("general"))
    assert err.value.field == "score"
    with pytest.raises(InputError, match="4 criteria and no formula"):
        RewardSpec().bind(load_rubric("general"))
    with pytest.raises(InputError, match="empty"):
        RewardSpec(score="accuracy", low=3, high=3).bind(load_rubric("general"))


def test_unscored_is_never_a_silent_zero():
    rubric = load_rubric("general")
    records = [
        record("1", {"accuracy": 4.0}),
        record("2", {"accuracy": None}, reasons=["accuracy: 1 of 2 votes, quorum 2"]),
    ]
    none = RewardSpec(score="accuracy", unscored="none").bind(rubric)
    assert none.values(records) == [1.0, None]
    assert none.count_unscored(records) == 1
    explicit = RewardSpec(score="accuracy", unscored=0.25).bind(rubric)
    assert explicit.values(records) == [1.0, 0.25]  # the user's number, as given
    error = RewardSpec(score="accuracy").bind(rubric)  # the default
    with pytest.raises(
        UnscoredReward,
        match=r"1 item\(s\) have no reward: 2: accuracy: 1 of "
        r"2 votes",
    ) as err:
        error.values(records)
    assert err.value.unscored == [("2", "accuracy: 1 of 2 votes, quorum 2")]
    with pytest.raises(ValueError, match="finite"):
        RewardSpec(unscored=float("nan"))


def test_the_calibrated_reward_reads_calibrated_values_and_never_falls_back_to_raw():
    rubric = load_rubric("general")
    reward = RewardSpec(score="accuracy", calibrated=True, scale="raw").bind(rubric)
    assert reward.name == "general.accuracy (calibrated)"
    calibrated = record("1", {"accuracy": 4.0}, calibrated={"accuracy": 2.5})
    assert reward.values([calibrated]) == [2.5]
    with pytest.raises(InputError, match="carries no calibrated scores"):
        reward.values([record("2", {"accuracy": 4.0})])
    none = RewardSpec(score="accuracy", calibrated=True, unscored="none").bind(rubric)
    assert none.values([record("3", {"accuracy": 4.0}, calibrated={"accuracy": None})]) == [None]
