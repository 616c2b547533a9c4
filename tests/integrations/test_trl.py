"""TRL: a real ``GRPOTrainer`` trains two steps on CPU, with the SmolLM2-135M copy that
``jurybox models fetch`` writes as its policy and the jury's rewards from the session's live
service (``user_service``) as its (async) reward function, on conversations with a system
turn. The rewards TRL logs equal what /v1/score returns for the same items (the system turn is
not judged as the item's context); an unscored item (its reference makes the judges' prompt
longer than the service's limit, while the policy's prompt stays short: a long prompt made
the policy's step take most of the test's time) has the reward None, which TRL leaves out,
and the trainer's log says why (a warning naming jurybox, the completion and the cause) as
its completions table shows each verdict. Per-criterion rewards weighed by TRL's
``reward_weights`` go through TRL's own scoring (``_generate_and_score_completions``, the
first half of a training step): a completion missing one criterion is unscored for all of
them, not a sum with a 0 in it. Group rewards (#54): the same trainer's two steps on each
prompt's completions compared in pairs, through the service's POST /v1/groups and by an
in-process jury at once; a group beyond the service's limits is refused before any request.
The guard (#62): the same trainer with a canary per step in the service's request and the real
tiny jury as a held-out sentinel logs both, and stops at a (forced) drift alarm through its
callback."""

from __future__ import annotations

import logging
import math

import pytest
from service_helpers import USER_SERVICE_TOKEN

pytestmark = pytest.mark.models

REFERENCE = "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."
SHORT = "What causes brown rings on tomato leaves after rain?"
GARLIC = "When should I plant garlic in Ohio?"
#: A reference that puts the judges' prompts over the session service's limit (1024 tokens).
LONG_REFERENCE = "Plant it in mid-autumn. " + "Mulch it, water it and weed it. " * 110
SYSTEM = "You are a plant doctor. Answer in one sentence; this instruction is not the question."


def policy_directory() -> str:
    from jurybox.judges import load_jury_spec
    from jurybox.judges.weights import materialize, resolve

    smol = next(j for j in load_jury_spec("tiny").judges if j.name == "smollm2-135m")
    return materialize(resolve(smol.model)).directory


def grpo(tmp_path, reward_funcs, dataset, steps: int = 2, weights=None):
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    policy = policy_directory()
    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        use_cpu=True,
        bf16=False,
        fp16=False,
        per_device_train_batch_size=2,
        num_generations=2,
        gradient_accumulation_steps=1,
        max_completion_length=8,
        max_steps=steps,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        gradient_checkpointing=False,
        learning_rate=1e-5,
        seed=0,
        reward_weights=weights,
    )
    return GRPOTrainer(
        model=policy,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )


