"""A jury as the reward of TRL's trainers (``GRPOTrainer(reward_funcs=[...])``, and any TRL
trainer that takes reward functions).

>>> from jurybox.integrations.trl import jury_reward
>>> reward = jury_reward(url="http://127.0.0.1:8000", rubric="mirage-mg",
...                      fields={"reference": "answer"})          # the dataset's answer column
>>> trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, args=...)

TRL calls a reward function with the batch's ``prompts`` and ``completions`` (strings, or
conversations: the question is the last turn, the turns before it but the system turns are the
item's context) and every other dataset column by name; it returns one reward per completion.
An unscored item's reward is ``None`` by default, which TRL leaves out of the reward's mean
and the group's baseline (its advantage is 0): never a 0 that reads as "a bad answer".

What TRL shows of it: each call logs ``jurybox/<name>/unscored`` (how many of the batch were
unscored) through TRL's ``log_metric``, beside TRL's own ``rewards/<name>/mean``; each batch
adds a ``<name>/verdict`` column (``jury_<rubric>/verdict`` for ``per_criterion``) to TRL's
completions table (``log_extra``: every judge's scores, or why there are none), and a batch
with unscored items logs one warning naming jurybox, each such completion and the cause (e.g.
a prompt over the judges' token limit). ``asynchronous=True`` gives async functions, which
TRL runs concurrently with its other async reward functions.

TRL adds its reward functions up with ``nansum``, which counts a None as 0 beside numbers.
So ``per_criterion=True`` (one function per criterion, to weigh with ``reward_weights``)
returns None from every one of its functions for a completion that any of them has no score
for (TRL then leaves it out, advantage 0), and a function whose unscored policy is None
refuses to run beside reward functions of other origins (give ``unscored=`` a value instead:
your explicit choice of what a missing reward is worth).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jurybox.rubrics import Rubric, load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import Reward, RewardSpec, Scale, Unscored, UnscoredReward

from .core import JuryRewards, MissingRewards, RewardStats, explain, message_text, short

RewardFunc = Callable[..., Any]


def jury_reward(*, rubric: str | Rubric, url: str | None = None, jury: Any = None,
                token: str | None = None, token_env: str = "JURYBOX_TOKEN",
                per_criterion: bool = False, score: str | None = None, calibrated: bool = False,
                scale: Scale = "unit", unscored: Unscored = "none",
                fields: Mapping[str, str] | None = None, cache: bool = True,
                concurrency: int = 4, timeout: float = 900.0,
                asynchronous: bool = False) -> RewardFunc | list[RewardFunc]:
    """A TRL reward function: the jury's reward for each completion.

    ``url`` (a running ``jurybox serve``; its token ``token``, or from the environment
    variable ``token_env``) or ``jury`` (in process: a jury name, a jury file or a loaded
    Jury). ``score``, ``calibrated``, ``scale`` and ``unscored`` define the reward
    (:class:`jurybox.rubrics.reward.RewardSpec`; unscored ``"none"`` by default, which TRL
    supports). ``per_criterion=True`` returns one function per criterion of the rubric (plus
    the formula, if any), all from one judging of each batch: give TRL ``reward_weights`` to
    combine them. ``fields`` maps item fields to dataset columns. ``asynchronous=True``: async
    functions (TRL awaits them concurrently). ``timeout``: seconds per request to the service.
    """
    loaded = load_rubric(rubric) if isinstance(rubric, str) else rubric
    if per_criterion and score is None and loaded.formula is None:
        score = loaded.criteria[0].name  # each function binds its own; this one is checked
    rewards = JuryRewards(loaded, url=url, jury=jury, token=token, token_env=token_env,
                          cache=cache, reward=RewardSpec(score=score, calibrated=calibrated,
                                                         scale=scale, unscored=unscored),
                          fields=fields, concurrency=concurrency, timeout=timeout)
    names = [rewards.reward.score]
    if per_criterion:
        names = [c.name for c in rewards.rubric.criteria]
        if rewards.rubric.formula is not None:
            names.append(rewards.rubric.formula.name)
    group = _Group(rewards, names, per_criterion)
    functions = [_function(group, name, asynchronous) for name in names]
    return functions if per_criterion else functions[0]


def _function_name(rubric: str, score: str) -> str:
    return f"jury_{rubric.replace('-', '_')}_{score}"


class _Group:
    """The reward functions of one :func:`jury_reward` call. Each batch is judged once for all
    of them (the first function TRL calls judges it, the others read its verdicts), its
    verdicts go once to TRL's completions table and its unscored completions once to the log.
    With several functions (per criterion), a completion that any of them has no score for is
    unscored for all of them (``completion_missing``): TRL's nansum would count the missing
    one as 0 in the weighted sum."""

    def __init__(self, rewards: JuryRewards, names: list[str], per_criterion: bool) -> None:
        self.rewards = rewards
        self.by_name: dict[str, Reward] = {
            name: rewards.spec.model_copy(update={"score": name}).bind(rewards.rubric)
            for name in names}
        slug = rewards.rubric.name.replace("-", "_")
        self.column = (f"jury_{slug}/verdict" if per_criterion
                       else f"{_function_name(rewards.rubric.name, names[0])}/verdict")
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._served: set[str] = set()
        self._records: list[dict[str, Any]] = []
        self._missing: list[bool] = []

    def batch(self, name: str, prompts: Sequence[Any], completions: Sequence[Any],
              kwargs: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[bool], list[str]]:
        """The batch's verdict records, for each completion whether any of the group's rewards
        is missing, and the completions' names; judges the batch when ``name`` is the first
        function to ask."""
        self._check_alone(kwargs.get("log_extra"))
        columns = {k: v for k, v in kwargs.items()
                   if isinstance(v, list) and len(v) == len(prompts)}
        rows = [{"prompt": p, "completion": c, **{k: v[i] for k, v in columns.items()}}
                for i, (p, c) in enumerate(zip(prompts, completions))]
        samples = [f"completion {k} of the batch (prompt {short(message_text(p), 60)!r})"
                   for k, p in enumerate(prompts)]
        items = [self.rewards.item(k, row, samples[k]) for k, row in enumerate(rows)]
        key = tuple((it.question, it.response, it.reference, it.context) for it in items)
        with self._lock:
            if key != self._key or name in self._served:  # a new batch
                self._key, self._served = None, set()
                records = self.rewards.records(items, samples)
                rewards = list(self.by_name.values())
                self._missing = [any(r.raw(rec)[0] is None for r in rewards) for rec in records]
                self.rewards.log_unscored(records, samples, rewards)
                log_extra = kwargs.get("log_extra")
                if callable(log_extra):
                    log_extra(self.column, [explain(r) for r in records])
                self._key, self._records = key, records
            self._served.add(name)
            return self._records, self._missing, samples

    def _check_alone(self, log_extra: Any) -> None:
        """Refuse a None reward beside reward functions of other origins: TRL's nansum would
        count it as 0 there. TRL passes its own trainer's ``log_extra``; the functions it holds
        beside this group's (or wrappers of them) are what TRL sums."""
        trainer = getattr(log_extra, "__self__", None)
        if self.rewards.spec.unscored != "none" or trainer is None:
            return
        from trl import GRPOTrainer, RLOOTrainer  # TRL is here: it called us

        if not isinstance(trainer, (GRPOTrainer, RLOOTrainer)):
            return
        theirs = list(trainer.reward_func_names)
        if len(theirs) > len(self.by_name):
            ours = [_function_name(self.rewards.rubric.name, n) for n in self.by_name]
            raise InputError(
                f"jurybox: TRL adds its {len(theirs)} reward functions ({', '.join(theirs)}) "
                "up with nansum, which counts a missing reward as 0: a None from "
                f"{', '.join(ours)} for an unscored completion would read there as a score of "
                "0. Give jury_reward(unscored=...) the value a missing jury reward should "
                "have, or make the jury's functions the trainer's only ones", field="unscored")


