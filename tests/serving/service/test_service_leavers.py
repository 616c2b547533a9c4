"""A client that leaves fails no one merged with it (#59), on the real service: Ray Serve's HTTP
proxy, real sockets on 127.0.0.1, the application `jurybox serve` deploys (``running_service``,
on the session's ``shared_ray``: a Ray and a Serve of its own were most of this module's time;
`jurybox serve` as a user starts it is test_service.py's ``user_service``).

Four requests hold the four slots (``--max-concurrent 4``); two more wait and are merged into one
batch of ``mirage-mg``; one of them closes its socket while that batch is judged. The other must
get exactly the verdicts `jurybox judge` gives, whether the leaver opened the batch or joined it.
Then 64 clients at once, a quarter of them leaving at random moments: every client still
connected gets its verdicts, none a 499. The judges are the replay jury (the tiny jury's judges
answering with their recorded answers through their real tokenizers, each generate taking
DELAY_S). On the real tiny jury: test_batch_leavers.py (the service's scoring path in-process over
the session's tiny jury: Serve and the sockets add nothing the models change).
"""

from __future__ import annotations

import json
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from judging_helpers import ITEMS, write_replay_jury
from service_helpers import assert_same_verdicts, running_service

pytestmark = pytest.mark.models

DELAY_S = 3.0  # each generate of the replay judges
RUBRIC = "mirage-mg"
ROWS = [
    {"id": it.id, "question": it.question, "response": it.response, "reference": it.reference}
    for it in ITEMS
]


def serving(jury: Any, slots: int = 4):
    """The service as `jurybox serve --jury JURY --max-concurrent SLOTS --max-queued 128
    --ingress-replicas 1 --no-cache` configures it, deployed on the shared Ray."""
    from jurybox.serving.service.config import Limits, ServiceConfig

    config = ServiceConfig(
        jury=str(jury),
        limits=Limits(max_concurrent=slots, max_queued=128),
        ingress_replicas=1,
        verdict_cache=None,
    )
    return running_service(config)


@pytest.fixture(scope="module")
def jury_file(tmp_path_factory):
    return write_replay_jury(tmp_path_factory.mktemp("leavers") / "replay.yaml", delay_s=DELAY_S)


@pytest.fixture(scope="module")
def offline(jury_file, replay_tiny) -> dict[str, dict]:
    """Each row's verdict as `jurybox judge` gives it (in this process), by row id: this
    module's jury file (its provenance) judged by the session's replay judges (``replay_tiny``:
    the same judges and recording, their tokenizers already loaded, without DELAY_S's waits)."""
    from jurybox.judges import Jury, load_jury_spec

    return judged_offline(Jury(load_jury_spec(jury_file), replay_tiny._backends))


def judged_offline(jury: Any, items: list[Any] = ITEMS) -> dict[str, dict]:
    """Each row's verdict from ``jury`` (a jury file, or a loaded `Jury`), by row id."""
    from jurybox.judges import Jury
    from jurybox.rubrics import load_rubric

    local = jury if isinstance(jury, Jury) else Jury.load(jury)
    try:
        verdicts = local.score(load_rubric(RUBRIC), items)
    finally:
        if local is not jury:
            local.close()
    return {it.id: v.to_record(input=_input(it)) for it, v in zip(items, verdicts)}


def _input(item: Any) -> str:
    from jurybox.rubrics import input_hash

    return input_hash(item)


@pytest.fixture(scope="module")
def service(shared_ray, jury_file):
    with serving(jury_file) as url:
        yield url


def body(rows: list[dict]) -> bytes:
    return json.dumps({"rubric": RUBRIC, "items": rows}).encode()


def post(url: str, rows: list[dict]) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/score",
        content=body(rows),
        headers={"content-type": "application/json"},
        timeout=600,
    )


