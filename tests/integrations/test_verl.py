"""verl: its reward loop worker (``verl.experimental.reward_loop.RewardLoopWorker``, what each
of verl's reward actors runs, here in this process) loads jurybox's reward function by path
from the config, as a training run does (``reward.custom_reward_function.path=
pkg://jurybox.integrations.verl``), and scores a small batch of responses (a ``DataProto`` of
token ids) through verl's own reward managers against the session's live service: ``naive``
(the default; its concurrent calls are judged together, in one request) and ``remote`` (a Ray
worker process of its own, on a local Ray the test starts; it takes only a synchronous
function: ``compute_score_sync``).
verl's own ``assemble_rm_scores`` puts each reward at its response's last token. The rewards
equal /v1/score's for the same items; each response's ``reward_extra_info`` carries every
criterion's score and its verdict in a line. An unscored response stops the step (the default)
naming jurybox, the sample (``extra_info.index``) and the cause, or gets the value the config
names; ``unscored=none``, which verl cannot take, is refused. Where it stops on CPU: the
rollout and the trainer around the reward path (vLLM/SGLang rollouts, FSDP) are not run here."""

from __future__ import annotations

import pytest
from service_helpers import LONG_QUESTION

pytestmark = pytest.mark.models

REFERENCE = "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."
ROWS = [
    (
        "What causes brown rings on tomato leaves after rain?",
        "Early blight, a fungal disease; remove the infected leaves.",
    ),
    ("What causes brown rings on tomato leaves after rain?", "Too much sun."),
    (LONG_QUESTION, "A fungus."),
]
CRITERIA = ("accuracy", "relevance", "completeness", "parsimony", "weighted_sum")


def policy_directory() -> str:
    from jurybox.judges import load_jury_spec
    from jurybox.judges.weights import materialize, resolve

    smol = next(j for j in load_jury_spec("tiny").judges if j.name == "smollm2-135m")
    return materialize(resolve(smol.model)).directory


def config(
    url: str, token_env: str, manager: str = "naive", name: str = "compute_score", **reward_kwargs
):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "actor_rollout_ref": {"model": {"path": policy_directory(), "tokenizer_path": None}},
            "reward": {
                "num_workers": 1,
                "custom_reward_function": {
                    "path": "pkg://jurybox.integrations.verl",
                    "name": name,
                    "reward_kwargs": {
                        "url": url,
                        "rubric": "mirage-mg",
                        "token_env": token_env,
                        **reward_kwargs,
                    },
                },
                "reward_manager": {
                    "source": "register",
                    "name": manager,
                    "module": {"path": None, "name": "custom_reward_manager"},
                },
                "reward_model": {"enable": False},
            },
        }
    )


def batch(tokenizer, rows, question_key: str = "question", first_index: int = 0):
    """A verl DataProto as its rollout leaves it: left-padded prompts, right-padded responses,
    and each row's data_source, reward_model.ground_truth and extra_info (the question under
    ``question_key`` and the row's index, as verl's preprocessing scripts write them)."""
    import numpy as np
    import torch
    from verl import DataProto

    prompts = tokenizer(
        [q for q, _ in rows],
        padding=True,
        return_tensors="pt",
        padding_side="left",
        add_special_tokens=False,
    )
    tokenizer.padding_side = "right"
    responses = tokenizer(
        [a + tokenizer.eos_token for _, a in rows],
        padding=True,
        return_tensors="pt",
        add_special_tokens=False,
    )
    return DataProto.from_dict(
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
            "extra_info": np.array(
                [
                    {question_key: q, "index": first_index + k, "split": "train"}
                    for k, (q, _) in enumerate(rows)
                ],
                dtype=object,
            ),
        },
    )


def decoded(data, worker) -> list[str]:
    """The responses as verl's reward manager decodes them (what the judges are shown)."""
    responses, mask = data.batch["responses"], data.batch["attention_mask"]
    lengths = mask[:, -responses.shape[1] :].sum(-1).tolist()
    return [
        worker.input_tokenizer.decode(responses[k, :n], skip_special_tokens=True)
        for k, n in enumerate(lengths)
    ]


