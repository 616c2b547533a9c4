"""OpenRLHF: its own remote reward client (``openrlhf.utils.agent.SingleTurnAgentExecutor``,
what a PPO run with ``--reward.remote_url`` calls for each sample) posts to the session's live
service at /v1/openrlhf/{rubric} and gets the jury's rewards: the token in the URL, as its
client can only give it; an unscored sample is a 422 naming it, or the value the URL asks for."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from service_helpers import LONG_QUESTION, USER_SERVICE_AUTH, USER_SERVICE_TOKEN

pytestmark = pytest.mark.models

# What OpenRLHF sends: the prompt after the policy's chat template, and the query (prompt and
# response decoded together, special tokens included).
PROMPT = ("<|im_start|>user\nWhat causes brown rings on tomato leaves after rain?<|im_end|>\n"
          "<|im_start|>assistant\n")
RESPONSE = "Early blight, a fungal disease; remove infected leaves and use copper."
LABEL = "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."


def with_token(url: str, path: str, token: str = USER_SERVICE_TOKEN) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme}://jurybox:{token}@{rest}{path}"


def fetch(url: str, queries: list[str], prompts: list[str], labels: list[str]) -> list[dict]:
    """OpenRLHF's own HTTP reward call, as its rollout actors make it."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(url)
    return asyncio.run(executor._fetch_rewards_via_http(queries, prompts, labels))


def test_openrlhf_s_client_gets_the_jury_s_rewards(user_service, v1_score):
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    url = with_token(user_service, "/v1/openrlhf/mirage-mg")
    (answer,) = fetch(url, [PROMPT + RESPONSE + "<|im_end|>"], [PROMPT], [LABEL])
    (record,) = v1_score("mirage-mg", [{"id": "0", "question": PROMPT, "response": RESPONSE,
                                        "reference": LABEL}])
    (want,) = RewardSpec().bind(load_rubric("mirage-mg")).values([record])
    assert answer["rewards"] == answer["scores"] == [want] and 0.0 <= want <= 1.0
    assert answer["extra_logs"] == {"jurybox_unscored": 0.0}
    # One criterion on its own scale, as the URL asks.
    (raw,) = fetch(url + "?score=accuracy&scale=raw", [PROMPT + RESPONSE], [PROMPT], [LABEL])
    assert raw["rewards"] == [record["scores"]["accuracy"]]


def test_an_unscored_sample_is_a_422_or_the_value_the_url_names(user_service):
    long_prompt = f"<|im_start|>user\n{LONG_QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    body = {"query": [long_prompt + "A fungus."], "prompts": [long_prompt], "labels": [LABEL]}
    r = httpx.post(f"{user_service}/v1/openrlhf/mirage-mg", json=body, headers=USER_SERVICE_AUTH,
                   timeout=600)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["type"] == "unscored" and error["field"] == "unscored"
    assert "1 item(s) have no reward: 0: " in error["message"] and "max_prompt_tokens" in error["message"]
    url = with_token(user_service, "/v1/openrlhf/mirage-mg?unscored=0.5")
    (answer,) = fetch(url, body["query"], body["prompts"], body["labels"])
    assert answer["rewards"] == [0.5] and answer["extra_logs"] == {"jurybox_unscored": 1.0}


def test_the_route_keeps_the_service_s_auth_and_names_bad_input(user_service):
    url = f"{user_service}/v1/openrlhf/mirage-mg"
    body = {"query": [PROMPT + RESPONSE], "prompts": [PROMPT], "labels": [LABEL]}
    assert httpx.post(url, json=body, timeout=60).status_code == 401
    wrong = httpx.post(url, json=body, auth=("jurybox", "wrong"), timeout=60)
    assert wrong.status_code == 401
    for query, body_, field in [
        ("", {**body, "labels": [LABEL, LABEL]}, "labels"),
        ("", {**body, "query": ["something else"]}, "query[0]"),
        ("?unscored=zero", body, "unscored"),
        ("?unscored=none", body, "unscored"),
        ("?score=fluency", body, "score"),
        ("", {"prompts": [PROMPT]}, "query"),
    ]:
        r = httpx.post(url + query, json=body_, headers=USER_SERVICE_AUTH, timeout=60)
        assert r.status_code == 422, (query, r.text)
        assert r.json()["error"]["field"] == field, (query, r.json())
    r = httpx.post(f"{user_service}/v1/openrlhf/nope", json=body, headers=USER_SERVICE_AUTH,
                   timeout=60)
    assert r.status_code == 422 and "unknown rubric 'nope'" in r.json()["error"]["message"]