def opened(url: str, rows: list[dict]) -> socket.socket:
    """A request sent on a raw socket, its answer never read: closing it is a client leaving."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    payload = body(rows)
    sock.sendall(
        b"POST /v1/score HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (host.encode(), len(payload), payload)
    )
    return sock


def depth(url: str) -> float:
    """Requests waiting for a slot plus batches judging (the service's queue gauge)."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    match = re.search(r"^jurybox_queue_depth(?:\{[^}]*\})? (\S+)$", text, re.M)
    assert match, text[:2000]
    return float(match.group(1))


def until(ready: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.05)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except Exception as exc:  # shown by the assertion that reads it
            out["value"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def as_offline(records: list[dict], offline: dict[str, dict], ids: list[str]) -> list[dict]:
    """The offline verdicts of the rows ``ids`` were made of, under the ids sent (the input
    hash covers the id)."""
    from jurybox.rubrics import input_hash

    by_id = {it.id: it for it in ITEMS}
    return [
        {
            **offline[source],
            "id": r["id"],
            "input": input_hash(by_id[source].model_copy(update={"id": r["id"]})),
        }
        for r, source in zip(records, ids)
    ]


def leave_a_merged_batch(
    url: str, leaver_first: bool, generate_s: float | None, slots: int = 4
) -> httpx.Response:
    """Holders take the ``slots`` slots; the leaver and the stayer wait and are merged (the
    leaver opening the batch, or joining it); once the holders are done and the merged batch
    is being judged, the leaver closes its socket, a third of ``generate_s`` later (None: of
    the holders' time, from their start until the merged batch began: how long a batch of
    them takes here). Returns the stayer's answer."""
    began = time.monotonic()
    holders = [in_thread(lambda k=k: post(url, [ROWS[k % 2]])) for k in range(slots)]
    until(lambda: depth(url) == slots, "every slot held")
    leaver = stayer = None
    for role in ("leaver", "stayer") if leaver_first else ("stayer", "leaver"):
        before = depth(url)
        if role == "leaver":
            leaver = opened(url, [{**ROWS[0], "id": "leaver"}])
        else:
            stayer = in_thread(lambda: post(url, [{**ROWS[0], "id": "stayer"}]))
        until(lambda b=before: depth(url) == b + 1, f"the {role} waiting")
    until(lambda: depth(url) == 1, "the merged batch judged")
    time.sleep((time.monotonic() - began if generate_s is None else generate_s) / 3)
    assert leaver is not None and stayer is not None
    leaver.close()
    for thread, out in [*holders, stayer]:
        thread.join(600)
        assert isinstance(out["value"], httpx.Response) and out["value"].status_code == 200, out
    return stayer[1]["value"]


@pytest.mark.parametrize("leaver_first", [True, False], ids=["leaver-first", "innocent-first"])
def test_a_client_leaving_a_merged_batch_fails_no_one_merged_with_it(
    service, offline, leaver_first
):
    got = leave_a_merged_batch(service, leaver_first, DELAY_S).json()["verdicts"]
    assert_same_verdicts(got, as_offline(got, offline, ["good"]))


CLIENTS = 64


def test_sixty_four_clients_with_leavers_among_them_get_the_offline_verdicts(service, offline):
    """64 clients at once, each one request of one or two rows. A quarter leave: they come
    first (so that they hold the slots and open the batches the others join) and close their
    sockets after a random 0.5 s to two generates (while waiting, or while judged)."""
    rng = random.Random(59)
    plans = []
    for c in range(CLIENTS):
        sources = [rng.choice(["good", "bad"]) for _ in range(rng.choice([1, 2]))]
        rows = [{**ROWS[0 if s == "good" else 1], "id": f"c{c}-{k}"} for k, s in enumerate(sources)]
        plans.append((c < CLIENTS // 4, rng.uniform(0.5, 2 * DELAY_S), rows, sources))

    def client(leaves: bool, after: float, rows: list[dict]) -> Any:
        if not leaves:
            time.sleep(0.3)  # the leavers first
            return post(service, rows)
        sock = opened(service, rows)
        time.sleep(after)
        sock.close()
        return None

    began = time.monotonic()
    threads = [in_thread(lambda p=p: client(*p[:3])) for p in plans]
    for thread, _ in threads:
        thread.join(600)
    seconds = time.monotonic() - began
    statuses: dict[int, int] = {}
    mismatches = 0
    for (leaves, _, _, sources), (_, out) in zip(plans, threads):
        if leaves:
            continue
        response = out["value"]
        assert isinstance(response, httpx.Response), response
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.status_code == 200:
            got = response.json()["verdicts"]
            try:
                assert_same_verdicts(got, as_offline(got, offline, sources))
            except AssertionError:
                mismatches += 1
    connected = sum(not p[0] for p in plans)
    assert statuses == {200: connected}, statuses
    assert mismatches == 0
    assert seconds < 300, f"{CLIENTS} clients took {seconds:.0f} s"
    assert depth(service) == 0  # nothing left waiting or judging
