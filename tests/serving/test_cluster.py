"""The cluster path for real: a two-node Ray cluster on this machine, started with Ray's own CLI
(`ray start --head` and a second `ray start --address`, each node with its own CPUs, a custom
resource and its own temp dir), used as the README's cluster instructions say:
`jurybox judge --engine ray --address ...` from outside the cluster, and `ray job submit --
jurybox judge ... --address auto` on it. The judges are the replay jury (the subject is the
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

import pytest
from service_helpers import free_port

pytestmark = pytest.mark.models

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BIN = Path(sys.executable).parent


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
    env.update({"JURYBOX_TEST_CLUSTER": marker, "SPT_NOENV": "1",
                "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": uuid.uuid4().hex * 2,
                "DASHBOARD_METRIC_PORT": str(free_port()), "JURYBOX_VERDICT_CACHE": "off"})
    common = ["--dashboard-agent-listen-port=0", "--min-worker-port=0", "--max-worker-port=0",
              "--num-cpus=3", "--disable-usage-stats"]
    try:
        head = subprocess.run(
            [str(BIN / "ray"), "start", "--head", "--port=0", f"--temp-dir={dirs[0]}",
             f"--ray-client-server-port={free_port()}", f"--dashboard-port={dashboard}",
             "--include-dashboard=true", '--resources={"head_node": 1}', *common],
            env=env, capture_output=True, text=True, timeout=300)
        assert head.returncode == 0, head.stderr[-3000:]
        address = Path(dirs[0], "ray_current_cluster").read_text().strip()
        worker = subprocess.run(
            [str(BIN / "ray"), "start", f"--address={address}", f"--temp-dir={dirs[1]}",
             '--resources={"worker_node": 1}', *common],
            env=env, capture_output=True, text=True, timeout=300)
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


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_cluster_has_two_nodes_and_judges_as_the_local_engine(cluster, replay_jury,
                                                                 replay_tiny, tmp_path):
    from jurybox.rubrics import load_rubric
    from jurybox.serving.runs.local import judge_file

    address, _, env = cluster
    nodes = subprocess.run(
        [sys.executable, "-c", "import json, ray; ray.init(address=" + repr(address) +
         ", logging_level='ERROR'); print(json.dumps(sorted(k for n in ray.nodes() "
         "if n['Alive'] for k in n['Resources'] if k.endswith('_node'))))"],
        env=env, capture_output=True, text=True, timeout=300)
    assert nodes.returncode == 0, nodes.stderr[-2000:]
    assert json.loads(nodes.stdout.strip().splitlines()[-1]) == ["head_node", "worker_node"]

    out = tmp_path / "cluster.jsonl"
    run = subprocess.run(
        [str(BIN / "jurybox"), "judge", str(EXAMPLES / "mirage_mg.jsonl"), "--rubric",
         "mirage-mg", "--jury", str(replay_jury), "--engine", "ray", "--address", address,
         "--out", str(out), "--quiet"], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    local = tmp_path / "local.jsonl"
    judge_file(EXAMPLES / "mirage_mg.jsonl", load_rubric("mirage-mg"), replay_tiny, local)

    def comparable(path):
        return sorted(({k: r[k] for k in ("id", "status", "scores", "provenance", "input")}
                       for r in records(path)), key=lambda r: r["id"])
    assert comparable(out) == comparable(local)


def test_ray_job_submit_runs_jurybox_judge_on_the_cluster(cluster, replay_jury, tmp_path):
    _, dashboard, env = cluster
    out = tmp_path / "job.jsonl"
    began = time.monotonic()
    job = subprocess.run(
        [str(BIN / "ray"), "job", "submit", f"--address={dashboard}", "--",
         str(BIN / "jurybox"), "judge", str(EXAMPLES / "mirage_mg.jsonl"), "--rubric",
         "mirage-mg", "--jury", str(replay_jury), "--engine", "ray", "--address", "auto",
         "--out", str(out), "--quiet"], env=env, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-2000:]
    assert "succeeded" in job.stdout + job.stderr, time.monotonic() - began
    got = records(out)
    assert len(got) == 6 and all(r["status"] in ("scored", "unscored") for r in got)
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["status"] == "complete"
