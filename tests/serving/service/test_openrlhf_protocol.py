"""OpenRLHF's remote reward protocol without a service (jurybox.serving.service.openrlhf): the
items a body makes (a prompt cut from the left included), the answer's shape, the reward
options (no default unscored policy), errors naming OpenRLHF's fields, and parsing that is
linear in the body whatever a policy writes."""

from __future__ import annotations

import math
import time

import pytest
from service_helpers import refused

from jurybox.judges.parsing import REASON_CODES, reason_code
from jurybox.rubrics import load_rubric
from jurybox.rubrics.reward import RewardSpec
from jurybox.serving.errors import Invalid
from jurybox.serving.problems import validation_field
from jurybox.serving.service.openrlhf import (
    OpenRLHFRequest,
    answer,
    items_of,
    renamed,
    response_of,
    reward_options,
    strip_trailing_special,
)

PROMPT = "<|im_start|>user\nWhy are my leaves brown?<|im_end|>\n<|im_start|>assistant\n"
SPANS = {"accuracy": 4.0, "relevance": 4.0, "completeness": 4.0, "parsimony": 4.0}


def items(request: OpenRLHFRequest, max_items: int = 256, max_chars: int = 100_000) -> list:
    return items_of(request, max_items, max_chars)


def verdict(
    item_id: str, weighted: float | None, accuracy: float | None = 3.0, spread: float = 0.0
) -> dict:
    return {
        "id": item_id,
        "status": "scored" if weighted is not None else "unscored",
        "rubric": "mirage-mg",
        "jury": "j",
        "provenance": "0" * 16,
        "scores": {
            "weighted_sum": weighted,
            "accuracy": accuracy,
            "relevance": 4.0,
            "completeness": 4.0,
            "parsimony": 4.0,
        },
        "disagreement": {"accuracy": {"n": 2, "std": None, "range": spread}},
        "reasons": []
        if weighted is not None
        else ["accuracy: below quorum: 0 of 2 judges scored accuracy, 1 needed"],
    }


def test_the_response_is_the_query_after_its_prompt_without_trailing_special_tokens():
    request = OpenRLHFRequest(
        query=[PROMPT + "Early blight.<|im_end|>", PROMPT + "A virus </s>", "No template here."],
        prompts=[PROMPT, PROMPT, ""],
        labels=["Early blight", "", None],
    )
    got = items(request)
    assert [it["response"] for it in got] == ["Early blight.", "A virus", "No template here."]
    assert [it.get("reference") for it in got] == ["Early blight", None, None]
    assert [it["id"] for it in got] == ["0", "1", "2"] and got[0]["question"] == PROMPT
    with refused() as err:
        items(OpenRLHFRequest(query=["other text"], prompts=[PROMPT]))
    assert (err.value.status, err.value.field) == (422, "query[0]")
    with refused() as err:
        items(OpenRLHFRequest(query=["a", "b"], prompts=["a"]))
    assert err.value.field == "prompts"


def test_a_prompt_cut_from_the_left_still_finds_its_response():
    # OpenRLHF keeps the prompt's last tokens (max_len) and sends the whole prompt beside the
    # query it decoded from them: the query begins with the prompt's end.
    long_prompt = "<|im_start|>user\n" + "Some context about the field. " * 40 + PROMPT
    for cut in (1, 17, 300, len(long_prompt) - 20):
        query = long_prompt[cut:] + "Early blight.<|im_end|>"
        assert response_of(query, long_prompt) == "Early blight.<|im_end|>", cut
    # A cut inside a character decodes as U+FFFD before the rest of the prompt's end.
    assert response_of("\ufffd" + long_prompt[40:] + "Fungus.", long_prompt) == "Fungus."
    # A query that begins with neither the prompt nor a long enough end of it.
    assert response_of("Fungus.", long_prompt) is None
    assert response_of(PROMPT[-5:] + "Fungus.", long_prompt) is None
    got = items(
        OpenRLHFRequest(query=[long_prompt[500:] + "Fungus.<|im_end|>"], prompts=[long_prompt])
    )
    assert got[0]["response"] == "Fungus." and got[0]["question"] == long_prompt


@pytest.mark.parametrize(
    "text",
    [
        "<|a|> " * 10666 + "x",  # the reproduction: 64 KB that held the ingress ~21 s
        " " * 48_000 + "x",  # a degenerate policy output: 4 s
        "<|" * 30_000 + "|>",
        "x" + "<|im_end|>" * 10_000,
    ],
)
def test_parsing_a_query_is_linear_whatever_the_policy_wrote(text):
    began = time.process_time()  # CPU time: other processes' load does not count
    request = OpenRLHFRequest(query=[PROMPT + text], prompts=[PROMPT])
    (item,) = items(request)
    strip_trailing_special(text)
    assert time.process_time() - began < 0.2
    assert item["response"] == strip_trailing_special(text)
    assert strip_trailing_special("x" + "<|im_end|>" * 10_000) == "x"


