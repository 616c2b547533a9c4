"""A jury as the reward of TRL's trainers.

``GRPOTrainer(reward_funcs=[...])``, and any TRL trainer that takes reward functions:

```python
from jurybox.integrations.trl import jury_reward

reward = jury_reward(url="http://127.0.0.1:8000", rubric="mirage-mg",
                     fields={"reference": "answer"})          # the dataset's answer column
trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset, args=...)
```

TRL calls a reward function with the batch's ``prompts`` and ``completions`` (strings, or
conversations: the question is the last turn, the turns before it but the system turns are the
item's context) and every other dataset column by name; it returns one reward per completion. An
unscored item's reward is ``None`` by default, which TRL leaves out of the reward's mean and the
group's baseline (its advantage is 0): never a 0 that reads as "a bad answer".

What TRL shows of it: each call logs ``jurybox/<name>/unscored`` (how many of the batch were
unscored) through TRL's ``log_metric``, beside TRL's own ``rewards/<name>/mean``; each batch adds a
``<name>/verdict`` column (``jury_<rubric>/verdict`` for ``per_criterion``) to TRL's completions
table (``log_extra``: every judge's scores, or why there are none), and a batch with unscored items
logs one warning naming jurybox, each such completion and the cause (e.g. a prompt over the judges'
token limit). ``asynchronous=True`` gives async functions, which TRL runs concurrently with its
other async reward functions.

TRL adds its reward functions up with ``nansum``, which counts a None as 0 beside numbers. So
``per_criterion=True`` (one function per criterion, to weigh with ``reward_weights``) returns None
from every one of its functions for a completion that any of them has no score for (TRL then leaves
it out, advantage 0), and a function whose unscored policy is None refuses to run beside reward
functions of other origins (give ``unscored=`` a value instead: your explicit choice of what a
missing reward is worth).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from jurybox.rubrics import Rubric, load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import Reward, RewardSpec, Scale, Unscored, UnscoredReward

from .checklists import DropoutStep
from .core import JuryRewards, MissingRewards, RewardStats, explain, message_text, short

if TYPE_CHECKING:  # (jurybox.judges is imported when used: the adapters import light)
    from jurybox.judges.groups import GroupResult, GroupSpec
    from jurybox.judges.jurors import JurorCheck
    from jurybox.judges.resolution import Use

logger = logging.getLogger("jurybox.integrations")

RewardFunc = Callable[..., Any]


def jury_reward(
    *,
    rubric: str | Rubric,
    url: str | None = None,
    jury: Any = None,
    token: str | None = None,
    token_env: str = "JURYBOX_TOKEN",
    per_criterion: bool = False,
    score: str | None = None,
    calibrated: bool = False,
    scale: Scale = "unit",
    unscored: Unscored = "none",
    fields: Mapping[str, str] | None = None,
    cache: bool = True,
    concurrency: int = 4,
    timeout: float = 900.0,
    asynchronous: bool = False,
    use: Use | None = None,
    group: GroupSpec | str | None = None,
    pointwise: str | Rubric | None = None,
    group_size: int | None = None,
    name: str | None = None,
    prechecks: bool = False,
    precheck_reward: Literal["unscored"] | float = "unscored",
    canaries: bool | float | int = False,
    canary_kinds: Sequence[str] | None = None,
    sentinel: Any = None,
    sentinel_rubric: str | Rubric | None = None,
    sentinel_share: float = 0.05,
    juror_checks: JurorCheck | bool | None = None,
    stop_on_alarm: bool = False,
    drift: Mapping[str, Any] | None = None,
    checklist_column: str = "checklist",
    dropout: float = 0.0,
    dropout_seed: int = 0,
) -> RewardFunc | list[RewardFunc]:
    """A TRL reward function: the jury's reward for each completion.

    ``score``, ``calibrated``, ``scale`` and ``unscored`` define the reward
    (`jurybox.rubrics.reward.RewardSpec`). ``group`` rewards each prompt's completions against each
    other instead (GRPO's groups; see `_group_function`).

    Args:
        rubric: The rubric, by name or file, or one loaded; with ``group``, the design's (pairwise
            for round_robin, regular, swiss, anchor).
        url: A running ``jurybox serve``'s URL (give this or ``jury``).
        jury: In process: a jury name, a jury file or a loaded Jury (give this or ``url``).
        token: The service's token.
        token_env: The environment variable the token is read from when ``token`` is not given.
        per_criterion: Return one function per criterion of the rubric (plus the formula, if any),
            all from one judging of each batch: give TRL ``reward_weights`` to combine them.
        score: The score that is the reward; with ``group``, the pointwise reward's.
        calibrated: Reward with the calibrated values.
        scale: The reward's range; with ``group``, the pointwise reward's.
        unscored: What an unscored completion's reward is: ``"none"`` by default, which TRL
            supports.
        fields: Maps item fields to dataset columns.
        cache: An in-process jury loaded here keeps its verdict cache on unless ``cache=False``.
        concurrency: Requests sent to a service at once.
        timeout: Seconds per request to the service.
        asynchronous: Give async functions (TRL awaits them concurrently).
        use: ``"expected"`` reads the reward from the judges' expected scores where every judge
            gives a distribution (`jurybox.judges.resolution`; ``jurybox/<name>/expected`` logs the
            share that did). With ``group``, it applies to the group's verdicts (by default the
            spec's, ``expected``).
        group: A `jurybox.judges.groups.GroupSpec`, or a design's name: each prompt's completions
            rewarded against each other.
        pointwise: With ``group``: the pointwise rubric (the anchor's median, a mixed reward, groups
            of one).
        group_size: With ``group``: TRL's ``num_generations`` (by default read from the trainer that
            calls the function; given, the calls per group are printed now).
        name: The group reward function's name in TRL's logs (default ``jury_<rubric>_<design>``;
            two group rewards in one trainer need two names).
        prechecks: Do not send empty, punctuation-only, echoed and master-key completions to the
            judges (`jurybox.rubrics.exploits.precheck`); each is logged with its reason.
        precheck_reward: A pre-checked completion's reward: ``"unscored"`` (the ``unscored``
            policy, the pre-check its reason) or a number.
        canaries: Exploit canaries judged with each batch and never returned as rewards: True
            (3% of the completions), a share (a float below 1), a count per step (an int). A
            share's fraction carries across steps: over a run it is that share at any batch
            size, and a step may have no canary (`jurybox.integrations.guard_steps.StepShares`).
        canary_kinds: The canaries' kinds (`jurybox.rubrics.exploits.DEFAULT_CANARIES`).
        sentinel: A held-out judge or jury outside the reward: a service's URL, a jury (name,
            file or loaded) or a `jurybox.integrations.core.JuryRewards`; it scores a random
            ``sentinel_share`` of each batch's completions.
        sentinel_rubric: The sentinel's rubric (default the reward's, and its score).
        sentinel_share: The share of the completions the sentinel scores, its fraction carried
            across steps as the canaries'.
        juror_checks: Flag failing jurors per batch: True or a `jurybox.judges.jurors.JurorCheck`
            (``leave_out=True`` decides the batch again without them).
        stop_on_alarm: Stop training at the end of a step whose drift test raised an alarm (a
            TrainerCallback added to the trainer that calls the function: `alarm_callback`).
        drift: The drift tests' ``alpha``, ``baseline_steps``, ``margin`` and ``horizon``
            (`jurybox.calibration.stats.monitors.DriftMonitor`).
        checklist_column: With a checklist rubric, the dataset column holding each prompt's
            checklist (a list of points, or that list as a JSON string).
        dropout: Rubric dropout (a checklist rubric): the share of each prompt's points left
            out at each step, a seeded subset drawn per prompt and ``state.global_step``
            (`jurybox.integrations.checklists`); each step logs ``jurybox/<name>/dropout_kept``
            (the share of points judged). 0, the default, judges every point.
        dropout_seed: The seed of the points left out.

    Returns:
        The reward function, or with ``per_criterion`` a list of them. A function whose unscored
        policy is ``"error"`` raises `jurybox.integrations.core.MissingRewards` naming the
        completions without a reward.

    Raises:
        InputError: Options that do not go together (``per_criterion`` with ``group``,
            ``pointwise``, ``group_size`` or ``name`` without it, both or neither of ``url`` and
            ``jury``), an unknown design, a rubric that cannot be loaded, or a reward or design that
            does not fit the rubric.
        ExecutionError: The service cannot be reached or refused the token.
    """
    loaded = load_rubric(rubric) if isinstance(rubric, str) else rubric
    from .guard import asks_for_guard

    if dropout and group is not None:
        raise InputError(
            "jurybox: dropout leaves out checklist points of a pointwise reward; a group "
            "reward has none of it yet",
            field="dropout",
        )
    if per_criterion and loaded.checklist is not None and loaded.checklist.expands:
        raise InputError(
            f"jurybox: rubric {loaded.name} scores each item by its checklist's points, one "
            "score: per_criterion does not apply",
            field="per_criterion",
        )

    guarded = asks_for_guard(
        prechecks, canaries, sentinel, juror_checks, stop_on_alarm, precheck_reward
    )
    if group is not None and guarded:
        raise InputError(
            "jurybox: the guard (prechecks, canaries, sentinel, juror_checks, stop_on_alarm) "
            "guards a pointwise reward; a group reward has none of it yet",
            field="group",
        )
    if group is not None:
        from jurybox.judges.groups import Design, GroupSpec

        if per_criterion:
            raise InputError(
                "jurybox: per_criterion gives one reward function per criterion of "
                "a pointwise rubric; a group reward is one function (give one of "
                "the two)",
                field="per_criterion",
            )
        if isinstance(group, str):
            designs = get_args(Design)
            if group not in designs:
                raise InputError(
                    f"jurybox: group={group!r} is no design; the designs: "
                    f"{', '.join(designs)} (or a GroupSpec)",
                    field="group",
                )
            spec = GroupSpec(design=group)  # type: ignore[arg-type]
        else:
            spec = group
        if use is not None:
            spec = spec.model_copy(update={"use": use})
        scorer = load_rubric(pointwise) if isinstance(pointwise, str) else pointwise
        listed = loaded if loaded.checklist is not None else scorer
        if (
            listed is not None
            and listed.checklist is not None
            and (spec.design != "pointwise" or scorer is not None)
        ):
            # (as the service's /v1/groups: a checklist rubric only as the pointwise design's)
            raise InputError(
                f"jurybox: rubric {listed.name} judges each prompt's own checklist, which a "
                f"group reward takes only with design pointwise and the checklist rubric as "
                f"rubric (no pointwise=); the {spec.design} design would not judge its points: "
                "give group='pointwise', or the pointwise reward jury_reward without group",
                field="group" if scorer is None else "pointwise",
            )
        point = RewardSpec(score=score, scale=scale, unscored="none")
        try:
            spec.check(loaded, scorer)
            point.bind(scorer or loaded)  # checked now: the pointwise reward's score and range
        except InputError as exc:
            raise InputError(f"jurybox: {exc}", field=exc.field) from None
        # (the transport's own reward: the design rubric's number, never read as a reward)
        own = RewardSpec(scale="raw", unscored="none") if loaded.pairwise else point
        rewards = JuryRewards(
            loaded,
            url=url,
            jury=jury,
            token=token,
            token_env=token_env,
            cache=cache,
            reward=own,
            fields=fields,
            concurrency=concurrency,
            timeout=timeout,
            checklist_column=checklist_column,
        )
        rewards.also = (scorer,) if scorer is not None else ()
        return _group_function(
            rewards, spec, scorer, point, group_size, unscored, asynchronous, name
        )
    if pointwise is not None or group_size is not None or name is not None:
        raise InputError(
            "jurybox: pointwise=, group_size= and name= are a group reward's: give group= too",
            field="group",
        )
    if per_criterion and score is None and loaded.formula is None:
        score = loaded.criteria[0].name  # each function binds its own; this one is checked
    rewards = JuryRewards(
        loaded,
        url=url,
        jury=jury,
        token=token,
        token_env=token_env,
        cache=cache,
        reward=RewardSpec(
            score=score,
            calibrated=calibrated,
            scale=scale,
            unscored=unscored,
            dropout=dropout,
            dropout_seed=dropout_seed,
        ),
        fields=fields,
        concurrency=concurrency,
        timeout=timeout,
        use=use or "score",
        checklist_column=checklist_column,
    )
    if guarded:
        from .guard import RewardGuard, guard_spec, sentinel_rewards

        guard = guard_spec(
            prechecks=prechecks,
            precheck_reward=precheck_reward,
            canaries=canaries,
            canary_kinds=canary_kinds,
            sentinel_share=sentinel_share,
            juror_checks=juror_checks,
            stop_on_alarm=stop_on_alarm,
            drift=dict(drift or {}),
        )
        held_out = sentinel_rewards(
            sentinel,
            rewards,
            load_rubric(sentinel_rubric) if isinstance(sentinel_rubric, str) else sentinel_rubric,
            token_env,
        )
        RewardGuard(guard, rewards, held_out)
    names = [rewards.reward.score]
    if per_criterion:
        names = [c.name for c in rewards.rubric.criteria]
        if rewards.rubric.formula is not None:
            names.append(rewards.rubric.formula.name)
    batch = _Group(rewards, names, per_criterion)
    functions = [_function(batch, name, asynchronous) for name in names]
    return functions if per_criterion else functions[0]


def _function_name(rubric: str, score: str) -> str:
    return f"jury_{rubric.replace('-', '_')}_{score}"


class _Group:
    """The reward functions of one `jury_reward` call, judging each batch once for all of them.

    The first function TRL calls judges it, the others read its verdicts; its verdicts go once to
    TRL's completions table and its unscored completions once to the log. With several functions
    (per criterion), a completion that any of them has no score for is unscored for all of them
    (``completion_missing``): TRL's nansum would count the missing one as 0 in the weighted sum.
    """

    def __init__(self, rewards: JuryRewards, names: list[str], per_criterion: bool) -> None:
        self.rewards = rewards
        self.by_name: dict[str, Reward] = {
            name: rewards.spec.model_copy(update={"score": name}).bind(rewards.rubric)
            for name in names
        }
        slug = rewards.rubric.name.replace("-", "_")
        self.column = (
            f"jury_{slug}/verdict"
            if per_criterion
            else f"{_function_name(rewards.rubric.name, names[0])}/verdict"
        )
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._served: set[str] = set()
        self._records: list[dict[str, Any]] = []
        self._missing: list[bool] = []
        #: The batch's step of rubric dropout (None while it is off).
        self.dropped: DropoutStep | None = None

    def batch(
        self,
        name: str,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        kwargs: Mapping[str, Any],
    ) -> tuple[list[dict[str, Any]], list[bool], list[str]]:
        """The batch's verdict records, which completions miss a reward, and the completions' names.

        For each completion, whether any of the group's rewards is missing; judges the batch when
        ``name`` is the first function to ask.
        """
        self._check_alone(kwargs.get("log_extra"))
        columns = {
            k: v for k, v in kwargs.items() if isinstance(v, list) and len(v) == len(prompts)
        }
        rows = [
            {"prompt": p, "completion": c, **{k: v[i] for k, v in columns.items()}}
            for i, (p, c) in enumerate(zip(prompts, completions))
        ]
        samples = [
            f"completion {k} of the batch (prompt {short(message_text(p), 60)!r})"
            for k, p in enumerate(prompts)
        ]
        items = [self.rewards.item(k, row, samples[k]) for k, row in enumerate(rows)]
        key = tuple((it.question, it.response, it.reference, it.context) for it in items)
        with self._lock:
            if key != self._key or name in self._served:  # a new batch
                self._key, self._served = None, set()
                state = kwargs.get("trainer_state")  # (TRL passes its TrainerState)
                if state is None:
                    state = getattr(_trainer(kwargs.get("log_extra")), "state", None)
                step = getattr(state, "global_step", None)
                records = (
                    self.rewards.records(items, samples, step=step)
                    if self.rewards.dropout.rate
                    else self.rewards.records(items, samples)
                )
                self.dropped = self.rewards.dropout.last if self.rewards.dropout.rate else None
                rewards = list(self.by_name.values())
                floored = self.rewards.floored(records)
                self._missing = [
                    k not in floored and any(r.raw(rec)[0] is None for r in rewards)
                    for k, rec in enumerate(records)
                ]
                self.rewards.log_unscored(records, samples, rewards)
                log_extra = kwargs.get("log_extra")
                if callable(log_extra):
                    log_extra(self.column, [explain(r) + _scores_used(r) for r in records])
                self._key, self._records = key, records
            self._served.add(name)
            return self._records, self._missing, samples

    def _check_alone(self, log_extra: Any) -> None:
        """Refuse a None reward beside reward functions of other origins (`_alone`)."""
        if self.rewards.spec.unscored == "none":
            _alone(log_extra, [_function_name(self.rewards.rubric.name, n) for n in self.by_name])


def _scores_used(record: Mapping[str, Any]) -> str:
    """What a reward read with ``use="expected"`` was read from, for the completions table."""
    used = record.get("reward_scores")
    if used is None:
        return ""
    note = record.get("reward_note")
    return f" [reward from {used} scores" + (f": {note}]" if note else "]")


def _trainer(log_extra: Any) -> Any:
    """The TRL trainer whose ``log_extra`` TRL passed (a GRPO or RLOO trainer), or None."""
    trainer = getattr(log_extra, "__self__", None)
    if trainer is None:
        return None
    from trl import GRPOTrainer, RLOOTrainer  # TRL is here: it called us

    return trainer if isinstance(trainer, (GRPOTrainer, RLOOTrainer)) else None


def _alone(log_extra: Any, ours: list[str]) -> None:
    """Refuse a None reward beside reward functions of other origins.

    TRL's nansum would count it as 0 there. TRL passes its own trainer's ``log_extra``; the
    functions it holds beside ``ours`` (or wrappers of them) are what TRL sums.
    """
    trainer = _trainer(log_extra)
    if trainer is None:
        return
    theirs = list(trainer.reward_func_names)
    if len(theirs) > len(ours):
        raise InputError(
            f"jurybox: TRL adds its {len(theirs)} reward functions ({', '.join(theirs)}) "
            "up with nansum, which counts a missing reward as 0: a None from "
            f"{', '.join(ours)} for an unscored completion would read there as a score of "
            "0. Give jury_reward(unscored=...) the value a missing jury reward should "
            "have, or make the jury's functions the trainer's only ones",
            field="unscored",
        )


def _reward_function(
    values: Callable[..., list[float | None]], name: str, asynchronous: bool, **attributes: Any
) -> RewardFunc:
    """``values`` as TRL's reward function called ``name``.

    It is ``values`` itself, or (``asynchronous``) a coroutine function running it in a thread,
    which TRL awaits beside its other async reward functions; ``attributes`` (its rewards,
    their stats, ...) are set on it.
    """
    if asynchronous:

        async def function(
            prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
        ) -> list[float | None]:
            return await asyncio.to_thread(values, prompts, completions, **kwargs)

    else:
        function = values  # type: ignore[assignment]
    function.__name__ = function.__qualname__ = name
    for key, value in attributes.items():
        setattr(function, key, value)
    return function


def _function(group: _Group, score: str, asynchronous: bool) -> RewardFunc:
    rewards = group.rewards
    reward = group.by_name[score]
    name = _function_name(rewards.rubric.name, score)
    alone = len(group.by_name) == 1
    stats = RewardStats()  # this function's rewards (requests: the shared JuryRewards')

    def values(
        prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        records, missing, samples = group.batch(name, prompts, completions, kwargs)
        try:
            out = rewards.values_of(records, reward)
        except UnscoredReward as exc:  # unscored="error": name the completions, not item ids
            raise MissingRewards(
                reward.name,
                [(samples[int(i)], why) for i, why in exc.unscored],
                "The reward's unscored policy is 'error': give jury_reward("
                "unscored='none') (TRL leaves the completion out) or a value to "
                "use instead",
            ) from None
        if not alone and reward.spec.unscored == "none":  # all of a completion's, or none
            out = [None if gone else value for value, gone in zip(out, missing)]
        floored = rewards.floored(records)
        unscored = (
            sum(value is None for value in out)
            if reward.spec.unscored == "none"
            else sum(
                k not in floored and reward.raw(rec)[0] is None for k, rec in enumerate(records)
            )
        )
        stats.rows += len(records)
        stats.unscored += unscored
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"jurybox/{name}/unscored", float(unscored))
            if group.dropped is not None and group.dropped.of:
                log_metric(f"jurybox/{name}/dropout_kept", group.dropped.kept / group.dropped.of)
            if rewards.resolved.use == "expected" and records:
                log_metric(
                    f"jurybox/{name}/expected",
                    sum(r.get("reward_scores") == "expected" for r in records) / len(records),
                )
        if rewards.guard is not None:
            _guarded(rewards.guard, name, log_metric, kwargs.get("log_extra"))
        return out

    return _reward_function(values, name, asynchronous, rewards=rewards, stats=stats)


def _guarded(guard: Any, name: str, log_metric: Any, log_extra: Any) -> None:
    """Log the guard's step (``jurybox/<name>/...``) and stop the trainer on an alarm if asked."""
    report = guard.last
    if report is None:
        return
    if callable(log_metric):
        nan = float("nan")
        log_metric(f"jurybox/{name}/prechecked", float(len(report.prechecked)))
        # What was judged this step (a share carries across steps: 0 is a step like any
        # other), and its values only where there were some (a mean over TRL's logging steps).
        if guard.spec.canaries:
            log_metric(f"jurybox/{name}/canaries", float(report.canaries))
        if report.canaries:
            log_metric(
                f"jurybox/{name}/canary_reward",
                nan if report.canary_reward is None else report.canary_reward,
            )
        if guard.sentinel is not None:
            log_metric(f"jurybox/{name}/sentinel_completions", float(report.sentinel))
            if report.sentinel:
                log_metric(
                    f"jurybox/{name}/sentinel_gap",
                    nan if report.sentinel_gap is None else report.sentinel_gap,
                )
        if report.evidence is not None:
            log_metric(f"jurybox/{name}/drift_evidence", float(report.evidence))
        log_metric(f"jurybox/{name}/alarm", float(report.alarm))
        if guard.spec.juror_checks is not None:
            log_metric(f"jurybox/{name}/jurors_flagged", float(len(report.flags)))
    if guard.spec.stop_on_alarm and not getattr(guard, "_callback_added", False):
        trainer = _trainer(log_extra)
        if trainer is not None:
            trainer.add_callback(alarm_callback(guard))
            guard._callback_added = True
        elif report.alarm:
            logger.warning(
                "jurybox: stop_on_alarm: no TRL trainer called %s, so nothing stops: add "
                "jurybox.integrations.trl.alarm_callback(reward) to your trainer's callbacks",
                name,
            )
            guard._callback_added = True