def conversation(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


def test_grpo_trains_two_steps_on_the_jury_s_rewards(
    user_service, token, v1_score, tmp_path, caplog, monkeypatch
):
    from datasets import Dataset

    from jurybox.integrations.trl import jury_reward
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    reward = jury_reward(
        url=user_service,
        rubric="mirage-mg",
        token_env=token,
        fields={"reference": "answer"},
        asynchronous=True,
    )
    calls: list[tuple[list, list, list, list]] = []
    judged: list = []  # the items jurybox sent
    rewards_of = reward.rewards  # type: ignore[attr-defined]
    records = rewards_of.records
    monkeypatch.setattr(
        rewards_of,
        "records",
        lambda items, samples=None: judged.extend(items) or records(items, samples),
    )

    async def recorded(prompts, completions, **kwargs):
        rewards = await reward(prompts=prompts, completions=completions, **kwargs)
        calls.append((list(prompts), list(completions), list(kwargs["answer"]), rewards))
        return rewards

    recorded.__name__ = reward.__name__  # the name TRL logs the reward under
    # One prompt per step (2 completions each): the first is scored, the second's judge
    # prompts are over the service's limit (its reference is long): unscored.
    dataset = Dataset.from_dict(
        {
            "prompt": [conversation(SHORT), conversation(GARLIC)],
            "answer": [REFERENCE, LONG_REFERENCE],
        }
    )
    trainer = grpo(tmp_path, [recorded], dataset)
    with caplog.at_level(logging.WARNING, logger="jurybox.integrations"):
        trainer.train()

    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2 and len(calls) == 2
    # The question is the user's turn; the system turn is the policy's instruction, not context.
    assert {it.question for it in judged} == {SHORT, GARLIC}
    assert all(it.context is None for it in judged)
    name = reward.__name__
    spec = RewardSpec(unscored="none").bind(load_rubric("mirage-mg"))
    unscored_seen = scored_seen = 0
    for logged, (prompts, completions, answers, rewards) in zip(steps, calls):
        items = [
            {
                "id": str(k),
                "question": p[-1]["content"],
                "response": c[0]["content"],
                "reference": a,
            }
            for k, (p, c, a) in enumerate(zip(prompts, completions, answers))
        ]
        # What the service says of the same items, turned into rewards the same way.
        assert rewards == spec.values(v1_score("mirage-mg", items))
        assert logged[f"jurybox/{name}/unscored"] == sum(r is None for r in rewards)
        if all(r is None for r in rewards):  # TRL leaves the missing rewards out: no mean
            assert prompts[0][-1]["content"] == GARLIC
            assert logged[f"rewards/{name}/mean"] is None
            unscored_seen += 1
        else:
            assert prompts[0][-1]["content"] == SHORT and all(0.0 <= r <= 1.0 for r in rewards)
            mean = sum(rewards) / len(rewards)
            assert math.isclose(logged[f"rewards/{name}/mean"], mean, abs_tol=1e-6)
            scored_seen += 1
    assert (unscored_seen, scored_seen) == (1, 1)
    assert reward.stats.unscored == 2 and reward.stats.rows == 4  # type: ignore[attr-defined]
    # Why, in the trainer's log: jurybox, each unscored completion, the cause (#51: nothing).
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "jurybox.integrations"]
    assert warning.startswith(
        "jurybox: 2 of 2 rewards (mirage-mg.weighted_sum) unscored: "
        f"completion 0 of the batch (prompt {GARLIC!r}): smollm2-135m: "
        "prompt is "
    )
    assert f"; completion 1 of the batch (prompt {GARLIC!r}): smollm2-135m: prompt is " in warning
    # Each verdict in TRL's completions table (the last step's, as TRL keeps them).
    column = list(trainer._logs["extra"][f"{name}/verdict"])
    last = calls[-1][3]
    assert len(column) == 2
    for verdict, value in zip(column, last):
        assert verdict.startswith(
            "smollm2-135m: accuracy "
            if value is not None
            else "not scored: smollm2-135m: prompt is "
        )
    rewards_of.close()


#: A rubric of two criteria judged one by one: ``better`` answered from the replay jury's
#: recorded answers of its schema, ``detail`` never (its prompt is over the service's limit).
PARTIAL = {
    "name": "trl-partial",
    "version": "1",
    "mode": "per_criterion",
    "description": "Two criteria judged one by one, the second over the judges' token limit.",
    "inputs": ["question", "response", "reference"],
    "optional_inputs": ["context"],
    "system": "You are a strict grader.",
    "template": "Criterion:\n{% for c in criteria %}- {{ c.name }}: {{ c.description }}\n"
    "{{ c.scale.describe() }}\n{% endfor %}\nQuestion:\n{{ question }}\n"
    "Reference:\n{{ reference }}\n\nResponse:\n{{ response }}\n\n{{ output_format }}",
    "criteria": [
        {
            "name": "better",
            "description": "Is the response better than the reference?",
            "scale": {"labels": {"1": 1, "tie": 0.5, "2": 0}},
        },
        {
            "name": "detail",
            "scale": {"min": 0, "max": 4},
            "description": " ".join(
                [
                    "Count every concrete, actionable step the response gives: "
                    "what to do, when, with which product and how much."
                ]
                * 60
            ),
        },
    ],
}


