"""verl's batch reward manager (``verl.workers.reward_manager.batch.BatchRewardManager``, which
calls its function once with the whole batch) with jurybox's group rewards
(``compute_group_scores``) on the in-process replay jury: the responses of one prompt (one
``extra_info.index``, as verl's rollouts repeat it) are compared with each other, and verl puts
each reward at its response's last token. verl 0.9.1's trainer does not load this manager
(its reward loop asks for one sample at a time): the integrations guide says so, and this is
the path for a loop that calls it."""

from __future__ import annotations

import pytest

from jurybox.integrations.core import MissingRewards
from jurybox.judges.groups import Group, GroupJob, GroupSpec, judge_groups
from jurybox.rubrics import load_rubric
from jurybox.rubrics.errors import InputError

QUESTION = "What causes brown rings on tomato leaves after rain?"
OTHER = "When should I plant garlic in Ohio?"
REFERENCE = "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."
ROWS = [
    (QUESTION, "Early blight, a fungal disease.", 0),
    (OTHER, "In October.", 1),
    (QUESTION, "Too much sun.", 0),
    (OTHER, "In spring, after frost.", 1),
    (QUESTION, "A virus; spray water.", 0),
]


def data(rows):
    import numpy as np
    import torch
    from transformers import AutoTokenizer
    from verl import DataProto

    from jurybox.judges import load_jury_spec
    from jurybox.judges.weights import materialize, resolve

    smol = next(j for j in load_jury_spec("tiny").judges if j.name == "smollm2-135m")
    tokenizer = AutoTokenizer.from_pretrained(materialize(resolve(smol.model)).directory)
    prompts = tokenizer(
        [q for q, _, _ in rows],
        padding=True,
        return_tensors="pt",
        padding_side="left",
        add_special_tokens=False,
    )
    tokenizer.padding_side = "right"
    responses = tokenizer(
        [a + tokenizer.eos_token for _, a, _ in rows],
        padding=True,
        return_tensors="pt",
        add_special_tokens=False,
    )
    batch = DataProto.from_dict(
        tensors={
            "prompts": prompts["input_ids"],
            "responses": responses["input_ids"],
            "attention_mask": torch.cat(
                [prompts["attention_mask"], responses["attention_mask"]], dim=1
            ),
        },
        non_tensors={
            "data_source": np.array(["mirage"] * len(rows), dtype=object),
            "reward_model": np.array([{"ground_truth": REFERENCE} for _ in rows], dtype=object),
            "extra_info": np.array([{"question": q, "index": i} for q, _, i in rows], dtype=object),
        },
    )
    return tokenizer, batch, responses["attention_mask"].sum(dim=1)


def test_the_batch_manager_rewards_each_prompt_s_responses_against_each_other(
    replay_jury, replay_tiny
):
    from verl.workers.reward_manager.batch import BatchRewardManager

    from jurybox.integrations.verl import compute_group_scores

    tokenizer, batch, lengths = data(ROWS)
    manager = BatchRewardManager(
        tokenizer,
        0,
        compute_group_scores,
        rubric="pairwise",
        jury=str(replay_jury),
        design="round_robin",
    )
    out = manager(batch, return_dict=True)
    tensor, extra = out["reward_tensor"], out["reward_extra_info"]
    scores = [float(tensor[k, lengths[k] - 1]) for k in range(len(ROWS))]
    groups = [
        Group("a", {"question": QUESTION, "reference": REFERENCE}, [ROWS[k][1] for k in (0, 2, 4)]),
        Group("b", {"question": OTHER, "reference": REFERENCE}, [ROWS[k][1] for k in (1, 3)]),
    ]
    first, second = judge_groups(
        replay_tiny, GroupJob(GroupSpec(), load_rubric("pairwise"), replay_tiny.spec, groups)
    )
    want = [
        first.rewards[0],
        second.rewards[0],
        first.rewards[1],
        second.rewards[1],
        first.rewards[2],
    ]
    assert scores == pytest.approx(want, abs=1e-6)  # (verl's tensor is float32)
    assert extra["jurybox/unscored"] == [0.0] * 5
    assert all(line.startswith("round_robin: ") for line in extra["jurybox/reward"])


def test_a_response_without_its_group_key_or_reward_is_named():
    from jurybox.integrations.verl import compute_group_scores

    with pytest.raises(
        InputError,
        match=r"^jurybox: verl sample extra_info.index=0 has no "
        r"extra_info\['prompt_id'\]",
    ):
        compute_group_scores(
            ["m"],
            ["An answer."],
            [REFERENCE],
            [{"question": QUESTION, "index": 0}],
            rubric="pairwise",
            jury="tiny",
            group_key="prompt_id",
        )


def test_an_unscored_response_stops_the_step_by_default(monkeypatch):
    """Simulated judges that fail on one answer (tests/group_helpers.py) stand in for the
    jury: the group's one comparison is unscored, so both responses are."""
    from group_helpers import sim_jury

    from jurybox.integrations import verl

    rows = [(QUESTION, "[good]", 0), (QUESTION, "[bad]", 0)]
    rewards = verl.jury_rewards(rubric="pairwise", jury="tiny", unscored="error")
    monkeypatch.setattr(rewards, "_jury", sim_jury({"[good]": 1.0, "[bad]": -1.0}, fail=("[bad]",)))
    args = (
        ["m"] * 2,
        [a for _, a, _ in rows],
        [REFERENCE] * 2,
        [{"question": q, "index": i} for q, _, i in rows],
    )
    with pytest.raises(
        MissingRewards,
        match=r"^jurybox: 2 sample\(s\) have no pairwise "
        r"round_robin reward: verl sample "
        r"extra_info.index=0: all its comparisons unscored",
    ):
        verl.compute_group_scores(*args, rubric="pairwise", jury="tiny")
    got = verl.compute_group_scores(*args, rubric="pairwise", jury="tiny", unscored=0.25)
    assert [g["score"] for g in got] == [0.25, 0.25]
    assert [g["jurybox/unscored"] for g in got] == [1.0, 1.0]
