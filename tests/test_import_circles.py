"""No import circle anywhere in jurybox (#37), type-only imports included (#53): .ci/cycles.py,
which .ci/check runs, finds none; and it does find one where two modules import each other."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_of_jurybox_imports_itself_round_a_circle():
    run = subprocess.run(
        [sys.executable, ".ci/cycles.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert run.returncode == 0 and "import circles: 0" in run.stdout, run.stdout + run.stderr


def test_the_check_finds_a_circle(tmp_path):
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text("def f():\n    from circled import a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circled import d\n"
    )
    (package / "d.py").write_text("from circled import c\n")
    code = (
        "import sys; sys.path.insert(0, '.ci'); from cycles import circles; "
        "print(circles('circled'))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": ""},
    )
    assert run.returncode == 0, run.stderr
    # c <-> d is for type checkers only, and still a circle (#53): both are found.
    assert run.stdout.strip() == "[['circled.a', 'circled.b'], ['circled.c', 'circled.d']]"
