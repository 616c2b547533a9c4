"""Starting the real scoring service (real Ray, real Serve, real HTTP on 127.0.0.1) for a test
module, and the checks the service tests share."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

QUIET = {"log_level": "WARNING", "enable_access_log": False}


# The session's service (``user_service`` in tests/conftest.py): `jurybox serve` over the replay
# jury, started as a user starts it, with a token, tight limits and two ingress replicas.
USER_SERVICE_DELAY_S = 2.0  # each generate: long enough to kill a replica or stop it mid-request
USER_SERVICE_TOKEN_ENV = "JURYBOX_TEST_TOKEN"
USER_SERVICE_TOKEN = "s3cret-token-for-tests"
USER_SERVICE_AUTH = {"Authorization": f"Bearer {USER_SERVICE_TOKEN}"}
USER_SERVICE_INGRESS_REPLICAS = 2  # each scores 1 request at once and queues 1
USER_SERVICE_MAX_PROMPT_TOKENS = 1024  # longer prompts are unscored votes (judges' prompts: ~600)
#: A question that makes an item unscored on the session's service (its prompt over 1024 tokens).
LONG_QUESTION = ("Please consider this long description of the field before answering. " * 60)[
    :4000
] + " What is wrong with my tomatoes?"


@contextmanager
def refused() -> Iterator[Any]:
    """``pytest.raises`` for the problem a request meets; its ``value``: the problem's HTTP answer.

    The service raises its problems by name (`jurybox.serving.errors`); ``value`` is the answer
    ``serving/problems.py`` maps it to (status, kind, message, field, headers).
    """
    import pytest

    from jurybox.serving.errors import RequestProblem
    from jurybox.serving.problems import problem_for

    got = SimpleNamespace(value=None)
    with pytest.raises(RequestProblem) as info:
        yield got
    got.value = problem_for(info.value)


def user_service_limits() -> Any:
    from jurybox.serving.service.config import Limits

    return Limits(
        max_body_bytes=64 * 1024,
        max_items=4,
        max_field_chars=5000,
        max_concurrent=2,
        max_queued=2,
        request_timeout_s=600,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_SERVE_PORT: list[int] = []  # the shared Ray's Serve HTTP port, once started


@contextmanager
def running_service(
    config, env: dict[str, str] | None = None, ready_timeout: float = 900.0, backend_factory=None
):
    """Serve ``config`` (a ServiceConfig) until the block ends; yields the base URL.
    ``backend_factory`` replaces the judges' backends (see ``jury_app``).

    On a Ray already running in this process (the tests' ``shared_ray``), Serve is started
    once and each block deploys its application and deletes it at its end: a Ray and a Serve
    started per module were seconds each. Otherwise (perf scripts) the block starts its own Ray
    with ``env`` in the environment its replicas inherit, and stops it."""
    import ray
    from ray import serve

    from jurybox.serving.service.builder import APP_NAME, jury_app

    shared = ray.is_initialized()
    if shared and env:
        raise ValueError("env reaches the replicas only through a Ray of the block's own")
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})  # before ray.init: replicas inherit the environment
    if not shared:
        # Logical CPUs: two judge replicas, the ingress and Serve's actors on a 2-core machine.
        ray.init(num_cpus=8, include_dashboard=False, logging_level="WARNING")
    try:
        if not shared or not _SERVE_PORT:
            _SERVE_PORT[:] = [free_port()]
            serve.start(
                http_options={"host": "127.0.0.1", "port": _SERVE_PORT[0]}, logging_config=QUIET
            )
        serve.run(
            jury_app(config, backend_factory), name=APP_NAME, route_prefix="/", logging_config=QUIET
        )
        url = f"http://127.0.0.1:{_SERVE_PORT[0]}"
        wait_healthy(url, ready_timeout)
        yield url
    finally:
        try:
            if shared:
                serve.delete(APP_NAME)
            else:
                serve.shutdown()
        finally:
            if not shared:
                _SERVE_PORT.clear()
                ray.shutdown()
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def shutdown_shared_ray() -> None:
    """Stop the shared Ray (and its Serve, if one was started)."""
    import ray

    if _SERVE_PORT:
        from ray import serve

        serve.shutdown()
        _SERVE_PORT.clear()
    ray.shutdown()


@contextmanager
def serving_as_users_do(
    args: list[str], log: Path, env: dict[str, str] | None = None, ready_timeout: float = 900.0
):
    """``jurybox serve ARGS --port P`` in its own process, started by the installed console
    script as the README says, until the block ends (then Ctrl-C, as a user stops it, after
    which it must exit 0); yields the base URL. Its output goes to ``log``. (.ci/smoke.py uses
    it too.)"""
    port = free_port()
    jurybox = Path(sys.executable).with_name("jurybox")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(jurybox), "serve", *args, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        # Ready as a user sees it (every deployment healthy, says `jurybox serve`); from then
        # on /healthz must answer 200 within a minute (the proxy's routes catch up).
        deadline = time.monotonic() + ready_timeout
        while "jurybox is serving" not in log.read_text(errors="replace"):
            assert proc.poll() is None, (
                f"jurybox serve exited {proc.returncode}:\n{log.read_text()}"
            )
            assert time.monotonic() < deadline, f"not serving within {ready_timeout} s"
            time.sleep(1)
        wait_healthy(url, 60, proc, log)
        yield url
    finally:
        interrupt(proc, 120)
    assert proc.returncode == 0, (
        f"jurybox serve exited {proc.returncode} after Ctrl-C:\n"
        + log.read_text(errors="replace")[-3000:]
    )


def killed_when(
    command: list[str],
    ready: Callable[[], bool],
    what: str,
    env: dict[str, str] | None = None,
    timeout: float = 600.0,
) -> None:
    """Start ``command``, wait until ``ready()`` (``what`` says what for the failure), then
    SIGKILL it: a run killed mid-way, as a crash or an OOM kill leaves it."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + timeout
        while not ready():
            if time.time() > deadline:
                raise AssertionError(f"no {what} within {timeout:.0f} s")
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_healthy(
    url: str, timeout: float, proc: subprocess.Popen | None = None, log: Path | None = None
) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            output = log.read_text(errors="replace")[-3000:] if log else ""
            raise AssertionError(f"jurybox serve exited with {proc.returncode}:\n{output}")
        try:
            last = httpx.get(f"{url}/healthz", timeout=30)
            if last.status_code == 200:
                return
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(2)
    raise AssertionError(f"service not healthy within {timeout} s: {last!r}")


def comparable(record: dict) -> dict:
    """A verdict record without what legitimately differs between two runs of the same greedy
    judges in different processes: latency, and float noise in the expected scores and
    distributions (checked with a tolerance by :func:`assert_same_verdicts`)."""
    out = {k: v for k, v in record.items() if k not in ("votes", "p_a")}
    out["p_a"] = "p_a" in record  # present (pairwise) or not; its value is float noise
    if "stage" in out:  # a cascade's confidence is float noise too (its reason quotes it)
        out["stage"] = {k: v for k, v in out["stage"].items() if k not in ("confidence", "reason")}
    out["votes"] = [plain_vote(vote) for vote in record["votes"]]
    return out


def plain_vote(vote: dict) -> dict:
    """A vote without its latency and float noise (expected score, distribution)."""
    return {k: v for k, v in vote.items() if k not in ("latency_s", "expected", "distribution")}


# vLLM on a CPU is not bit-stable across processes: the same greedy answers, but logprobs that
# moved the expected scores by up to 0.09 between two processes of one CI run (2 cores).
VLLM_EXPECTED_TOLERANCE = 0.15


def assert_same_verdicts(got: list[dict], want: list[dict], tolerance: float = 1e-3) -> None:
    assert [comparable(r) for r in got] == [comparable(r) for r in want]
    for a, b in zip(got, want):
        if a.get("p_a") is not None or b.get("p_a") is not None:
            assert abs(a["p_a"] - b["p_a"]) < tolerance, (a["p_a"], b["p_a"])
        if (a.get("stage") or {}).get("confidence") is not None:
            assert abs(a["stage"]["confidence"] - b["stage"]["confidence"]) < tolerance
        assert_same_votes(a["votes"], b["votes"], tolerance)


def assert_same_votes(got: list[dict], want: list[dict], tolerance: float = 1e-3) -> None:
    """The same votes: equal but for latency and distribution, expected scores within
    ``tolerance``."""
    assert [plain_vote(v) for v in got] == [plain_vote(v) for v in want]
    for va, vb in zip(got, want):
        if vb.get("expected") is None:
            assert va.get("expected") is None
        else:
            assert abs(va["expected"] - vb["expected"]) < tolerance, (va, vb)


@contextmanager
def labelling(
    items: Path | None,
    judged: Path,
    labels: Path,
    port: int,
    *options: str,
    log: Path | None = None,
    env: dict[str, str] | None = None,
):
    """`jurybox label` in its own process until the block ends; yields (base URL, process).
    ``items`` None: `jurybox label VERDICTS`, the items from the verdicts' manifest."""
    log = log or labels.with_suffix(".log")
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("jurybox")),
                "label",
                *([str(items)] if items is not None else []),
                str(judged),
                "--labels",
                str(labels),
                "--port",
                str(port),
                *options,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/api/progress", timeout=5).status_code in (200, 401):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the labelling server did not start"
            time.sleep(0.3)
        yield url, proc
    finally:
        if proc.poll() is None:
            interrupt(proc, 30)


def interrupt(proc: subprocess.Popen, timeout: float) -> None:
    """Ctrl-C ``proc`` as a user would; killed if it has not exited within ``timeout`` s."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class _Call:
    """A handle call's answer: awaitable and cancellable, as Serve's DeploymentResponse."""

    def __init__(self, coro: Any) -> None:
        import asyncio

        self.task = asyncio.ensure_future(coro)

    def __await__(self) -> Any:
        return self.task.__await__()

    def cancel(self) -> None:
        self.task.cancel()


class _Method:
    def __init__(self, fn: Any, counts: dict[str, int], name: str) -> None:
        self.fn, self.counts, self.name = fn, counts, name

    def remote(self, *args: Any) -> _Call:
        self.counts[self.name] = self.counts.get(self.name, 0) + 1
        return _Call(self.fn(*args))


class LocalJudge:
    """A judge deployment's handle in this process (the in-process service tests: the
    ingress's app over a ScoringService through ASGI); its calls counted by method."""

    def __init__(self, server: Any) -> None:
        self.counts: dict[str, int] = {}
        self.votes = _Method(server.votes, self.counts, "votes")
        self.ping = _Method(server.ping, self.counts, "ping")
