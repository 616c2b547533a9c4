"""Every ``>>>`` example in jurybox's docstrings runs and shows what it says (doctest), so an
example cannot rot: a docstring that shows code it cannot run writes it as a code block."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The packages' root folders: jurybox/'s links (the one list of them, which setuptools follows).
PACKAGES = tuple(sorted(p.name for p in (ROOT / "jurybox").iterdir() if p.is_symlink()))


def modules_with_examples() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.append(".".join(("jurybox", *parts)).removesuffix(".__init__"))
    return found


@pytest.mark.parametrize("name", modules_with_examples())
def test_the_docstring_examples_run(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name the repository's files (examples/...)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, result
