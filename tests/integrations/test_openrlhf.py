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
PROMPT = (
    "<|im_start|>user\nWhat causes brown rings on tomato leaves after rain?<|im_end|>\n"
    "<|im_start|>assistant\n"
)
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

    url = with_token(user_service, "/v1/openrlhf/mirage-mg?unscored=error")
    (answer,) = fetch(url, [PROMPT + RESPONSE + "<|im_end|>"], [PROMPT], [LABEL])
    (record,) = v1_score(
        "mirage-mg", [{"id": "0", "question": PROMPT, "response": RESPONSE, "reference": LABEL}]
    )
    rubric = load_rubric("mirage-mg")
    (want,) = RewardSpec().bind(rubric).values([record])
    assert answer["rewards"] == answer["scores"] == [want] and 0.0 <= want <= 1.0
    # What OpenRLHF logs beside its own metrics: the unscored flag and reason, each criterion.
    logs = answer["extra_logs"]
    assert logs["jurybox/unscored"] == 0.0 and logs["jurybox/unscored_reason"] == 0.0
    for c in rubric.criteria:
        (value,) = RewardSpec(score=c.name).bind(rubric).values([record])
        assert logs[f"jurybox/{c.name}"] == value
    # One criterion on its own scale, as the URL asks.
    (raw,) = fetch(url + "&score=accuracy&scale=raw", [PROMPT + RESPONSE], [PROMPT], [LABEL])
    assert raw["rewards"] == [record["scores"]["accuracy"]]


def test_an_unscored_sample_is_a_422_or_the_value_the_url_names(user_service):
    from jurybox.judges.parsing import REASON_CODES

    long_prompt = f"<|im_start|>user\n{LONG_QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    body = {"query": [long_prompt + "A fungus."], "prompts": [long_prompt], "labels": [LABEL]}
    r = httpx.post(
        f"{user_service}/v1/openrlhf/mirage-mg?unscored=error",
        json=body,
        headers=USER_SERVICE_AUTH,
        timeout=600,
    )
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["type"] == "unscored" and error["field"] == "unscored"
    assert (
        "1 item(s) have no reward: 0: " in error["message"]
        and "max_prompt_tokens" in error["message"]
    )
    url = with_token(user_service, "/v1/openrlhf/mirage-mg?unscored=0.5")
    (answer,) = fetch(url, body["query"], body["prompts"], body["labels"])
    assert answer["rewards"] == [0.5] and answer["extra_logs"]["jurybox/unscored"] == 1.0
    reason = answer["extra_logs"]["jurybox/unscored_reason"]
    assert REASON_CODES[int(reason)] == "prompt_too_long"


def test_a_prompt_openrlhf_cut_to_max_len_gets_its_reward(user_service):
    """OpenRLHF's own executor cuts a long prompt from the left to fit ``max_length`` and
    posts the query decoded from what is left beside the whole prompt (about 280 tokens,
    max_length 150): the reward comes back, where the route answered 422 before. (The issue's
    940 tokens would pass the replay judges' max_prompt_tokens.)"""
    from types import SimpleNamespace

    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from jurybox.judges import load_jury_spec
    from jurybox.judges.backends.replay import load_tokenizer

    tokenizer = load_tokenizer(load_jury_spec("tiny").judges[0])  # SmolLM2's
    question = "Why are there brown rings on my tomato leaves after the rain? " * 20
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
    )
    assert len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) > 250
    answer_ids = tokenizer("Early blight, a fungus.<|im_end|>", add_special_tokens=False)[
        "input_ids"
    ]

    class Engine:  # the policy's vLLM engine: one fixed continuation
        async def generate(self, prompt_ids, params, multi_modal_data=None):
            self.prompt_ids = prompt_ids
            return SimpleNamespace(
                outputs=[SimpleNamespace(token_ids=answer_ids, finish_reason="stop", logprobs=None)]
            )

    engine = Engine()
    executor = SingleTurnAgentExecutor(
        with_token(user_service, "/v1/openrlhf/mirage-mg?unscored=error")
    )
    out = asyncio.run(
        executor.execute(
            prompt, LABEL, SimpleNamespace(max_tokens=20, logprobs=None), 150, tokenizer, engine
        )
    )
    assert len(engine.prompt_ids) == 130  # cut from the left, by OpenRLHF
    assert out["reward"] is not None and 0.0 <= out["reward"][0] <= 1.0, out
    assert out["extra_logs"]["jurybox/unscored"] == 0.0


def test_the_route_keeps_the_service_s_auth_and_names_bad_input(user_service):
    url = f"{user_service}/v1/openrlhf/mirage-mg"
    body = {"query": [PROMPT + RESPONSE], "prompts": [PROMPT], "labels": [LABEL]}
    assert httpx.post(url + "?unscored=0", json=body, timeout=60).status_code == 401
    wrong = httpx.post(url + "?unscored=0", json=body, auth=("jurybox", "wrong"), timeout=60)
    assert wrong.status_code == 401
    for query, body_, field in [
        ("?unscored=0", {**body, "labels": [LABEL, LABEL]}, "labels"),
        ("?unscored=0", {**body, "query": ["something else"]}, "query[0]"),
        ("", body, "unscored"),  # no policy in the URL, none set for the service
        ("?unscored=zero", body, "unscored"),
        ("?unscored=none", body, "unscored"),
        ("?unscored=0&score=fluency", body, "score"),
        ("?unscored=0", {"prompts": [PROMPT]}, "query"),
    ]:
        r = httpx.post(url + query, json=body_, headers=USER_SERVICE_AUTH, timeout=60)
        assert r.status_code == 422, (query, r.text)
        assert r.json()["error"]["field"] == field, (query, r.json())
    r = httpx.post(
        f"{user_service}/v1/openrlhf/nope?unscored=0",
        json=body,
        headers=USER_SERVICE_AUTH,
        timeout=60,
    )
    assert r.status_code == 422 and "unknown rubric 'nope'" in r.json()["error"]["message"]
