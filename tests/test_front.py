"""``import jurybox`` is the front door: every name a Python user needs, each resolved when first
used (so the import itself pulls in no numpy, torch, Ray or vLLM), and the version."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import jurybox


def test_the_front_names_resolve_and_the_import_stays_cheap():
    probe = (
        "import json, sys, jurybox; heavy = [m for m in ('numpy', 'torch', 'ray', 'vllm', "
        "'transformers') if m in sys.modules]; print(json.dumps([jurybox.__version__, "
        "heavy]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    got, heavy = json.loads(out.stdout)
    assert got == version("jurybox") and heavy == []
    for name in jurybox.__all__:
        assert getattr(jurybox, name) is not None, name
    assert set(jurybox.__all__) <= set(dir(jurybox))
    assert jurybox.Jury is __import__("jurybox.judges", fromlist=["Jury"]).Jury
    try:
        jurybox.nothing  # noqa: B018
    except AttributeError as exc:
        assert "no attribute 'nothing'" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
