"""One Ray Serve deployment per judge: a replica loads the judge's model once and answers votes.

A replica answers ``votes(requests)``, the judging path's second piece, so answers are parsed where
the judge runs and only votes travel back.

vLLM judges run on vLLM's async engine, which batches every request of every client continuously;
transformers judges (not thread-safe, one generate at a time) have the requests that arrive together
merged into one batch (`_Batched`); OpenAI-compatible judges are async clients already. Why not Ray
Serve LLM's ``LLMServer``: called through a handle it answers with OpenAI payloads (top-k
alternatives detokenized, forbidden tokens as -9999, token ids as strings), where the judging code
reads vLLM's own outputs: the score distribution at the answer position, ``detokenize=False`` and
the two-phase reasoning continuing from token ids. Holding vLLM's ``AsyncLLM`` here keeps one code
path with ``jurybox judge`` on vLLM.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from jurybox.judges import JudgeSpec
from jurybox.judges.backends.protocol import (
    AsyncBackend,
    Backend,
    CancelCheck,
    Generation,
    GenerationCancelled,
    Request,
)
from jurybox.judges.judging import Requests, ajudge_votes
from jurybox.rubrics import Vote

BackendFactory = Callable[[JudgeSpec], Backend]


def service_backend(spec: JudgeSpec) -> Backend:
    """The backend a judge runs on inside the service: its registry entry's for replicas.

    The spec's ``vision`` is decided first (`jurybox.judges.images.decide_vision`), as the jury
    does, so the backend receives images only when its judge sees them.
    """
    from jurybox.judges.backends.registry import backend_kind
    from jurybox.judges.images import decide_vision

    spec = decide_vision(spec)
    return served(backend_kind(spec.backend).make_replica(spec))


def served(backend: Backend) -> Backend:
    """``backend`` as a judge replica runs it.

    An async one as it is, a synchronous one behind `_Batched` (concurrent requests merged into one
    generate in a worker thread).
    """
    return backend if isinstance(backend, AsyncBackend) else _Batched(backend)


class _Batched:
    """A synchronous backend behind an async call, concurrent requests merged into one generate.

    The prompts of requests that arrive while one generate runs are merged into the next, which runs
    in a worker thread.

    Each caller gets its own outputs or its own error, never a neighbour's: a batch whose generate
    raises is run again request by request, so a request the backend cannot take fails alone; a
    caller that stops waiting (its client left, its deadline passed) cancels only its own wait, and
    a request nobody waits for any more is not generated. The batches run in a task of their own, so
    no caller's cancellation reaches them: a batch with one caller still waiting runs to its end.
    Once every caller of the running batch has left, the backend is told to stop (``generate(...,
    cancelled=...)``; one that can stops early), so an abandoned generate does not hold the judge
    while new requests wait (a deadline or ``max_concurrent`` would mean nothing if it did).
    """

    def __init__(self, backend: Backend, max_wait_s: float = 0.0) -> None:
        self.backend = backend
        self.name = backend.name
        self._waiting: list[tuple[list[Request], asyncio.Future]] = []
        self._max_wait_s = max_wait_s
        self._runner: asyncio.Task | None = None
        self._generating = 0  # generates running in a worker thread (0 or 1)
        self.generated = self.cancelled = 0  # generates that ran to their end; that stopped

    async def agenerate(self, requests: list[Request]) -> list[Generation]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiting.append((requests, future))
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._run())
        return await future  # cancelling the caller cancels this future alone

    async def _run(self) -> None:
        batch: list[tuple[list[Request], asyncio.Future]] = []
        try:
            while self._waiting:
                # Let calls made together join the batch: one turn of the event loop, by
                # default (a fixed wait would delay every lone request by as much; under load
                # the next batch gathers while one generates).
                await asyncio.sleep(self._max_wait_s)
                batch = [(reqs, fut) for reqs, fut in self._waiting if not fut.done()]
                self._waiting = []
                if batch:
                    await self._generate(batch)
        except asyncio.CancelledError:  # the replica is stopping: nobody is left unanswered
            for _, fut in batch + self._waiting:  # the batch in flight and those waiting
                if not fut.done():
                    fut.set_exception(RuntimeError("the judge replica is stopping"))
            raise

    async def _generate(self, batch: list[tuple[list[Request], asyncio.Future]]) -> None:
        prompts = [r for reqs, _ in batch for r in reqs]
        try:
            outputs = await self._generate_while_awaited(batch, prompts)
        except GenerationCancelled as exc:  # every caller left: nobody to answer or to rerun
            self.cancelled += 1
            for _, fut in batch:
                if not fut.done():  # cannot happen (it stops only once all are done); no hang
                    fut.set_exception(exc)
            return
        except Exception as exc:
            if len(batch) > 1:
                for one in batch:  # alone, so that only the request at fault fails
                    if not one[1].done():
                        await self._generate([one])
            elif not batch[0][1].done():
                batch[0][1].set_exception(exc)
            return
        self.generated += 1
        start = 0
        for reqs, fut in batch:
            if not fut.done():
                fut.set_result(outputs[start : start + len(reqs)])
            start += len(reqs)

    async def _generate_while_awaited(
        self, batch: list[tuple[list[Request], asyncio.Future]], prompts: list[Request]
    ) -> list[Generation]:
        """The backend's generate in a worker thread, stopped once no caller of ``batch`` waits.

        Its cancel check turns True once every caller of ``batch`` has stopped waiting (their
        futures are cancelled: a caller that is answered is answered after the generate). The check
        is a ``threading.Event`` set on the event loop, since the worker thread reads it.
        """
        nobody_waits = threading.Event()

        def left(_: asyncio.Future) -> None:
            if all(fut.done() for _, fut in batch):
                nobody_waits.set()

        for _, fut in batch:
            fut.add_done_callback(left)
        self._generating += 1
        try:
            return await asyncio.to_thread(
                self.backend.generate, prompts, cancelled=nobody_waits.is_set
            )
        except asyncio.CancelledError:  # the replica is stopping: its callers are failed
            nobody_waits.set()
            raise
        finally:
            self._generating -= 1
            for _, fut in batch:
                fut.remove_done_callback(left)

    def busy(self) -> bool:
        """Whether a generate is running (in the worker thread) right now."""
        return self._generating > 0

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        return self.backend.generate(requests, cancelled=cancelled)

    def close(self) -> None:
        self.backend.close()


class JudgeServer:
    """One judge: its backend, built once per replica.

    ``backend_factory`` replaces it in tests and benchmarks, as Ray Serve LLM takes an
    ``engine_cls``; a synchronous backend it makes is run as the service runs one, see `served`.
    """

    def __init__(self, spec: dict[str, Any], backend_factory: BackendFactory | None = None) -> None:
        from jurybox.judges.jury import freeze_loaded_objects

        self.spec = JudgeSpec.model_validate(spec)
        self.backend = (
            served(backend_factory(self.spec))
            if backend_factory is not None
            else service_backend(self.spec)
        )
        freeze_loaded_objects()

    async def votes(self, requests: Requests) -> list[list[Vote]]:
        """This judge's votes on every item of ``requests`` (see ``judge_votes``)."""
        return await ajudge_votes(self.spec, self.backend, requests)

    async def ping(self) -> str:
        """``"ok"``: the replica answers (the ingress's /healthz asks every judge)."""
        return "ok"

    async def activity(self) -> dict[str, Any]:
        """What this replica's judge is doing.

        ``busy``: whether it is generating now (after every client of a request has left or passed
        its deadline, not for long); for a merged-batch judge, how many generates ran to their end
        (``generated``) or were stopped because nobody waited for them any more (``cancelled``);
        None where not counted.
        """
        busy = getattr(self.backend, "busy", None)
        return {
            "busy": bool(busy()) if busy is not None else False,
            "generated": getattr(self.backend, "generated", None),
            "cancelled": getattr(self.backend, "cancelled", None),
        }

    async def check_health(self) -> None:
        """Ray Serve's health check: a judge whose engine died is restarted."""
        engine = getattr(self.backend, "engine", None)
        if engine is not None and hasattr(engine, "check_health"):
            await engine.check_health()

    def __del__(self) -> None:
        backend = self.__dict__.get("backend")
        if backend is not None:
            try:
                backend.close()
            except Exception:  # shutting down: nothing left to report to
                pass
