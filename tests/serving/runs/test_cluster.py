"""The cluster path for real: a two-node Ray cluster on this machine, started with Ray's own CLI
(`ray start --head` and a second `ray start --address`, each node with its own CPUs, a custom
resource and its own temp dir), used as the docs' cluster instructions say (docs/guides/judging.md, service.md):
`jurybox judge --engine ray --address ...` from outside the cluster (its driver killed mid-way
and the run resumed), `ray job submit -- jurybox judge ... --address auto` on it, and `serve
deploy` of `jurybox serve --print-config`. The judges are the replay jury (the subject is the
cluster path, not a model).

The cluster shares nothing with the other tests' Rays: its address file is in its own temp dir
(a plain ``ray.init()`` elsewhere starts its own Ray, it never joins this one), it has its own
ports, and Ray 2.60's token authentication with a token of its own (``RAY_AUTH_TOKEN``, which
the nodes and every driver need). Every process it started is found by an environment marker
the nodes pass on to all their children (with ``SPT_NOENV=1``, so that Ray's process titles do
not blank it) and killed at the end; none may be left (`ray stop` would kill every Ray on the
machine, the other tests' too)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest
from service_helpers import assert_same_verdicts, free_port, killed_when

pytestmark = pytest.mark.models

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BIN = Path(sys.executable).parent
TOKEN = uuid.uuid4().hex


def marked(marker: str) -> list:
    import psutil

    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("JURYBOX_TEST_CLUSTER") == marker:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


@pytest.fixture(scope="module")
def cluster():
    """``(gcs address, dashboard URL, environment)`` of a two-node cluster; every process of it
    gone afterwards (checked)."""
    import psutil

    marker = uuid.uuid4().hex
    # Short temp dirs: Ray's unix sockets live under them (107 bytes in all).
    dirs = [tempfile.mkdtemp(prefix="jbh", dir="/tmp"), tempfile.mkdtemp(prefix="jbw", dir="/tmp")]
    dashboard = free_port()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(
        {
            "JURYBOX_TEST_CLUSTER": marker,
            "SPT_NOENV": "1",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": uuid.uuid4().hex * 2,
            "DASHBOARD_METRIC_PORT": str(free_port()),
            "JURYBOX_VERDICT_CACHE": "off",
            # The service's token: `serve deploy`'s replicas read it on the nodes.
            "JURYBOX_TOKEN": TOKEN,
        }
    )
    common = [
        "--dashboard-agent-listen-port=0",
        "--min-worker-port=0",
        "--max-worker-port=0",
        "--num-cpus=3",
        "--disable-usage-stats",
    ]
    try:
        head = subprocess.run(
            [
                str(BIN / "ray"),
                "start",
                "--head",
                "--port=0",
                f"--temp-dir={dirs[0]}",
                f"--ray-client-server-port={free_port()}",
                f"--dashboard-port={dashboard}",
                "--include-dashboard=true",
                '--resources={"head_node": 1}',
                *common,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert head.returncode == 0, head.stderr[-3000:]
        address = Path(dirs[0], "ray_current_cluster").read_text().strip()
        worker = subprocess.run(
            [
                str(BIN / "ray"),
                "start",
                f"--address={address}",
                f"--temp-dir={dirs[1]}",
                '--resources={"worker_node": 1}',
                *common,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert worker.returncode == 0, worker.stderr[-3000:]
        yield address, f"http://127.0.0.1:{dashboard}", env
    finally:
        procs = marked(marker)
        for proc in procs:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=60)
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        left = marked(marker)
        assert not left, f"the cluster's processes are still running: {left}"


def written(out: Path) -> list[dict]:
    """The records of a run's output (a file or a directory of shards), by id."""
    from jurybox.calibration import load_judge_output

    return sorted((r.to_dict() for r in load_judge_output(out).records), key=lambda r: r["id"])


