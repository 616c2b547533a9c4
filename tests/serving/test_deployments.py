"""A judge deployment's class with a backend passed in (as Ray Serve LLM takes an engine_cls):
the votes it returns are the judging path's, and a synchronous backend's concurrent calls are
merged into one generate."""

import asyncio

from jurybox.judges import render_requests
from jurybox.judges.backends.base import Generation
from jurybox.rubrics import Item, load_rubric
from jurybox.serving.deployments import JudgeServer, _Batched

ITEMS = [Item(id=str(i), question="q", response="r", reference="a") for i in range(3)]
ANSWER = '{"accuracy": 3, "relevance": 2, "completeness": 1, "parsimony": 4}'


class Recording:
    name = "fake"

    def __init__(self):
        self.calls = []

    def generate(self, requests):
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
            ("accuracy", 3), ("relevance", 2), ("completeness", 1), ("parsimony", 4)}
    assert asyncio.run(server.ping()) == "ok"


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
        def generate(self, requests):
            raise MemoryError("out of memory")

    batched = _Batched(Broken())
    requests = render_requests(load_rubric("mirage-mg"), ITEMS)

    async def two():
        return await asyncio.gather(batched.agenerate(list(requests.requests[:1])),
                                    batched.agenerate(list(requests.requests[1:])),
                                    return_exceptions=True)

    results = asyncio.run(two())
    assert all(isinstance(r, MemoryError) for r in results)
