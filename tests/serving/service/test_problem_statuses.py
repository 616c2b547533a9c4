"""``serving/problems.py`` says nothing else chooses a status code (#61): the service's modules
raise the problem they meet by name (`TooLarge`, `Overloaded`, ...) and problems.py alone says
which status and kind each one is."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from jurybox.serving import problems
from jurybox.serving.problems import STATUSES, HTTPProblem, RequestProblem, problem_for

SERVING = Path(__file__).resolve().parents[3] / "serving"
# The HTTP surfaces whose modules raise problems by name (problems.py says their statuses).
SURFACES = (SERVING / "service", SERVING / "labelling")


def _status_choices(path: Path) -> list[tuple[str, int]]:
    """(function, line) of each HTTPProblem(...) built in ``path`` with a status of its own."""
    tree = ast.parse(path.read_text())
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "HTTPProblem":
                found.append((function.name, node.lineno))
    return found


def test_no_module_of_the_service_or_the_labelling_page_chooses_a_status():
    chosen = [
        f"{path.parent.name}/{path.name}:{line} ({function})"
        for surface in SURFACES
        for path in sorted(surface.glob("*.py"))
        for function, line in _status_choices(path)
    ]
    assert not chosen, chosen


def test_every_request_problem_has_its_status_here_and_survives_a_worker():
    named = {
        cls
        for cls in vars(problems).values()
        if isinstance(cls, type) and issubclass(cls, RequestProblem) and cls is not RequestProblem
    }
    assert named == set(STATUSES)
    for cls, (status, kind) in STATUSES.items():
        raised = cls("what is wrong", "items[0]", {"Retry-After": "3"})
        back = pickle.loads(pickle.dumps(raised))  # raised in a worker process, answered here
        assert type(back) is cls
        assert (back.status, back.kind, back.message, back.field, back.headers) == (
            status,
            kind,
            "what is wrong",
            "items[0]",
            {"Retry-After": "3"},
        )
        assert problem_for(raised) is raised


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422])
def test_a_problem_moved_to_another_field_keeps_its_status(status):
    problem = HTTPProblem(status, "x", "items[0]: bad", "items[0]", {"A": "b"})
    moved = problem.moved("groups[2]: bad", "groups[2]")
    assert (moved.status, moved.kind, moved.headers) == (status, "x", {"A": "b"})
    assert (moved.message, moved.field) == ("groups[2]: bad", "groups[2]")
