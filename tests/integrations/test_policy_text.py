"""What a policy writes is data, whatever it is (#59): a runaway completion over the service's
``max_field_chars`` is an unscored completion with its reason under the user's unscored policy
(it failed the whole batch with an InputError: TRL's step, verl's sample), and a lone surrogate
(``"\\ud800"``, no Unicode text) is replaced by U+FFFD and the rest judged (it raised a bare
UnicodeEncodeError in the clients; the OpenRLHF route answered 422) alike in TRL, verl and on
the OpenRLHF route. Each through the trainer's own code against the session's service: TRL's
``GRPOTrainer._calculate_rewards``, verl's reward loop worker, OpenRLHF's reward client. That
verl's ``remote`` manager (its own Ray worker process) gets the cause of an unscored response,
not Ray's "Failed to deserialize exception", is tested in test_verl.py, on the local Ray its
remote manager's test starts (one Ray start for both)."""

from __future__ import annotations

import logging
import math

import pytest
from service_helpers import USER_SERVICE_TOKEN, user_service_limits

pytestmark = pytest.mark.models

QUESTION = "What causes brown rings on tomato leaves after rain?"
REFERENCE = "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."
#: One character over the session service's max_field_chars: a runaway generation.
LIMIT = user_service_limits().max_field_chars
RUNAWAY = ("Early blight. " * (LIMIT // 14 + 1))[:LIMIT] + "."


def reward_of(records, **spec):
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    return RewardSpec(**spec).bind(load_rubric("mirage-mg")).values(records)


def test_trl_gives_a_runaway_completion_the_unscored_value_and_judges_the_rest(
    user_service, v1_score, tmp_path, caplog
):
    """TRL's own reward step, a real GRPOTrainer's ``_calculate_rewards``, with
    ``unscored=0.0``: the runaway completion's reward is 0.0 (the user's policy), the others
    /v1/score's, the trainer's metric counts one unscored and the warning says why; a lone
    surrogate is judged as U+FFFD."""
    from datasets import Dataset
    from test_trl import grpo

    from jurybox.integrations.trl import jury_reward

    assert len(RUNAWAY) == LIMIT + 1
    reward = jury_reward(
        url=user_service,
        rubric="mirage-mg",
        token=USER_SERVICE_TOKEN,
        unscored=0.0,
        fields={"reference": "answer"},
    )
    dataset = Dataset.from_dict({"prompt": [QUESTION], "answer": [REFERENCE]})
    trainer = grpo(tmp_path, [reward], dataset, steps=1)
    trainer.model.train()
    completions = ["Early blight, a fungus.", RUNAWAY, "Early blight\ud800, a fungus."]
    inputs = [{"prompt": QUESTION, "answer": REFERENCE} for _ in completions]
    with caplog.at_level(logging.WARNING, logger="jurybox.integrations"):
        rewards = trainer._calculate_rewards(
            inputs, [QUESTION] * 3, completions, [[1]] * len(completions)
        )
    records = v1_score(
        "mirage-mg",
        [
            {"id": str(k), "question": QUESTION, "response": text, "reference": REFERENCE}
            for k, text in enumerate(["Early blight, a fungus.", "Early blight\ufffd, a fungus."])
        ],
    )
    want = reward_of(records)
    assert rewards[:, 0].tolist() == pytest.approx([want[0], 0.0, want[1]])
    assert trainer._pending_metrics["jurybox/jury_mirage_mg_weighted_sum/unscored"] == [1.0]
    assert "completion 1 of the batch" in caplog.text
    assert f"response: {len(RUNAWAY):,} characters, more than the limit of" in caplog.text
    assert "(max_field_chars): not sent to the judges" in caplog.text
    assert "completion 2 of the batch" in caplog.text and "lone surrogate" in caplog.text
    assert reward.rewards.stats.requests == 1  # type: ignore[attr-defined]
    reward.rewards.close()  # type: ignore[attr-defined]


def test_verl_gives_a_runaway_response_its_unscored_value_or_names_the_cause(
    user_service, token, v1_score
):
    """verl's reward loop worker (the naive manager): the runaway response gets the configured
    unscored value beside the others' rewards; by default (unscored=error) the step stops with
    VerlUnscored naming the sample and max_field_chars, not an InputError about the request."""
    from test_verl import ROWS, batch, config, decoded, score
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    from jurybox.integrations.verl import VerlUnscored, compute_score_sync

    rows = [ROWS[0], (ROWS[0][0], RUNAWAY)]
    worker = RewardLoopWorker(config(user_service, token, unscored=0.25))
    data = batch(worker.input_tokenizer, rows)
    outputs = score(worker, data)
    texts = decoded(data, worker)
    assert len(texts[1]) > LIMIT
    (record,) = v1_score(
        "mirage-mg",
        [{"id": "0", "question": ROWS[0][0], "response": texts[0], "reference": REFERENCE}],
    )
    assert [o["reward_score"] for o in outputs] == [reward_of([record])[0], 0.25]
    info = outputs[1]["reward_extra_info"]
    assert info["jurybox/unscored"] == 1.0 and info["jurybox/weighted_sum"] is None
    assert "more than the limit of" in info["jurybox/verdict"]

    strict = RewardLoopWorker(config(user_service, token))
    with pytest.raises(
        VerlUnscored,
        match=r"^jurybox: 1 sample\(s\) have no mirage-mg\.weighted_sum reward: verl sample "
        r"extra_info\.index=4: response: [\d,]+ characters, more than the limit of 5,000",
    ):
        score(strict, batch(strict.input_tokenizer, rows[1:], first_index=4))
    # A lone surrogate in the response: judged as U+FFFD (verl's own decoding makes none; a
    # function of the user's may).
    options = {"url": user_service, "rubric": "mirage-mg", "token_env": token}
    got = compute_score_sync(
        solution_str="Early blight\ud800, a fungus.",
        ground_truth=REFERENCE,
        extra_info={"question": QUESTION, "index": 9},
        **options,
    )
    (record,) = v1_score(
        "mirage-mg",
        [
            {
                "id": "0",
                "question": QUESTION,
                "response": "Early blight\ufffd, a fungus.",
                "reference": REFERENCE,
            }
        ],
    )
    assert got["score"] == reward_of([record])[0]


def test_openrlhf_s_client_gets_a_reward_for_a_query_with_a_lone_surrogate(user_service, v1_score):
    from test_openrlhf import LABEL, PROMPT, fetch, with_token

    url = with_token(user_service, "/v1/openrlhf/mirage-mg?unscored=error")
    (answer,) = fetch(url, [PROMPT + "Early blight\ud800, a fungus.<|im_end|>"], [PROMPT], [LABEL])
    (record,) = v1_score(
        "mirage-mg",
        [
            {
                "id": "0",
                "question": PROMPT,
                "response": "Early blight\ufffd, a fungus.",
                "reference": LABEL,
            }
        ],
    )
    assert answer is not None and answer["rewards"] == [reward_of([record])[0]]
    assert not math.isnan(answer["rewards"][0])


def test_openrlhf_s_client_gets_the_unscored_value_for_a_runaway_response(user_service):
    from test_openrlhf import LABEL, PROMPT, fetch, with_token

    from jurybox.judges.parsing import REASON_CODES

    url = with_token(user_service, "/v1/openrlhf/mirage-mg?unscored=0.25")
    (answer,) = fetch(url, [PROMPT + RUNAWAY + "<|im_end|>"], [PROMPT], [LABEL])
    assert answer is not None and answer["rewards"] == [0.25]
    logs = answer["extra_logs"]
    assert logs["jurybox/unscored"] == 1.0
    assert REASON_CODES[int(logs["jurybox/unscored_reason"])] == "prompt_too_long"
