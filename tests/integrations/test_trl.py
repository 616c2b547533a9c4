"""TRL: a real ``GRPOTrainer`` trains two steps on CPU, with the SmolLM2-135M copy that
``jurybox models fetch`` writes as its policy and the jury's rewards from the session's live
service (``user_service``) as its reward function. The rewards TRL logs equal what /v1/score
returns for the same items; an unscored item's reward is None, which TRL leaves out."""

from __future__ import annotations

import math

import pytest
from service_helpers import LONG_QUESTION

pytestmark = pytest.mark.models

REFERENCE = "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."
SHORT = "What causes brown rings on tomato leaves after rain?"


def policy_directory() -> str:
    from jurybox.judges import load_jury_spec
    from jurybox.judges.weights import materialize, resolve

    smol = next(j for j in load_jury_spec("tiny").judges if j.name == "smollm2-135m")
    return materialize(resolve(smol.model)).directory


def test_grpo_trains_two_steps_on_the_jury_s_rewards(user_service, token, v1_score, tmp_path):
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from jurybox.integrations.trl import jury_reward
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    reward = jury_reward(url=user_service, rubric="mirage-mg", token_env=token,
                         fields={"reference": "answer"})
    calls: list[tuple[list, list, list, list]] = []

    def recorded(prompts, completions, **kwargs):
        rewards = reward(prompts=prompts, completions=completions, **kwargs)
        calls.append((list(prompts), list(completions), list(kwargs["answer"]), rewards))
        return rewards

    recorded.__name__ = reward.__name__  # the name TRL logs the reward under
    # One prompt per step (2 completions each): the short one is scored, the long one's
    # judge prompts are over the service's limit (unscored).
    dataset = Dataset.from_dict({"prompt": [SHORT, LONG_QUESTION],
                                 "answer": [REFERENCE, REFERENCE]})
    policy = policy_directory()
    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), use_cpu=True, bf16=False, fp16=False,
                      per_device_train_batch_size=2, num_generations=2,
                      gradient_accumulation_steps=1, max_completion_length=8, max_steps=2,
                      logging_steps=1, report_to="none", save_strategy="no",
                      gradient_checkpointing=False, learning_rate=1e-5, seed=0)
    trainer = GRPOTrainer(model=policy, reward_funcs=[recorded], args=args,
                          train_dataset=dataset, processing_class=tokenizer)
    trainer.train()

    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2 and len(calls) == 2
    name = reward.__name__
    spec = RewardSpec(unscored="none").bind(load_rubric("mirage-mg"))
    unscored_seen = scored_seen = 0
    for logged, (prompts, completions, answers, rewards) in zip(steps, calls):
        items = [{"id": str(k), "question": p, "response": c, "reference": a}
                 for k, (p, c, a) in enumerate(zip(prompts, completions, answers))]
        # What the service says of the same items, turned into rewards the same way.
        assert rewards == spec.values(v1_score("mirage-mg", items))
        assert logged[f"jurybox/{name}/unscored"] == sum(r is None for r in rewards)
        if all(r is None for r in rewards):  # TRL leaves the missing rewards out: no mean
            assert prompts[0] == LONG_QUESTION
            assert logged[f"rewards/{name}/mean"] is None
            unscored_seen += 1
        else:
            assert prompts[0] == SHORT and all(0.0 <= r <= 1.0 for r in rewards)
            mean = sum(rewards) / len(rewards)
            assert math.isclose(logged[f"rewards/{name}/mean"], mean, abs_tol=1e-6)
            scored_seen += 1
    assert (unscored_seen, scored_seen) == (1, 1)
    assert reward.stats.unscored == 2 and reward.stats.rows == 4  # type: ignore[attr-defined]
    reward.rewards.close()  # type: ignore[attr-defined]


def test_the_rewards_of_one_batch_per_criterion_come_from_one_judging(user_service, token):
    from jurybox.integrations.trl import jury_reward

    functions = jury_reward(url=user_service, rubric="mirage-mg", token_env=token,
                            per_criterion=True, scale="raw", fields={"reference": "answer"})
    names = [f.__name__ for f in functions]
    assert names == [f"jury_mirage_mg_{c}" for c in
                     ("accuracy", "relevance", "completeness", "parsimony", "weighted_sum")]
    batch = {"prompts": [SHORT, SHORT], "completions": [[{"role": "assistant",
                                                           "content": "Early blight."}],
                                                         "A virus."],
             "answer": [REFERENCE, REFERENCE]}
    values = [f(**batch) for f in functions]
    stats = functions[0].rewards.stats  # type: ignore[attr-defined]
    assert stats.requests == 1  # five rewards, one request
    accuracy, relevance, completeness, parsimony, weighted = values
    for k in range(2):
        total = 2 * accuracy[k] + relevance[k] + completeness[k] + parsimony[k]
        assert math.isclose(weighted[k], total / 20, abs_tol=1e-9)
    functions[0].rewards.close()  # type: ignore[attr-defined]
