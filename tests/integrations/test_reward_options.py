"""Bad reward options said plainly, without a service (#59): ``unscored="skip"`` and the like
are an InputError naming the field and what it takes (pydantic's raw two-error text before);
the OpenRLHF route's ``?unscored=error`` refusal tells what the route takes (it suggested
``unscored='none'``, which the route refuses); ``jurybox check-reward`` reads OpenRLHF's URL as
OpenRLHF will use it; a lone surrogate in OpenRLHF's body is replaced, not refused; the guide
says what the group metrics count."""

from __future__ import annotations

from pathlib import Path

import pytest

from jurybox.rubrics import load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec, UnscoredReward

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "fields, field, words",
    [
        ({"unscored": "skip"}, "unscored", "'none' (the reward is None), 'error'"),
        ({"unscored": float("inf")}, "unscored", "or a finite number"),
        ({"scale": "percent"}, "scale", "'unit' (mapped onto [0, 1]) or 'raw'"),
        ({"low": "bottom"}, "low", "a number"),
        ({"unscord": 0.0}, "unscord", "the reward has no field 'unscord'"),
    ],
)
def test_a_bad_reward_option_names_the_field_and_what_it_takes(fields, field, words):
    with pytest.raises(InputError) as raised:
        RewardSpec(**fields)
    assert raised.value.field == field and words in str(raised.value)
    assert "pydantic" not in str(raised.value) and "validation error" not in str(raised.value)


def test_trl_s_and_verl_s_reward_refuse_unscored_skip_plainly():
    from jurybox.integrations.trl import jury_reward
    from jurybox.integrations.verl import compute_score_sync

    with pytest.raises(InputError, match=r"^the reward's unscored is 'skip': it takes 'none'"):
        jury_reward(rubric="mirage-mg", url="http://127.0.0.1:9", unscored="skip")
    with pytest.raises(InputError, match=r"^the reward's unscored is 'skip': it takes 'none'"):
        compute_score_sync(
            solution_str="x", rubric="mirage-mg", url="http://127.0.0.1:9", unscored="skip"
        )


def test_the_openrlhf_route_s_unscored_refusal_suggests_only_what_it_takes():
    from jurybox.serving.errors import RequestProblem
    from jurybox.serving.service.openrlhf import answer, reward_options

    record = {
        "id": "0",
        "status": "unscored",
        "rubric": "mirage-mg",
        "jury": "j",
        "provenance": "0" * 16,
        "scores": {"weighted_sum": None},
        "reasons": ["accuracy: below quorum: 0 of 2 judges scored accuracy, 1 needed"],
    }
    reward = reward_options(None, "unit", False, "error").bind(load_rubric("mirage-mg"))
    with pytest.raises(RequestProblem) as raised:
        answer(reward, [], [record], {})
    message = raised.value.message
    assert "'none'" not in message and "unscored=none" not in message
    assert "1 item(s) have no reward: 0: accuracy: below quorum" in message
    assert "give ?unscored=<number> in --reward.remote_url" in message
    # The adapters' own advice is unchanged (None is theirs to give).
    assert "unscored='none'" in str(UnscoredReward([("0", "below quorum")]))


def test_a_lone_surrogate_in_openrlhf_s_body_is_replaced_not_refused():
    from jurybox.rubrics.reward import policy_text
    from jurybox.serving.service.openrlhf import OpenRLHFRequest, items_of

    prompt = "<|im_start|>user\nWhy\ud800?<|im_end|>\n<|im_start|>assistant\n"
    body = OpenRLHFRequest(
        query=[prompt + "A fun\udc80gus.<|im_end|>"], prompts=[prompt], labels=["x\ud800"]
    )
    (item,) = items_of(body, 4, 1000)
    assert item["response"] == "A fun\ufffdgus."
    assert item["question"] == prompt.replace("\ud800", "\ufffd")
    assert item["reference"] == "x\ufffd"
    assert policy_text("plain") == ("plain", 0)


def test_check_reward_reads_openrlhf_s_url_as_openrlhf_uses_it():
    from jurybox.serving.runs.reward_check import target

    url = "http://jurybox:s3cret@127.0.0.1:8000/v1/openrlhf/mirage-mg?unscored=0&scale=raw"
    got = target(url, None, None, "from-env", None)
    assert (got.route, got.base, got.rubric, got.token) == (
        "openrlhf",
        "http://127.0.0.1:8000",
        "mirage-mg",
        "s3cret",  # the URL's, as OpenRLHF sends it: never the environment's
    )
    assert got.query == {"unscored": "0", "scale": "raw"}
    bare = target("http://127.0.0.1:8000/v1/openrlhf/general", None, None, "from-env", "error")
    assert bare.token is None and bare.query == {"unscored": "error"}
    adapters = target("http://127.0.0.1:8000", None, "general", "from-env", None)
    assert (adapters.route, adapters.rubric, adapters.token) == ("score", "general", "from-env")


def test_the_guide_says_what_the_group_metrics_count():
    """``/asked`` counts calls answered from the verdict cache (GroupResult.asked); ``/spread``
    is a population standard deviation where TRL's reward_std is a sample one; ``?unscored=0``
    is the worst reward on the unit scale."""
    guide = " ".join((ROOT / "docs" / "guides" / "integrations.md").read_text().split())
    assert "cached pairs are not asked again" not in guide
    assert "answered from the verdict cache count" in guide
    assert "population standard deviation" in guide and "sample standard deviation" in guide
    assert "`?unscored=0` gives an unscored sample the lowest reward" in guide


def test_a_runaway_response_on_the_openrlhf_route_is_unscored_not_a_422():
    from jurybox.serving.service.openrlhf import (
        OpenRLHFRequest,
        answer,
        items_of,
        merged,
        reward_options,
        split_unsent,
    )

    prompt = "<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n"
    body = OpenRLHFRequest(query=[prompt + "A fungus.", prompt + "x" * 1001], prompts=[prompt] * 2)
    sent, unsent = split_unsent(items_of(body, 4, 1000), 1000)
    assert [item["id"] for item in sent] == ["0"] and list(unsent) == [1]
    assert unsent[1].startswith("response: 1,001 characters, more than the limit of 1,000")
    rubric = load_rubric("mirage-mg")
    judged = {
        "id": "0",
        "status": "scored",
        "rubric": "mirage-mg",
        "jury": "j",
        "provenance": "0" * 16,
        "scores": {"weighted_sum": 0.75},
    }
    records = merged([judged], unsent, rubric, "j")
    reward = reward_options(None, "unit", False, "0.25").bind(rubric)
    given = answer(reward, [], records, {})
    assert given["rewards"] == [0.75, 0.25]
    assert given["extra_logs"]["jurybox/unscored"] == [0.0, 1.0]