def test_per_criterion_rewards_of_a_completion_missing_one_are_all_none(user_service, tmp_path):
    """#51: with ``per_criterion=True`` and ``reward_weights``, TRL's nansum made a missing
    criterion a 0 in the completion's reward; now every criterion's reward is None for it and
    TRL counts the completion unscorable (no reward, advantage 0). Beside a reward function of
    another origin a None is refused, naming jurybox and the cause."""
    import torch
    from datasets import Dataset

    from jurybox.integrations.core import MissingRewards
    from jurybox.integrations.trl import jury_reward
    from jurybox.rubrics import Rubric
    from jurybox.rubrics.errors import InputError

    rubric = Rubric.model_validate(PARTIAL)
    functions = jury_reward(
        url=user_service,
        rubric=rubric,
        token=USER_SERVICE_TOKEN,
        per_criterion=True,
        fields={"reference": "answer"},
    )
    assert [f.__name__ for f in functions] == ["jury_trl_partial_better", "jury_trl_partial_detail"]
    dataset = Dataset.from_dict({"prompt": [SHORT], "answer": [REFERENCE]})
    trainer = grpo(tmp_path, functions, dataset, steps=1, weights=[1.0, 1.0])
    trainer.model.train()  # as in a training step (TRL keeps its metrics by mode)
    out = trainer._generate_and_score_completions([dataset[0], dataset[0]])
    metrics = trainer._metrics["train"]
    assert math.isnan(metrics["reward"][-1])  # before: 1.0, better's 1 plus detail's "0"
    assert math.isnan(metrics["rewards/jury_trl_partial_better/mean"][-1])
    assert torch.equal(out["advantages"], torch.zeros(2))
    (verdict, _) = trainer._logs["extra"]["jury_trl_partial/verdict"]
    assert verdict.startswith(
        "smollm2-135m: better 1; gemma3-270m: better 1; not scored: "
        "smollm2-135m on detail: prompt is "
    )
    assert functions[0].rewards.stats.requests == 1  # type: ignore[attr-defined]

    def length(completions, **kwargs):
        return [float(len(c)) for c in completions]

    mixed = grpo(tmp_path, [*functions, length], dataset, steps=1)
    mixed.model.train()
    with pytest.raises(
        InputError,
        match=r"^jurybox: TRL adds its 3 reward functions "
        r"\(jury_trl_partial_better, jury_trl_partial_detail, "
        r"length\) up with nansum",
    ):
        mixed._generate_and_score_completions([dataset[0], dataset[0]])
    functions[0].rewards.close()  # type: ignore[attr-defined]
    # unscored="error": the error names jurybox, the completion and the cause.
    strict = jury_reward(
        url=user_service,
        rubric=rubric,
        token=USER_SERVICE_TOKEN,
        score="detail",
        unscored="error",
        fields={"reference": "answer"},
    )
    with pytest.raises(
        MissingRewards,
        match=r"^jurybox: 1 sample\(s\) have no trl-partial\."
        r"detail reward: completion 0 of the batch \(prompt "
        r"'What causes.*'\): smollm2-135m: prompt is \d+ "
        r"tokens",
    ):
        strict(prompts=[SHORT], completions=["Early blight."], answer=[REFERENCE])
    strict.rewards.close()  # type: ignore[attr-defined]


def test_the_rewards_of_one_batch_per_criterion_come_from_one_judging(user_service):
    from jurybox.integrations.trl import jury_reward

    # token= is the service's token itself (#51: it was refused as a field of the reward).
    functions = jury_reward(
        url=user_service,
        rubric="mirage-mg",
        token=USER_SERVICE_TOKEN,
        per_criterion=True,
        scale="raw",
        fields={"reference": "answer"},
    )
    names = [f.__name__ for f in functions]
    assert names == [
        f"jury_mirage_mg_{c}"
        for c in ("accuracy", "relevance", "completeness", "parsimony", "weighted_sum")
    ]
    batch = {
        "prompts": [SHORT, SHORT],
        "completions": [[{"role": "assistant", "content": "Early blight."}], "A virus."],
        "answer": [REFERENCE, REFERENCE],
    }
    values = [f(**batch) for f in functions]
    stats = functions[0].rewards.stats  # type: ignore[attr-defined]
    assert stats.requests == 1  # five rewards, one request
    accuracy, relevance, completeness, parsimony, weighted = values
    for k in range(2):
        total = 2 * accuracy[k] + relevance[k] + completeness[k] + parsimony[k]
        assert math.isclose(weighted[k], total / 20, abs_tol=1e-9)
    # The same batch again (TRL's next step may repeat it) is judged again, not served stale.
    functions[0](**batch)
    assert stats.requests == 2
    functions[0].rewards.close()  # type: ignore[attr-defined]


