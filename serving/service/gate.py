"""The admission gate: at most so many batches judged at once, so many requests waiting.

One per ingress replica, with its `share` of the service's ``max_concurrent`` and ``max_queued``;
a request beyond them is told to come back (429 with Retry-After) instead of waiting without
bound. The requests that wait together are judged together (`jurybox.serving.service.batching`).
`Clients`: at most so many requests open per client address, refused before anything is read.
`CLIENT`: the address of the client whose request the running code serves (what keeps one
client's juror agreement and route guards apart from another's).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from typing import Any

from jurybox.serving.errors import Overloaded
from jurybox.serving.service.pace import Pace

#: The address of the client whose request runs here (set by the request's checks, before its
#: route runs; "" outside a request). The service keeps what one client's traffic teaches it (its
#: jurors' agreement, its route guards) per client, so that no client's requests change another's
#: rewards. A client is its address as the service sees it: behind a proxy, every client is one.
CLIENT: ContextVar[str] = ContextVar("jurybox_client", default="")


class Gate:
    """At most ``concurrent`` batches judged at once and ``queued`` requests waiting for a slot.

    A request beyond that is told to come back (429 with Retry-After) instead of waiting without
    bound. The requests that wait together are judged together
    (`jurybox.serving.service.batching.Batches`).
    """

    def __init__(self, concurrent: int, queued: int, gauge: Any) -> None:
        self.slots = asyncio.Semaphore(concurrent)
        self.concurrent, self.queued = concurrent, queued
        self.waiting = self.active = 0
        self.seconds = 1.0  # moving average of a batch's judging time, for Retry-After
        self.gauge = gauge
        self.pace = Pace()  # how fast the judges answer

    def retry_after(self) -> int:
        """Seconds a refused request is told to wait.

        The average judging time of a batch, rounded up, between 1 and 60 (the requests waiting now
        are judged in the next batches, together).
        """
        batches = 1 + self.waiting // max(1, self.queued)
        return int(min(60, max(1, math.ceil(self.seconds * batches))))

    def admit(self, admitted: bool = False) -> None:
        """Count one more request waiting; 429 when every slot is busy and the queue full.

        ``admitted``: a later slice of a request admitted already, counted but never refused
        (a 429 halfway would throw away the slices judged).
        """
        if self.waiting >= self.queued and not admitted:
            raise Overloaded(
                f"the service is busy ({self.active} batches "
                f"judging, {self.waiting} requests waiting); retry later",
                retry_after=self.retry_after(),
            )
        self.waiting += 1
        self._show()

    def left(self, n: int = 1) -> None:
        """``n`` requests stop waiting (judged now, or gone)."""
        self.waiting -= n
        self._show()

    @contextlib.asynccontextmanager
    async def slot(self, held: bool = False) -> AsyncIterator[None]:
        """One batch judging, once a slot is free (``held``: taken already)."""
        if not held:
            await self.slots.acquire()
        self.active += 1
        self._show()
        began = time.perf_counter()
        try:
            yield
        finally:
            self.active -= 1
            self.slots.release()
            self._show()
            self.seconds = 0.8 * self.seconds + 0.2 * (time.perf_counter() - began)

    def _show(self) -> None:
        self.gauge.set(self.waiting + self.active)


def share(total: int, replicas: int, rank: int) -> int:
    """Replica ``rank``'s share of ``total`` among ``replicas``.

    The shares add up to ``total`` exactly (the first ``total % replicas`` replicas take one more).
    """
    return total // replicas + (1 if rank < total % replicas else 0)


class Clients:
    """Requests open per client address on one ingress replica.

    A client past ``limit`` is refused (429) before anything of its request is read, so that a few
    clients that open many slow requests cannot take every slot of the replica from the others.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open: dict[str, int] = {}

    @contextlib.contextmanager
    def held(self, client: str) -> Iterator[bool]:
        """Whether ``client`` may open one more request; if so, it is counted until the block ends.

        True (and one more request counted for ``client`` until the block ends) when the client has
        fewer than ``limit`` open; else False.
        """
        n = self.open.get(client, 0)
        if n >= self.limit:
            yield False
            return
        self.open[client] = n + 1
        try:
            yield True
        finally:
            left = self.open[client] - 1
            if left:
                self.open[client] = left
            else:
                del self.open[client]
