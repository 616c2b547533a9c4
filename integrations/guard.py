"""The trainers' guard: pre-checks, canaries, a held-out sentinel and juror flags around a reward.

A policy optimises against its reward for thousands of steps and keeps whatever the jury
over-rewards. `RewardGuard` wraps the one call every adapter makes per batch
(`jurybox.integrations.core.JuryRewards.records`) and, as `GuardSpec` says:

- **pre-checks** (`jurybox.rubrics.exploits.precheck`): an empty answer, punctuation only, the
  question or a prefix of it, a known master key is not sent to the judges. Its record is
  unscored with the reason (``pre-check: known master key 'colon'``), so its reward is the
  unscored policy's, or ``precheck_reward`` when that is a number: never a silent 0, and logged
  with the sample either way.
- **canaries** (`jurybox.rubrics.exploits.canary_items`): exploit responses built from the step's
  own prompts, judged in the same call as the batch and never returned as rewards. Their mean
  reward is the canary rate; a rise above its first steps' level is an alarm.
- **a sentinel**: a judge or jury outside the reward scores a random ``sentinel_share`` of the
  step's completions, in a thread beside the reward's judging. The gap ``g = (1 + reward -
  sentinel) / 2`` (both on [0, 1]) rises when the reward climbs and the sentinel does not: a
  policy gaming the reward. A rise above its first steps' level is an alarm.
- **juror flags** (`jurybox.judges.jurors.flag_jurors`): a juror that collapsed to one value,
  refused, or left its usual agreement with the rest, flagged in the log; with
  ``JurorCheck(leave_out=True)`` the batch's verdicts are decided again without it.

Both rises are tested by `jurybox.calibration.stats.monitors.DriftMonitor`: an anytime-valid
test, valid however often it is read (every step). An alarm is a warning in the trainer's log
naming the step, the statistic, its baseline level and the threshold; ``stop_on_alarm`` stops
training (TRL: a callback; verl: `RewardDrift` is raised).

What it costs: the canaries and the sentinel's completions are judge calls on top of the
reward's. A share of the batch carries its fraction across steps (`jurybox.integrations.
guard_steps.StepShares`), so over a run it costs that share at any batch size, and a step may
judge no canary or send no completion to the sentinel. `RewardGuard.describe` says what a step
costs on average and at most; it is logged before the first reward.

The spec, each step's shares and `StepReport` are in `jurybox.integrations.guard_steps` (and
importable from here).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from jurybox.rubrics.errors import ExecutionError, JuryboxError
from jurybox.rubrics.reward import RewardSpec

from .core import JuryRewards, precheck_reason
from .guard_steps import (
    DEFAULT_CANARY_SHARE,
    GuardSpec,
    StepReport,
    StepShares,
    asks_for_guard,
    guard_spec,
)

if TYPE_CHECKING:
    from jurybox.calibration.stats.monitors import DriftMonitor, DriftState
    from jurybox.judges.jurors import AgreementHistory
    from jurybox.rubrics import Item

__all__ = [
    "DEFAULT_CANARY_SHARE",
    "GuardSpec",
    "RewardDrift",
    "RewardGuard",
    "StepReport",
    "asks_for_guard",
    "guard_spec",
    "precheck_reason",
    "sentinel_rewards",
]

logger = logging.getLogger("jurybox.integrations")

Records = list[dict[str, Any]]
Judge = Callable[[Sequence["Item"], Sequence[str]], Records]


class RewardDrift(ExecutionError):
    """The guard's alarm, raised where the trainer has no other way to stop (verl).

    Names the step and the statistic that rose.
    """


class RewardGuard:
    """Pre-checks, canaries, a sentinel and juror flags around one reward's batches.

    Made, it guards ``rewards``: each `jurybox.integrations.core.JuryRewards.records` call runs
    through `around` (``rewards.guard`` is this one).

    Args:
        spec: What it does.
        rewards: The reward it guards (its rubric, jury and reward).
        sentinel: The held-out sentinel's rewards (a judge or jury outside the reward), or None.

    Attributes:
        last: The last step's `StepReport` (None before the first).
        alarmed: Whether a drift test has raised an alarm.
    """

    def __init__(
        self, spec: GuardSpec, rewards: JuryRewards, sentinel: JuryRewards | None = None
    ) -> None:
        self.spec = spec
        self.rewards = rewards
        self.sentinel = sentinel
        # both on the unit scale, whatever the reward's own scale and unscored policy
        self.unit = rewards.spec.model_copy(update={"scale": "unit", "unscored": "none"}).bind(
            rewards.rubric
        )
        self.sentinel_unit = (
            sentinel.spec.model_copy(update={"scale": "unit", "unscored": "none"}).bind(
                sentinel.rubric
            )
            if sentinel is not None
            else None
        )
        self.suite: Any = None
        self.step = 0
        self.last: StepReport | None = None
        self.alarmed = False
        self._canary_monitor: DriftMonitor | None = None
        self._sentinel_monitor: DriftMonitor | None = None
        self._history: AgreementHistory | None = None
        self._states: dict[str, DriftState] = {}
        self._alarms: dict[str, str] = {}  # statistic -> the alarm's line
        self._announced: set[int] = set()
        # Each step's canaries and sentinel completions, the shares' fractions carried across
        # steps; then the completions the sentinel scores, and each step's first canary kind.
        self._shares = StepShares(spec)
        self._rng = random.Random(spec.seed)
        # Each step's canary kinds start at a random kind, drawn apart from everything judged: a
        # step's expected canary reward is then the same at every step (the drift test's steady
        # mean under a frozen jury), where kinds rotating by step would make it cycle.
        self._kinds_rng = random.Random(spec.seed + 1)
        self._lock = threading.Lock()
        self._update = threading.Lock()
        self._pool = (
            ThreadPoolExecutor(1, thread_name_prefix="jurybox-sentinel")
            if sentinel is not None
            else None
        )
        rewards.guard = self

    # -- cost ---------------------------------------------------------------------------------

    def calls(self, batch: int) -> tuple[int, int, int]:
        """The most judge calls of a step of ``batch`` completions: the reward's, canaries', sentinel's.

        A share rounded up (a step may take one item more than the share of its batch, or one
        less); pre-checked completions are not sent, so a step with some costs less.
        """
        judges, per = self._per_item()
        reward = batch * judges
        canaries = self.spec.canary_count(batch) * judges
        sentinel = self.spec.sentinel_count(batch) * per
        return reward, canaries, sentinel

    def mean_calls(self, batch: int) -> tuple[float, float, float]:
        """`calls` on average over a run of steps of ``batch`` completions (the shares exact)."""
        judges, per = self._per_item()
        return (
            float(batch * judges),
            self.spec.canary_mean(batch) * judges,
            self.spec.sentinel_mean(batch) * per,
        )

    def _per_item(self) -> tuple[int, int]:
        """The judge calls of one item: by the reward's jury, by the sentinel's (0: none)."""
        judges = len(self.rewards._jury.spec.judges) * self.rewards.rubric.judge_calls
        per = 0
        if self.sentinel is not None:
            per = len(self.sentinel._jury.spec.judges) * self.sentinel.rubric.judge_calls
        return judges, per

    def describe(self, batch: int) -> str:
        """The judge calls per step of ``batch`` completions, in a line for the log.

        Where a share does not divide the batch it says the calls on average over the run and
        the most in one step.
        """
        most, mean = self.calls(batch), self.mean_calls(batch)
        reward, spec = most[0], self.spec
        exact = all(abs(m - k) < 1e-9 for m, k in zip(mean, most))
        counts = (
            (_n(spec.canary_count(batch), "canary", "canaries"), "{} canaries"),
            (_n(spec.sentinel_count(batch), "completion"), "the sentinel's {} completions"),
        )
        parts = [f"{reward} for the reward"]
        for calls, average, means, (count, many) in zip(
            most[1:], mean[1:], (spec.canary_mean(batch), spec.sentinel_mean(batch)), counts
        ):
            if not calls:
                continue
            whose = "the sentinel's " if "sentinel" in many else ""
            part = (
                f"{calls} for {whose}{count}"
                if exact
                else f"{_g(average)} for {many.format(_g(means))} a step on average, at most "
                f"{calls} for {count}"
            )
            if whose and self.sentinel is not None:
                part += f" ({self.sentinel.rubric.name})"
            parts.append(part)
        head = f"jurybox: guard of {self.rewards.reward.name}: a step of {_n(batch, 'completion')}"
        checks = "; pre-checked completions are not sent" if spec.prechecks else ""
        total, average = sum(most), sum(mean)
        peak = f"{(total / reward - 1) * 100 if reward else 0.0:+.1f}%"
        if exact:
            return (
                f"{head} costs at most {total} judge calls ({', '.join(parts)}): {peak} over the "
                f"reward alone{checks}"
            )
        extra = (average / reward - 1) * 100 if reward else 0.0
        return (
            f"{head} costs {_g(average)} judge calls on average over the run and at most "
            f"{total} in one step ({'; '.join(parts)}; each share's fraction carried to the "
            f"next step): {extra:+.1f}% over the reward alone on average, {peak} at most{checks}"
        )

    def announce(self, batch: int) -> None:
        """Print and log (INFO) `describe` once per batch size, before its first reward."""
        if batch in self._announced:
            return
        self._announced.add(batch)
        line = self.describe(batch)
        print(line, flush=True)
        logger.info(line)

    # -- a step -------------------------------------------------------------------------------

    def around(self, judge: Judge, items: Sequence[Item], samples: Sequence[str]) -> Records:
        """The records of one batch, judged by ``judge`` with the guard around it.

        Args:
            judge: Judges items (the reward's plain `records`).
            items: The batch's items.
            samples: One label per item.

        Returns:
            One verdict record per item, in order (no canary among them).
        """
        items, samples = list(items), list(samples)
        self.announce(len(items))
        reasons = self._prechecks(items)
        sent = [k for k in range(len(items)) if k not in reasons]
        chosen: list[int] = []
        with self._lock:  # (one step's draws at a time: the same seed, the same steps)
            self.step += 1
            step = self.step
            due = self._shares.canary_count(len(sent))
            kinds = len(self.spec.canary_kinds)
            start = self._kinds_rng.randrange(kinds) if due and kinds else 0
            if self.sentinel is not None and self._pool is not None:
                chosen = sorted(self._rng.sample(sent, self._shares.sentinel_count(len(sent))))
        report = StepReport(step=step, batch=len(items))
        report.prechecked = [(samples[k], reasons[k]) for k in sorted(reasons)]
        canaries = self._canaries([items[k] for k in sent], step, due, start)
        report.canaries = len(canaries)
        report.sentinel = len(chosen)
        pending: Future[Records] | None = None
        if chosen and self.sentinel is not None and self._pool is not None:
            pending = self._pool.submit(
                self.sentinel.records,
                [items[k] for k in chosen],
                [f"{samples[k]} (sentinel)" for k in chosen],
            )
        try:
            judged = judge(
                [items[k] for k in sent] + canaries,
                [samples[k] for k in sent] + [f"canary {c.id}" for c in canaries],
            )
        except BaseException:
            if pending is not None:
                pending.cancel()
            raise
        main, canary_records = judged[: len(sent)], judged[len(sent) :]
        if canaries:
            self._recount(len(canaries))
        with self._update:  # (verl may judge chunks at once: one step's state at a time)
            if self.spec.juror_checks is not None and main:
                main = self._flag(main, report)
            by_k = dict(zip(sent, main))
            records = [
                by_k[k] if k in by_k else self.rewards._unsent(items[k], reasons[k])
                for k in range(len(items))
            ]
            if report.prechecked and not isinstance(self.spec.precheck_reward, str):
                self._log_prechecked(report)  # (unscored ones: the adapter's unscored warning)
            if canaries:
                values = [v for v in self.unit.values(canary_records) if v is not None]
                report.canary_reward = sum(values) / len(values) if values else None
                if values:  # (a step with none, or none scored, leaves the test alone)
                    if self._canary_monitor is None:
                        self._canary_monitor = self.spec.monitor()
                    self._states["canary"] = self._canary_monitor.update(values)
                    self._check("canary", "the canaries' mean reward", step)
            report.canary_state = self._states.get("canary")
            sentinel_records: Records | None = None
            if pending is not None:
                try:
                    sentinel_records = pending.result()
                except JuryboxError as exc:  # a monitor's failure never fails the reward's step
                    logger.warning(
                        "jurybox: step %d: the sentinel could not score (no sentinel gap this "
                        "step): %s",
                        step,
                        exc,
                    )
            if sentinel_records is not None:
                assert self.sentinel_unit is not None and self.sentinel is not None
                ours = self.unit.values([records[k] for k in chosen])
                theirs = self.sentinel_unit.values(sentinel_records)
                gaps = [
                    (1 + r - s) / 2 for r, s in zip(ours, theirs) if r is not None and s is not None
                ]
                report.sentinel_gap = sum(gaps) / len(gaps) if gaps else None
                with self.rewards._lock:
                    self.rewards.stats.sentinel_calls += self.calls_of(self.sentinel, len(chosen))
                if gaps:  # (as the canaries': only a step with values updates the test)
                    if self._sentinel_monitor is None:
                        self._sentinel_monitor = self.spec.monitor()
                    self._states["sentinel"] = self._sentinel_monitor.update(gaps)
                    self._check("sentinel", "the sentinel gap (1 + reward - sentinel) / 2", step)
            report.sentinel_state = self._states.get("sentinel")
            report.alarm = self.alarmed
            self.last = report
        return records

    def stop(self) -> None:
        """Raise `RewardDrift` if ``stop_on_alarm`` and a drift test has raised an alarm."""
        if not (self.spec.stop_on_alarm and self.alarmed and self.last is not None):
            return
        raise RewardDrift(
            f"jurybox: training stopped at step {self.last.step} (stop_on_alarm): "
            + "; ".join(self._alarms.values())
        )

    def close(self) -> None:
        """Stop the sentinel's thread (and close the sentinel's rewards)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self.sentinel is not None:
            self.sentinel.close()

    # -- pieces -------------------------------------------------------------------------------

    @staticmethod
    def calls_of(rewards: JuryRewards, items: int) -> int:
        """The judge calls of ``items`` items judged by ``rewards``' jury."""
        return items * len(rewards._jury.spec.judges) * rewards.rubric.judge_calls

    def _prechecks(self, items: Sequence[Item]) -> dict[int, str]:
        if not self.spec.prechecks:
            return {}
        from jurybox.rubrics.exploits import load_suite, precheck

        if self.suite is None:
            self.suite = load_suite()
        out: dict[int, str] = {}
        for k, item in enumerate(items):
            why = precheck(item.question or "", item.response or "", self.suite)
            if why is not None:
                out[k] = why
        return out

    def _canaries(self, items: Sequence[Item], step: int, k: int, start: int) -> list[Item]:
        """``k`` canaries from ``items``' prompts, their kinds starting at kind ``start``."""
        if not k or not items:
            return []
        from jurybox.rubrics.exploits import canary_items

        kinds = self.spec.canary_kinds
        shift = (start - step) % len(kinds) if kinds else 0  # canary_items starts at ``step``
        return canary_items(items, self.rewards.rubric, k, step + shift, kinds)

    def _recount(self, canaries: int) -> None:
        """Count the canaries' calls apart from the reward's (the plain path counted them)."""
        calls = self.calls_of(self.rewards, canaries)
        with self.rewards._lock:
            self.rewards.stats.judge_calls -= calls
            self.rewards.stats.canary_calls += calls

    def _flag(self, records: Records, report: StepReport) -> Records:
        from jurybox.judges.jurors import (
            AgreementHistory,
            flag_jurors,
            records_flagged,
            records_without,
        )

        check = self.spec.juror_checks
        assert check is not None
        if self._history is None:
            self._history = AgreementHistory(check.history)
        jury = self.rewards._jury
        report.flags = list(flag_jurors(self.rewards.rubric, jury, records, check, self._history))
        if not report.flags:
            return records
        shown = "; ".join(
            f"{f.judge}"
            + (f" on {f.criterion}" if f.criterion else "")
            + f": {f.kind} ({f.detail})"
            for f in report.flags
        )
        left = " (left out of this batch's verdicts)" if check.leave_out else ""
        logger.warning(
            "jurybox: step %d: %d juror flag(s) in %s's batch%s: %s",
            report.step,
            len(report.flags),
            self.rewards.reward.name,
            left,
            shown,
        )
        records = records_flagged(records, report.flags)
        if not check.leave_out:
            return records
        return records_without(self.rewards.rubric, jury, records, report.flags)

    def _log_prechecked(self, report: StepReport) -> None:
        what = f"reward {float(self.spec.precheck_reward):g}, the precheck_reward"
        shown = "; ".join(f"{sample}: {why}" for sample, why in report.prechecked[:5])
        more = f" (and {len(report.prechecked) - 5} more)" if len(report.prechecked) > 5 else ""
        logger.warning(
            "jurybox: step %d: %d of %d completions pre-checked, not sent to the judges (%s): %s%s",
            report.step,
            len(report.prechecked),
            report.batch,
            what,
            shown,
            more,
        )

    def _check(self, which: str, statistic: str, step: int) -> None:
        """Warn (once per statistic) where its drift test raised an alarm."""
        state = self._states[which]
        if not state.alarm or which in self._alarms:
            return
        line = (
            f"{statistic} rose above its first {self.spec.baseline_steps} steps' level: recent "
            f"mean {_f(state.recent_mean)}, baseline {_f(state.baseline)} (upper level "
            f"u0 {_f(state.upper)}), evidence {state.evidence:.3g} >= threshold "
            f"{state.threshold:.3g}"
        )
        self._alarms[which] = line
        self.alarmed = True
        stop = " (stop_on_alarm: training stops)" if self.spec.stop_on_alarm else ""
        logger.warning(
            "jurybox: step %d: reward drift alarm for %s: %s%s",
            step,
            self.rewards.reward.name,
            line,
            stop,
        )


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _g(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def sentinel_rewards(
    sentinel: Any,
    rewards: JuryRewards,
    rubric: Any = None,
    token_env: str = "JURYBOX_TOKEN",
) -> JuryRewards | None:
    """The sentinel's rewards from an adapter's ``sentinel=``: a URL, a jury, or `JuryRewards`.

    Its reward reads the guarded reward's score where its rubric is the same (else the rubric's
    default), on the unit scale, uncalibrated; None for no sentinel.
    """
    if sentinel is None:
        return None
    if isinstance(sentinel, JuryRewards):
        return sentinel
    same = rubric is None
    loaded = rewards.rubric if same else rubric
    spec = RewardSpec(score=rewards.reward.score if same else None, unscored="none")
    where: dict[str, Any] = (
        {"url": sentinel, "token_env": token_env}
        if isinstance(sentinel, str) and sentinel.startswith(("http://", "https://"))
        else {"jury": sentinel}
    )
    return JuryRewards(loaded, reward=spec, concurrency=1, **where)