def test_grpo_trains_two_steps_on_group_rewards_from_the_service_and_in_process(
    user_service, token, replay_tiny, tmp_path, caplog, capsys, monkeypatch
):
    """#54: one GRPOTrainer, two steps, two group rewards: each prompt's two completions
    compared in both orders on the pairwise rubric, through the session's ``jurybox serve``
    (POST /v1/groups) and by the in-process replay jury. The calls per group are printed
    before the first step; the rewards reach the trainer; within each group their spread is
    not zero where the pointwise reward's is (the tiny jury's chosen scores tie); the service's
    rewards equal the in-process ones where both judged; where the service's judges could
    not (the second prompt's reference puts their prompts over its limit) the unscored count
    is logged, with the cause, and the reward is the value the user gave."""
    from datasets import Dataset

    from jurybox.integrations.trl import jury_reward
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    remote = jury_reward(
        url=user_service,
        rubric="pairwise",
        group="round_robin",
        group_size=2,
        token_env=token,
        fields={"reference": "answer"},
        unscored=0.5,
        asynchronous=True,
        name="service_groups",
    )
    local = jury_reward(
        jury=replay_tiny,
        rubric="pairwise",
        group="round_robin",
        group_size=2,
        fields={"reference": "answer"},
        unscored=0.5,
        name="local_groups",
    )
    printed = capsys.readouterr().out
    assert (
        printed.count(
            "2 judge calls per judge per group of 2 (round robin: 1 pair x 2 "
            "calls (both orders)); 2 judges: 4 judge calls per group"
        )
        == 2
    )
    seen: list[tuple[list, list, list, list]] = []

    async def recorded(prompts, completions, **kwargs):
        rewards = await remote(prompts=prompts, completions=completions, **kwargs)
        seen.append(
            (list(prompts), [c[0]["content"] for c in completions], list(kwargs["answer"]), rewards)
        )
        return rewards

    recorded.__name__ = remote.__name__
    dataset = Dataset.from_dict(
        {
            "prompt": [conversation(SHORT), conversation(GARLIC)],
            "answer": [REFERENCE, LONG_REFERENCE],
        }
    )
    trainer = grpo(tmp_path, [recorded, local], dataset)
    with caplog.at_level(logging.WARNING, logger="jurybox.integrations"):
        trainer.train()

    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2 and len(seen) == 2
    pointwise = RewardSpec(unscored="none").bind(load_rubric("mirage-mg"))
    unscored_steps = 0
    for logged, (prompts, texts, answers, rewards) in zip(steps, seen):
        assert texts[0] != texts[1]  # two different completions: a comparison was asked
        for name in ("service_groups", "local_groups"):
            assert logged[f"jurybox/{name}/calls_per_group"] == 2.0
            assert logged[f"rewards/{name}/mean"] == pytest.approx(0.5)  # a pair's two sides
        assert logged["jurybox/local_groups/unscored"] == 0.0
        items = [
            replay_tiny.score_records(
                load_rubric("mirage-mg"),
                [local.rewards.item(k, {"prompt": p, "completion": t, "answer": a})],
            )[0]  # type: ignore[attr-defined]
            for k, (p, t, a) in enumerate(zip(prompts, texts, answers))
        ]
        assert len({pointwise.value(r) for r in items}) == 1  # the pointwise reward ties
        in_process = local(
            prompts=prompts,
            completions=[[{"role": "assistant", "content": t}] for t in texts],
            answer=answers,
        )
        assert sum(in_process) == pytest.approx(1.0)
        # The tiny jury's judges may contradict themselves when the pair's order is swapped: a
        # tie (issue 60, 7), whose group is logged as zero spread and no signal.
        tied = float(in_process[0] == in_process[1])
        assert logged["jurybox/local_groups/zero_spread"] == tied
        assert logged["jurybox/local_groups/no_signal"] >= tied
        assert logged["jurybox/local_groups/spread"] == pytest.approx(
            abs(in_process[0] - in_process[1]) / 2
        )
        if prompts[0][-1]["content"] == GARLIC:  # over the service's prompt limit
            assert rewards == [0.5, 0.5]
            assert logged["jurybox/service_groups/unscored"] == 2.0
            # no group with two rewards: no spread to log (TRL shows None)
            assert logged["jurybox/service_groups/spread"] is None
            unscored_steps += 1
        else:
            assert rewards == pytest.approx(in_process)
            assert logged["jurybox/service_groups/unscored"] == 0.0
            assert logged["jurybox/service_groups/spread"] == pytest.approx(
                logged["jurybox/local_groups/spread"]
            )
    assert unscored_steps == 1
    warnings = [r.getMessage() for r in caplog.records if r.name == "jurybox.integrations"]
    (warning,) = [w for w in warnings if "unscored" in w]
    assert warning.startswith(
        "jurybox: 2 of 2 rewards (service_groups) unscored: completion 0 "
        f"of the batch (prompt {GARLIC!r}): all its comparisons "
        "unscored: "
    )
    assert "prompt is " in warning and "tokens" in warning
    assert remote.stats.unscored == 2 and local.stats.unscored == 0  # type: ignore[attr-defined]
    for function in (remote, local):
        function.rewards.close()  # type: ignore[attr-defined]


