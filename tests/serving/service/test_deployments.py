"""A judge deployment's class with a backend passed in (as Ray Serve LLM takes an engine_cls):
the votes it returns are the judging path's, and a synchronous backend's concurrent calls are
merged into one generate, each caller getting its own outputs or its own error."""

import asyncio
import threading
import time

from jurybox.judges.backends.protocol import Generation, GenerationCancelled
from jurybox.judges.judging import render_requests
from jurybox.rubrics import Item, load_rubric
from jurybox.serving.service.deployments import JudgeServer, _Batched

ITEMS = [Item(id=str(i), question="q", response="r", reference="a") for i in range(3)]
ANSWER = '{"accuracy": 3, "relevance": 2, "completeness": 1, "parsimony": 4}'


class Recording:
    name = "fake"

    def __init__(self):
        self.calls = []

    def generate(self, requests, cancelled=None):
        self.calls.append(len(requests))
        return [Generation(text=ANSWER) for _ in requests]

    def close(self):
        pass


def spec():
    return {"name": "fake", "model": "org/m"}


def test_votes_from_a_passed_in_backend():
    backend = Recording()
    server = JudgeServer(spec(), backend_factory=lambda s: _Batched(backend))
    requests = render_requests(load_rubric("mirage-mg"), ITEMS)
    votes = asyncio.run(server.votes(requests))
    assert len(votes) == 3
    for per_item in votes:
        assert {(v.criterion, v.score) for v in per_item} == {
            ("accuracy", 3),
            ("relevance", 2),
            ("completeness", 1),
            ("parsimony", 4),
        }
    assert asyncio.run(server.ping()) == "ok"
    assert asyncio.run(server.activity()) == {"busy": False, "generated": 1, "cancelled": 0}


def test_concurrent_calls_share_one_generate_and_get_their_own_outputs():
    backend = Recording()
    batched = _Batched(backend)
    requests = render_requests(load_rubric("mirage-mg"), ITEMS)

    async def three_clients():
        calls = [batched.agenerate(list(requests.requests[:k])) for k in (1, 2, 3)]
        return await asyncio.gather(*calls)

    outputs = asyncio.run(three_clients())
    assert [len(o) for o in outputs] == [1, 2, 3]
    assert backend.calls == [6]  # one generate for all six prompts


def test_a_failing_generate_fails_every_call_of_its_batch():
    class Broken(Recording):
        def generate(self, requests, cancelled=None):
            raise MemoryError("out of memory")

    batched = _Batched(Broken())
    requests = render_requests(load_rubric("mirage-mg"), ITEMS)

    async def two():
        return await asyncio.gather(
            batched.agenerate(list(requests.requests[:1])),
            batched.agenerate(list(requests.requests[1:])),
            return_exceptions=True,
        )

    results = asyncio.run(two())
    assert all(isinstance(r, MemoryError) for r in results)


class Poisoned(Recording):
    """Fails a whole generate when any prompt holds a lone surrogate, as a tokenizer does."""

    def generate(self, requests, cancelled=None):
        self.calls.append(len(requests))
        if any("\ud800" in m["content"] for r in requests for m in r.messages):
            raise TypeError("TextEncodeInput must be Union[TextInputSequence, ...]")
        return [Generation(text=ANSWER) for _ in requests]


def test_a_neighbour_the_backend_cannot_take_fails_alone():
    backend = Poisoned()
    batched = _Batched(backend)
    good = render_requests(load_rubric("mirage-mg"), ITEMS[:2]).requests
    bad = render_requests(
        load_rubric("mirage-mg"), [Item(id="x", question="q", response="\ud800", reference="a")]
    ).requests

    async def two():
        return await asyncio.gather(
            batched.agenerate(list(good)), batched.agenerate(list(bad)), return_exceptions=True
        )

    mine, theirs = asyncio.run(two())
    assert [g.text for g in mine] == [ANSWER, ANSWER]
    assert isinstance(theirs, TypeError)
    assert backend.calls == [3, 2, 1]  # the batch, then each request alone


class Slow(Recording):
    """A generate that takes a while, counting how many run at once."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds, self.running, self.most = seconds, 0, 0
        self.lock = threading.Lock()

    def generate(self, requests, cancelled=None):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(self.seconds)
        with self.lock:
            self.running -= 1
        return super().generate(requests)


def test_a_neighbour_that_leaves_does_not_cancel_the_batch_or_start_a_second_generate():
    backend = Slow(0.5)
    batched, requests = batched_over(backend)

    async def scenario():
        # Theirs came first (before, the call that came first ran the batch for everyone).
        theirs = asyncio.create_task(batched.agenerate(list(requests[1:2])))
        mine = asyncio.create_task(batched.agenerate(list(requests[:1])))
        await asyncio.sleep(0.2)  # both in the running generate
        theirs.cancel()  # their client left
        late = asyncio.create_task(batched.agenerate(list(requests[2:])))
        return await mine, await late, theirs

    mine, late, theirs = asyncio.run(scenario())
    assert theirs.cancelled()
    assert [g.text for g in mine] == [ANSWER] and [g.text for g in late] == [ANSWER]
    assert backend.most == 1  # never two generates side by side
    assert backend.calls == [2, 1]


def test_a_request_nobody_waits_for_any_more_is_not_generated():
    backend = Recording()
    batched = _Batched(backend, max_wait_s=0.2)
    requests = render_requests(load_rubric("mirage-mg"), ITEMS).requests

    async def scenario():
        gone = asyncio.create_task(batched.agenerate(list(requests[:2])))
        mine = asyncio.create_task(batched.agenerate(list(requests[2:])))
        await asyncio.sleep(0.05)
        gone.cancel()  # before the batch starts
        return await mine

    assert [g.text for g in asyncio.run(scenario())] == [ANSWER]
    assert backend.calls == [1]


class Stoppable(Recording):
    """A generate that runs until the test lets it finish, or stops (GenerationCancelled) as
    soon as its cancel check is True, as the transformers backend does between steps. It keeps
    each generate's check so the test can read what it says."""

    def __init__(self):
        super().__init__()
        self.started = threading.Event()
        self.finish = threading.Event()
        self.checks, self.stopped = [], []

    def generate(self, requests, cancelled=None):
        self.calls.append(len(requests))
        self.checks.append(cancelled)
        self.started.set()
        deadline = time.monotonic() + 60  # only so that a broken _Batched fails, not hangs
        while not self.finish.is_set() and time.monotonic() < deadline:
            if cancelled():
                self.stopped.append(True)
                raise GenerationCancelled("cancelled")
            time.sleep(0.002)
        self.stopped.append(False)
        return [Generation(text=ANSWER) for _ in requests]


