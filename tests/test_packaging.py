"""What jurybox imports, it declares (#61): every third-party module the package's sources import
comes from a distribution pyproject.toml names (in ``dependencies`` or an extra) or one such a
distribution always brings; Pillow, which the base install reads the items' images with, is a
base dependency the lock pins; jurybox-client reads them with its ``images`` extra, and says so
without it."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from wheel_helpers import LINKED

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# Modules imported directly whose distribution a declared one always requires (checked below).
CARRIED = {"huggingface_hub": "transformers", "pydantic_core": "pydantic", "starlette": "fastapi"}


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _declared(project: dict) -> dict[str, set[str]]:
    """Each declared distribution's name, and where it is declared (``base`` or the extras)."""
    out: dict[str, set[str]] = {}
    groups = {"base": project.get("dependencies", []), **project.get("optional-dependencies", {})}
    for group, requirements in groups.items():
        for text in requirements:
            out.setdefault(_name(Requirement(text).name), set()).add(group)
    return out


def _imported() -> dict[str, set[str]]:
    """Every third-party top-level module the package's sources import (at any depth, lazily or
    for types), with the files that import it."""
    folders = {"jurybox", *LINKED}  # jurybox's own files and the folders it links to
    out: dict[str, set[str]] = {}
    for folder in sorted(folders):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in ("jurybox", "__future__"):
                        out.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return out


def test_every_module_the_package_imports_is_declared():
    declared = _declared(PYPROJECT["project"])
    provides = md.packages_distributions()
    undeclared = {}
    for module, files in _imported().items():
        if module in CARRIED:
            carrier = CARRIED[module]
            assert _name(carrier) in declared, (module, carrier)
            needs = {_name(Requirement(r).name) for r in md.requires(carrier) or [] if ";" not in r}
            assert {_name(d) for d in provides.get(module, [])} & needs, (module, carrier)
            continue
        if not any(_name(d) in declared for d in provides.get(module, [])):
            undeclared[module] = sorted(files)
    assert not undeclared, f"imported, declared nowhere in pyproject.toml: {undeclared}"


def test_the_base_install_reads_images_with_a_pinned_pillow():
    """`jurybox judge` on a file with images reads them on the base install (rubrics/images.py),
    as transformers' Pillow image processors do for the judges that see them."""
    assert "rubrics/images.py" in _imported()["PIL"]
    assert "base" in _declared(PYPROJECT["project"])["pillow"]
    pins = dict(
        line.split("==", 1)
        for line in (ROOT / "locks" / "cpu.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert "pillow" in {_name(k) for k in pins}


def test_the_client_reads_images_with_its_extra_and_says_so_without_it(monkeypatch):
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())["project"]
    (range_here,) = [r for r in PYPROJECT["project"]["dependencies"] if r.startswith("pillow")]
    assert client["optional-dependencies"]["images"] == [range_here]
    assert "pillow" not in _declared({"dependencies": client["dependencies"]})

    from vision_helpers import LEAF

    from jurybox.rubrics.images import load_image

    monkeypatch.setitem(sys.modules, "PIL", None)  # as where Pillow is not installed
    with pytest.raises(ImportError, match=r"needs Pillow.*jurybox-client\[images\]"):
        load_image(str(LEAF))