def test_a_group_beyond_the_service_s_limits_is_refused_before_any_request(user_service, token):
    """The session's service takes 4 items per request (max_items): a group of 6 is refused
    on this side, naming the limit, before anything is sent; the route itself refuses it
    too (413) and, without the token, answers 401."""
    import httpx

    from jurybox.integrations.trl import jury_reward
    from jurybox.rubrics.errors import InputError

    reward = jury_reward(
        url=user_service, rubric="pairwise", group="round_robin", group_size=6, token_env=token
    )
    texts = [f"Answer {k}." for k in range(6)]
    with pytest.raises(
        InputError,
        match=r"^jurybox: group prompt 0: its design asks 6 "
        r"completions; the service takes at most 4 per request "
        r"\(max_items\)",
    ) as caught:
        reward(prompts=[SHORT] * 6, completions=texts)
    assert caught.value.field == "design" and reward.rewards.stats.requests == 0  # type: ignore[attr-defined]
    reward.rewards.close()  # type: ignore[attr-defined]
    body = {"rubric": "pairwise", "groups": [{"id": "g", "question": SHORT, "completions": texts}]}
    assert httpx.post(f"{user_service}/v1/groups", json=body).status_code == 401
    r = httpx.post(
        f"{user_service}/v1/groups",
        json=body,
        headers={"Authorization": f"Bearer {USER_SERVICE_TOKEN}"},
    )
    assert r.status_code == 413 and r.json()["error"]["field"] == "groups"
    assert "(max_items)" in r.json()["error"]["message"]


