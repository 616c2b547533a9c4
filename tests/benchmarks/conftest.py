"""Fixtures of the benchmark-pack tests (helpers are in bench_helpers.py)."""

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "benchmarks"


@pytest.fixture
def examples():
    """The sample files in each benchmark's own format (examples/benchmarks)."""
    return EXAMPLES
