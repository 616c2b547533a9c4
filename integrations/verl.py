"""A jury as verl's custom reward function, loaded by verl by path::

    reward.custom_reward_function.path=pkg://jurybox.integrations.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://127.0.0.1:8000
    +reward.custom_reward_function.reward_kwargs.rubric=mirage-mg

verl's reward manager calls ``compute_score(data_source=, solution_str=, ground_truth=,
extra_info=, **reward_kwargs)`` once per response (concurrently: it awaits this coroutine per
row). The response is ``solution_str``, the reference ``ground_truth``; verl passes no prompt,
so the question comes from ``extra_info["question"]`` (or the key ``fields`` names), which
verl's data preprocessing scripts write. The result is ``{"score": reward, "unscored": 0 or
1}``: verl averages each key into its metrics, so ``unscored`` is the share of unscored
rewards. verl cannot take a missing reward: an unscored item stops the step
(``unscored="error"``, the default) unless the config gives a value
(``+reward.custom_reward_function.reward_kwargs.unscored=0.5``).

``compute_score_batch`` is the batched form (lists in, a list out) for verl's batch reward
manager, where a verl release offers one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import Scale, Unscored

from .core import JuryRewards

_REWARDS: dict[tuple[Any, ...], JuryRewards] = {}
_LOCK = threading.Lock()


def jury_rewards(*, rubric: str, url: str | None = None, jury: str | None = None,
                 token_env: str = "JURYBOX_TOKEN", score: str | None = None,
                 calibrated: bool = False, scale: Scale = "unit",
                 unscored: Unscored = "error",
                 fields: Mapping[str, str] | None = None) -> JuryRewards:
    """The :class:`JuryRewards` of these options, made once per process (verl calls the
    reward function once per response)."""
    key = (rubric, url, jury, token_env, score, calibrated, scale, unscored,
           tuple(sorted((fields or {}).items())))
    with _LOCK:
        if key not in _REWARDS:
            _REWARDS[key] = JuryRewards(rubric, url=url, jury=jury, token_env=token_env,
                                        score=score, calibrated=calibrated, scale=scale,
                                        unscored=unscored, fields=fields)
        return _REWARDS[key]


def _row(rewards: JuryRewards, solution_str: str, ground_truth: Any,
         extra_info: Mapping[str, Any] | None) -> dict[str, Any]:
    info = dict(extra_info or {})
    question_key = rewards.fields.get("question", "question")
    if question_key not in info and "question" in rewards.rubric.inputs:
        raise InputError(f"rubric {rewards.rubric.name} needs the question: verl passes none, "
                         f"so put it in the dataset's extra_info[{question_key!r}] (or name the "
                         "key with reward_kwargs.fields.question)", field=f"extra_info.{question_key}")
    row: dict[str, Any] = {"prompt": info.get(question_key, ""), "completion": solution_str}
    if isinstance(ground_truth, Mapping):  # some recipes keep a dict of gold fields
        ground_truth = ground_truth.get("ground_truth", ground_truth.get("reference"))
    if ground_truth not in (None, ""):
        row[rewards.fields.get("reference", "reference")] = str(ground_truth)
    context_key = rewards.fields.get("context", "context")
    if context_key in info:
        row[context_key] = info[context_key]
    return row


def _result(value: float | None, unscored: bool) -> dict[str, Any]:
    return {"score": value, "unscored": float(unscored)}


async def compute_score(data_source: str | None = None, solution_str: str = "",
                        ground_truth: Any = None, extra_info: Mapping[str, Any] | None = None,
                        **kwargs: Any) -> dict[str, Any]:
    """verl's custom reward function: the jury's reward of one response (see the module
    docstring); ``kwargs`` are the reward's options from ``reward_kwargs`` (``rubric`` and
    ``url`` or ``jury`` at least)."""
    rewards = jury_rewards(**_options(kwargs))
    item = rewards.item(0, _row(rewards, solution_str, ground_truth, extra_info))
    values, records = await asyncio.to_thread(rewards.rewards_of, [item])
    return _result(values[0], rewards.reward.raw(records[0])[0] is None)


def compute_score_batch(data_sources: Sequence[str] | None = None,
                        solution_strs: Sequence[str] = (), ground_truths: Sequence[Any] = (),
                        extra_infos: Sequence[Mapping[str, Any] | None] = (),
                        **kwargs: Any) -> list[dict[str, Any]]:
    """The batched form: one reward per response, all judged together (as few requests as the
    service's limits allow)."""
    rewards = jury_rewards(**_options(kwargs))
    infos = list(extra_infos) or [None] * len(solution_strs)
    truths = list(ground_truths) or [None] * len(solution_strs)
    items = [rewards.item(k, _row(rewards, s, g, e))
             for k, (s, g, e) in enumerate(zip(solution_strs, truths, infos))]
    values, records = rewards.rewards_of(items)
    return [_result(v, rewards.reward.raw(r)[0] is None) for v, r in zip(values, records)]


_OPTIONS = ("rubric", "url", "jury", "token_env", "score", "calibrated", "scale", "unscored",
            "fields")
# What verl itself may add to the call (with a reward-model router), not ours to read.
_VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def _options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(kwargs) - set(_OPTIONS) - set(_VERL_KWARGS))
    if unknown:
        raise InputError(f"unknown reward_kwargs {unknown} (jurybox takes {', '.join(_OPTIONS)})",
                         field=f"reward_kwargs.{unknown[0]}")
    if "rubric" not in kwargs:
        raise InputError("reward_kwargs.rubric is required (and url or jury)",
                         field="reward_kwargs.rubric")
    return {k: v for k, v in kwargs.items() if k in _OPTIONS}