def test_grpo_logs_canaries_and_a_sentinel_and_stops_on_an_alarm(
    user_service, tiny_jury, token, tmp_path, caplog, monkeypatch
):
    """The guard (#62) in a real trainer: the reward from the live service with one canary per
    step judged in the same request (2 completions + 1 canary within its 4 items), the real tiny
    jury in process as the held-out sentinel (sentinel_share 0.5: 1 completion a step), and
    stop_on_alarm. The drift tests' own statistics are test_monitors.py's: here the monitors'
    alarm is forced at step 2 (their threshold met there), and the trainer stops at the end of
    that step (max_steps 3)."""
    import dataclasses

    from datasets import Dataset

    from jurybox.integrations.guard import GuardSpec
    from jurybox.integrations.trl import jury_reward

    monitor = GuardSpec.monitor

    class AlarmAtStepTwo:
        def __init__(self, inner) -> None:
            self.inner, self.updates = inner, 0

        def update(self, values):
            state = self.inner.update(values)
            self.updates += 1
            if self.updates < 2:
                return state
            return dataclasses.replace(
                state,
                threshold=min(state.threshold, state.evidence),
                alarm=True,
                alarm_step=state.alarm_step or state.step,
            )

    monkeypatch.setattr(GuardSpec, "monitor", lambda self: AlarmAtStepTwo(monitor(self)))
    reward = jury_reward(
        url=user_service,
        rubric="mirage-mg",
        token_env=token,
        fields={"reference": "answer"},
        canaries=1,
        sentinel=tiny_jury,
        sentinel_share=0.5,  # (carried across steps: one of the 2 completions every step)
        stop_on_alarm=True,
    )
    rewards_of = reward.rewards  # type: ignore[attr-defined]
    sent: list[list] = []  # the items of each request to the service's jury
    returned: list[list] = []  # the records the reward function read
    plain, records = rewards_of._records_plain, rewards_of.records
    monkeypatch.setattr(
        rewards_of,
        "_records_plain",
        lambda items, samples: sent.append(list(items)) or plain(items, samples),
    )
    monkeypatch.setattr(
        rewards_of,
        "records",
        lambda items, samples=None: returned.append(records(items, samples)) or returned[-1],
    )
    calls: list[list] = []

    def recorded(prompts, completions, **kwargs):
        out = reward(prompts=prompts, completions=completions, **kwargs)
        calls.append(list(out))
        return out

    recorded.__name__ = reward.__name__
    dataset = Dataset.from_dict(
        {
            "prompt": [conversation(SHORT), conversation(GARLIC)],
            "answer": [REFERENCE, "Plant the cloves in October, before the ground freezes."],
        }
    )
    trainer = grpo(tmp_path, [recorded], dataset, steps=3)
    with caplog.at_level(logging.INFO, logger="jurybox.integrations"):
        trainer.train()

    # Stopped by the guard's callback at the end of step 2, not by max_steps.
    assert trainer.state.global_step == 2 and len(calls) == 2
    assert "StopOnAlarm" in trainer.callback_handler.callback_list
    name = reward.__name__
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2
    for logged in steps:
        assert 0.0 <= logged[f"jurybox/{name}/canary_reward"] <= 1.0
        assert 0.0 <= logged[f"jurybox/{name}/sentinel_gap"] <= 1.0
        assert logged[f"jurybox/{name}/prechecked"] == 0.0
        assert logged[f"jurybox/{name}/canaries"] == logged[f"jurybox/{name}/sentinel_completions"]
        assert logged[f"jurybox/{name}/canaries"] == 1.0
    assert [h[f"jurybox/{name}/alarm"] for h in steps] == [0.0, 1.0]
    # Each step's one request held the 2 completions and 1 canary; the trainer got 2 rewards.
    assert [len(items) for items in sent] == [3, 3]
    assert all(items[-1].id.startswith("canary-") for items in sent)
    assert all(len(r) == 2 for r in calls)
    assert all(not rec["id"].startswith("canary-") for recs in returned for rec in recs)
    stats = rewards_of.stats
    assert (stats.judge_calls, stats.canary_calls, stats.sentinel_calls) == (8, 4, 4)
    messages = [r.getMessage() for r in caplog.records if r.name == "jurybox.integrations"]
    assert messages[0].startswith(
        "jurybox: guard of mirage-mg.weighted_sum: a step of 2 completions costs at most "
        "8 judge calls (4 for the reward, 2 for 1 canary, 2 for the sentinel's 1 completion"
    )
    assert any(m.startswith("jurybox: step 2: reward drift alarm for ") for m in messages)
    assert "jurybox: training stops at step 2: the reward's drift alarm (stop_on_alarm)" in messages
    rewards_of.close()


