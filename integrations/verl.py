"""A jury as verl's custom reward function.

verl loads it by path:

```
reward.custom_reward_function.path=pkg://jurybox.integrations.verl
reward.custom_reward_function.name=compute_score
+reward.custom_reward_function.reward_kwargs.url=http://127.0.0.1:8000
+reward.custom_reward_function.reward_kwargs.rubric=mirage-mg
```

verl 0.9.1's reward loop gives each reward worker a chunk of the batch and its reward manager
(``naive`` by default; ``dapo``, ``gdpo``, ``rate_limited`` alike) awaits
``compute_score(data_source=, solution_str=, ground_truth=, extra_info=, **reward_kwargs)`` for
every response of the chunk at once. Nothing in that loop calls a batch function, so `compute_score`
is the batch path: the calls that arrive together (each within ``GAP_S`` of the one before, all
within ``WINDOW_S`` of the first) are judged together, in as few requests as the service's limits
allow. verl's ``remote`` reward manager runs the function in Ray worker processes of its own and
refuses coroutines: name `compute_score_sync` there
(``reward.custom_reward_function.name=compute_score_sync``); it judges one response per call (each
worker one at a time), so ``naive`` is the faster choice for a jury behind a service.

verl passes no prompt, so the question comes from ``extra_info["question"]`` (or the key
``reward_kwargs.fields.question`` names), which verl's data preprocessing scripts write; the
reference is ``reward_model.ground_truth`` (or ``extra_info[fields.reference]``), the context
``extra_info["context"]`` (or ``extra_info[fields.context]``). With a checklist rubric, each
prompt's checklist is ``extra_info["checklist"]`` (or the key ``reward_kwargs.checklist_column``
names), else the ``ground_truth`` itself (a list of points, that list as a JSON string, or a dict
holding it as ``checklist`` beside its ``reference``); ``reward_kwargs.dropout`` and
``dropout_seed`` turn rubric dropout on (`jurybox.integrations.checklists`): the step is the count
of batches this process has judged (verl passes no step), so the responses of one prompt judged in
different batches may be judged on different subsets; each result gains ``jurybox/dropout_kept``,
the share of the step's points judged.

The result is ``{"score": reward, "jurybox/unscored": 0 or 1, "jurybox/<score>": ...,
"jurybox/verdict": ...}``: verl keeps every key but ``score`` as the response's
``reward_extra_info``: its validation metrics average each criterion's and the formula's value (on
the reward's scale; None where the jury has none, which verl leaves out) and the share unscored, and
its rollout dumps show each response's verdict in a line (every judge's scores, or why there are
none).

verl cannot take a missing reward (its reward manager writes every score into a tensor), so
``unscored="none"`` is refused; by default (``unscored="error"``) an unscored response stops the
step with an error naming jurybox, the sample (``extra_info.index``) and the cause;
``+reward.custom_reward_function.reward_kwargs.unscored=0.5`` uses that value instead. The service's
token comes from the environment variable ``token_env`` (``JURYBOX_TOKEN``) of the process that runs
the function (verl prints its config, so a token there is refused).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import Reward, Scale, Unscored

from .checklists import checklist_from, score_names
from .core import (
    JuryRewards,
    MissingRewards,
    conversation_context,
    explain,
    message_text,
    precheck_reason,
)
from .guard import RewardDrift as RewardDrift  # (raised here: stop_on_alarm)
from .guard import asks_for_guard

#: The calls judged together: each within GAP_S of the one before (a quiet GAP_S ends the
#: batch: e.g. a client that has only so many calls in flight), all within WINDOW_S of the
#: first (seconds).
GAP_S = 0.01
WINDOW_S = 0.05

_REWARDS: dict[tuple[Any, ...], JuryRewards] = {}
_SCORES: dict[int, dict[str, Reward]] = {}
_LOCK = threading.Lock()


class VerlUnscored(MissingRewards):
    """A response verl cannot have a reward for.

    The jury did not score it and the reward's unscored policy is ``error``.
    """

    def __init__(self, reward: str, sample: str, why: str) -> None:
        super().__init__(
            reward,
            [(f"verl {sample}", why)],
            "The reward's unscored policy is "
            "'error' (verl cannot take a missing reward): give +reward."
            "custom_reward_function.reward_kwargs.unscored=VALUE to use that "
            "value instead",
        )


def jury_rewards(
    *,
    rubric: str,
    url: str | None = None,
    jury: str | None = None,
    token_env: str = "JURYBOX_TOKEN",
    score: str | None = None,
    calibrated: bool = False,
    scale: Scale = "unit",
    unscored: Unscored = "error",
    fields: Mapping[str, str] | None = None,
    timeout: float = 900.0,
    concurrency: int = 4,
    prechecks: bool = False,
    precheck_reward: str | float = "unscored",
    canaries: bool | float | int = False,
    canary_kinds: Sequence[str] | None = None,
    sentinel: str | None = None,
    sentinel_rubric: str | None = None,
    sentinel_share: float = 0.05,
    juror_checks: bool | Mapping[str, Any] | None = None,
    stop_on_alarm: bool = False,
    drift: Mapping[str, Any] | None = None,
    checklist_column: str = "checklist",
    dropout: float = 0.0,
    dropout_seed: int = 0,
) -> JuryRewards:
    """The `JuryRewards` of these options, made once per process.

    verl calls the reward function once per response. The guard's options (``prechecks`` to
    ``drift``) are `jurybox.integrations.trl.jury_reward`'s; ``sentinel`` is a service's URL or a
    jury's name or file, ``juror_checks`` True or a `jurybox.judges.jurors.JurorCheck`'s fields.
    """
    if unscored == "none":
        raise InputError(
            "jurybox: verl cannot take a missing reward (its reward manager writes "
            "every score into a tensor, and a None fails there): give "
            "reward_kwargs.unscored=error (stop the step, the default) or a value "
            "to use instead",
            field="reward_kwargs.unscored",
        )
    fields = dict(fields or {})
    if "response" in fields:
        raise InputError(
            "jurybox: verl gives the response as solution_str; fields maps "
            "question, reference and context",
            field="reward_kwargs.fields.response",
        )
    key = (
        rubric,
        url,
        jury,
        token_env,
        score,
        calibrated,
        scale,
        unscored,
        tuple(sorted(fields.items())),
        timeout,
        concurrency,
        prechecks,
        precheck_reward,
        canaries,
        tuple(canary_kinds or ()),
        sentinel,
        sentinel_rubric,
        sentinel_share,
        tuple(sorted(juror_checks.items())) if isinstance(juror_checks, Mapping) else juror_checks,
        stop_on_alarm,
        tuple(sorted((drift or {}).items())),
        checklist_column,
        dropout,
        dropout_seed,
    )
    guarded = asks_for_guard(
        prechecks, canaries, sentinel, juror_checks, stop_on_alarm, precheck_reward
    )
    with _LOCK:
        if key not in _REWARDS:
            rewards = JuryRewards(
                rubric,
                url=url,
                jury=jury,
                token_env=token_env,
                score=score,
                calibrated=calibrated,
                scale=scale,
                unscored=unscored,
                fields=fields,
                timeout=timeout,
                concurrency=concurrency,
                checklist_column=checklist_column,
                dropout=dropout,
                dropout_seed=dropout_seed,
            )
            names = score_names(rewards.rubric)
            _SCORES[id(rewards)] = {
                name: rewards.spec.model_copy(update={"score": name, "unscored": "none"}).bind(
                    rewards.rubric
                )
                for name in names
            }
            if guarded:
                _guard(
                    rewards,
                    token_env=token_env,
                    prechecks=prechecks,
                    precheck_reward=precheck_reward,
                    canaries=canaries,
                    canary_kinds=canary_kinds,
                    sentinel=sentinel,
                    sentinel_rubric=sentinel_rubric,
                    sentinel_share=sentinel_share,
                    juror_checks=juror_checks,
                    stop_on_alarm=stop_on_alarm,
                    drift=drift,
                )
            _REWARDS[key] = rewards
        return _REWARDS[key]


def _guard(rewards: JuryRewards, **options: Any) -> None:
    """Guard ``rewards`` as verl's ``reward_kwargs`` say (`jurybox.integrations.guard`)."""
    from jurybox.rubrics import load_rubric

    from .guard import RewardGuard, guard_spec, sentinel_rewards

    checks = options.pop("juror_checks")
    if isinstance(checks, Mapping):
        from jurybox.judges.jurors import JurorCheck

        checks = JurorCheck(**checks)
    sentinel, rubric = options.pop("sentinel"), options.pop("sentinel_rubric")
    token_env = options.pop("token_env")
    spec = guard_spec(juror_checks=checks, **options)
    RewardGuard(
        spec,
        rewards,
        sentinel_rewards(
            sentinel, rewards, load_rubric(rubric) if rubric is not None else None, token_env
        ),
    )


