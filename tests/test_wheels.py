"""What the two wheels hold, built from the sources as a user's pip builds them (not the
editable install the rest of the suite runs on, which would hide a file the wheel lacks): the
packages are found through jurybox/'s links (pyproject.toml lists none), so the full wheel holds
every file of the sources; jurybox-client's holds exactly its part (jurybox._lazy's
CLIENT_PACKAGES, which client/pyproject.toml's patterns must match); and every name a package's
front exports resolves to a module its wheel holds, the client's front exporting only those.
tests/integrations/test_client_install.py installs the client's wheel into a fresh environment
and scores through a live service; .ci/drift installs jurybox's and runs the smoke test."""

from __future__ import annotations

import ast
import importlib

import pytest
from wheel_helpers import (
    LINKED,
    ROOT,
    build_wheel,
    copy_sources,
    packages,
    source_files,
    wheel_files,
)

from jurybox._lazy import client_exports, client_holds

#: The package fronts whose names resolve lazily (jurybox/_lazy.py), each with its _EXPORTS.
FRONTS = ("jurybox", "jurybox.serving", "jurybox.calibration", "jurybox.benchmarks")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheels")
    source = copy_sources(tmp / "source")
    full = build_wheel(source, ".", tmp / "dist")
    client = build_wheel(source, "client", tmp / "dist")
    assert full.name.startswith("jurybox-") and client.name.startswith("jurybox_client-")
    return wheel_files(full), wheel_files(client)


def exports(front: str) -> dict[str, str]:
    """A front's names -> their modules (absolute), as its _EXPORTS table says."""
    table = importlib.import_module(front)._EXPORTS
    return {
        name: module if module.startswith("jurybox.") else f"{front}.{module}"
        for name, module in table.items()
    }


def module_file(module: str, files: set[str]) -> str | None:
    path = module.replace(".", "/")
    found = [f for f in (f"{path}.py", f"{path}/__init__.py") if f in files]
    return found[0] if found else None


def defines(source: str, name: str) -> bool:
    """Whether a module's text defines or imports ``name`` at its top level (or lazily exports it)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return f'"{name}"' in source  # a front's own lazy name


def test_every_root_package_is_a_link_in_jurybox():
    # The list of folders is jurybox/'s links; a root package without one would not ship.
    roots = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - {"jurybox"}
    assert roots == set(LINKED)
    for name in LINKED:
        assert (ROOT / "jurybox" / name).resolve() == ROOT / name


def test_the_wheel_holds_every_file_of_the_sources(wheels):
    full, _ = wheels
    sources = source_files()
    assert sources - full == set(), "in the sources, not in the wheel"
    assert full - sources == set(), "in the wheel, not in the sources"
    assert packages(full) >= {"jurybox", *(f"jurybox.{name}" for name in LINKED)}


def test_the_client_wheel_holds_exactly_its_part(wheels):
    full, client = wheels
    want = {path for path in full if client_holds(path)}
    assert client - want == set(), "in the client's wheel, not in its part (_lazy.CLIENT_PACKAGES)"
    assert want - client == set(), "in its part (_lazy.CLIENT_PACKAGES), not in the client's wheel"
    assert "jurybox/serving/service/client.py" in client
    # (#62: the shipped exploit suite is package data, in both wheels: the adapters' pre-checks
    # and canaries read it where only jurybox-client is installed)
    suite = "jurybox/rubrics/suites/exploits-v1.yaml"
    assert suite in full and suite in client
    assert not any(p.startswith("jurybox/serving/runs/") for p in client)
    assert {p for p in client if p.startswith("jurybox/calibration/")} == {
        "jurybox/calibration/__init__.py",
        "jurybox/calibration/errors.py",
        "jurybox/calibration/stats/__init__.py",
        "jurybox/calibration/stats/sequences.py",
        "jurybox/calibration/stats/monitors.py",
    }  # (#62: the drift monitor, for the adapters' guard)


@pytest.mark.parametrize("front", FRONTS)
def test_a_front_s_names_resolve_in_each_wheel(wheels, front):
    full, client = wheels
    names = exports(front)
    held = client_exports(front, names)
    for name, module in names.items():
        path = module_file(module, full)
        assert path is not None, f"{front}.{name}: {module} is not in the wheel"
        assert defines((ROOT / path).read_text(), name), f"{front}.{name}: not in {module}"
    if module_file(front, client) is None:
        assert held == set()
        return
    for name, module in names.items():
        in_client = module_file(module, client) is not None
        assert (name in held) == in_client, (
            f"{front}.{name}: listed {name in held}, held {in_client}"
        )


def test_the_client_s_front_leaves_out_what_needs_the_full_install():
    # (#61: jurybox-client's front exported judge_file, jurybox.serving build_jury_app and
    # ServiceConfig, whose modules it does not hold.)
    assert set(exports("jurybox")) - client_exports("jurybox", exports("jurybox")) == {"judge_file"}
    assert client_exports("jurybox.serving", exports("jurybox.serving")) == {"Client", "RemoteJury"}
