"""Backends by name (jurybox.judges.backends.registry): the shipped ones, a package's through the
``jurybox.backends`` entry point group (examples/custom_backend, installed for real with pip into
a folder on the path of a `jurybox judge` run), and a program's through ``register``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.protocol import Generation
from jurybox.judges.backends.registry import backend_kind, kinds, register
from jurybox.rubrics import Item, load_rubric

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "custom_backend"
JURYBOX = [sys.executable, "-c", "from jurybox.serving.cli import main; main()"]


def test_a_package_s_backend_judges_through_the_entry_point_group(tmp_path):
    site, source = tmp_path / "site", tmp_path / "source"
    shutil.copytree(EXAMPLE, source)  # (a build writes beside the sources)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    out = tmp_path / "judged.jsonl"
    env = {**os.environ, "PYTHONPATH": str(site), "JURYBOX_VERDICT_CACHE": "off"}
    run = subprocess.run(
        [
            *JURYBOX,
            "judge",
            str(ROOT / "examples" / "mirage_mg.jsonl"),
            "--rubric",
            "mirage-mg",
            "--jury",
            str(EXAMPLE / "jury.yaml"),
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["status"] == "scored" for r in records)
    # Every criterion of mirage-mg is on 0-4: the lowest point everywhere, the formula 0.
    assert all(set(r["scores"].values()) == {0.0} for r in records), records[0]["scores"]
    assert {v["judge"] for r in records for v in r["votes"]} == {"lowest"}
    # The package's entry point declares its kind: a model known by name, not weights here.
    declared = subprocess.run(
        [
            sys.executable,
            "-c",
            "from jurybox.judges.backends.registry import backend_kind; "
            "print(backend_kind('lowest').kind)",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert declared.stdout.strip() == "remote", declared.stderr[-2000:]
    # Without the package on the path, the jury file names a backend nobody knows.
    env.pop("PYTHONPATH")
    run = subprocess.run(
        [
            *JURYBOX,
            "judge",
            str(ROOT / "examples" / "mirage_mg.jsonl"),
            "--rubric",
            "mirage-mg",
            "--jury",
            str(EXAMPLE / "jury.yaml"),
            "--out",
            str(tmp_path / "none.jsonl"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0 and "unknown backend 'lowest'" in run.stderr, run.stderr[-2000:]
    assert "jurybox.backends" in run.stderr


class Constant:
    """A program's own backend: every criterion's last point."""

    def __init__(self, spec):
        self.name = spec.name
        self.closed = False

    def generate(self, requests, cancelled=None):
        return [
            Generation(
                text=json.dumps(
                    {name: prop["enum"][-1] for name, prop in r.schema["properties"].items()}
                )
            )
            for r in requests
        ]

    def close(self):
        self.closed = True


def test_a_program_registers_its_own_backend(monkeypatch):
    from jurybox.judges.backends import registry

    monkeypatch.setattr(registry, "_registered", {})  # this process's registrations, undone after
    register("highest-for-tests", Constant)
    spec = JurySpec.model_validate(
        {
            "name": "mine",
            "judges": [{"name": "high", "model": "none", "backend": "highest-for-tests"}],
        }
    )
    item = Item(
        id="1", question="Why brown rings?", response="Early blight.", reference="Early blight."
    )
    with Jury(spec) as jury:
        (verdict,) = jury.score(load_rubric("mirage-mg"), [item])
    assert verdict.scores["weighted_sum"] == 1.0  # every criterion at 4 of 4
    assert "highest-for-tests" in kinds()


def test_unknown_and_shipped_names_are_refused_saying_why():
    with pytest.raises(ValueError, match=r"unknown backend 'nope': known backends are \["):
        JurySpec.model_validate(
            {"name": "j", "judges": [{"name": "a", "model": "m", "backend": "nope"}]}
        )
    with pytest.raises(ValueError, match="one of jurybox's own"):
        register("vllm", Constant)
    assert backend_kind("transformers").weights and backend_kind("replay").batches
    assert not backend_kind("openai").weights


# A backend's kind is the registry entry's word, never read from its name: a plugin for a remote
# API is a server's model, a plugin that loads weights is local weights, as the shipped ones are.


def _judge(backend, **fields):
    from jurybox.judges import JudgeSpec

    return JudgeSpec.model_validate({"name": "j", "model": "org/m", "backend": backend, **fields})


def test_a_remote_plugin_is_a_server_s_model_not_local_weights(monkeypatch):
    from jurybox.judges.backends import registry
    from jurybox.judges.weights import (
        local_tokenizer,
        model_config,
        unpinned_warnings,
        weights_identity,
    )

    monkeypatch.setattr(registry, "_registered", {})
    register("api-for-tests", Constant, kind="remote")
    assert backend_kind("api-for-tests").kind == "remote"
    assert not backend_kind("api-for-tests").weights
    assert weights_identity("org/m", None, "api-for-tests") == "served:org/m"
    assert weights_identity("org/m", None, "openai") == "served:org/m"  # as the shipped one
    assert unpinned_warnings([_judge("api-for-tests")]) == []
    assert model_config("org/m", None, "api-for-tests") is None
    assert local_tokenizer("org/m", None, "api-for-tests") == (
        None,
        "the judge's server tokenizes",
    )


def test_a_local_plugin_is_local_weights(monkeypatch):
    from jurybox.judges.backends import registry
    from jurybox.judges.weights import unpinned_warnings, weights_identity

    monkeypatch.setattr(registry, "_registered", {})
    register("weights-for-tests", Constant, kind="local")
    assert backend_kind("weights-for-tests").kind == "local"
    assert backend_kind("weights-for-tests").weights
    assert weights_identity("org/m", None, "weights-for-tests") == "hub:org/m@unpinned"
    assert weights_identity("org/m", "abc", "weights-for-tests") == "hub:org/m@abc"
    (warning,) = unpinned_warnings([_judge("weights-for-tests")])
    assert "org/m has no pinned revision" in warning


def test_kinds_and_capabilities_come_from_the_entry(monkeypatch):
    from jurybox.judges.backends import registry

    monkeypatch.setattr(registry, "_registered", {})
    shipped = {name: backend_kind(name).kind for name in ("transformers", "vllm", "openai")}
    assert shipped == {"transformers": "local", "vllm": "local", "openai": "remote"}
    assert backend_kind("replay").kind == "recording"
    with pytest.raises(ValueError, match="kind 'cloud'"):
        register("cloud-for-tests", Constant, kind="cloud")
    # Tensor parallelism is what an entry says it takes, not vLLM's by name.
    with pytest.raises(ValueError, match="tensor_parallel_size"):
        _judge("transformers", tensor_parallel_size=2)
    register("split-for-tests", Constant, tensor_parallel=True)
    assert _judge("split-for-tests", tensor_parallel_size=2).execution.tensor_parallel_size == 2
    # Loading beside the other judges is the entry's rule too.
    from jurybox.judges.jury import loads_side_by_side

    register("beside-for-tests", Constant, side_by_side=lambda spec: spec.model == "org/m")
    assert loads_side_by_side(_judge("beside-for-tests"))
    assert not loads_side_by_side(_judge("split-for-tests"))


def test_a_package_declares_its_kind_through_the_entry_point(monkeypatch, tmp_path, request):
    from importlib.metadata import EntryPoint

    from jurybox.judges.backends import registry
    from jurybox.judges.weights import weights_identity

    (tmp_path / "api_plugin_for_tests.py").write_text(
        "from jurybox.judges.backends.registry import BackendKind\n"
        "class Judge:\n"
        "    def __init__(self, spec):\n"
        "        self.name = spec.name\n"
        "BACKEND = BackendKind('any name', Judge, kind='remote')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    points = [
        EntryPoint("api-plugin", "api_plugin_for_tests:BACKEND", registry.ENTRY_POINTS),
        EntryPoint("bare-plugin", "api_plugin_for_tests:Judge", registry.ENTRY_POINTS),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: points)
    registry._entry_point_kinds.cache_clear()  # read once per import path: these, then the real
    request.addfinalizer(registry._entry_point_kinds.cache_clear)
    declared = backend_kind("api-plugin")
    assert (declared.name, declared.kind) == ("api-plugin", "remote")
    assert weights_identity("org/m", None, "api-plugin") == "served:org/m"
    # A factory alone says nothing of its kind: local weights, as before kinds were declared.
    assert backend_kind("bare-plugin").kind == "local"
    assert weights_identity("org/m", None, "bare-plugin") == "hub:org/m@unpinned"
    assert registry.make_backend(_judge("api-plugin")).name == "j"
