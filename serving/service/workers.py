"""Worker processes for what a client's inline rubric may make slow or large.

An inline rubric is the client's, and its template is code: it is validated and rendered
(`jurybox.serving.service.admission`) in a worker process with a time budget and a memory cap, so
a template that loops for hours or builds a huge string costs one killed worker, never a stalled
route or the ingress's memory.
"""

from __future__ import annotations

import asyncio
import math
import pickle
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import IO, Any

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.images import Image
from jurybox.serving.errors import Invalid, Overloaded, RequestProblem
from jurybox.serving.service.admission import SHARED_IMAGES

# Address space of a worker that validates and renders inline rubrics: Python with pydantic and
# Jinja takes about 300 MB of it; a template that wants more fails alone (MemoryError).
WORKER_MEMORY_BYTES = 2 << 30

READY = b"R"  # what a worker writes once it has imported what it needs


class Workers:
    """Worker processes for what a client's template may make slow or large, one call at a time.

    A call past its time budget, or whose caller stopped waiting, kills its worker (nothing else
    stops a Jinja loop), and a fresh one takes its place; no other call is touched. Workers are
    plain subprocesses speaking pickles over their stdin and stdout, not ``multiprocessing`` ones,
    which would re-run the ingress process's main module (Ray's worker) in every child.
    """

    def __init__(self, workers: int = 2, queued: int = 8) -> None:
        self._slots = asyncio.Semaphore(workers)
        self.queued = queued  # calls that may wait for a worker; beyond, 429
        self.waiting = 0
        self._idle = [_Worker()]  # one started now, so that a first inline rubric need not wait

    async def run(self, budget_s: float, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a worker (``fn`` importable by name); what it raises is raised here.

        `Invalid` past ``budget_s`` seconds or if the worker dies, `Overloaded` when every worker is
        busy and ``queued`` calls already wait for one.
        """
        if self._slots.locked() and self.waiting >= self.queued:
            raise Overloaded(
                f"every worker that renders inline rubrics is "
                f"busy and {self.waiting} requests wait for one; retry later (or "
                "name a rubric the service knows)",
                retry_after=max(1, math.ceil(budget_s)),
            )
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        try:
            return await self._call(budget_s, fn, args)
        finally:
            self._slots.release()

    async def _call(self, budget_s: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        worker = self._idle.pop() if self._idle else _Worker()
        try:
            # A new worker imports what it needs first (seconds of CPU): not the call's time.
            await asyncio.to_thread(worker.wait_ready)
        except BaseException:
            worker.kill()
            raise
        shared = SHARED_IMAGES.get()  # a group request's decoded images, for its items
        try:
            ok, value = await asyncio.wait_for(
                asyncio.to_thread(worker.call, fn, args, shared), budget_s
            )
        except TimeoutError:
            self._replace(worker)
            raise Invalid(
                f"the inline rubric's template took "
                f"longer than {budget_s:g} s to render (max_render_s)",
                "rubric.template",
            ) from None
        except BaseException as exc:  # cancelled (deadline, client left), or it died
            self._replace(worker)
            if isinstance(exc, (EOFError, OSError)):
                raise Invalid(
                    "the inline rubric could not be "
                    "rendered: the worker rendering it died (out of memory?)",
                    "rubric",
                ) from None
            raise
        self._idle.append(worker)
        if ok:
            return value
        raise value

    def _replace(self, worker: _Worker) -> None:
        """Kill ``worker`` and start its successor now.

        So that the successor has imported what it needs (seconds of CPU) by the time the next
        inline rubric comes, not while that one waits.
        """
        worker.kill()
        self._idle.append(_Worker())

    def close(self) -> None:
        """Kill the idle worker processes (one busy with a call is not among them)."""
        for worker in self._idle:
            worker.kill()
        self._idle = []


class _Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from jurybox.serving.service.workers import serve_worker; serve_worker()",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.ready = False

    def wait_ready(self) -> None:
        """Block until the worker has imported what it needs (it says so with one byte)."""
        if not self.ready:
            assert self.proc.stdout is not None
            if self.proc.stdout.read(1) != READY:
                raise EOFError("the worker process ended while starting")
            self.ready = True

    def call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], shared: Mapping[str, Image] | None
    ) -> tuple[bool, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        _send(self.proc.stdin, (fn, args, shared))
        return _receive(self.proc.stdout)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _send(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "big") + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the worker process ended")
    return pickle.loads(stream.read(int.from_bytes(head, "big")))


def serve_worker() -> None:
    """A worker's loop: ``(fn, args, shared)`` in, ``(True, result)`` or ``(False, exception)`` out.

    ``shared``: the caller's `SHARED_IMAGES`, set for the call.

    Until its stdin closes. Its address space is capped, so a template that would build a huge
    string fails with MemoryError here instead of growing the ingress.
    """
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed may break the protocol
    answers.write(READY)  # (admission's imports, this module's, are what rendering needs)
    answers.flush()
    while True:
        try:
            fn, args, shared = _receive(requests)
        except EOFError:
            return
        token = SHARED_IMAGES.set(shared)
        try:
            answer: tuple[bool, Any] = (True, fn(*args))
        except RequestProblem as exc:
            answer = (False, exc)
        except InputError as exc:  # as a plain InputError: a subclass may not unpickle
            answer = (False, InputError(str(exc), field=exc.field))
        except BaseException as exc:  # the ingress sees it as the 500 it would be in-process
            answer = (False, RuntimeError(f"{type(exc).__name__}: {exc}"))
        finally:
            SHARED_IMAGES.reset(token)
        _send(answers, answer)
