"""Batching: the requests of one rubric that wait for a slot together are judged together.

A trainer's one-sample requests arrive by the dozen: those that wait at the gate
(`jurybox.serving.service.gate`) for the same rubric and jury (one provenance) are merged into one
batch, judged in one walk through the jury's steps (one call per judge for all of them instead of
one each), and each request gets its own verdicts back. A request larger than a batch is judged a
slice at a time (`jurybox.serving.service.pace.slices`). A request whose client leaves takes its
share out; a batch nobody waits for any more is stopped, at the judges too.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from typing import Any

from jurybox.judges.judging import Requests
from jurybox.rubrics import Rubric, Verdict
from jurybox.serving.service.calls import JudgeCalls, every, short, stopped
from jurybox.serving.service.gate import Gate
from jurybox.serving.service.pace import SHARE, slices

logger = logging.getLogger("jurybox.serving")


class _Part:
    """One request's share of a batch: its requests to judge, deadline and answer."""

    def __init__(self, requests: Requests, deadline: float) -> None:
        self.requests, self.deadline = requests, deadline
        self.answer: asyncio.Future[list[Verdict]] = asyncio.get_running_loop().create_future()
        self.waiting = True  # counted as waiting at the gate


class _Batch:
    """Requests of one rubric and jury (one provenance) that waited for a slot together.

    They are judged in one walk through the jury's steps: one call per judge for all of them instead
    of one each (a trainer's one-sample requests arrive by the dozen).
    """

    def __init__(self, rubric: Rubric, prov: str) -> None:
        self.rubric, self.prov = rubric, prov
        self.parts: list[_Part] = []
        self.calls = 0  # judge calls per judge so far
        self.started = False
        self.task: asyncio.Future[None] | None = None