def alarm_callback(reward: Any) -> Any:
    """A ``transformers.TrainerCallback`` that stops training after a step with a drift alarm.

    At the end of the step in which ``reward``'s guard raised an alarm it sets the trainer's
    ``control.should_training_stop`` (the trainer then saves and ends as at ``max_steps``).
    `jury_reward` adds it to the trainer that calls the function when ``stop_on_alarm=True``;
    add it yourself (``callbacks=[alarm_callback(reward)]``) where another loop calls it.

    Args:
        reward: A reward function from `jury_reward` (or its `jurybox.integrations.guard.
            RewardGuard`).

    Returns:
        The callback.
    """
    from transformers import TrainerCallback

    guard = getattr(getattr(reward, "rewards", None), "guard", None) or reward
    if guard is None or not hasattr(guard, "alarmed"):
        raise InputError(
            "jurybox: alarm_callback takes a guarded reward function (jury_reward(..., "
            "canaries=..., sentinel=...)) or its RewardGuard",
            field="reward",
        )

    class StopOnAlarm(TrainerCallback):
        """Stops training at the end of a step whose guard raised a drift alarm."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if guard.alarmed:
                if not control.should_training_stop:
                    logger.warning(
                        "jurybox: training stops at step %d: the reward's drift alarm "
                        "(stop_on_alarm)",
                        state.global_step,
                    )
                control.should_training_stop = True
            return control

    return StopOnAlarm()


def _group_function(
    rewards: JuryRewards,
    spec: GroupSpec,
    pointwise: Rubric | None,
    point: RewardSpec,
    group_size: int | None,
    unscored: Unscored,
    asynchronous: bool,
    name: str | None = None,
) -> RewardFunc:
    """The reward function of a group reward.

    TRL's ``RepeatSampler`` puts a prompt's ``num_generations`` completions side by side in the
    batch (prompt indices ``[4, 4, 3, 3, 0, 0]``), and a process's reward function gets its slice of
    the generation batch (the slice starts at ``process_index * len(prompts)``): each run of
    ``group_size`` completions from a multiple of it is one prompt's group. That is checked, not
    assumed: completions of one group with different prompts (or references), a batch that is not
    whole groups, or a slice that splits a group between processes (make
    ``per_device_train_batch_size x steps_per_generation`` a multiple of ``num_generations``) are
    InputErrors naming jurybox and the fix.

    Each call logs ``jurybox/<name>/unscored`` (completions without a reward, with a warning naming
    each and the cause), ``/spread`` (the mean of the groups' reward standard deviations),
    ``/zero_spread`` (the share of groups whose rewards all tie), ``/no_signal`` (the share of
    groups with no signal: those, and those whose comparisons spread them no further than coin
    flips, `jurybox.judges.groups.GroupResult.signal`), ``/calls_per_group`` (judge calls
    per judge and group the design plans) and ``/asked`` (those asked this call); ``<name>/reward``
    in TRL's completions table says what each reward came from. The calls per group are printed (and
    logged) before the first judging.
    """
    from jurybox.judges.groups import Group, no_signal_share

    rubric = rewards.rubric
    name = name or f"jury_{rubric.name.replace('-', '_').replace('.', '_')}_{spec.design}"
    stats = RewardStats()
    announced: set[int] = set()

    def announce(size: int) -> None:
        if size in announced:
            return
        announced.add(size)
        cost = spec.cost(size, rubric, pointwise)
        judges = len(rewards._jury.spec.judges)
        line = (
            f"jurybox: {name}: {cost.words}; {judges} judges: {cost.calls * judges} judge "
            "calls per group"
        )
        print(line, flush=True)
        logger.info(line)

    if group_size is not None:
        if group_size < 1:
            raise InputError(
                f"jurybox: group_size must be 1 or more, got {group_size}", field="group_size"
            )
        announce(group_size)

    def values(
        prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        log_extra = kwargs.get("log_extra")
        if unscored == "none":
            _alone(log_extra, [name])
        trainer = _trainer(log_extra)
        size = group_size or _generations(trainer)
        if size is None:
            raise InputError(
                "jurybox: a group reward needs the group size: give jury_reward("
                "group_size=...) (TRL's num_generations), or let a GRPOTrainer "
                "call it",
                field="group_size",
            )
        n = len(prompts)
        start = trainer.accelerator.process_index * n if trainer is not None else 0
        if n % size or start % size:
            where = (
                f"this process's slice starts at completion {start} of the generation "
                "batch, inside a group"
                if start % size
                else f"the batch has {n} completions, not a whole number of groups of {size}"
            )
            raise InputError(
                f"jurybox: {where}: TRL puts a prompt's num_generations "
                "completions side by side, and a group reward needs each group "
                "whole in one call (make per_device_train_batch_size x "
                "steps_per_generation a multiple of num_generations)",
                field="group_size",
            )
        announce(size)
        columns = {k: v for k, v in kwargs.items() if isinstance(v, list) and len(v) == n}
        rows = [
            {"prompt": p, "completion": c, **{k: v[i] for k, v in columns.items()}}
            for i, (p, c) in enumerate(zip(prompts, completions))
        ]
        samples = [
            f"completion {k} of the batch (prompt {short(message_text(p), 60)!r})"
            for k, p in enumerate(prompts)
        ]
        items = [rewards.item(k, row, samples[k]) for k, row in enumerate(rows)]
        groups: list[Group] = []
        for g in range(n // size):
            mine = items[g * size : (g + 1) * size]
            shared = {
                k: v
                for k, v in mine[0].fields().items()
                if k != "response" and v is not None and v != []
            }
            for k, it in enumerate(mine[1:], 1):
                other = {
                    f: v
                    for f, v in it.fields().items()
                    if f != "response" and v is not None and v != []
                }
                if other != shared:
                    field = next(f for f in (*shared, *other) if shared.get(f) != other.get(f))
                    raise InputError(
                        f"jurybox: completions {g * size}-{(g + 1) * size - 1} of the batch "
                        f"should be one prompt's group of {size} (TRL's RepeatSampler puts a "
                        f"prompt's num_generations completions side by side), but completion "
                        f"{g * size + k} has another {field}",
                        field="group_size",
                    )
            groups.append(
                Group(
                    f"prompt {(start + g * size) // size}",
                    shared,
                    [it.response or "" for it in mine],
                )
            )
        results = rewards.group_results(groups, spec, pointwise, point)
        out, missing = _applied(results, samples, unscored, name)
        with rewards._lock:
            rewards.stats.rows += n
            rewards.stats.unscored += len(missing)
        stats.rows += n
        stats.unscored += len(missing)
        if missing:
            shown = "; ".join(f"{label}: {short(why)}" for label, why in missing[:5])
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            logger.warning(
                "jurybox: %d of %d rewards (%s) unscored: %s%s", len(missing), n, name, shown, more
            )
        spreads = [r.spread for r in results if r.spread is not None]
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"jurybox/{name}/unscored", float(len(missing)))
            log_metric(
                f"jurybox/{name}/spread",
                float(sum(spreads) / len(spreads)) if spreads else float("nan"),
            )
            log_metric(
                f"jurybox/{name}/zero_spread",
                float(sum(s <= 1e-12 for s in spreads) / len(spreads)) if spreads else float("nan"),
            )
            log_metric(f"jurybox/{name}/no_signal", no_signal_share(results))
            log_metric(
                f"jurybox/{name}/calls_per_group",
                float(sum(r.calls for r in results) / len(results)),
            )
            log_metric(f"jurybox/{name}/asked", float(sum(r.asked for r in results)))
        if callable(log_extra):
            log_extra(
                f"{name}/reward",
                [explain_group(r, c) for r in results for c in range(len(r.rewards))],
            )
        return out

    return _reward_function(values, name, asynchronous, rewards=rewards, stats=stats, spec=spec)


def _generations(trainer: Any) -> int | None:
    """The trainer's group size now.

    ``num_generations`` while training, else its ``num_generations_eval``.
    """
    if trainer is None:
        return None
    training = bool(getattr(trainer.model, "training", True))
    size = trainer.num_generations if training else trainer.num_generations_eval
    return int(size) if size else None


def _applied(
    results: Sequence[GroupResult], samples: Sequence[str], unscored: Unscored, name: str
) -> tuple[list[float | None], list[tuple[str, str]]]:
    """The rewards with the unscored policy applied, and the completions without one.

    The completions without one as (label, why); ``unscored="error"`` raises `MissingRewards` naming
    them.
    """
    out: list[float | None] = []
    missing: list[tuple[str, str]] = []
    k = 0
    for result in results:
        for completion in result.completions:
            if completion.reward is None:
                missing.append((samples[k], completion.reason or "no reward"))
                out.append(float(unscored) if isinstance(unscored, (int, float)) else None)
            else:
                out.append(completion.reward)
            k += 1
    if missing and unscored == "error":
        raise MissingRewards(
            name,
            missing,
            "The reward's unscored policy is 'error': give "
            "jury_reward(unscored='none') (TRL leaves the completion out) or a "
            "value to use instead",
        )
    return out, missing


def explain_group(result: GroupResult, k: int) -> str:
    """What one completion's group reward came from, in a line (TRL's completions table)."""
    c = result.completions[k]
    if c.reward is None:
        return f"no reward ({result.design}): {short(c.reason or 'unscored', 200)}"
    parts = [
        f"reward {c.reward:.4g} ({result.design}"
        + (f"; {result.fallback}" if result.fallback else "")
        + ")"
    ]
    if c.comparisons:
        scored = [x for x in c.comparisons if x.share is not None]
        wins = sum(x.winner == "this" for x in scored)
        ties = sum(x.winner == "tie" for x in scored)
        parts.append(
            f"{len(scored)} of {len(c.comparisons)} comparisons scored: {wins} won, "
            f"{ties} tied" + (f", win share {c.win_share:.3f}" if c.win_share is not None else "")
        )
    if c.pointwise is not None:
        parts.append(f"pointwise {c.pointwise:.4g}")
    if c.used is not None:
        parts.append(f"from {c.used} scores" + (f" ({short(c.note, 120)})" if c.note else ""))
    return "; ".join(parts)
