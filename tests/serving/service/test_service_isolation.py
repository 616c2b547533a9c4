"""One client's failure is not another's verdict, on the real service (Ray, Serve, HTTP on
127.0.0.1), started once for this module with room for concurrent requests.

The judges are the replay jury (``judging_helpers.write_replay_jury``: the tiny jury's judges
answering with their recorded real answers, through their real tokenizers) with a delay: every
generate (one merged batch) takes DELAY_S, and stops early when nobody waits for it any more.
What is tested is the service's plumbing (batching, isolation between clients, a dying judge),
not the models: the real models' service path is tested end to end in test_service.py and
test_service_vllm.py.

A synchronous judge (transformers, or replay) merges the requests that arrive together into one
generate. A request that keeps a judge busy first makes the next two requests queue up and
share a batch: one of them the request under test, the other a neighbour that poisons the
batch (text the tokenizer refuses) or whose client leaves while the batch runs. The request
under test must get exactly the verdicts it gets alone.

And no request may buy unbounded work or memory: judge calls and inline rubrics have limits,
and a chunked body is refused before it is read. (A slow template meeting the deadline is in
test_service_deadline.py, whose service has a short one.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from judging_helpers import write_replay_jury
from service_helpers import assert_same_verdicts, running_service, wait_healthy

from jurybox.serving.service.config import Limits, ServiceConfig

pytestmark = pytest.mark.models

QUESTION = "What causes brown rings on tomato leaves?"
REFERENCE = "Early blight (Alternaria solani)."


def item(id_: str, response: str) -> dict:
    return {"id": id_, "question": QUESTION, "response": response, "reference": REFERENCE}


MINE = item("mine", "Early blight, a fungal disease; remove infected leaves.")
BUSY = item("busy", "Probably a virus, or too much water; hard to say without a photo.")
# Every generate of the replay judges takes this long: BUSY's is still running when the
# neighbour and MINE arrive 0.3-0.4 s after it (so they share the next one), and a leaver whose
# client waits 1.5 times a lone request leaves in the middle of that shared generate.
DELAY_S = 3.0


@pytest.fixture(scope="module")
def service(tmp_path_factory, shared_ray):
    jury = write_replay_jury(tmp_path_factory.mktemp("jury") / "slow-replay.yaml", delay_s=DELAY_S)
    config = ServiceConfig(
        jury=str(jury),
        limits=Limits(max_concurrent=4, max_queued=8, max_judge_calls=8, max_body_bytes=2 << 20),
    )
    with running_service(config) as url:
        yield url


def score(url: str, items: list[dict], timeout: float = 600) -> httpx.Response:
    # json.dumps escapes a lone surrogate as \ud800, as any JSON client may send it.
    return httpx.post(
        f"{url}/v1/score",
        content=json.dumps({"rubric": "general", "items": items}),
        headers={"content-type": "application/json"},
        timeout=timeout,
    )


def vote_errors(verdicts: list[dict]) -> list[str]:
    return [v["error"] for r in verdicts for v in r["votes"] if v["error"]]


def alone(url: str) -> tuple[list[dict], float]:
    began = time.monotonic()
    r = score(url, [MINE])
    assert r.status_code == 200, r.text
    return r.json()["verdicts"], time.monotonic() - began


def behind_a_busy_judge(url: str, neighbour: dict, neighbour_timeout: float) -> dict:
    """BUSY first; then the neighbour and MINE while BUSY is judged (so that they share the
    next batch, the neighbour's call first). Returns every response or error by name."""
    results: dict = {}

    def send(name, items, timeout, delay):
        time.sleep(delay)
        try:
            results[name] = score(url, items, timeout)
        except httpx.HTTPError as exc:
            results[name] = exc

    threads = [
        threading.Thread(target=send, args=args)
        for args in (
            ("busy", [BUSY], 600, 0.0),
            ("neighbour", [neighbour], neighbour_timeout, 0.3),
            ("mine", [MINE], 600, 0.4),
        )
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    return results


def test_a_poisoned_neighbour_leaves_my_request_fully_scored(service):
    want, _ = alone(service)
    results = behind_a_busy_judge(service, item("poison", "Early \ud800 blight"), 600)
    mine = results["mine"]
    assert isinstance(mine, httpx.Response) and mine.status_code == 200, mine
    assert vote_errors(mine.json()["verdicts"]) == vote_errors(want)
    assert_same_verdicts(mine.json()["verdicts"], want)
    assert results["busy"].status_code == 200
    # The poisoned request itself fails, and says so: never a 200 of unscored votes. (The
    # ingress now refuses lone surrogates before any judge sees them, 422; the batch's own
    # isolation, for what a judge cannot take, is tested in test_deployments.py.)
    poison = results["neighbour"]
    assert poison.status_code in (422, 503) and "error" in poison.json(), poison.text


def test_a_neighbour_whose_client_leaves_leaves_my_request_fully_scored(service):
    want, seconds = alone(service)
    # The neighbour's client gives up while its batch (shared with mine) is being judged.
    results = behind_a_busy_judge(
        service, item("leaver", "Early blight, I think."), neighbour_timeout=seconds * 1.5
    )
    assert isinstance(results["neighbour"], httpx.TimeoutException), results["neighbour"]
    mine = results["mine"]
    assert isinstance(mine, httpx.Response) and mine.status_code == 200, mine
    assert vote_errors(mine.json()["verdicts"]) == vote_errors(want)
    assert_same_verdicts(mine.json()["verdicts"], want)
    # And the service goes on as before.
    again, _ = alone(service)
    assert_same_verdicts(again, want)


def criterion(name: str) -> dict:
    return {
        "name": name,
        "description": f"How {name} the answer is.",
        "scale": {"min": 1, "max": 5},
    }


def inline(template: str, n_criteria: int = 1, mode: str = "joint") -> dict:
    return {
        "name": "inline",
        "mode": mode,
        "template": template,
        "criteria": [criterion(f"c{k}") for k in range(n_criteria)],
    }


def score_with(url: str, rubric, items: list[dict], timeout: float = 600) -> httpx.Response:
    return httpx.post(f"{url}/v1/score", json={"rubric": rubric, "items": items}, timeout=timeout)


def assert_problem(r: httpx.Response, status: int, field: str, *words: str) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["field"] == field and all(w in error["message"] for w in words), error


def test_a_ten_thousand_criterion_inline_rubric_is_refused_naming_the_limit(service):
    r = score_with(
        service,
        inline("{{ question }} {{ output_format }}", 10_000, "per_criterion"),
        [MINE],
        timeout=60,
    )
    assert_problem(r, 413, "rubric.criteria", "10000 criteria", "max_criteria")


def test_judge_calls_per_request_are_bounded(service):
    # 3 items x 4 criteria judged one per call = 12 judge calls, beyond this service's 8.
    items = [item(f"i{k}", "Early blight.") for k in range(3)]
    r = score_with(
        service,
        inline("{{ question }} {{ response }} {{ output_format }}", 4, "per_criterion"),
        items,
        timeout=60,
    )
    assert_problem(r, 413, "items", "12 judge calls", "max_judge_calls")


@pytest.mark.parametrize("depth", [50, 500])
def test_deeply_nested_extra_fields_are_a_422(service, depth):
    nested: dict = {}
    inner = nested
    for _ in range(depth):
        inner["k"] = {}
        inner = inner["k"]
    r = score(service, [{**MINE, "notes": nested}], timeout=60)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"].startswith("items[0].notes.k") and "max_nesting" in error["message"]


def test_a_huge_constant_in_a_template_is_refused_not_computed(service):
    r = score_with(
        service, inline("{{ question }}{{ 'x' * 10**10 }} {{ output_format }}"), [MINE], timeout=60
    )
    assert_problem(r, 422, "rubric", "repetition of 10000000000", "at most 1000000")


def replica_pid(deployment: str) -> int:
    """The pid of the one replica of ``deployment`` of this module's service (whose Ray the
    test process started: its workers are our descendants)."""
    import psutil

    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if f"ServeReplica:jurybox:{deployment}" in " ".join(p.cmdline()):
                found.append(p.pid)
        except psutil.Error:  # a worker that ended (a zombie until Ray reaps it)
            pass
    (pid,) = found
    return pid


def ingress_rss() -> int:
    import psutil

    # Private memory (USS): Ray maps its shared object store into every worker, and the pages
    # of it a worker touches count in its RSS, though they are the store's.
    return psutil.Process(replica_pid("JuryIngress")).memory_full_info().uss


def test_a_chunked_hundred_megabyte_body_is_refused_before_it_is_read(service):
    def body():
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            yield chunk

    def small():
        yield b"{}"

    # Warm: the replica's first answers of each kind allocate what it keeps for them.
    assert httpx.post(f"{service}/v1/score", content=small(), timeout=60).status_code == 411
    assert score(service, [MINE]).status_code == 200
    before = ingress_rss()
    for _ in range(2):  # and a second one costs no more
        try:  # no Content-Length: httpx sends a generator chunked
            r = httpx.post(
                f"{service}/v1/score",
                content=body(),
                timeout=120,
                headers={"content-type": "application/json"},
            )
            assert r.status_code == 411 and "Content-Length" in r.json()["error"]["message"], r.text
        except httpx.TransportError:
            pass  # the service answered and closed while the client was still sending
    grown = ingress_rss() - before
    # Reading either body would cost 100 MiB; the bound leaves room for what the replica
    # allocates meanwhile on its own (its metrics reports to the shared state every 0.5 s, the
    # allocator's arenas): a clean-clone CI run measured 4.8 MiB, above the earlier 4 MiB bound.
    assert grown < 16 << 20, f"the ingress grew by {grown / 2**20:.1f} MiB"
    assert score(service, [MINE]).status_code == 200  # and it goes on as before


def judge_activity(judge: str) -> dict:
    """``JudgeServer.activity`` of ``judge``'s replica, through its Serve handle (this process
    is the Serve driver)."""
    from ray import serve

    from jurybox.serving.service.builder import APP_NAME, judge_deployment_name

    return (
        serve.get_deployment_handle(judge_deployment_name(judge), app_name=APP_NAME)
        .activity.remote()
        .result(timeout_s=60)
    )


def judge_url(url: str, preds, out) -> subprocess.CompletedProcess:
    args = ["judge", str(preds), "--rubric", "general", "--url", url, "--out", str(out), "--quiet"]
    return subprocess.run(
        [sys.executable, "-c", "from jurybox.serving.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_judge_url_across_neighbours_failures_and_a_dying_judge_writes_only_verdicts(
    service, tmp_path
):
    """`judge --url` while neighbours poison batches and leave, and one judge's replica is
    killed: no row of the output is an infrastructure failure dressed as unscored votes, and
    a rerun completes the file (or finds nothing left to do)."""
    rows = [item(f"r{k}", f"Early blight, answer {k}; remove the leaves.") for k in range(10)]
    preds, out = tmp_path / "p.jsonl", tmp_path / "judged.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stop = threading.Event()

    def neighbours():
        while not stop.is_set():
            for neighbour, timeout in (
                (item("poison", "Early \ud800 blight"), 60),
                (item("leaver", "Blight, I think."), 0.5),
            ):
                try:
                    score(service, [neighbour], timeout)
                except httpx.HTTPError:
                    pass

    noise = threading.Thread(target=neighbours)
    noise.start()
    try:
        killed = []
        judged = threading.Event()

        def kill():
            """Kill Gemma's replica in the middle of a generate that has run for a second (a
            leaver's is cancelled when its client leaves, after half of one: this one is
            judge --url's), or not at all if judge --url ends first."""
            running = None  # (the judge's counters, since when) while one generate runs
            while not judged.is_set():
                state = judge_activity("gemma3-270m")
                counters = (state["generated"], state["cancelled"])
                if not state["busy"]:
                    running = None
                elif running is None or running[0] != counters:
                    running = (counters, time.monotonic())
                elif time.monotonic() - running[1] >= 1.0:
                    pid = replica_pid("judge-gemma3-270m")
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
                time.sleep(0.1)

        killer = threading.Thread(target=kill)
        killer.start()
        try:
            first = judge_url(service, preds, out)
        finally:
            judged.set()
            killer.join()
        assert killed, "the judge's replica was not killed while judge --url ran"
    finally:
        stop.set()
        noise.join()
    # Scored through it all (the request asked again after the death), or stopped as an
    # in-process run stops on a failed judge: exit 1, nothing written for what failed.
    assert first.returncode in (0, 1), first.stderr
    print(f"judge --url through it all: exit {first.returncode}\n{first.stderr[-2000:]}")
    wait_healthy(service, 900)
    rerun = judge_url(service, preds, out)
    assert rerun.returncode == 0, rerun.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == sorted(r["id"] for r in rows)
    for record in records:
        for vote in record["votes"]:
            error = vote["error"] or ""
            assert not any(
                w in error
                for w in ("could not answer", "replica", "Ray", "Cancelled", "EndOfStream")
            ), vote
    if first.returncode == 0:
        assert f"0 judged now, {len(rows)} already in" in rerun.stderr, rerun.stderr
