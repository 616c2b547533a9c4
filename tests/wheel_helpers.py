"""Building jurybox's two wheels from a copy of the sources and reading what they hold, for
tests/test_wheels.py, tests/integrations/test_client_install.py and .ci/drift (what setuptools
finds through jurybox/'s links is what ships; an editable install would hide a missing file)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The root folders jurybox/ links to (jurybox/judges -> ../judges, ...): the packages' sources.
LINKED = tuple(sorted(p.name for p in (ROOT / "jurybox").iterdir() if p.is_symlink()))
#: The files a build reads besides the packages' folders.
PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE")
SKIPPED = ("__pycache__", "*.pyc", "*.egg-info", "build")


def copy_sources(to: Path) -> Path:
    """The sources both wheels are built from, copied to ``to`` (no build folder in the tree)."""
    ignore = shutil.ignore_patterns(*SKIPPED)
    for folder in ("client", "jurybox", *LINKED):  # jurybox/'s links stay links
        shutil.copytree(ROOT / folder, to / folder, ignore=ignore, symlinks=True)
    for name in PROJECT_FILES:
        shutil.copy2(ROOT / name, to / name)
    return to


def build_wheel(source: Path, project: str, out: Path) -> Path:
    """The wheel of ``project`` ("." for jurybox, "client" for jurybox-client) in ``out``.

    Built with this Python's setuptools (``pip wheel --no-deps --no-build-isolation``): no
    index, no isolated build environment.
    """
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.glob("*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(source / project)],
        check=True,
    )  # fmt: skip
    (wheel,) = set(out.glob("*.whl")) - before
    return wheel


def wheel_files(wheel: Path) -> set[str]:
    """The files a wheel installs into site-packages (its metadata folder left out)."""
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if ".dist-info/" not in name}


def source_files(root: Path = ROOT) -> set[str]:
    """Where each file of the packages' sources lands in the full install (``jurybox/...``):
    jurybox/'s own files and every file under its links (bytecode and caches left out)."""
    found = set()
    for folder, dirs, names in os.walk(root / "jurybox", followlinks=True):  # as setuptools does
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        here = Path(folder).relative_to(root).as_posix()
        found.update(f"{here}/{name}" for name in names if not name.endswith(".pyc"))
    return found


def packages(files: set[str]) -> set[str]:
    """The packages among ``files`` (each folder with an ``__init__.py``), dotted."""
    return {
        name.removesuffix("/__init__.py").replace("/", ".")
        for name in files
        if name.endswith("/__init__.py")
    }