def _sample(extra_info: Mapping[str, Any] | None) -> str:
    index = (extra_info or {}).get("index")
    return (
        "sample without extra_info.index" if index is None else f"sample extra_info.index={index}"
    )


def _item(
    rewards: JuryRewards,
    sample: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None,
) -> Any:
    info = dict(extra_info or {})
    question_key = rewards.fields.get("question", "question")
    question = info.get(question_key)
    values: dict[str, Any] = {
        "question": message_text(question) if question is not None else None,
        "response": solution_str,
    }
    context_key = rewards.fields.get("context", "context")
    context = info[context_key] if context_key in info else conversation_context(question)
    if context is not None:
        values["context"] = message_text(context)
    if "reference" in rewards.fields:
        reference, where = (
            info.get(rewards.fields["reference"]),
            f"extra_info[{rewards.fields['reference']!r}]",
        )
    else:
        reference, where = ground_truth, "reward_model.ground_truth"
        if rewards.rubric.checklist is not None and _is_checklist(ground_truth):
            reference = None  # the ground truth is the checklist (read below)
        if isinstance(reference, Mapping):  # some recipes keep a dict of gold fields
            reference = reference.get("ground_truth", reference.get("reference"))
    values["checklist"] = _checklist(rewards, sample, ground_truth, info)
    if reference not in (None, ""):
        values["reference"] = message_text(reference)
    return rewards.make_item(
        0,
        values,
        f"verl {sample}",
        {
            "question": f"verl passes no prompt, so jurybox reads it from extra_info"
            f"[{question_key!r}] (or the key reward_kwargs.fields.question names)",
            "reference": f"jurybox reads it from {where}",
        },
    )


