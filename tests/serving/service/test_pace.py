"""One big request does not take the judges from everyone (#59), in-process.

The scoring path (a ScoringService) over judges whose calls take time in proportion to their
requests, one call at a time per judge (as a model's generate does): the replay jury's judges
behind a lock and PER_CALL_S per request. A request the judges cannot finish within the
deadline at their measured rate is refused before any judge runs; a small request that comes
while a large one is judged is answered between its slices, not after all of it.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from judging_helpers import ITEMS, write_replay_jury
from service_helpers import LocalJudge

from jurybox.serving.errors import RequestProblem
from jurybox.serving.problems import HTTPProblem, problem_for
from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.deployments import JudgeServer
from jurybox.serving.service.score_protocol import ScoreItem, ScoreRequest
from jurybox.serving.service.scoring import ScoringService


class PacedJudge(LocalJudge):
    """A judge answering one call at a time, each taking ``per_call_s`` per request in it."""

    def __init__(self, server: Any, per_call_s: float) -> None:
        super().__init__(server)
        lock = asyncio.Lock()
        plain = self.votes.fn

        async def votes(requests: Any) -> Any:
            async with lock:
                await asyncio.sleep(per_call_s * len(requests.requests))
                return await plain(requests)

        self.votes.fn = votes


@pytest.fixture(scope="module")
def judges(tmp_path_factory):
    jury = write_replay_jury(tmp_path_factory.mktemp("pace") / "jury.yaml")
    from jurybox.judges import load_jury_spec

    servers = {
        j.name: JudgeServer(j.model_dump(mode="json")) for j in load_jury_spec(str(jury)).judges
    }
    warm = service((jury, servers), 0.0)  # what the judges load on their first call
    try:
        asyncio.run(warm.score(request(2, "warm")))
    finally:
        warm.workers.close()
    return jury, servers


def service(judges: Any, per_call_s: float, **limits: Any) -> ScoringService:
    jury, servers = judges
    plan = ServiceConfig(jury=str(jury), limits=Limits(**limits)).resolve()
    return ScoringService(
        plan.model_dump(mode="json"), {n: PacedJudge(s, per_call_s) for n, s in servers.items()}
    )


def request(n: int, tag: str) -> ScoreRequest:
    item = ITEMS[0]
    return ScoreRequest(
        rubric="general",
        items=[
            ScoreItem(
                id=f"{tag}{k}",
                question=item.question,
                response=item.response,
                reference=item.reference,
            )
            for k in range(n)
        ],
    )


def calls(scoring: ScoringService) -> int:
    return sum(h.counts.get("votes", 0) for h in scoring.judges.values())


def test_a_request_that_cannot_end_in_time_is_refused_before_any_judge_runs(judges):
    # 0.05 s per request: a judge answers 20 calls a second, judged in slices of 64 calls
    # (max_judge_calls // 8), two at once: within a deadline of 10 s, at most 400 calls.
    scoring = service(judges, 0.05, request_timeout_s=10, max_items=1024, max_judge_calls=512)

    async def run() -> tuple[Any, int, int]:
        await scoring.score(request(40, "warm"))  # the judges' rate measured (calls of 32+)
        before = calls(scoring)
        try:
            await scoring.score(request(500, "big"))
        except RequestProblem as exc:
            refused: Any = problem_for(exc)
        else:
            refused = None
        after = calls(scoring)
        fits = await scoring.score(request(20, "fits"))
        return refused, after - before, len(fits)

    try:
        refused, asked, fits = asyncio.run(run())
    finally:
        scoring.workers.close()
    assert isinstance(refused, HTTPProblem), refused
    assert refused.status == 413 and refused.kind == "too_large"
    said = re.search(
        r"^500 judge calls per judge take about (\d+) s at this service's measured rate "
        r"\(([\d.]+) calls/s per judge in calls of 32 or more, 2 at once\), more than the "
        r"\d+ s left of its deadline of 10 s",
        refused.message,
    )
    assert said, refused.message
    estimate, rate = float(said.group(1)), float(said.group(2))
    assert 10 < rate <= 20  # measured: at most the judges' 20 calls/s
    assert abs(estimate - 500 / (2 * rate)) <= 1
    assert asked == 0  # no judge ran for it
    assert fits == 20


def test_a_small_request_is_not_refused_for_what_small_calls_measured(judges):
    # A judge that batches: every call takes 0.5 s, whatever its size. Only one-item calls
    # measured: a request of 300 calls (10 s at their pace, 0.5 s in fact) is not refused.
    scoring = service(judges, 0.0, request_timeout_s=5, max_items=1024, max_judge_calls=512)
    for handle in scoring.judges.values():
        plain = handle.votes.fn

        async def votes(requests: Any, plain: Any = plain) -> Any:
            await asyncio.sleep(0.5)
            return await plain(requests)

        handle.votes.fn = votes

    async def run() -> int:
        await scoring.score(request(1, "one"))
        return len(await scoring.score(request(300, "many")))

    try:
        assert asyncio.run(run()) == 300
    finally:
        scoring.workers.close()


def test_a_small_request_is_judged_between_a_large_ones_slices(judges):
    # A large request of 400 calls per judge (4 s of each judge at 0.01 s per request) is
    # judged in slices of 50 (max_judge_calls // 8); a one-item request arriving meanwhile
    # waits for at most the slices already handed to the judges, not for all of it.
    scoring = service(judges, 0.01, max_items=1024, max_judge_calls=400)

    async def run() -> tuple[float, float]:
        began = time.monotonic()
        large = asyncio.ensure_future(scoring.score(request(400, "large")))
        while calls(scoring) == 0:  # the large one's first slices are with the judges
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        asked = time.monotonic()
        small = await scoring.score(request(1, "small"))
        waited = time.monotonic() - asked
        assert len(small) == 1 and len(await large) == 400
        return waited, time.monotonic() - began

    try:
        waited, total = asyncio.run(run())
    finally:
        scoring.workers.close()
    assert waited < total / 3, (waited, total)


def test_a_sliced_request_is_not_refused_halfway_when_the_queue_fills(judges):
    """Found in review: each slice waited at the gate as a new request, so another client's
    request taking the queue's place as a slice left it made the next slice a 429, and the
    slices judged were thrown away. A request past the gate is not refused again."""
    scoring = service(judges, 0.05, max_concurrent=1, max_queued=1, max_judge_calls=256)
    gate, left, seen = scoring.gate, scoring.gate.left, {"n": 0}

    def another_arrives(n: int = 1) -> None:
        left(n)
        seen["n"] += n
        if seen["n"] == 1 and gate.waiting < gate.queued:  # a slice has just left the queue
            gate.admit()  # ... and another client's request takes its place

    gate.left = another_arrives  # type: ignore[method-assign]
    try:
        got = asyncio.run(scoring.score(request(128, "big")))  # 4 slices of 32 items
        assert len(got) == 128 and all(r["status"] == "scored" for r in got)
    finally:
        scoring.workers.close()


def test_slow_calls_stop_refusing_others_once_they_are_old(monkeypatch):
    """Found in review: a client's slow calls (long items, or queued behind its own batches)
    lowered the measured rate, and refused requests measure nothing, so every large request
    was refused from then on. A measurement counts for `MAX_AGE_S` seconds."""
    from jurybox.serving.service import pace as pace_module

    now = [1000.0]
    monkeypatch.setattr(pace_module.time, "monotonic", lambda: now[0])
    pace = pace_module.Pace()
    for _ in range(pace_module.RECENT):
        pace.measured("j", 128, 80.0)  # 1.6 calls a second
    with pytest.raises(RequestProblem, match="measured rate"):
        pace.check(2048, 256, now[0] + 600.0, ["j"], 600.0)
    now[0] += pace_module.MAX_AGE_S + 1
    pace.check(2048, 256, now[0] + 600.0, ["j"], 600.0)  # no estimate now: not refused
    assert pace.rate(["j"], 64) is None