#: Each prompt's own checklist (#63), HealthBench's shape, as the dataset's JSON string column.
CHECKLISTS = {
    SHORT: [
        {"criterion": "Names early blight or a fungus as the cause", "points": 5},
        {"criterion": "Advises removing the infected leaves", "points": 3},
        {"criterion": "Blames the rain alone, with no disease named", "points": -2},
    ],
    GARLIC: [
        {"criterion": "Says to plant in autumn (October)", "points": 5},
        {"criterion": "Mentions planting before the ground freezes", "points": 2},
    ],
}


def test_grpo_trains_two_steps_with_a_checklist_column_and_dropout(
    tiny_jury, tmp_path, monkeypatch, caplog
):
    """A checklist rubric (#63) in a real trainer: each prompt's checklist read from the
    dataset's ``checklist`` column (JSON strings), judged point by point by the real tiny jury in
    process, with rubric dropout seeded per TRL's ``global_step`` and logged per step. The
    rewards are the verdicts' HealthBench scores of the points kept."""
    import json

    from datasets import Dataset

    from jurybox.integrations.trl import jury_reward
    from jurybox.rubrics import Item, load_rubric

    (probe,) = tiny_jury.score(
        load_rubric("checklist"),
        [Item(id="probe", question=SHORT, response="A fungus.", checklist=CHECKLISTS[SHORT][:1])],
    )
    assert probe.points is not None  # the tiny jury judges checklist rubrics point by point
    reward = jury_reward(jury=tiny_jury, rubric="checklist", dropout=0.5, dropout_seed=1)
    rewards_of = reward.rewards  # type: ignore[attr-defined]
    returned: list[list] = []
    records = rewards_of.records
    monkeypatch.setattr(
        rewards_of,
        "records",
        lambda items, samples=None, step=None: (
            returned.append((list(items), records(items, samples, step=step))) or returned[-1][1]
        ),
    )
    calls: list[list] = []

    def recorded(prompts, completions, **kwargs):
        out = reward(prompts=prompts, completions=completions, **kwargs)
        calls.append(list(out))
        return out

    recorded.__name__ = reward.__name__
    dataset = Dataset.from_dict(
        {
            "prompt": [conversation(SHORT), conversation(GARLIC)],
            "checklist": [json.dumps(CHECKLISTS[SHORT]), json.dumps(CHECKLISTS[GARLIC])],
        }
    )
    trainer = grpo(tmp_path, [recorded], dataset)
    with caplog.at_level(logging.INFO, logger="jurybox.integrations"):
        trainer.train()

    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2 and len(calls) == 2 and len(returned) == 2
    # The dropout's steps are TRL's (global_step 0 and 1 while each batch is generated).
    logged = rewards_of.stats.dropout
    assert [s["step"] for s in logged] == [0, 1]
    name = reward.__name__
    for history, record, (items, verdicts), rewards in zip(steps, logged, returned, calls):
        (question,) = {it.question for it in items}  # one prompt a step, its 2 completions
        points = CHECKLISTS[question]
        assert record["of"] == 2 * len(points)  # (the items as given: every point)
        assert all(len(it.checklist) == len(points) for it in items)
        assert record["kept"] == sum(len(v["points"]) for v in verdicts)
        # TRL keeps logged metrics as float32 tensors: equal to 7 significant digits.
        kept = history[f"jurybox/{name}/dropout_kept"]
        assert kept == pytest.approx(record["kept"] / record["of"], rel=1e-6)
        assert len({tuple(v["points"]) for v in verdicts}) == 1  # one subset per prompt
        for verdict, value in zip(verdicts, rewards):
            assert sorted([*verdict["dropped"], *verdict["points"]]) == sorted(
                f"p{k + 1}" for k in range(len(points))
            )
            assert value == verdict["scores"]["score"]  # (None where a point is unscored)
            assert value is None or 0.0 <= value <= 1.0
    lines = [r.getMessage() for r in caplog.records if "rubric dropout at step" in r.getMessage()]
    assert len(lines) == 2
