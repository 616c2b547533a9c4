from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Tests judge for real: a verdict cached by an earlier test (or run) would stand in for judging.
# The cache's own tests turn it on with a file of their own.
os.environ["JURYBOX_VERDICT_CACHE"] = "off"


@pytest.fixture(scope="session")
def tiny_jury():
    """The real tiny jury (SmolLM2 + Gemma 3 through transformers), loaded once per session."""
    from jurybox.judges import Jury

    jury = Jury.load("tiny")
    jury.load_backends()
    yield jury
    jury.close()