def _is_checklist(value: Any) -> bool:
    """Whether verl's ground truth is a checklist: a list, or that list as a JSON string."""
    if isinstance(value, str):
        return value.lstrip().startswith("[")
    return isinstance(value, Sequence)


def _checklist(
    rewards: JuryRewards, sample: str, ground_truth: Any, info: Mapping[str, Any]
) -> Any:
    """A checklist rubric's checklist: ``extra_info[checklist_column]``, else the ground truth."""
    key = rewards.checklist_column
    if rewards.rubric.checklist is None or key in info:
        return checklist_from(rewards.rubric, info, key, f"verl {sample}", f"extra_info[{key!r}]")
    if isinstance(ground_truth, Mapping):
        return checklist_from(
            rewards.rubric,
            ground_truth,
            "checklist",
            f"verl {sample}",
            f"extra_info[{key!r}] or reward_model.ground_truth['checklist']",
        )
    return checklist_from(
        rewards.rubric,
        {"checklist": ground_truth if _is_checklist(ground_truth) else None},
        "checklist",
        f"verl {sample}",
        f"extra_info[{key!r}] or reward_model.ground_truth (a list of points)",
    )


def _result(rewards: JuryRewards, record: Mapping[str, Any], sample: str) -> dict[str, Any]:
    floored = bool(rewards.floored([record]))  # pre-checked, the guard's floor its reward
    value, why = rewards.reward.raw(record)
    if value is None and not floored and rewards.spec.unscored == "error":
        raise VerlUnscored(rewards.reward.name, sample, why)
    # the unscored policy applied ("none" is refused: verl cannot take it)
    out: dict[str, Any] = {
        "score": rewards.values_of([record])[0],
        "jurybox/unscored": float(value is None and not floored),
    }
    for name, reward in _SCORES[id(rewards)].items():
        out[f"jurybox/{name}"] = reward.values([record])[0]
    out["jurybox/verdict"] = explain(record)
    dropped = rewards.dropout.last
    if dropped is not None:  # (rubric dropout: the share of the step's points judged)
        out["jurybox/dropout_kept"] = dropped.kept / dropped.of if dropped.of else float("nan")
    guard = rewards.guard
    if guard is not None and guard.last is not None:
        report = guard.last
        out["jurybox/prechecked"] = float(floored or precheck_reason(record) is not None)
        # Every response the same keys (verl gathers each into a column): the step's count of
        # canaries and sentinel completions (a share carries across steps, so 0 is a step like
        # any other) and their values, NaN in a step without any.
        nan = float("nan")
        if guard.spec.canaries:
            out["jurybox/canaries"] = float(report.canaries)
            out["jurybox/canary_reward"] = (
                nan if report.canary_reward is None else report.canary_reward
            )
        if guard.sentinel is not None:
            out["jurybox/sentinel_completions"] = float(report.sentinel)
            out["jurybox/sentinel_gap"] = (
                nan if report.sentinel_gap is None else report.sentinel_gap
            )
        out["jurybox/alarm"] = float(report.alarm)
    return out