def score(worker, data):
    return worker.loop.run_until_complete(worker.compute_score_batch(data))


def test_verl_s_reward_managers_score_a_batch_with_the_jury(
    user_service, token, v1_score, monkeypatch
):
    """The naive manager, the question under the key ``fields.question`` names (#51: it was
    read from the wrong key, and the service answered ``items[0].question: empty``); then the
    remote manager (its own Ray worker process per reward worker), which refuses a coroutine
    (#51) and runs ``compute_score_sync``: the same reward, and an unscored response's cause
    (#59), on one local Ray."""
    import shutil
    import tempfile

    import ray
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

    from jurybox.integrations import verl
    from jurybox.integrations.verl import VerlUnscored, jury_rewards
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    # A quiet 10 ms ends a batch (50 ms at most); this machine, shared with other runs, may
    # pause a thread longer between two of verl's decodes: wider here, so that the count of
    # requests below is certain.
    monkeypatch.setattr(verl, "GAP_S", 0.5)
    monkeypatch.setattr(verl, "WINDOW_S", 2.0)

    options = {"unscored": 0.25, "fields": {"question": "prompt_text"}}
    worker = RewardLoopWorker(config(user_service, token, **options))
    data = batch(worker.input_tokenizer, ROWS, question_key="prompt_text")
    outputs = score(worker, data)
    # The three concurrent calls were judged together: one request (the service takes 4 items).
    rewards = jury_rewards(url=user_service, rubric="mirage-mg", token_env=token, **options)
    assert rewards.stats.requests == 1 and rewards.stats.rows == 3
    records = v1_score(
        "mirage-mg",
        [
            {"id": str(k), "question": q, "response": a, "reference": REFERENCE}
            for k, (q, a) in enumerate(zip([q for q, _ in ROWS], decoded(data, worker)))
        ],
    )
    rubric = load_rubric("mirage-mg")
    want = RewardSpec(unscored=0.25).bind(rubric).values(records)
    scores = [o["reward_score"] for o in outputs]
    assert scores == want and want[2] == 0.25  # the long question's response is unscored
    infos = [o["reward_extra_info"] for o in outputs]
    assert [i["jurybox/unscored"] for i in infos] == [0.0, 0.0, 1.0]
    for c in CRITERIA:  # every criterion's score on the reward's scale, None where missing
        assert [i[f"jurybox/{c}"] for i in infos] == RewardSpec(score=c, unscored="none").bind(
            rubric
        ).values(records)
    assert infos[0]["jurybox/verdict"].startswith("smollm2-135m: accuracy ")
    # The cause, not its consequence: the judges' prompt over their limit before "below quorum".
    assert infos[2]["jurybox/verdict"].startswith("not scored: smollm2-135m: prompt is ")
    tensor = RewardManagerBase.assemble_rm_scores(data, scores)
    lengths = data.batch["attention_mask"][:, -data.batch["responses"].shape[1] :].sum(-1)
    for k, n in enumerate(lengths.tolist()):
        assert tensor[k, n - 1].item() == pytest.approx(want[k])
        assert tensor[k].abs().sum().item() == pytest.approx(abs(want[k]))

    with pytest.raises(AssertionError, match="Async reward score is not supported"):
        RewardLoopWorker(config(user_service, token, manager="remote"))
    # Its own local Ray (the token fixture's variable inherited by its workers), stopped after.
    temp = tempfile.mkdtemp(prefix="verl-ray-", dir="/tmp")  # short: Ray's socket paths
    ray.init(
        address="local",
        num_cpus=1,
        include_dashboard=False,
        logging_level="WARNING",
        _temp_dir=temp,
    )
    try:
        remote = RewardLoopWorker(
            config(user_service, token, manager="remote", name="compute_score_sync")
        )
        (output,) = score(remote, batch(remote.input_tokenizer, ROWS[:1]))
        # An unscored response (unscored=error, the default here): the VerlUnscored raised in the
        # worker process reaches the step whole (#59: Ray's "Failed to deserialize exception",
        # the cause only in a worker's warning line).
        with pytest.raises(VerlUnscored) as raised:
            score(remote, batch(remote.input_tokenizer, ROWS[2:], first_index=7))
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    assert output["reward_score"] == want[0]
    assert output["reward_extra_info"]["jurybox/weighted_sum"] == want[0]
    assert "verl sample extra_info.index=7: smollm2-135m: prompt is " in str(raised.value)
    assert raised.value.unscored[0][0] == "verl sample extra_info.index=7"