def test_a_driver_killed_outside_the_cluster_is_resumed_by_ray_job_submit(cluster, tmp_path):
    """Both of the documented ways to judge on a cluster, one after the other on the same run:
    `jurybox judge --engine ray --address` from outside the cluster, SIGKILLed once a shard is
    written, then `ray job submit -- jurybox judge ... --address auto` on the cluster resuming
    it. Every item exactly once, the verdicts the local engine gives. The judge is the replay
    SmolLM2 taking 1 s per batch of 2 (``delay_s``): the first run is killed mid-way (the first
    shard comes a batch in, five batches are still to come), without a model's time."""
    import yaml
    from judging_helpers import write_replay_jury

    from jurybox.judges import Jury
    from jurybox.rubrics import load_rubric
    from jurybox.serving.runs.local import judge_file

    address, dashboard, env = cluster
    nodes = httpx.get(
        f"{dashboard}/api/v0/nodes",
        timeout=60,
        headers={"Authorization": f"Bearer {env['RAY_AUTH_TOKEN']}"},
    )
    assert nodes.status_code == 200, nodes.text
    alive = [n for n in nodes.json()["data"]["result"]["result"] if n["state"] == "ALIVE"]
    assert sorted(k for n in alive for k in n["resources_total"] if k.endswith("_node")) == [
        "head_node",
        "worker_node",
    ]

    rows = [json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()]
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        "".join(
            json.dumps({**row, "id": f"{row['id']}-{k}"}) + "\n" for k in range(2) for row in rows
        )
    )
    jury = write_replay_jury(tmp_path / "smol.yaml", delay_s=1.0, judges=("smollm2-135m",))
    spec = yaml.safe_load(jury.read_text())
    spec["judges"][0]["batch_size"] = 2
    jury.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    judge = [
        str(BIN / "jurybox"),
        "judge",
        str(preds),
        "--rubric",
        "mirage-mg",
        "--jury",
        str(jury),
        "--engine",
        "ray",
        "--out",
        str(out),
        "--shard-size",
        "1",
        "--quiet",
    ]
    killed_when(
        [*judge, "--address", address],
        lambda: out.exists() and len(list(out.glob("part-*"))) >= 1,
        "shard",
        env=env,
    )
    before = len(written(out))
    assert 1 <= before < 12

    job = subprocess.run(
        [
            str(BIN / "ray"),
            "job",
            "submit",
            f"--address={dashboard}",
            "--",
            *judge,
            "--address",
            "auto",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = job.stdout + job.stderr
    assert job.returncode == 0, log[-4000:]
    assert "succeeded" in log and f"{12 - before} judged now, {before} already in" in log, log[
        -4000:
    ]
    got = written(out)
    assert len({r["id"] for r in got}) == 12
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["status"] == "complete"

    local = Jury.load(jury)
    local.load_backends()
    for judge in local.spec.judges:  # the same jury and provenance, without the 1 s waits
        local.backend(judge).delay_s = 0.0
    try:
        judge_file(preds, load_rubric("mirage-mg"), local, tmp_path / "local.jsonl")
    finally:
        local.close()
    assert_same_verdicts(got, written(tmp_path / "local.jsonl"))


def test_serve_deploy_of_the_printed_config_serves_the_jury_on_the_cluster(
    cluster, replay_jury, replay_tiny, tmp_path
):
    """`jurybox serve --print-config` written to a file and deployed with Ray's `serve deploy`,
    the token's variable set on the nodes: /v1/score answers as `jurybox judge` does (the
    service's proxies on both nodes share the port), then `serve shutdown` takes it down."""
    from jurybox.rubrics import load_rubric
    from jurybox.serving.runs.local import judge_file

    _, dashboard, env = cluster
    port = free_port()
    printed = subprocess.run(
        [
            str(BIN / "jurybox"),
            "serve",
            "--jury",
            str(replay_jury),
            "--token-env",
            "JURYBOX_TOKEN",
            "--port",
            str(port),
            "--print-config",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert printed.returncode == 0, printed.stderr[-3000:]
    config = tmp_path / "jurybox-serve.yaml"
    config.write_text(printed.stdout)
    serve = str(BIN / "serve")
    deployed = subprocess.run(
        [serve, "deploy", str(config), f"--address={dashboard}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert deployed.returncode == 0, deployed.stdout[-2000:] + deployed.stderr[-3000:]
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    rows = [json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()]
    deadline, last = time.monotonic() + 300, None
    while True:
        try:
            last = httpx.post(
                f"{url}/v1/score",
                json={"rubric": "mirage-mg", "items": rows},
                headers=headers,
                timeout=120,
            )
            if last.status_code == 200:
                break
        except httpx.HTTPError as exc:
            last = exc
        status = subprocess.run(
            [serve, "status", f"--address={dashboard}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        if "DEPLOY_FAILED" in status or time.monotonic() > deadline:
            pytest.fail(f"no verdicts: {last!r}\n{status[-3000:]}")
        time.sleep(1)
    assert (
        httpx.post(
            f"{url}/v1/score", json={"rubric": "mirage-mg", "items": rows[:1]}, timeout=60
        ).status_code
        == 401
    )
    local = tmp_path / "local.jsonl"
    judge_file(EXAMPLES / "mirage_mg.jsonl", load_rubric("mirage-mg"), replay_tiny, local)
    assert_same_verdicts(
        last.json()["verdicts"], [json.loads(line) for line in local.read_text().splitlines()]
    )

    down = subprocess.run(
        [serve, "shutdown", "--yes", f"--address={dashboard}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert down.returncode == 0, down.stderr[-3000:]
    status = subprocess.run(
        [serve, "status", f"--address={dashboard}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "jurybox" not in status.stdout, status.stdout  # the application is gone
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/healthz", timeout=10)
