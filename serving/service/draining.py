"""This ingress replica among the others: its requests in flight, the drain, the shared metrics.

Each replica reports its metrics and requests in flight to the replicas' shared state
(`jurybox.serving.service.shared`) every `REPORT_S` seconds and learns from it whether to drain;
``GET /metrics`` reads every replica's from there. Without a shared state (a service built in
this process), the replica's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from jurybox.serving.errors import Unavailable
from jurybox.serving.service.calls import short
from jurybox.serving.service.metrics import Metrics, Shared

logger = logging.getLogger("jurybox.serving")


class StateHandle:
    """The handle of the replicas' shared state (a Serve deployment actor).

    Looked up at the first call, and again after a failure (Serve restarts the actor under the
    same name).
    """

    def __init__(self) -> None:
        self._handle: Any = None

    def __call__(self) -> Any:
        """The handle, looked up when there is none."""
        from ray import serve

        from jurybox.serving.service.config import STATE_ACTOR

        if self._handle is None:
            self._handle = serve.get_deployment_actor(STATE_ACTOR)
        return self._handle

    def lost(self) -> None:
        """A call to it failed: look it up again at the next call."""
        self._handle = None


class Replica:
    """One ingress replica (named ``name``): its requests in flight and its drain.

    With ``state`` (the replicas' shared state: called for its handle, with ``lost()`` said
    after a failed call) its metrics and drain are the whole service's, else its own.
    """

    def __init__(self, name: str, metrics: Metrics, state: StateHandle | None = None) -> None:
        self.name, self.metrics, self.state = name, metrics, state
        self.in_flight = 0  # score requests being answered
        self.draining = False  # set on shutdown: new score requests get 503
        self._reporter: asyncio.Task[None] | None = None
        self._metrics_text = Shared(self._read_metrics, 0.0)  # callers at once share a read

    @contextlib.contextmanager
    def flight(self) -> Iterator[None]:
        """One score request in flight for as long as the block runs."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1

    def _lost(self) -> None:
        if self.state is not None:
            self.state.lost()

    async def drain(self, timeout_s: float) -> int:
        """Make every ingress replica take no new score requests and wait for those in flight.

        New score requests are answered 503 with Retry-After; the wait, at most ``timeout_s``, is
        for those in flight on any replica to finish (``jurybox serve`` calls it on Ctrl-C, before
        it deletes the application).

        Returns:
            How many requests are still in flight.
        """
        self.draining = True
        deadline = time.monotonic() + timeout_s
        if self.state is not None:
            try:
                return await self._drain_all(deadline)
            except Exception as exc:  # no shared state to reach: drain this replica alone
                self._lost()
                logger.warning(
                    "drain: the other ingress replicas cannot be told (%s); draining this one",
                    short(exc),
                )
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return self.in_flight

    async def _drain_all(self, deadline: float) -> int:
        assert self.state is not None
        await self.state().drain.remote()
        while True:
            await self._report()
            status = await self.state().status.remote()
            # Done once every live replica has heard of the drain (so admits no more) and none
            # has a request in flight.
            if (status["all_know"] and not status["in_flight"]) or time.monotonic() >= deadline:
                return int(status["in_flight"])
            await asyncio.sleep(0.1)

    def start_reporting(self) -> None:
        """Report to the shared state every ``REPORT_S`` seconds from now on.

        A no-op without a shared state, outside an event loop, or when already reporting.
        """
        if self.state is None or self._reporter is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._reporter = loop.create_task(self._reporting())

    async def _reporting(self) -> None:
        from jurybox.serving.service.shared import REPORT_S

        while True:
            try:
                await self._report()
            except Exception as exc:  # the state restarting: the next report rebuilds it
                self._lost()
                logger.debug("report to the shared ingress state failed: %s", short(exc))
            await asyncio.sleep(REPORT_S)

    async def _report(self) -> None:
        """This replica's metrics and requests in flight to the shared state.

        Learns from it whether to drain.
        """
        from jurybox.serving.service.shared import snapshot

        assert self.state is not None
        if await self.state().report.remote(
            self.name, os.getpid(), snapshot(self.metrics.registry), self.in_flight
        ):
            self.draining = True

    async def metrics_text(self) -> bytes:
        """The metrics of every ingress replica, summed, as Prometheus text.

        This replica's alone without a shared state; 503 while the shared state cannot be read
        (Serve restarting it). Callers that come while it is read share that reading.
        """
        return await self._metrics_text.get()

    async def _read_metrics(self) -> bytes:
        from jurybox.serving.service.shared import render

        if self.state is None:
            return self.metrics.text()
        try:
            await self._report()  # this replica's counts as of now
            families = await self.state().metrics.remote()
        except Exception as exc:
            self._lost()
            raise Unavailable(
                "the metrics the ingress replicas share "
                f"cannot be read right now ({short(exc)}); retry shortly",
                retry_after=2,
            ) from None
        return render(families)
