"""OpenRLHF's remote reward protocol without a service (jurybox.serving.service.openrlhf): the
items a body makes, the answer's shape, the reward options, and errors naming the field."""

from __future__ import annotations

import pytest

from jurybox.rubrics import load_rubric
from jurybox.serving.service.errors import HTTPProblem, validation_field
from jurybox.serving.service.openrlhf import OpenRLHFRequest, answer, items_of, reward_options

PROMPT = "<|im_start|>user\nWhy are my leaves brown?<|im_end|>\n<|im_start|>assistant\n"


def verdict(item_id: str, weighted: float | None) -> dict:
    return {"id": item_id, "status": "scored" if weighted is not None else "unscored",
            "rubric": "mirage-mg", "jury": "j", "provenance": "0" * 16,
            "scores": {"weighted_sum": weighted},
            "reasons": [] if weighted is not None else ["accuracy: below quorum"]}


def test_the_response_is_the_query_after_its_prompt_without_trailing_special_tokens():
    request = OpenRLHFRequest(query=[PROMPT + "Early blight.<|im_end|>", PROMPT + "A virus </s>",
                                     "No template here."],
                              prompts=[PROMPT, PROMPT, ""], labels=["Early blight", "", None])
    items = items_of(request)
    assert [it["response"] for it in items] == ["Early blight.", "A virus", "No template here."]
    assert [it.get("reference") for it in items] == ["Early blight", None, None]
    assert [it["id"] for it in items] == ["0", "1", "2"] and items[0]["question"] == PROMPT
    with pytest.raises(HTTPProblem) as err:
        items_of(OpenRLHFRequest(query=["other text"], prompts=[PROMPT]))
    assert (err.value.status, err.value.field) == (422, "query[0]")
    with pytest.raises(HTTPProblem) as err:
        items_of(OpenRLHFRequest(query=["a", "b"], prompts=["a"]))
    assert err.value.field == "prompts"


def test_the_answer_is_what_openrlhf_reads_and_unscored_follows_the_policy():
    rubric = load_rubric("mirage-mg")
    records = [verdict("0", 0.75), verdict("1", None)]
    given = answer(reward_options(None, "unit", False, "0.5").bind(rubric), records)
    assert given == {"rewards": [0.75, 0.5], "scores": [0.75, 0.5],
                     "extra_logs": {"jurybox_unscored": 1.0}}
    with pytest.raises(HTTPProblem) as err:
        answer(reward_options(None, "unit", False, "error").bind(rubric), records)
    assert (err.value.status, err.value.kind, err.value.field) == (422, "unscored", "unscored")
    assert "1: accuracy: below quorum" in err.value.message
    with pytest.raises(HTTPProblem) as err:
        reward_options(None, "unit", False, "zero")
    assert err.value.field == "unscored"


def test_a_field_named_like_a_request_location_keeps_its_name():
    assert validation_field(("body", "query")) == "query"
    assert validation_field(("body", "items", 2, "reference")) == "items[2].reference"
    assert validation_field(("query", "unscored")) == "unscored"
    assert validation_field(("body",)) is None
