"""The OpenRLHF route's guards: pre-checks and canaries (``?prechecks=on&canaries=0.03``).

**Pre-checks** (`route_prechecks`): a sample whose response is not worth judging (empty,
punctuation only, the question or a prefix of it, a known master key:
`jurybox.rubrics.exploits.precheck`) is not sent to the judges. It is an unscored sample with
the reason ``pre-check: ...`` (reason code ``prechecked`` in ``extra_logs``), rewarded
``precheck_reward`` when the URL gives one, else the route's unscored value, and counted in
``jurybox/prechecked``. Never a silent 0: the service's log names each one.

**Canaries** (`route_canaries`): one canary every ``ceil(1 / canaries)``-th sample a replica
receives from a client for the same rubric and options (OpenRLHF sends one sample per request,
so a count per request would cost a judge call per sample). A canary is an exploit response
(`jurybox.rubrics.exploits.canary_items`: a self-assessment, an instruction to the judge, the
rubric's output format filled in with top scores, ...) built from the request's own prompt and
reference, judged in the same `ScoringService.score_items` call as the samples (so it costs its
judge calls and nothing else), never looked up in the verdict cache, and never among the
answer's ``rewards``. ``extra_logs`` carries ``jurybox/canary_reward`` (the running mean of the
canaries' rewards on [0, 1] of this guard, one per replica and client, rubric and options; NaN
before the first) and ``jurybox/canary_alarm`` (1 once the guard's `DriftMonitor` flags a rise
of the canaries' rewards above their first steps' level, an anytime-valid test; 0 before). The alarm is a WARNING in the service's log.

**The sentinel** (`jurybox.serving.service.sentinel`): where the operator started the service
with ``--sentinel-url``, every request of the route has a guard, and a random share of its scored
samples (``--sentinel-share``) goes to that second service; ``extra_logs`` carries
``jurybox/sentinel_gap`` and ``jurybox/sentinel_alarm``. Its URL is never a client's.

A guard (`RouteGuard`) is kept per ingress replica, client (its address,
`jurybox.serving.service.gate.CLIENT`: one client's canaries and sentinel gaps never raise an
alarm in another's answers), rubric and options, at most `MAX_GUARDS` per replica (the least
recently used is dropped first: a client that varies its URL cannot grow the service's memory).
"""

from __future__ import annotations

import logging
import math
import random
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jurybox.calibration.stats.monitors import DriftMonitor
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.checklist import checklist_calls
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.exploits import DEFAULT_CANARIES, ExploitSuite, canary_items, precheck
from jurybox.rubrics.reward import RewardSpec
from jurybox.serving.errors import Invalid
from jurybox.serving.service.gate import CLIENT
from jurybox.serving.service.sentinel import SentinelWatch

if TYPE_CHECKING:
    from jurybox.serving.service.scoring import ScoringService

logger = logging.getLogger("jurybox.serving")

#: The most guards an ingress replica keeps (one per client, rubric and options).
MAX_GUARDS = 256

# The monitor a new guard watches its canaries with (tests may replace it).
monitor_factory: Any = DriftMonitor


def route_prechecks(
    samples: Sequence[Mapping[str, Any]], suite: ExploitSuite | None = None
) -> dict[int, str]:
    """The positions of the samples not worth judging, with why (``"pre-check: ..."``).

    Linear in the samples' text (`jurybox.rubrics.exploits.precheck`: no regular expression).
    """
    out = {}
    for k, sample in enumerate(samples):
        why = precheck(sample.get("question") or "", sample.get("response") or "", suite)
        if why is not None:
            out[k] = why
    return out


def canaries_due(n: int, counter: int, share: float) -> int:
    """How many canaries ``n`` samples add after ``counter`` samples: one every ceil(1/share)."""
    if share <= 0 or n <= 0:
        return 0
    every = math.ceil(1 / share)
    return (counter + n) // every - counter // every


def route_canaries(
    samples: Sequence[Mapping[str, Any]],
    counter: int,
    share: float,
    rubric: Rubric,
    k: int | None = None,
    start: int | None = None,
) -> list[Item]:
    """The canary items ``samples`` add after a replica's ``counter`` samples.

    One every ``ceil(1 / share)``-th sample (``k`` of them instead, when given), built from the
    samples' own prompts and references (`jurybox.rubrics.exploits.canary_items`), their kinds
    starting at kind ``start`` (drawn at random by the guard, so a step's expected canary reward
    is the same at every step: the drift test's steady mean), or rotating with the replica's
    count without one (ids ``canary-<step>-<j>-<kind>``).
    """
    due = canaries_due(len(samples), counter, share) if k is None else k
    if due <= 0 or not samples:
        return []
    items = [
        Item(
            id=str(j),
            question=s.get("question"),
            response=s.get("response"),
            reference=s.get("reference"),
            checklist=s.get("checklist"),  # (a checklist rubric's: the sample's own)
        )
        for j, s in enumerate(samples)
    ]
    every = math.ceil(1 / share) if share > 0 else 1
    step = counter // every
    if start is not None:  # kinds[(step + j) % n] == kinds[(start + j) % n]
        step = step * len(DEFAULT_CANARIES) + start % len(DEFAULT_CANARIES)
    try:
        return canary_items(items, rubric, due, step)
    except InputError as exc:  # (a pairwise rubric: its items are pairs, not answers)
        raise Invalid(f"no canaries on this rubric: {exc}", "canaries") from None


