"""`check_reward`: ``jurybox check-reward``'s probe, called from Python, against a stand-in for
the service's OpenRLHF route (a plain HTTP server: the probe's requests and its words about the
answers; the real service's answers are tests/integrations/test_check_reward.py's)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from jurybox.serving.cli import app
from jurybox.serving.runs.reward_check import RewardCheck, check_reward

SEEN: list[dict] = []


class _Route(BaseHTTPRequestHandler):
    """OpenRLHF's route as the service answers it: 401 without Basic auth, else one reward."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        SEEN.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if self.headers.get("Authorization") is None:
            answer, status = {"error": {"message": "no token", "field": None}}, 401
        else:
            answer, status = {"rewards": [0.75], "extra_logs": {}}, 200
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Route)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    SEEN.clear()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_good_openrlhf_url_gets_the_probe_s_reward(service):
    said: list[str] = []
    url = f"http://jurybox:t0ken@{service}/v1/openrlhf/general?unscored=0"
    found = check_reward(url, say=said.append)
    assert isinstance(found, RewardCheck) and found.ok and found.problems == []
    assert found.notes == said and said[-1].startswith("ok: reward 0.75 for the probe")
    (request,) = SEEN
    assert request["path"] == "/v1/openrlhf/general?unscored=0"
    assert request["auth"].startswith("Basic ") and request["labels"] == [
        "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."
    ]


def test_a_missing_token_is_said_and_the_command_exits_1(service):
    url = f"http://{service}/v1/openrlhf/general?unscored=0"
    found = check_reward(url, unscored="error", label="")
    assert not found.ok
    (problem,) = found.problems
    assert "401" in problem and "no token was sent" in problem
    assert SEEN[0]["path"].endswith("?unscored=error") and SEEN[0]["labels"] == [""]
    r = CliRunner().invoke(app, ["check-reward", url])
    assert r.exit_code == 1 and "problem: the service answered 401" in r.output


def test_no_rubric_is_a_problem_before_any_request():
    found = check_reward("http://127.0.0.1:9", say=print)
    assert found.problems[0].startswith("name the rubric") and found.notes == []
