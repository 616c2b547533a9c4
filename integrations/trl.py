"""A jury as the reward of TRL's trainers (``GRPOTrainer(reward_funcs=[...])``, and any TRL
trainer that takes reward functions).

>>> from jurybox.integrations.trl import jury_reward
>>> reward = jury_reward(url="http://127.0.0.1:8000", rubric="mirage-mg",
...                      fields={"reference": "answer"})          # the dataset's answer column
>>> trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, args=...)

TRL calls a reward function with the batch's ``prompts`` and ``completions`` (strings, or
conversations) and every other dataset column by name; it returns one reward per completion.
An unscored item's reward is ``None`` by default, which TRL leaves out of the reward's mean
and the group's baseline (its advantage is 0): never a 0 that reads as "a bad answer". Each
call logs ``jurybox/<name>/unscored`` (how many of the batch were unscored) through TRL's
``log_metric``, beside TRL's own ``rewards/<name>/mean``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.reward import RewardSpec, Scale, Unscored

from .core import JuryRewards, RewardStats

RewardFunc = Callable[..., list[float | None]]


def jury_reward(*, rubric: str | Rubric, url: str | None = None, jury: Any = None,
                token_env: str = "JURYBOX_TOKEN", per_criterion: bool = False,
                score: str | None = None, calibrated: bool = False, scale: Scale = "unit",
                unscored: Unscored = "none", fields: Mapping[str, str] | None = None,
                cache: bool = True, concurrency: int = 4,
                **options: Any) -> RewardFunc | list[RewardFunc]:
    """A TRL reward function: the jury's reward for each completion.

    ``url`` (a running ``jurybox serve``; its token from ``token_env``) or ``jury`` (in
    process: a jury name, a jury file or a loaded Jury). ``score``, ``calibrated``, ``scale``
    and ``unscored`` define the reward (:class:`jurybox.rubrics.reward.RewardSpec`; unscored
    ``"none"`` by default, which TRL supports). ``per_criterion=True`` returns one function per
    criterion of the rubric (plus the formula, if any), all from one judging of each batch: give
    TRL ``reward_weights`` to combine them. ``fields`` maps item fields to dataset columns.
    """
    rewards = JuryRewards(rubric, url=url, jury=jury, token_env=token_env, cache=cache,
                          reward=RewardSpec(score=score, calibrated=calibrated, scale=scale,
                                            unscored=unscored), fields=fields,
                          concurrency=concurrency, **options)
    memo = _BatchMemo(rewards)
    if not per_criterion:
        return _function(memo, rewards.reward.score, rewards)
    names = [c.name for c in rewards.rubric.criteria]
    if rewards.rubric.formula is not None:
        names.append(rewards.rubric.formula.name)
    return [_function(memo, name, rewards) for name in names]


class _BatchMemo:
    """The verdict records of the last batch: the per-criterion functions of one batch judge
    it once."""

    def __init__(self, rewards: JuryRewards) -> None:
        self.rewards = rewards
        self.key: tuple[Any, ...] | None = None
        self.records: list[dict[str, Any]] = []

    def records_for(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        key = tuple((it.question, it.response, it.reference, it.context) for it in items)
        if key != self.key:
            self.records = self.rewards.records(items)
            self.key = key
        return self.records


def _function(memo: _BatchMemo, score: str, rewards: JuryRewards) -> RewardFunc:
    reward = rewards.spec.model_copy(update={"score": score}).bind(rewards.rubric)
    name = f"jury_{rewards.rubric.name.replace('-', '_')}_{score}"
    stats = RewardStats()  # this function's rewards (requests: the shared JuryRewards')

    def jury_reward_fn(prompts: Sequence[Any], completions: Sequence[Any],
                       **kwargs: Any) -> list[float | None]:
        columns = {k: v for k, v in kwargs.items()
                   if isinstance(v, list) and len(v) == len(prompts)}
        rows = [{"prompt": p, "completion": c, **{k: v[i] for k, v in columns.items()}}
                for i, (p, c) in enumerate(zip(prompts, completions))]
        items = [rewards.item(i, row) for i, row in enumerate(rows)]
        records = memo.records_for(items)
        unscored = reward.count_unscored(records)
        stats.rows += len(records)
        stats.unscored += unscored
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"jurybox/{name}/unscored", float(unscored))
        return reward.values(records)

    jury_reward_fn.__name__ = jury_reward_fn.__qualname__ = name
    jury_reward_fn.rewards = rewards  # type: ignore[attr-defined]  # requests and close()
    jury_reward_fn.stats = stats  # type: ignore[attr-defined]
    return jury_reward_fn
