"""A batch of merged requests belongs to no request (#59), in-process.

The service's scoring path (a ScoringService with the replay jury's judges in this process) with
judge handles that do what Ray Serve's do when a request is cancelled: every handle call made in
that request's context is cancelled too (``ray.serve._private.replica._on_request_cancelled``).
Requests merged into one batch, the one that opened it leaving while it is judged: the others get
their verdicts, exactly those they get alone. Once more on the real models
(``test_..._on_the_real_tiny_jury``: the session's tiny jury's backends behind the service's judge
servers). The same through `jurybox serve` (real Serve, real sockets): test_service_leavers.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable
from typing import Any

import pytest
from judging_helpers import write_replay_jury
from service_helpers import LocalJudge, assert_same_verdicts

from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.deployments import JudgeServer
from jurybox.serving.service.score_protocol import ScoreItem, ScoreRequest
from jurybox.serving.service.scoring import ScoringService

DELAY_S = 0.5  # each generate of the replay judges
QUESTION = "What causes brown rings on tomato leaves?"

# The calls a request made, as Serve keeps them by parent request (a context variable).
_CALLS: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("calls", default=None)


class ServeLikeJudge(LocalJudge):
    """A judge handle whose calls a request's cancellation cancels, as Serve's do."""

    def __init__(self, server: Any) -> None:
        super().__init__(server)
        plain = self.votes.remote

        def remote(*args: Any) -> Any:
            call = plain(*args)
            calls = _CALLS.get()
            if calls is not None:
                calls.append(call)
            return call

        self.votes.remote = remote  # type: ignore[method-assign]


async def as_request(coro: Any) -> Any:
    """``coro`` as Serve runs a request: its handle calls cancelled if it is cancelled."""
    calls: list[Any] = []
    _CALLS.set(calls)
    try:
        return await coro
    except asyncio.CancelledError:
        for call in calls:
            call.cancel()
        raise


def request(n: int) -> ScoreRequest:
    return ScoreRequest(
        rubric="mirage-mg",
        items=[
            ScoreItem(
                id=f"i{n}",
                question=QUESTION,
                response=f"Early blight, answer {n}.",
                reference="Early blight (Alternaria solani).",
            )
        ],
    )


@pytest.fixture(scope="module")
def judges(tmp_path_factory):
    """The replay judges, loaded once (their tokenizers), and their jury file."""
    jury = write_replay_jury(tmp_path_factory.mktemp("leavers") / "jury.yaml", delay_s=DELAY_S)
    from jurybox.judges import load_jury_spec

    servers = {
        j.name: JudgeServer(j.model_dump(mode="json")) for j in load_jury_spec(str(jury)).judges
    }
    return jury, servers


@pytest.fixture
def scoring(judges):
    """A service with one slot over the judges (a new one per test: its gate is bound to the
    test's event loop)."""
    jury, servers = judges
    plan = ServiceConfig(jury=str(jury), limits=Limits(max_concurrent=1, max_queued=8)).resolve()
    service = ScoringService(
        plan.model_dump(mode="json"), {n: ServeLikeJudge(s) for n, s in servers.items()}
    )
    yield service
    service.workers.close()


async def until(ready: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"never {what}"
        await asyncio.sleep(0.01)


def calls(service: ScoringService) -> int:
    return sum(h.counts.get("votes", 0) for h in service.judges.values())


async def merged_and_judged(
    service: ScoringService,
    first: ScoreRequest,
    second: ScoreRequest,
    holding: ScoreRequest | None = None,
    generate_s: float | None = DELAY_S,
):
    """``first`` and ``second`` merged into one batch (``first`` opened it) while another request
    (``holding``, default ``request(0)``) holds the only slot; returns their tasks once that
    batch's judge calls are under way, a third of ``generate_s`` in (None: of the holder's time,
    how long a batch takes here)."""
    loop = asyncio.get_running_loop()
    began = time.monotonic()
    holder = loop.create_task(as_request(service.score(holding or request(0))))
    await until(lambda: service.gate.active == 1, "holding the slot")
    tasks = [loop.create_task(as_request(service.score(first)))]
    await until(lambda: service.gate.waiting == 1, "one waiting")
    tasks.append(loop.create_task(as_request(service.score(second))))
    await until(lambda: service.gate.waiting == 2, "two waiting")
    (batch,) = service.batches.open.values()
    assert len(batch.parts) == 2
    before = calls(service)
    await holder
    held_s = time.monotonic() - began
    await until(lambda: batch.started and calls(service) >= before + len(service.judges), "judged")
    # in the middle of the judges' generate
    await asyncio.sleep((held_s if generate_s is None else generate_s) / 3)
    return tasks


async def merged(service: ScoringService, leaver_first: bool) -> tuple[Any, list[Any]]:
    """The leaver and the stayer merged into one batch (in the order asked); the leaver leaves
    while that batch is judged. Returns the stayer's answer (or exception) and its verdicts
    alone."""
    leaver, stayer = request(1), request(2)
    tasks = await merged_and_judged(
        service, *((leaver, stayer) if leaver_first else (stayer, leaver))
    )
    (tasks[0] if leaver_first else tasks[1]).cancel()
    got = (await asyncio.gather(tasks[1] if leaver_first else tasks[0], return_exceptions=True))[0]
    alone = await as_request(service.score(request(2)))
    return got, alone


@pytest.mark.parametrize("leaver_first", [True, False], ids=["leaver-first", "innocent-first"])
def test_a_client_that_leaves_a_merged_batch_fails_no_one_merged_with_it(scoring, leaver_first):
    got, alone = asyncio.run(merged(scoring, leaver_first))
    assert isinstance(got, list), repr(got)
    assert_same_verdicts(got, alone)
    assert scoring.gate.waiting == 0 and scoring.gate.active == 0
    assert not scoring.gate.slots.locked()


def test_a_batch_every_client_left_stops_its_judge_calls(scoring):
    async def run() -> int:
        leavers = await merged_and_judged(scoring, request(1), request(2))
        running = list(scoring.batches.tasks)
        assert running, "the merged batch is not running"
        for task in leavers:
            task.cancel()
        await asyncio.gather(*leavers, return_exceptions=True)
        await asyncio.sleep(0.05)
        return sum(not t.done() for t in running)

    assert asyncio.run(run()) == 0
    assert not scoring.gate.slots.locked()


class Lent:
    """A backend of the session's tiny jury lent to a judge server: the session closes it."""

    def __init__(self, backend: Any) -> None:
        self.backend, self.name = backend, backend.name

    def generate(
        self, requests: list[Any], cancelled: Callable[[], bool] | None = None
    ) -> list[Any]:
        return self.backend.generate(requests, cancelled=cancelled)

    def close(self) -> None:
        pass


@pytest.mark.models
def test_a_client_leaving_a_merged_batch_on_the_real_tiny_jury(tiny_jury, tiny_judged_first):
    """Once on the real models: the service's judge servers over the session's tiny jury's
    backends (as `jurybox serve --jury tiny` runs them, without a second load of the models),
    one slot held; the leaver opens the merged batch and leaves while it is judged. The stayer
    gets the verdict the tiny jury gives in-process (``tiny_judged_first``, the session's)."""
    from judging_helpers import ITEMS

    from jurybox.rubrics import input_hash

    servers = {
        j.name: JudgeServer(
            j.model_dump(mode="json"), backend_factory=lambda s: Lent(tiny_jury.backend(s))
        )
        for j in tiny_jury.spec.judges
    }
    plan = ServiceConfig(jury="tiny", limits=Limits(max_concurrent=1, max_queued=8)).resolve()
    service = ScoringService(
        plan.model_dump(mode="json"), {n: ServeLikeJudge(s) for n, s in servers.items()}
    )
    first = ITEMS[0]

    def sent(as_id: str) -> ScoreRequest:
        item = ScoreItem(
            id=as_id, question=first.question, response=first.response, reference=first.reference
        )
        return ScoreRequest(rubric="mirage-mg", items=[item])

    async def run() -> Any:
        leaver, stayer = await merged_and_judged(
            service, sent("leaver"), sent("stayer"), holding=sent("holder"), generate_s=None
        )
        leaver.cancel()
        return (await asyncio.gather(stayer, return_exceptions=True))[0]

    try:
        got = asyncio.run(run())
    finally:
        service.workers.close()
    assert isinstance(got, list), repr(got)
    stayer = first.model_copy(update={"id": "stayer"})
    want = {**tiny_judged_first.to_record(input=input_hash(stayer)), "id": "stayer"}
    assert_same_verdicts(got, [want])
    assert service.gate.waiting == 0 and service.gate.active == 0
