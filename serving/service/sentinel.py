"""The OpenRLHF route's held-out sentinel (``jurybox serve --sentinel-url URL``).

A second jurybox service, set by the operator and never by a client's request, scores a random
share of the route's samples (``--sentinel-share``, 5% by default: one in every
``ceil(1 / share)`` scored samples a guard receives, counted across requests, since OpenRLHF
sends one sample per request). For each sample it scored, the gap ``(1 + reward - sentinel) / 2``
(both on [0, 1]) rises when the reward climbs and the sentinel does not: a policy gaming the
reward's jury. The gaps of each call go to a `DriftMonitor` (one step per call, an anytime-valid
test), kept per guard (`jurybox.serving.service.guards`: per client, rubric and options).

The sentinel never touches the client's answer: its call starts once the samples' rewards are
decided and runs beside the next requests (at most `MAX_PENDING` calls of a guard at once;
beyond, the samples chosen are not sent, counted as ``skipped``). A sentinel that cannot answer
(unreachable, an error, a malformed answer, past `SENTINEL_TIMEOUT_S`) is a WARNING in the
service's log and counted (``jurybox_sentinel_items_total{result="failed"}``), never an error of
the route. The answer's ``extra_logs`` carries ``jurybox/sentinel_gap`` (the mean gap of the
latest call that came back; NaN before the first) and ``jurybox/sentinel_alarm`` (1 once the
monitor flags a drift; a WARNING in the service's log).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from jurybox.calibration.stats.monitors import DriftMonitor
from jurybox.rubrics import Rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec

logger = logging.getLogger("jurybox.serving")

#: How long one call to the sentinel may take, in seconds (then it is a failure).
SENTINEL_TIMEOUT_S = 120.0
#: The sentinel calls one guard may have in flight at once (beyond, its chosen samples are skipped).
MAX_PENDING = 4
# Failures logged at WARNING: the first ones, then one in LOG_EVERY (a dead sentinel under a
# trainer's traffic would otherwise write a line per request).
LOG_FIRST, LOG_EVERY = 5, 100


class SentinelError(Exception):
    """The sentinel did not answer with one verdict per item."""


class Sentinel:
    """A second jurybox service that scores a share of the OpenRLHF route's samples.

    Args:
        url: The service's base URL (``http://host:port``), set by the operator.
        token: Its bearer token, if it has one.
        share: The share of the scored samples it scores, in (0, 1].
        timeout: How long one call may take, in seconds.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        share: float = 0.05,
        timeout: float = SENTINEL_TIMEOUT_S,
    ) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.share = share
        self.timeout = timeout
        self.transport: Any = None  # (tests: an in-process service's ASGI transport)

    async def records(self, rubric: str, items: Sequence[Mapping[str, Any]]) -> list[Any]:
        """The sentinel's verdict records of ``items`` with its rubric named ``rubric``.

        Raises:
            SentinelError: An error answer, or not one verdict per item.
            httpx.HTTPError: The call failed (unreachable, timed out).
        """
        import httpx

        async with httpx.AsyncClient(
            base_url=self.url, headers=self.headers, timeout=self.timeout, transport=self.transport
        ) as http:
            body = {"rubric": rubric, "items": list(items), "allow_empty": True}
            answer = await http.post("/v1/score", json=body)
        if answer.status_code >= 400:
            raise SentinelError(f"HTTP {answer.status_code}: {answer.text[:300]}")
        try:
            verdicts = answer.json()["verdicts"]
        except (ValueError, KeyError, TypeError):
            raise SentinelError(f"not a /v1/score answer: {answer.text[:300]}") from None
        if not isinstance(verdicts, list) or len(verdicts) != len(items):
            raise SentinelError(f"{len(items)} items sent, an answer of another length")
        return verdicts


def check_sentinel(url: str | None, share: float) -> None:
    """A sentinel's URL (a service's base URL alone) and share (in (0, 1]), or an InputError."""
    if not (math.isfinite(share) and 0 < share <= 1):
        raise InputError(
            f"--sentinel-share {share!r}: give the share of the samples the sentinel scores, "
            "more than 0 and at most 1 (e.g. 0.05)",
            field="sentinel_share",
        )
    if url is None:
        return
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"--sentinel-url {url!r}: give a jurybox service's base URL, "
            "http://host:port or https://host:port",
            field="sentinel_url",
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise InputError(
            f"--sentinel-url {url!r}: give the base URL alone (its token with "
            "--sentinel-token-env)",
            field="sentinel_url",
        )


def sentinel_of(plan: Any) -> Sentinel | None:
    """The sentinel of a service's `ResolvedConfig` (None without ``sentinel_url``).

    Raises:
        RuntimeError: ``sentinel_token_env`` is not set where the ingress runs.
    """
    if plan.sentinel_url is None:
        return None
    token = os.environ.get(plan.sentinel_token_env) if plan.sentinel_token_env else None
    if plan.sentinel_token_env and not token:
        raise RuntimeError(
            f"the environment variable {plan.sentinel_token_env} holding the sentinel's "
            "token is not set where the ingress runs"
        )
    return Sentinel(plan.sentinel_url, token, plan.sentinel_share)