def _function(group: _Group, score: str, asynchronous: bool) -> RewardFunc:
    rewards = group.rewards
    reward = group.by_name[score]
    name = _function_name(rewards.rubric.name, score)
    alone = len(group.by_name) == 1
    stats = RewardStats()  # this function's rewards (requests: the shared JuryRewards')

    def values(prompts: Sequence[Any], completions: Sequence[Any],
               **kwargs: Any) -> list[float | None]:
        records, missing, samples = group.batch(name, prompts, completions, kwargs)
        try:
            out = reward.values(records)
        except UnscoredReward as exc:  # unscored="error": name the completions, not item ids
            raise MissingRewards(reward.name, [(samples[int(i)], why) for i, why in exc.unscored],
                                 "The reward's unscored policy is 'error': give jury_reward("
                                 "unscored='none') (TRL leaves the completion out) or a value to "
                                 "use instead") from None
        if not alone and reward.spec.unscored == "none":  # all of a completion's, or none
            out = [None if gone else value for value, gone in zip(out, missing)]
        unscored = sum(value is None for value in out) if reward.spec.unscored == "none" \
            else reward.count_unscored(records)
        stats.rows += len(records)
        stats.unscored += unscored
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"jurybox/{name}/unscored", float(unscored))
        return out

    if asynchronous:
        async def jury_reward_fn(prompts: Sequence[Any], completions: Sequence[Any],
                                 **kwargs: Any) -> list[float | None]:
            return await asyncio.to_thread(values, prompts, completions, **kwargs)
        function: RewardFunc = jury_reward_fn
    else:
        function = values
    function.__name__ = function.__qualname__ = name
    function.rewards = rewards  # type: ignore[attr-defined]  # requests and close()
    function.stats = stats  # type: ignore[attr-defined]
    return function
