"""The client-only install (client/pyproject.toml, the distribution ``jurybox-client``): built
from this repository's sources into a wheel, installed with its dependencies (the lock's
versions) into a fresh virtual environment of the system's Python that has no torch, and used
there as a trainer's environment uses it: the adapters import (verl's included), TRL's
reward function in URL mode against the session's live service gives /v1/score's reward, and
what needs the full jurybox (an in-process jury of local models, ``judge_file``) is refused
naming the install command.
Nothing of the judges' model libraries is installed (#51: every install of jurybox pulled
torch, transformers and xgrammar)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from wheel_helpers import build_wheel, copy_sources

pytestmark = pytest.mark.models

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "accelerate", "gguf", "xgrammar", "triton", "vllm", "ray")
#: What the fresh environment runs: the adapters' URL mode, timed from a cold start.
SCRIPT = """
import json, os, sys, time
began = time.perf_counter()
from jurybox.integrations.trl import jury_reward
from jurybox.integrations.verl import compute_score_sync
import jurybox.serving.service.client  # what url= loads before its first request
imported = time.perf_counter() - began
url, question, response, reference = sys.argv[1:5]
trl = jury_reward(url=url, rubric="mirage-mg", token_env="JURYBOX_TEST_TOKEN")
scored = trl(prompts=[question], completions=[response], reference=[reference])
import jurybox, jurybox.serving
fronts = {"jurybox": [jurybox.__all__, dir(jurybox)],
          "jurybox.serving": [jurybox.serving.__all__, dir(jurybox.serving)]}
refused = {}  # what needs the full jurybox: an error naming its install command
try:
    jury_reward(jury="tiny", rubric="mirage-mg")
except Exception as exc:
    refused["jury"] = [type(exc).__name__, str(exc)]
try:
    from jurybox import judge_file
except ImportError as exc:
    refused["judge_file"] = [type(exc).__name__, str(exc)]
print(json.dumps({"import_s": imported, "modules": sorted(sys.modules), "trl": scored,
                  "refused": refused, "fronts": fronts}))
"""


def test_the_client_installs_without_torch_and_scores_through_the_service(
    user_service, v1_score, tmp_path
):
    from service_helpers import USER_SERVICE_TOKEN, USER_SERVICE_TOKEN_ENV

    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]
    main = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert client["version"] == main["version"]
    # Built from a copy of the sources (no build folder left in the work tree).
    wheel = build_wheel(copy_sources(tmp_path / "source"), "client", tmp_path / "wheels")
    assert wheel.name.startswith("jurybox_client-")
    # A fresh environment of the base Python (not this one's packages), pip from this one.
    fresh = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(fresh)
    python = fresh / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-compile",
            "-c",
            str(ROOT / "locks" / "cpu.txt"),
            str(wheel),
        ],
        check=True,
    )
    site = next((fresh / "lib").glob("python3*/site-packages"))
    installed = {d.name.split("-")[0].lower() for d in site.glob("*.dist-info")}
    assert "jurybox_client" in installed and not installed & set(HEAVY), installed
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
    assert size < 300e6, size  # numpy and scipy: most of 186 MB (237 MB with bytecode)

    item = {
        "question": "What causes brown rings on tomato leaves after rain?",
        "response": "Early blight, a fungal disease.",
        "reference": "Early blight (Alternaria solani).",
    }
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env[USER_SERVICE_TOKEN_ENV] = USER_SERVICE_TOKEN
    # A first import writes the bytecode (pip was told not to), the script's is timed.
    subprocess.run(
        [
            str(python),
            "-c",
            "import jurybox.integrations.trl, jurybox.integrations."
            "verl, jurybox.serving.service.client",
        ],
        cwd=tmp_path,
        env=env,
        check=True,
    )
    ran = subprocess.run(
        [
            str(python),
            "-c",
            SCRIPT,
            user_service,
            item["question"],
            item["response"],
            item["reference"],
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert not {m.split(".")[0] for m in out["modules"]} & set(HEAVY)
    (want,) = (
        RewardSpec()
        .bind(load_rubric("mirage-mg"))
        .values(v1_score("mirage-mg", [{"id": "0", **item}]))
    )
    assert out["trl"] == [want]
    # The fronts list only what the client holds (#61: judge_file, build_jury_app and
    # ServiceConfig were listed).
    for front in ("jurybox", "jurybox.serving"):
        listed, seen = out["fronts"][front]
        assert not {"judge_file", "build_jury_app", "ServiceConfig"} & {*listed, *seen}, front
    assert {"Client", "Jury", "load_rubric"} <= set(out["fronts"]["jurybox"][0])
    assert {"Client", "RemoteJury"} <= set(out["fronts"]["jurybox.serving"][0])
    # What needs the full jurybox says so, naming the install command (#59: No module named
    # 'torch' at the first batch, No module named 'jurybox.serving.runs').
    command = "pip uninstall -y jurybox-client && pip install ."
    kind, message = out["refused"]["jury"]
    assert kind == "InstallError" and message.startswith(
        "jurybox: an in-process jury (jury=) whose judges run local models (smollm2-135m "
        "(transformers), gemma3-270m (transformers)) needs the full jurybox install (torch"
    )
    assert message.endswith(command)
    kind, message = out["refused"]["judge_file"]
    assert kind == "InstallError" and message.startswith(
        "jurybox.judge_file needs the full jurybox install (module jurybox.serving.runs is not "
        "here: this is jurybox-client"
    )
    assert message.endswith(command)
    print(
        f"jurybox-client: {size / 1e6:.0f} MB installed, adapters imported in "
        f"{out['import_s']:.2f} s"
    )