async def compute_score(
    data_source: str | None = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """The jury's reward of one response: verl's custom reward function.

    Judged together with the others of its chunk (see the module docstring).

    Args:
        data_source: verl's data source of the response (not read).
        solution_str: The response.
        ground_truth: ``reward_model.ground_truth``: the reference (or a dict holding it as
            ``ground_truth`` or ``reference``), unless ``fields`` names another.
        extra_info: verl's ``extra_info``: the question (``extra_info["question"]``, or the key
            ``fields.question`` names), the context, and ``index``, which names the sample.
        **kwargs: The reward's options from ``reward_kwargs``: ``rubric`` and ``url`` or ``jury`` at
            least; also ``token_env``, ``score``, ``calibrated``, ``scale``, ``unscored``,
            ``fields``, ``timeout``, ``concurrency`` (a ``token`` is refused: verl prints its
            config).

    Returns:
        ``{"score": reward, "jurybox/unscored": 0 or 1, "jurybox/<score>": ..., "jurybox/verdict":
        ...}``: each criterion's and the formula's value, and the verdict in a line.

    Raises:
        VerlUnscored: The jury did not score the response and the unscored policy is ``"error"``
            (the default), naming the sample and the cause.
        InputError: Options jurybox does not take, ``unscored="none"``, a missing question or
            reference the rubric needs (naming the sample), or a request the service refused.
        ExecutionError: The jury or the service could not judge.
    """
    rewards = jury_rewards(**_options(kwargs))
    sample = _sample(extra_info)
    item = _item(rewards, sample, solution_str, ground_truth, extra_info)
    record = await _gatherer(rewards).judge(item, f"verl {sample}")
    return _result(rewards, record, sample)


def compute_score_sync(
    data_source: str | None = None,
    solution_str: str = "",
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """`compute_score` for verl's ``remote`` reward manager: one response, one request.

    That manager runs the function in Ray worker processes of its own and refuses coroutines.

    Args:
        data_source: verl's data source of the response (not read).
        solution_str: The response.
        ground_truth: ``reward_model.ground_truth``: the reference (or a dict holding it as
            ``ground_truth`` or ``reference``), unless ``fields`` names another.
        extra_info: verl's ``extra_info``: the question (``extra_info["question"]``, or the key
            ``fields.question`` names), the context, and ``index``, which names the sample.
        **kwargs: The reward's options from ``reward_kwargs``: ``rubric`` and ``url`` or ``jury`` at
            least; also ``token_env``, ``score``, ``calibrated``, ``scale``, ``unscored``,
            ``fields``, ``timeout``, ``concurrency`` (a ``token`` is refused: verl prints its
            config).

    Returns:
        ``{"score": reward, "jurybox/unscored": 0 or 1, "jurybox/<score>": ..., "jurybox/verdict":
        ...}``: each criterion's and the formula's value, and the verdict in a line.

    Raises:
        VerlUnscored: The jury did not score the response and the unscored policy is ``"error"``
            (the default), naming the sample and the cause.
        InputError: Options jurybox does not take, ``unscored="none"``, a missing question or
            reference the rubric needs (naming the sample), or a request the service refused.
        ExecutionError: The jury or the service could not judge.
    """
    rewards = jury_rewards(**_options(kwargs))
    sample = _sample(extra_info)
    item = _item(rewards, sample, solution_str, ground_truth, extra_info)
    (record,) = rewards.records([item], [f"verl {sample}"])
    rewards.log_unscored([record], [f"verl {sample}"])
    if rewards.guard is not None:
        rewards.guard.stop()
    return _result(rewards, record, sample)


class _Gatherer:
    """The calls on one event loop with one reward that arrive together (see ``GAP_S``).

    They are judged in one `JuryRewards.records` (which splits them into the requests the service
    takes, several at once); each call gets its own verdict, or the error of its request.
    """

    def __init__(self, rewards: JuryRewards) -> None:
        self.rewards = rewards
        self.pending: list[tuple[Any, str, asyncio.Future[dict[str, Any]]]] = []
        self.first = self.last = 0.0
        self.tasks: set[asyncio.Task[None]] = set()

    async def judge(self, item: Any, sample: str) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.last = loop.time()
        if not self.pending:
            self.first = self.last
            loop.call_later(GAP_S, self._check)
        self.pending.append((item, sample, future))
        return await future

    def _check(self) -> None:
        """Judge the pending calls after a quiet GAP_S or WINDOW_S in all, else look again."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now - self.last < GAP_S and now - self.first < WINDOW_S:
            loop.call_at(min(self.last + GAP_S, self.first + WINDOW_S), self._check)
            return
        batch, self.pending = self.pending, []
        task = loop.create_task(self._judge(batch))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _judge(self, batch: list[tuple[Any, str, asyncio.Future[dict[str, Any]]]]) -> None:
        items = [item.model_copy(update={"id": str(k)}) for k, (item, _, _) in enumerate(batch)]
        samples = [sample for _, sample, _ in batch]
        try:
            records = await asyncio.to_thread(self.rewards.records, items, samples)
            self.rewards.log_unscored(records, samples)
            if self.rewards.guard is not None:
                self.rewards.guard.stop()  # RewardDrift: verl has no other way to stop
        except Exception as exc:
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), record in zip(batch, records):
            if not future.done():
                future.set_result(record)


_GATHERERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _Gatherer]] = (
    weakref.WeakKeyDictionary()
)


def _gatherer(rewards: JuryRewards) -> _Gatherer:
    per_loop = _GATHERERS.setdefault(asyncio.get_running_loop(), {})
    if id(rewards) not in per_loop:
        per_loop[id(rewards)] = _Gatherer(rewards)
    return per_loop[id(rewards)]


_OPTIONS = (
    "rubric",
    "url",
    "jury",
    "token_env",
    "score",
    "calibrated",
    "scale",
    "unscored",
    "fields",
    "timeout",
    "concurrency",
    "prechecks",
    "precheck_reward",
    "canaries",
    "canary_kinds",
    "sentinel",
    "sentinel_rubric",
    "sentinel_share",
    "juror_checks",
    "stop_on_alarm",
    "drift",
    "checklist_column",
    "dropout",
    "dropout_seed",
)
# What verl itself may add to the call (with a reward-model router), not ours to read.
_VERL_KWARGS = ("reward_router_address", "reward_model_tokenizer")


def _options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    if "token" in kwargs:
        raise InputError(
            "jurybox: reward_kwargs.token is refused (verl prints its config, "
            "token included): put the token in an environment variable of the "
            "reward workers and name it with reward_kwargs.token_env (default "
            "JURYBOX_TOKEN)",
            field="reward_kwargs.token",
        )
    unknown = sorted(set(kwargs) - set(_OPTIONS) - set(_VERL_KWARGS))
    if unknown:
        raise InputError(
            f"jurybox: unknown reward_kwargs {unknown} (jurybox takes {', '.join(_OPTIONS)})",
            field=f"reward_kwargs.{unknown[0]}",
        )
    if "rubric" not in kwargs:
        raise InputError(
            "jurybox: reward_kwargs.rubric is required (and url or jury)",
            field="reward_kwargs.rubric",
        )
    return {k: v for k, v in kwargs.items() if k in _OPTIONS}


_GROUP_OPTIONS = (
    "design",
    "per_completion",
    "pointwise",
    "weight",
    "relative",
    "low",
    "high",
    "centred",
    "use",
    "group_key",
)


def compute_group_scores(
    data_sources: Any = None,
    solution_strs: Any = (),
    ground_truths: Any = (),
    extra_infos: Any = (),
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """Group rewards for verl's batch reward manager: a prompt's responses against each other.

    For ``verl.workers.reward_manager.batch.BatchRewardManager``, which calls its function once with
    the whole batch: the responses of one prompt (the same ``extra_info[group_key]``, by default
    ``index``, which verl's preprocessing writes per dataset row and its rollouts repeat) are
    rewarded against each other (`jurybox.judges.groups`).

    verl 0.9.1's trainer does not call it: its reward loop asks each reward manager for one sample
    at a time (``run_single``), and the batch manager is not among the ones it loads (see the
    integrations guide); this is for a loop of your own that calls the batch manager.

    Args:
        data_sources: verl's data sources of the responses (not read).
        solution_strs: The responses.
        ground_truths: Each response's ``reward_model.ground_truth``, as for `compute_score`.
        extra_infos: Each response's ``extra_info``, as for `compute_score`; its ``group_key`` value
            is the response's group.
        **kwargs: The reward's options as for `compute_score` (``rubric`` is the design's), and the
            group's: ``design`` (default ``round_robin``), ``per_completion``, ``pointwise`` (the
            pointwise rubric), ``weight``, ``relative``, ``low``, ``high``, ``centred``, ``use``,
            ``group_key``.

    Returns:
        Each result is ``{"score", "jurybox/unscored", "jurybox/strength", "jurybox/win_share",
        "jurybox/reward"}``, in the batch's order.

    Raises:
        MissingRewards: An unscored response, by default (``unscored="error"``), naming it and the
            cause.
        InputError: Options jurybox does not take, ``unscored="none"``, a response without its
            ``group_key`` or without the question or reference a rubric needs (naming the
            sample), or a request the service refused.
        ExecutionError: The jury or the service could not judge.
    """
    from jurybox.judges.groups import Group, GroupSpec
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    group_options = {k: kwargs.pop(k) for k in list(kwargs) if k in _GROUP_OPTIONS}
    key = group_options.pop("group_key", "index")
    scorer_name = group_options.pop("pointwise", None)
    # (the design rubric's own reward is never read: the pointwise one is ``point``)
    options = {k: v for k, v in _options(kwargs).items() if k not in ("score", "scale")}
    rewards = jury_rewards(**{**options, "unscored": "error"})
    unscored = kwargs.get("unscored", "error")
    if unscored == "none":
        raise InputError(
            "jurybox: verl cannot take a missing reward: give unscored=error or a value",
            field="reward_kwargs.unscored",
        )
    spec = GroupSpec(**group_options)
    scorer = load_rubric(scorer_name) if scorer_name is not None else None
    point = RewardSpec(
        score=kwargs.get("score"), scale=kwargs.get("scale", "unit"), unscored="none"
    )
    infos = list(extra_infos) if len(extra_infos) else [{} for _ in solution_strs]
    truths = list(ground_truths) if len(ground_truths) else [None] * len(solution_strs)
    samples = [_sample(info) for info in infos]
    items = [
        _item(rewards, sample, text, truth, info)
        for sample, text, truth, info in zip(samples, solution_strs, truths, infos)
    ]
    for sample, item in zip(samples, items):
        lacking = [
            n
            for n in (scorer.inputs if scorer is not None else ())
            if n in ("question", "reference") and not getattr(item, n)
        ]
        if lacking:
            raise InputError(
                f"jurybox: verl {sample}: the pointwise rubric {scorer_name} needs "
                f"the {lacking[0]}, and it is missing",
                field=lacking[0],
            )
    members: dict[str, list[int]] = {}
    for k, info in enumerate(infos):
        if key not in (info or {}):
            raise InputError(
                f"jurybox: verl {samples[k]} has no extra_info[{key!r}]: the "
                "group reward finds a prompt's responses by it (name another key "
                "with reward_kwargs.group_key)",
                field="reward_kwargs.group_key",
            )
        members.setdefault(str(info[key]), []).append(k)
    groups = []
    for name, ks in members.items():
        fields = {
            f: v
            for f, v in items[ks[0]].fields().items()
            if f != "response" and v is not None and v != []
        }
        groups.append(Group(f"{key}={name}", fields, [items[k].response or "" for k in ks]))
    results = rewards.group_results(groups, spec, scorer, point)
    out: list[dict[str, Any]] = [{} for _ in items]
    missing: list[tuple[str, str]] = []
    for ks, result in zip(members.values(), results):
        for k, completion in zip(ks, result.completions):
            value = completion.reward
            if value is None:
                missing.append((f"verl {samples[k]}", completion.reason or "no reward"))
            out[k] = {
                "score": value
                if value is not None
                else (float(unscored) if isinstance(unscored, (int, float)) else None),
                "jurybox/unscored": float(value is None),
                "jurybox/strength": completion.strength,
                "jurybox/win_share": completion.win_share,
                "jurybox/reward": (
                    f"{result.design}: "
                    + (f"{value:.4g}" if value is not None else completion.reason or "")
                ),
            }
    if missing and unscored == "error":
        raise MissingRewards(
            f"{rewards.rubric.name} {spec.design}",
            missing,
            "The reward's unscored policy is 'error' (verl cannot take a "
            "missing reward): give reward_kwargs.unscored=VALUE to use that "
            "value instead",
        )
    return out