def batched_over(backend):
    """``backend`` behind ``_Batched``, and the rendered requests of ITEMS."""
    return _Batched(backend), render_requests(load_rubric("mirage-mg"), ITEMS).requests


async def settle():
    """Let the event loop run the callbacks of what was just cancelled."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_the_cancel_check_stays_false_while_one_caller_still_waits():
    backend = Stoppable()
    batched, requests = batched_over(backend)

    async def scenario():
        theirs = asyncio.create_task(batched.agenerate(list(requests[:1])))
        mine = asyncio.create_task(batched.agenerate(list(requests[1:2])))
        assert await asyncio.to_thread(backend.started.wait, 30)  # both in one generate
        assert batched.busy()
        check = backend.checks[0]
        assert check() is False
        theirs.cancel()  # their client left; mine still waits
        await settle()
        said = check()
        backend.finish.set()
        return said, await mine

    said, mine = asyncio.run(scenario())
    assert said is False
    assert [g.text for g in mine] == [ANSWER]
    assert backend.calls == [2] and backend.stopped == [False]
    assert not batched.busy()
    assert (batched.cancelled, batched.generated) == (0, 1)


def test_a_batch_every_caller_left_stops_and_nobody_is_rerun():
    backend = Stoppable()
    batched, requests = batched_over(backend)

    async def scenario():
        callers = [
            asyncio.create_task(batched.agenerate(list(requests[k : k + 1]))) for k in (0, 1)
        ]
        assert await asyncio.to_thread(backend.started.wait, 30)
        check = backend.checks[0]
        callers[0].cancel()
        await settle()
        one_left = check()
        callers[1].cancel()  # the last caller leaves (its deadline passed)
        await settle()
        all_left = check()
        await batched._runner  # the generate stops and the runner ends, failing nobody
        busy_after = batched.busy()
        backend.finish.set()
        later = await batched.agenerate(list(requests[2:]))  # the judge takes new work
        return one_left, all_left, busy_after, callers, later

    one_left, all_left, busy_after, callers, later = asyncio.run(scenario())
    assert (one_left, all_left) == (False, True)
    assert all(c.cancelled() for c in callers)
    assert backend.stopped[0] is True  # stopped by its check, not finished
    assert not busy_after
    assert [g.text for g in later] == [ANSWER]
    assert backend.calls == [2, 1]  # no rerun request by request of the cancelled batch
    assert (batched.cancelled, batched.generated) == (1, 1)


def test_a_backend_without_a_cancel_check_is_called_as_before():
    backend = Recording()  # generate(requests) only
    batched, requests = batched_over(backend)
    assert [g.text for g in asyncio.run(batched.agenerate(list(requests[:2])))] == [ANSWER] * 2
    assert backend.calls == [2]


def test_a_stopping_replica_stops_the_generate_in_flight():
    backend = Stoppable()
    batched, requests = batched_over(backend)

    async def scenario():
        mine = asyncio.create_task(batched.agenerate(list(requests[:1])))
        assert await asyncio.to_thread(backend.started.wait, 30)
        batched._runner.cancel()  # as Serve stopping the replica cancels its tasks
        result = await asyncio.gather(mine, return_exceptions=True)
        return result[0], backend.checks[0]()

    error, check = asyncio.run(scenario())
    assert isinstance(error, RuntimeError) and "stopping" in str(error)
    assert check is True


def test_the_service_backend_is_the_registry_entry_s(monkeypatch):
    """A replica runs the backend its entry names for replicas (vLLM's async engine is one), or
    else the entry's own backend; never chosen by name. A synchronous one is merged behind
    `_Batched`."""
    from jurybox.judges import JudgeSpec
    from jurybox.judges.backends import registry
    from jurybox.serving.service.deployments import service_backend

    monkeypatch.setattr(registry, "_registered", {})
    made = []

    def replica(spec):
        made.append(spec.name)
        return Recording()

    class Async(Recording):
        async def agenerate(self, requests):
            return self.generate(requests)

    registry.register("replica-for-tests", lambda spec: Recording(), replica=replica)
    registry.register("plain-for-tests", lambda spec: Recording())
    registry.register("async-for-tests", lambda spec: Recording(), replica=lambda spec: Async())
    own = JudgeSpec.model_validate({**spec(), "backend": "replica-for-tests"})
    plain = JudgeSpec.model_validate({**spec(), "backend": "plain-for-tests"})
    engine = JudgeSpec.model_validate({**spec(), "backend": "async-for-tests"})
    backend = service_backend(own)
    assert isinstance(backend, _Batched) and isinstance(backend.backend, Recording)
    assert made == ["fake"]
    assert isinstance(service_backend(plain), _Batched) and made == ["fake"]
    assert isinstance(service_backend(engine), Async)  # async already: as it is
    assert registry.backend_kind("vllm").replica is not None