class SentinelWatch:
    """One guard's sentinel: which samples it scores, the gaps' drift monitor, its counts.

    ``reward``: the route's reward (its scale and unscored value do not matter: the gap reads
    both judges on [0, 1]). The sentinel's reward reads the same score, uncalibrated.
    """

    def __init__(
        self,
        sentinel: Sentinel,
        rubric_name: str,
        rubric: Rubric,
        reward: RewardSpec,
        monitor: DriftMonitor,
        metrics: Any = None,
        label: str = "",
    ) -> None:
        self.sentinel, self.rubric_name, self.monitor, self.metrics = (
            sentinel,
            rubric_name,
            monitor,
            metrics,
        )
        self.label = label or rubric_name
        self.ours = reward.model_copy(update={"scale": "unit", "unscored": "none"}).bind(rubric)
        self.theirs = RewardSpec(score=reward.score, scale="unit", unscored="none").bind(rubric)
        self.samples = 0  # the scored samples this guard has seen (the share counts them)
        self.gap: float | None = None  # the latest call's mean gap
        self.gaps = 0  # the gaps taken
        self.failed = self.skipped = 0  # samples not scored: a failed call's, and those skipped
        self.failed_calls = 0
        self.alarm = False
        self.pending: set[asyncio.Task[None]] = set()
        self._rng = random.Random()  # (not seeded: a policy must not know which are looked at)

    def due(self, n: int) -> int:
        """How many of ``n`` more scored samples the sentinel scores (one in ceil(1/share))."""
        every = math.ceil(1 / self.sentinel.share)
        due = (self.samples + n) // every - self.samples // every
        self.samples += n
        return due

    def send(
        self, items: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]
    ) -> None:
        """Send a random few of the scored ``items`` (``records``: their verdicts) to the sentinel.

        Returns at once: the call runs beside the next requests (`settled` waits for it).
        """
        scored = [
            (item, value)
            for item, value in zip(items, self.ours.values(records))
            if value is not None
        ]
        due = min(self.due(len(scored)), len(scored))
        if due <= 0:
            return
        chosen = self._rng.sample(scored, due)
        if len(self.pending) >= MAX_PENDING:
            self.skipped += due
            self._count("skipped", due)
            return
        task = asyncio.get_running_loop().create_task(self._check(chosen))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def settled(self) -> None:
        """Wait for the sentinel calls in flight (tests; a drain)."""
        while self.pending:
            await asyncio.gather(*self.pending, return_exceptions=True)

    async def _check(self, chosen: list[tuple[Mapping[str, Any], float]]) -> None:
        items = [{**item, "id": f"sentinel-{k}"} for k, (item, _) in enumerate(chosen)]
        try:
            records = await self.sentinel.records(self.rubric_name, items)
            theirs = self.theirs.values(records)
        except Exception as exc:  # a monitor's failure is never the route's: logged, counted
            self.failed += len(chosen)
            self.failed_calls += 1
            self._count("failed", len(chosen))
            calls = self.failed_calls
            if calls <= LOG_FIRST or calls % LOG_EVERY == 0:
                logger.warning(
                    "OpenRLHF sentinel (rubric %s) at %s could not score %d sample(s) (%d not "
                    "scored so far; no gap this time, the rewards are untouched): %s: %s",
                    self.label,
                    self.sentinel.url,
                    len(chosen),
                    self.failed,
                    type(exc).__name__,
                    str(exc)[:300],
                )
            return
        gaps = [(1 + r - s) / 2 for (_, r), s in zip(chosen, theirs) if s is not None]
        self._count("scored", len(gaps))
        self._count("unscored", len(chosen) - len(gaps))
        if not gaps:
            return
        self.gap = sum(gaps) / len(gaps)
        self.gaps += len(gaps)
        state = self.monitor.update(gaps)
        if state.alarm and not self.alarm:
            self.alarm = True
            logger.warning(
                "OpenRLHF sentinel (rubric %s): ALARM: the gap (1 + reward - sentinel) / 2 rose "
                "above its first steps' level at sentinel step %s (latest gap %.3f, %d gaps in "
                "all): the policy may be gaming the reward's jury, which the sentinel at %s does "
                "not reward alike. %s",
                self.label,
                state.alarm_step if state.alarm_step is not None else state.step,
                self.gap,
                self.gaps,
                self.sentinel.url,
                self.monitor.describe(),
            )

    def _count(self, result: str, n: int) -> None:
        if self.metrics is not None and n > 0:
            self.metrics.sentinel_items.labels(self.label, result).inc(n)

    def logs(self, n: int) -> dict[str, list[float]]:
        """The sentinel's ``extra_logs``, one value per sample."""
        gap = math.nan if self.gap is None else self.gap
        return {
            "jurybox/sentinel_gap": [gap] * n,
            "jurybox/sentinel_alarm": [1.0 if self.alarm else 0.0] * n,
        }