def test_verl_s_errors_name_jurybox_the_sample_and_the_cause(user_service, token, monkeypatch):
    """Every error names the sample by its extra_info.index (#51: always "item 0"), and
    ``unscored=none`` is refused before anything is judged (#51: it gave ``{"score": None}``
    and verl's ``assemble_rm_scores`` failed on it). The unreachable service is tried as often
    as the client's retries say, without the waits between tries (1 + 2 + 4 + 8 + 16 s: the
    back-off itself is tested in tests/serving/service/test_client.py)."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    from jurybox.integrations.verl import VerlUnscored
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.service import client as client_module
    from jurybox.serving.service.client import ServiceError

    strict = RewardLoopWorker(config(user_service, token))  # unscored=error, the default
    with pytest.raises(
        VerlUnscored,
        match=r"^jurybox: 1 sample\(s\) have no mirage-mg\."
        r"weighted_sum reward: verl sample extra_info\.index"
        r"=7: smollm2-135m: prompt is \d+ tokens",
    ):
        score(strict, batch(strict.input_tokenizer, ROWS[2:], first_index=7))
    # A response over the service's max_field_chars is not sent: unscored, saying why (#59:
    # the request's 422 failed the sample).
    too_long = [(ROWS[0][0], "Early blight. " * 400)]
    with pytest.raises(
        VerlUnscored,
        match=r"^jurybox: 1 sample\(s\) have no mirage-mg\.weighted_sum reward: verl sample "
        r"extra_info\.index=5: response: 5,600 characters, more than the limit of 5,000",
    ):
        score(strict, batch(strict.input_tokenizer, too_long, first_index=5))
    with pytest.raises(
        InputError,
        match=r"^jurybox: verl sample extra_info\.index=3: rubric "
        r"mirage-mg needs the question, and it is missing: verl "
        r"passes no prompt, so jurybox reads it from "
        r"extra_info\['question'\]",
    ):
        score(strict, batch(strict.input_tokenizer, ROWS[:1], question_key="q", first_index=3))
    waits: list[int] = []
    monkeypatch.setattr(
        client_module, "_retry_after", lambda value, attempt=0: waits.append(attempt) or 0.0
    )
    unreachable = RewardLoopWorker(config("http://127.0.0.1:9", token))
    with pytest.raises(
        ServiceError,
        match=r"^jurybox could not start the rewards "
        r"\(http://127\.0\.0\.1:9, token given\): .*unreachable after 6 tries",
    ):
        score(unreachable, batch(unreachable.input_tokenizer, ROWS[:1]))
    assert waits == [0, 1, 2, 3, 4]  # a wait before each of the client's five retries
    for options, match in [
        ({"unscored": "none"}, "verl cannot take a missing reward"),
        ({"token": "s3cret"}, "reward_kwargs.token is refused"),
        ({"rubirc": "mirage-mg"}, r"unknown reward_kwargs \['rubirc'\]"),
    ]:
        worker = RewardLoopWorker(config(user_service, token, **options))
        with pytest.raises(InputError, match=match):
            score(worker, batch(worker.input_tokenizer, ROWS[:1]))
