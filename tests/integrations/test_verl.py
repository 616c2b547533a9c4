"""verl: its reward loop worker (``verl.experimental.reward_loop.RewardLoopWorker``, what each
of verl's reward actors runs, here in this process without Ray) loads jurybox's reward function
by path from the config, as a training run does (``reward.custom_reward_function.path=
pkg://jurybox.integrations.verl``), and scores a small batch of responses (a ``DataProto`` of
token ids) through verl's naive reward manager against the session's live service; verl's own
``assemble_rm_scores`` puts each reward at its response's last token. The rewards equal
/v1/score's for the same items. An unscored response stops the step (the default) or gets the
value the config names. Where it stops on CPU: the rollout and the trainer around the reward
path (vLLM/SGLang rollouts, FSDP) are not run here."""

from __future__ import annotations

import pytest
from service_helpers import LONG_QUESTION

pytestmark = pytest.mark.models

REFERENCE = "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."
ROWS = [("What causes brown rings on tomato leaves after rain?",
         "Early blight, a fungal disease; remove the infected leaves."),
        ("What causes brown rings on tomato leaves after rain?", "Too much sun."),
        (LONG_QUESTION, "A fungus.")]


def policy_directory() -> str:
    from jurybox.judges import load_jury_spec
    from jurybox.judges.weights import materialize, resolve

    smol = next(j for j in load_jury_spec("tiny").judges if j.name == "smollm2-135m")
    return materialize(resolve(smol.model)).directory


def config(url: str, token_env: str, **reward_kwargs):
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": policy_directory(), "tokenizer_path": None}},
        "reward": {
            "num_workers": 1,
            "custom_reward_function": {
                "path": "pkg://jurybox.integrations.verl", "name": "compute_score",
                "reward_kwargs": {"url": url, "rubric": "mirage-mg", "token_env": token_env,
                                  **reward_kwargs}},
            "reward_manager": {"source": "register", "name": "naive",
                               "module": {"path": None, "name": "custom_reward_manager"}},
            "reward_model": {"enable": False},
        }})


def batch(tokenizer, rows):
    """A verl DataProto as its rollout leaves it: left-padded prompts, right-padded responses,
    and each row's data_source, reward_model.ground_truth and extra_info (the question)."""
    import numpy as np
    import torch
    from verl import DataProto

    prompts = tokenizer([q for q, _ in rows], padding=True, return_tensors="pt",
                        padding_side="left", add_special_tokens=False)
    tokenizer.padding_side = "right"
    responses = tokenizer([a + tokenizer.eos_token for _, a in rows], padding=True,
                          return_tensors="pt", add_special_tokens=False)
    return DataProto.from_dict(
        tensors={"prompts": prompts["input_ids"], "responses": responses["input_ids"],
                 "attention_mask": torch.cat([prompts["attention_mask"],
                                              responses["attention_mask"]], dim=1)},
        non_tensors={"data_source": np.array(["mirage"] * len(rows), dtype=object),
                     "reward_model": np.array([{"ground_truth": REFERENCE} for _ in rows],
                                              dtype=object),
                     "extra_info": np.array([{"question": q} for q, _ in rows], dtype=object)})


def decoded(data, worker) -> list[str]:
    """The responses as verl's reward manager decodes them (what the judges are shown)."""
    responses, mask = data.batch["responses"], data.batch["attention_mask"]
    lengths = mask[:, -responses.shape[1]:].sum(-1).tolist()
    return [worker.input_tokenizer.decode(responses[k, :n], skip_special_tokens=True)
            for k, n in enumerate(lengths)]


def test_verl_s_reward_loop_scores_a_batch_with_the_jury(user_service, token, v1_score):
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec, UnscoredReward

    worker = RewardLoopWorker(config(user_service, token, unscored=0.25))
    data = batch(worker.input_tokenizer, ROWS)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    scores = [o["reward_score"] for o in outputs]
    records = v1_score("mirage-mg", [{"id": str(k), "question": q, "response": a,
                                      "reference": REFERENCE}
                                     for k, (q, a) in enumerate(zip([q for q, _ in ROWS],
                                                                    decoded(data, worker)))])
    want = RewardSpec(unscored=0.25).bind(load_rubric("mirage-mg")).values(records)
    assert scores == want and want[2] == 0.25  # the long question's response is unscored
    assert [o["reward_extra_info"]["unscored"] for o in outputs] == [0.0, 0.0, 1.0]
    tensor = RewardManagerBase.assemble_rm_scores(data, scores)
    lengths = data.batch["attention_mask"][:, -data.batch["responses"].shape[1]:].sum(-1)
    for k, n in enumerate(lengths.tolist()):
        assert tensor[k, n - 1].item() == pytest.approx(want[k])
        assert tensor[k].abs().sum().item() == pytest.approx(abs(want[k]))

    # The default: an unscored response stops the step, naming it.
    strict = RewardLoopWorker(config(user_service, token))
    with pytest.raises(UnscoredReward, match="1 item\\(s\\) have no reward"):
        strict.loop.run_until_complete(strict.compute_score_batch(batch(
            strict.input_tokenizer, ROWS[2:])))


def test_the_batched_form_and_a_misspelt_option(user_service, token, v1_score):
    from jurybox.integrations.verl import compute_score_batch
    from jurybox.rubrics.errors import InputError

    out = compute_score_batch(data_sources=["m", "m"], solution_strs=[a for _, a in ROWS[:2]],
                              ground_truths=[REFERENCE, {"ground_truth": REFERENCE}],
                              extra_infos=[{"question": q} for q, _ in ROWS[:2]],
                              url=user_service, rubric="mirage-mg", token_env=token)
    records = v1_score("mirage-mg", [{"id": str(k), "question": q, "response": a,
                                      "reference": REFERENCE} for k, (q, a) in enumerate(ROWS[:2])])
    assert [o["score"] for o in out] == [r["scores"]["weighted_sum"] for r in records]
    with pytest.raises(InputError, match="unknown reward_kwargs \\['rubirc'\\]"):
        compute_score_batch(solution_strs=["x"], rubirc="mirage-mg", url=user_service)
    with pytest.raises(InputError, match="needs the question"):
        compute_score_batch(solution_strs=["x"], ground_truths=[REFERENCE], extra_infos=[{}],
                            url=user_service, rubric="mirage-mg", token_env=token)