def test_counts_and_lengths_are_checked_before_any_text_is_read():
    with refused() as err:
        items(OpenRLHFRequest(query=["a"] * 3), max_items=2)
    assert (err.value.status, err.value.field) == (413, "query")
    with refused() as err:
        items(OpenRLHFRequest(query=["a", "b" * 301], prompts=["", ""]), max_chars=150)
    assert (err.value.status, err.value.field) == (422, "query[1]")
    assert "max_field_chars" in err.value.message
    with refused() as err:
        items(OpenRLHFRequest(query=["a"], prompts=["a"], labels=["l" * 151]), max_chars=150)
    assert err.value.field == "labels[0]"


def test_an_item_s_field_is_named_as_openrlhf_names_it():
    for field, ours in [
        ("items[3].response", "query[3]"),
        ("items[0].question", "prompts[0]"),
        ("items[2].reference", "labels[2]"),
    ]:
        got = renamed(Invalid(f"{field}: empty", field))
        assert (got.field, got.message) == (ours, f"{ours}: empty")
    kept = Invalid("unscored", "unscored")
    assert renamed(kept) is kept


def test_the_answer_is_what_openrlhf_reads_and_unscored_follows_the_policy():
    rubric = load_rubric("mirage-mg")
    records = [verdict("0", 0.75, spread=2.0), verdict("1", None, accuracy=None)]
    reward = reward_options(None, "unit", False, "0.5").bind(rubric)
    criteria = [RewardSpec(score=c.name, unscored=0.5).bind(rubric) for c in rubric.criteria]
    given = answer(reward, criteria, records, SPANS)
    assert given["rewards"] == given["scores"] == [0.75, 0.5]
    logs = given["extra_logs"]
    assert logs["jurybox/unscored"] == [0.0, 1.0]
    assert logs["jurybox/unscored_reason"] == [0.0, float(REASON_CODES.index("below_quorum"))]
    assert logs["jurybox/accuracy"] == [0.75, 0.5]  # 3 on the 0-4 scale; unscored: 0.5
    # OpenRLHF's filter can read the jury's agreement instead of the reward.
    assert answer(reward, criteria, records, SPANS, scores="agreement")["scores"] == [0.5, 0.0]
    # One sample (OpenRLHF's requests): numbers, which it logs as they are.
    one = answer(reward, criteria, records[:1], SPANS)["extra_logs"]
    assert one["jurybox/unscored"] == 0.0 and one["jurybox/accuracy"] == 0.75
    with refused() as err:
        answer(reward_options(None, "unit", False, "error").bind(rubric), [], records, SPANS)
    assert (err.value.status, err.value.kind, err.value.field) == (422, "unscored", "unscored")
    assert "1: accuracy: below quorum" in err.value.message
    # With the error policy, a criterion without a value is NaN in the logs, never a number.
    strict = [RewardSpec(score="accuracy", unscored="none").bind(rubric)]
    mixed = [verdict("0", 0.75), verdict("1", 0.5, accuracy=None)]
    logs = answer(reward_options(None, "unit", False, "error").bind(rubric), strict, mixed, SPANS)[
        "extra_logs"
    ]
    assert logs["jurybox/accuracy"][0] == 0.75 and math.isnan(logs["jurybox/accuracy"][1])


def test_the_unscored_policy_has_no_default():
    with refused() as err:
        reward_options(None, "unit", False, None)
    assert (err.value.status, err.value.field) == (422, "unscored")
    assert "?unscored=" in err.value.message and "--openrlhf-unscored" in err.value.message
    assert reward_options(None, "unit", False, None, default="0").unscored == 0.0
    assert reward_options(None, "unit", False, "error", default="0").unscored == "error"
    with refused() as err:
        reward_options(None, "unit", False, "zero")
    assert err.value.field == "unscored"


def test_unscored_reasons_are_a_closed_set_of_codes():
    assert (
        reason_code(
            "prompt is 31000 tokens, more than 8192 (the default max_prompt_tokens "
            "on a CPU); set max_prompt_tokens"
        )
        == "prompt_too_long"
    )
    assert (
        reason_code("output cut at max_tokens (96 tokens): no answer for 'accuracy'")
        == "output_cut"
    )
    assert (
        reason_code("no answer for 'accuracy' in the judge's output: '<|im_end|>x'") == "no_answer"
    )
    assert reason_code("accuracy: '9' is not on the scale (outside the scale 1-5)") == "off_scale"
    assert (
        reason_code("smollm2: no answer for 'a' in ...; accuracy: below quorum: 0 of 2")
        == "no_answer"
    )
    assert reason_code("accuracy: below quorum: 0 of 2 judges scored accuracy") == "below_quorum"
    assert reason_code("Early blight.<|im_end|>\n<|im_start|>assistant\nScore: 4" * 100) == "other"


def test_a_field_named_like_a_request_location_keeps_its_name():
    assert validation_field(("body", "query")) == "query"
    assert validation_field(("body", "items", 2, "reference")) == "items[2].reference"
    assert validation_field(("query", "unscored")) == "unscored"
    assert validation_field(("body",)) is None