class RouteGuard:
    """One replica's pre-checks and canaries for a rubric and the route's options.

    ``reward``: the route's reward on [0, 1], unscored as None (what a canary earns);
    ``precheck_reward``: a pre-checked sample's reward (None: the route's unscored value);
    ``canaries``: the share of samples that add a canary (0: none); ``sentinel``: the held-out
    sentinel's watch (None: none).
    """

    def __init__(
        self,
        rubric: Rubric,
        reward: RewardSpec,
        *,
        prechecks: bool = False,
        precheck_reward: float | None = None,
        canaries: float = 0.0,
        suite: ExploitSuite | None = None,
        monitor: DriftMonitor | None = None,
        label: str = "",
        sentinel: SentinelWatch | None = None,
    ) -> None:
        self.rubric, self.prechecks, self.share, self.suite = rubric, prechecks, canaries, suite
        self.sentinel = sentinel
        self.precheck_reward = precheck_reward
        self.unit = reward.model_copy(update={"scale": "unit", "unscored": "none"}).bind(rubric)
        self.monitor = monitor if monitor is not None else monitor_factory()
        self.label = label or rubric.name
        self.samples = 0  # the samples this guard has seen (canaries are counted by them)
        self.owed = 0  # canaries due but not yet sent (a request with no room for them)
        self.canary_sum, self.canary_n = 0.0, 0
        self.alarm = False
        self._kinds = random.Random(1)  # each step's first canary kind, apart from the judging

    def prechecked(self, samples: Sequence[Mapping[str, Any]]) -> dict[int, str]:
        """The samples' pre-check reasons by position (none when pre-checks are off)."""
        return route_prechecks(samples, self.suite) if self.prechecks else {}

    def canaries(self, samples: Sequence[Mapping[str, Any]], room: int) -> list[Item]:
        """The canaries these samples add (at most ``room``: the rest wait for a later request)."""
        if self.share <= 0:
            return []
        due = self.owed + canaries_due(len(samples), self.samples, self.share)
        start = self._kinds.randrange(len(DEFAULT_CANARIES))
        made = route_canaries(
            samples, self.samples, self.share, self.rubric, min(due, room), start=start
        )
        self.samples += len(samples)
        self.owed = due - len(made)
        return made

    def observe(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Take the canaries' verdicts: the running mean, and one step of the drift monitor."""
        values = [v for v in (self.unit.value(r) for r in records) if v is not None]
        if not values:
            return
        self.canary_sum += sum(values)
        self.canary_n += len(values)
        state = self.monitor.update(values)
        if state.alarm and not self.alarm:
            self.alarm = True
            logger.warning(
                "OpenRLHF canaries (rubric %s): their reward rose above its first steps' level "
                "at canary step %s (running mean %.3f over %d canaries): the policy may be "
                "finding what this jury over-rewards, or the jury changed. %s",
                self.label,
                state.alarm_step if state.alarm_step is not None else state.step,
                self.canary_sum / self.canary_n,
                self.canary_n,
                self.monitor.describe(),
            )

    def answered(
        self, n: int, prechecked: Mapping[int, str]
    ) -> tuple[dict[int, float], dict[str, list[float]]]:
        """The pre-checked samples' rewards by position (none: as unscored), and `logs`."""
        fixed = (
            dict.fromkeys(prechecked, self.precheck_reward)
            if self.precheck_reward is not None
            else {}
        )
        return fixed, self.logs(n, prechecked)

    def logs(self, n: int, prechecked: Mapping[int, str]) -> dict[str, list[float]]:
        """The guard's ``extra_logs``, one value per sample."""
        out: dict[str, list[float]] = {}
        if self.prechecks:
            out["jurybox/prechecked"] = [1.0 if k in prechecked else 0.0 for k in range(n)]
        if self.share > 0:
            mean = self.canary_sum / self.canary_n if self.canary_n else math.nan
            out["jurybox/canary_reward"] = [mean] * n
            out["jurybox/canary_alarm"] = [1.0 if self.alarm else 0.0] * n
        if self.sentinel is not None:
            out.update(self.sentinel.logs(n))
        return out


def check_guard_options(options: Any, reward: RewardSpec) -> None:
    """The route's guard options (its ``Options``), or a 422 naming the parameter at fault."""
    prechecks, precheck_reward, canaries = (
        options.prechecks,
        options.precheck_reward,
        options.canaries,
    )
    if not (math.isfinite(canaries) and 0 <= canaries <= 1):
        raise Invalid(
            f"canaries={canaries!r}: give the share of samples that add a canary, "
            "between 0 (none) and 1 (one per sample), e.g. canaries=0.03",
            "canaries",
        )
    if precheck_reward is not None:
        if not prechecks:
            raise Invalid(
                "precheck_reward is given but pre-checks are off: add prechecks=on",
                "precheck_reward",
            )
        if not math.isfinite(precheck_reward):
            raise Invalid(
                f"precheck_reward={precheck_reward!r}: give a finite number (the reward "
                "of a pre-checked sample, e.g. 0)",
                "precheck_reward",
            )
    elif prechecks and reward.unscored == "error":
        raise Invalid(
            "prechecks=on with unscored=error would make every pre-checked sample a 422 "
            "(which fails OpenRLHF's step): give precheck_reward=<number> (e.g. 0)",
            "precheck_reward",
        )


_GUARDS: weakref.WeakKeyDictionary[ScoringService, OrderedDict[tuple[Any, ...], RouteGuard]] = (
    weakref.WeakKeyDictionary()
)


def guard_for(
    service: ScoringService, rubric_name: str, reward: RewardSpec, options: Any
) -> RouteGuard | None:
    """This replica's guard for the request's client, a rubric and the route's options.

    ``options``: the route's ``Options``. None when neither pre-checks nor canaries are asked
    for and the service has no sentinel (``service.sentinel``).
    """
    prechecks, precheck_reward, canaries = (
        options.prechecks,
        options.precheck_reward,
        options.canaries,
    )
    sentinel = service.sentinel
    if not prechecks and canaries <= 0 and sentinel is None:
        return None
    guards = _GUARDS.setdefault(service, OrderedDict())
    key = (CLIENT.get(), rubric_name, reward, prechecks, precheck_reward, canaries)
    guard = guards.get(key)
    if guard is None:
        rubric = service.named_rubric(rubric_name)
        watch = (
            SentinelWatch(sentinel, rubric_name, rubric, reward, monitor_factory(), service.metrics)
            if sentinel is not None
            else None
        )
        guard = guards[key] = RouteGuard(
            rubric,
            reward,
            prechecks=prechecks,
            precheck_reward=precheck_reward,
            canaries=canaries,
            label=rubric_name,
            sentinel=watch,
        )
        while len(guards) > MAX_GUARDS:
            guards.popitem(last=False)
    guards.move_to_end(key)
    return guard


async def guarded_records(
    service: ScoringService,
    rubric_name: str,
    guard: RouteGuard,
    samples: list[dict[str, Any]],
    unsent: dict[int, str],
    request_id: str = "-",
) -> tuple[list[dict[str, Any]], dict[int, str], dict[int, str]]:
    """Judge ``samples`` with the guard's pre-checks and canaries.

    ``unsent``: the samples not sent already (`jurybox.serving.service.openrlhf.split_unsent`).
    Returns the records of the samples sent (in order), every unsent sample with why (the
    pre-checked ones added), and the pre-checked ones alone.
    """
    prechecked = {
        k: why for k, why in guard.prechecked(samples).items() if k not in unsent
    }  # (a response over the limit is that, whatever it holds)
    unsent = {**unsent, **prechecked}
    sent = [s for k, s in enumerate(samples) if k not in unsent]
    limits = service.limits
    calls = max(1, guard.rubric.judge_calls)
    room = max(0, min(limits.max_items, limits.max_judge_calls // calls) - len(sent))
    made = [
        c
        for c in guard.canaries(samples, room)
        if all(len(t or "") <= limits.max_field_chars for t in (c.response, c.question))
    ]
    if guard.rubric.checklist is not None:  # a canary costs its checklist's calls
        made = _within_calls(guard.rubric, sent, made, limits.max_judge_calls)
    if not sent and not made:
        return [], unsent, prechecked
    records = await service.score_items(
        rubric_name,
        [*sent, *made],
        allow_empty=True,
        canaries=range(len(sent), len(sent) + len(made)),
    )
    guard.observe(records[len(sent) :])
    if guard.sentinel is not None:  # (its call runs beside the next requests: never this one's)
        guard.sentinel.send(sent, records[: len(sent)])
    for k, why in sorted(prechecked.items()):
        logger.warning(
            "OpenRLHF request %s: sample %d not sent to the judges (%s), rewarded %s",
            request_id,
            k,
            why[:200],
            guard.precheck_reward if guard.precheck_reward is not None else "as unscored",
        )
    return records[: len(sent)], unsent, prechecked


def _within_calls(
    rubric: Rubric, sent: list[dict[str, Any]], made: list[Item], max_calls: int
) -> list[Item]:
    """The canaries that fit beside ``sent`` in ``max_calls`` judge calls, for a checklist rubric.

    Each item costs `checklist_calls` (one call per point with ``calls: per_point``); a sample
    whose checklist is no list of points counts none here (the service refuses it, naming it).
    """
    spare = max_calls
    for sample in sent:
        try:
            spare -= checklist_calls(rubric, [Item(id="x", checklist=sample.get("checklist"))])
        except ValueError:
            pass
    kept = []
    for canary in made:
        cost = checklist_calls(rubric, [canary])
        if cost > spare:
            break
        kept.append(canary)
        spare -= cost
    return kept
