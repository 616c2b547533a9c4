"""The service's Prometheus metrics, and answers shared by the callers that come at once.

`Metrics`: one ingress replica's (``GET /metrics`` serves every replica's, summed:
`jurybox.serving.service.draining`). `Shared`: one answer of an open route (``/healthz``,
``/metrics``) for every caller within a time to live.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from typing import Any


class Metrics:
    """Prometheus metrics of one ingress replica (/metrics serves every replica's, summed)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.requests = Counter(
            "jurybox_requests",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "jurybox_request_seconds",
            "Request latency in seconds",
            ["route"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
        )
        self.votes = Counter(
            "jurybox_votes", "Votes returned, by judge", ["judge"], registry=self.registry
        )
        self.unscored = Counter(
            "jurybox_unscored_votes",
            "Unscored votes by judge and reason (a code of jurybox.judges.parsing.REASON_CODES)",
            ["judge", "reason"],
            registry=self.registry,
        )
        self.queue = Gauge(
            "jurybox_queue_depth", "Score requests waiting or being scored", registry=self.registry
        )
        self.judge_calls = Counter(
            "jurybox_judge_requests",
            "Requests sent to a judge deployment (each with the prompts of a request's open items)",
            ["judge"],
            registry=self.registry,
        )
        self.cache = Counter(
            "jurybox_verdict_cache",
            "Items looked up in the verdict cache, "
            "by result (hit: answered from it; miss: judged; skipped: judged "
            "or not stored, the cache being locked by another process)",
            ["result"],
            registry=self.registry,
        )
        self.juror_flags = Counter(
            "jurybox_juror_flags",
            "Jurors flagged as failing (jurybox.judges.jurors), by judge and kind (collapsed, "
            "refused, departed): one per request a judge was flagged in, with --juror-checks",
            ["judge", "kind"],
            registry=self.registry,
        )
        self.canary_items = Counter(
            "jurybox_canary_items",
            "Canary items judged (known exploits sent beside a step's items), by rubric",
            ["rubric"],
            registry=self.registry,
        )
        self.sentinel_items = Counter(
            "jurybox_sentinel_items",
            "OpenRLHF samples sent to the held-out sentinel (--sentinel-url), by rubric and "
            "result: scored, unscored (by the sentinel), failed (its call failed), skipped "
            "(too many calls in flight)",
            ["rubric", "result"],
            registry=self.registry,
        )
        self.canary_score = Histogram(
            "jurybox_canary_score",
            "The scores canary items got, by rubric",
            ["rubric"],
            registry=self.registry,
            buckets=(0, 0.1, 0.25, 0.5, 0.75, 0.9, 1, 2, 3, 4, 5, 10),
        )

    def observe(self, path: str, status: int, seconds: float) -> None:
        """Count one answered request by route and status and record its latency.

        A path that is not one of the fixed routes (``/v1/rubrics/{name}`` included) counts as
        ``other``, one of OpenRLHF's rewards as ``/v1/openrlhf/{rubric}``.
        """
        if path in (
            "/v1/score",
            "/v1/groups",
            "/v1/provenance",
            "/healthz",
            "/metrics",
            "/v1/jury",
            "/v1/rubrics",
        ):
            route = path
        elif path.startswith("/v1/openrlhf/"):
            route = "/v1/openrlhf/{rubric}"
        else:
            route = "other"
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def count_votes(self, records: list[dict[str, Any]]) -> None:
        """Count the votes of verdict records by judge, the unscored ones by judge and reason.

        By reason code, a closed set: a reason's text can carry an item's.
        """
        from jurybox.judges.parsing import reason_code

        votes: collections.Counter[str] = collections.Counter()
        unscored: collections.Counter[tuple[str, str]] = collections.Counter()
        for record in records:
            for vote in record["votes"]:
                votes[vote["judge"]] += 1
                if vote["score"] is None:
                    unscored[vote["judge"], reason_code(vote["error"] or "")] += 1
        for judge, n in votes.items():  # one metric update per label, not per vote
            self.votes.labels(judge).inc(n)
        for (judge, kind), n in unscored.items():
            self.unscored.labels(judge, kind).inc(n)

    def count_flags(self, flags: Any) -> None:
        """Count a request's juror flags (`jurybox.judges.jurors.JurorFlag`): each judge and kind once."""
        for judge, kind in dict.fromkeys((f.judge, f.kind) for f in flags):
            self.juror_flags.labels(judge, kind).inc()

    def text(self) -> bytes:
        """Every metric in Prometheus's text exposition format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class Shared:
    """One answer of ``fetch`` for every caller within ``ttl_s`` seconds.

    Callers that come while it is being fetched await that fetch (which a caller's leaving does not
    cancel).
    """

    def __init__(self, fetch: Callable[[], Any], ttl_s: float) -> None:
        self.fetch, self.ttl_s = fetch, ttl_s
        self._value: tuple[float, Any] | None = None
        self._task: asyncio.Future[Any] | None = None

    async def get(self) -> Any:
        """The answer kept within ``ttl_s`` seconds, else the fetch under way, else a new one."""
        if self._value is not None and time.monotonic() - self._value[0] < self.ttl_s:
            return self._value[1]
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self.fetch())
            self._task.add_done_callback(self._keep)
        return await asyncio.shield(self._task)

    def _keep(self, task: asyncio.Future[Any]) -> None:
        if not task.cancelled() and task.exception() is None:
            self._value = (time.monotonic(), task.result())