class Batches:
    """The batches of one ingress replica: judged through ``gate``'s slots by ``calls``.

    Each batch up to ``max_judge_calls`` judge calls per judge.
    """

    def __init__(self, gate: Gate, calls: JudgeCalls, max_judge_calls: int) -> None:
        self.gate, self.calls, self.max_judge_calls = gate, calls, max_judge_calls
        self.open: dict[str, _Batch] = {}  # by provenance: the batch requests join
        self.tasks: set[asyncio.Task[None]] = set()  # running: the service holds them

    async def judged(
        self, rubric: Rubric, prov: str, requests: Requests, deadline: float
    ) -> list[Verdict]:
        """The verdicts of ``requests``, a slice at a time beyond a slice (`pace.slices`).

        At most `pace.SHARE` slices at once, each waiting for a slot as a request does: the other
        requests' batches are judged between them.
        """
        parts = slices(len(requests.item_ids), len(requests.calls), self.max_judge_calls)
        if len(parts) == 1:
            return await self._judged_together(rubric, prov, requests, deadline)
        share = asyncio.Semaphore(SHARE)

        first = asyncio.Event()  # the first slice is past the gate: the request is admitted

        async def part(k: int, items: range) -> list[Verdict]:
            async with share:
                if k:
                    await first.wait()
                subset = requests.subset(list(items))
                return await self._judged_together(
                    rubric, prov, subset, deadline, admitted=k > 0, entered=first
                )

        return [
            v
            for verdicts in await every([part(k, p) for k, p in enumerate(parts)])
            for v in verdicts
        ]

    async def _judged_together(
        self,
        rubric: Rubric,
        prov: str,
        requests: Requests,
        deadline: float,
        admitted: bool = False,
        entered: asyncio.Event | None = None,
    ) -> list[Verdict]:
        """The verdicts of ``requests``, judged as soon as a slot is free.

        Together with the other requests of the same rubric that wait for one meanwhile (up to
        ``max_judge_calls`` per batch). ``admitted``: a later slice of an admitted request (never
        a 429); ``entered`` is set once this one is past the gate.
        """
        part = _Part(requests, deadline)
        batch = self.open.get(prov)
        calls = len(requests.requests)
        if batch is None and not self.gate.slots.locked():
            # A free slot: judged at once, alone (as if no batching; nothing waits to join).
            await self.gate.slots.acquire()  # (free: returns without waiting)
            part.waiting = False
            batch = _Batch(rubric, prov)
            batch.task = self._detached(self._run_batch(batch, held=True))
            batch.task.add_done_callback(functools.partial(self._unused_slot, batch))
        else:
            self.gate.admit(admitted)
            if batch is None or batch.calls + calls > self.max_judge_calls:
                batch = self.open[prov] = _Batch(rubric, prov)
                batch.task = self._detached(self._run_batch(batch))
        batch.parts.append(part)
        batch.calls += calls
        if entered is not None:
            entered.set()
        try:
            return await asyncio.shield(part.answer)
        except asyncio.CancelledError:  # its client left, or its deadline passed
            part.answer.cancel()
            if part.waiting:
                part.waiting = False
                self.gate.left()
            if batch.task is not None and all(p.answer.done() for p in batch.parts):
                # Nobody waits for it: stop its judges' work too, and let no request join it.
                if self.open.get(prov) is batch:
                    del self.open[prov]
                batch.task.cancel()
            raise

    def _detached(self, run: Any) -> asyncio.Task[None]:
        """``run`` as a task of the service's own, which no request's cancellation reaches.

        In an empty context: a task copies the context of the request that made it, and Ray Serve
        cancels every handle call made in a request's context when that request is cancelled (its
        client left), which would fail every other request merged into the batch. The service
        keeps the task until it ends (the event loop holds tasks only weakly).
        """
        task = asyncio.get_running_loop().create_task(run, context=contextvars.Context())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _unused_slot(self, batch: _Batch, _: object) -> None:
        """A batch cancelled before it began gives back the slot it was given."""
        if not batch.started:
            self.gate.slots.release()

    async def _run_batch(self, batch: _Batch, held: bool = False) -> None:
        try:
            async with self.gate.slot(held):
                if self.open.get(batch.prov) is batch:
                    del self.open[batch.prov]  # the next requests start a batch of their own
                batch.started = True
                waiting = [p for p in batch.parts if p.waiting]
                for p in waiting:
                    p.waiting = False
                self.gate.left(len(waiting))
                live = [p for p in batch.parts if not p.answer.done()]
                if live:
                    await self._answer(batch.rubric, batch.prov, live)
        except BaseException as exc:
            if self.open.get(batch.prov) is batch:
                del self.open[batch.prov]
            for p in batch.parts:
                if p.waiting:
                    p.waiting = False
                    self.gate.left()
                if not p.answer.done():  # a client still waits: an answer, never a cancel
                    p.answer.set_exception(exc if isinstance(exc, Exception) else stopped())
            if not isinstance(exc, Exception):
                raise

    async def _answer(self, rubric: Rubric, prov: str, parts: list[_Part]) -> None:
        """Judge ``parts`` together and give each its verdicts.

        If the batch fails (a judge cannot take it), each part is judged alone, so that only the
        part at fault fails.
        """
        deadline = max(p.deadline for p in parts)
        joined = Requests.join([p.requests for p in parts]) if len(parts) > 1 else parts[0].requests
        try:
            verdicts = await self.calls.steps(rubric, prov, joined, deadline)
        except Exception as exc:
            if len(parts) == 1:
                raise
            logger.info(
                "a batch of %d requests failed (%s); judging each alone", len(parts), short(exc)
            )
            for p in parts:
                if p.answer.done():
                    continue
                try:
                    alone = await self.calls.steps(rubric, prov, p.requests, p.deadline)
                except Exception as one:
                    if not p.answer.done():
                        p.answer.set_exception(one)
                else:
                    if not p.answer.done():
                        p.answer.set_result(alone)
            return
        start = 0
        for p in parts:
            n = len(p.requests.item_ids)
            if not p.answer.done():
                p.answer.set_result(verdicts[start : start + n])
            start += n
