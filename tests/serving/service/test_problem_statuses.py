"""``serving/problems.py`` says nothing else chooses a status code (#61): the service's modules
raise the problem they meet by name (`TooLarge`, `Overloaded`, ...: ``serving/errors.py``, which
knows nothing of HTTP) and problems.py alone says which status and kind each one is."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

from jurybox.serving import errors
from jurybox.serving.errors import RequestProblem, SlowBody, Unauthorized
from jurybox.serving.problems import STATUSES, problem_for

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
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, RequestProblem) and cls is not RequestProblem
    }
    assert named == set(STATUSES)
    for cls, (status, kind) in STATUSES.items():
        raised = cls("what is wrong", "items[0]", retry_after=3)
        back = pickle.loads(pickle.dumps(raised))  # raised in a worker process, answered here
        assert type(back) is cls
        answer = problem_for(back)
        assert (answer.status, answer.kind, answer.message, answer.field, answer.headers) == (
            status,
            kind,
            "what is wrong",
            "items[0]",
            {"Retry-After": "3", **HEADERS.get(cls, {})},
        )
        assert problem_for(answer) is answer


#: The headers a problem's class adds to its answer, whatever it carries.
HEADERS = {SlowBody: {"Connection": "close"}}


def test_an_unauthorized_answer_asks_for_the_scheme_it_names_and_only_then():
    asked = problem_for(Unauthorized("no token", scheme="Bearer"))
    assert (asked.status, asked.headers) == (401, {"WWW-Authenticate": "Bearer"})
    assert problem_for(Unauthorized("no token")).headers == {}


def test_the_problems_know_nothing_of_http():
    tree = ast.parse(Path(errors.__file__).read_text())
    imported = {
        alias.name if isinstance(node, ast.Import) else node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not {m for m in imported if m and m.split(".")[0] in ("fastapi", "starlette")}
    assert "jurybox.serving.problems" not in imported
    carried = {name for cls in STATUSES for name in vars(cls("x", "f", retry_after=1))}
    assert carried and not carried & {"status", "kind", "headers"}, carried


@pytest.mark.parametrize("cls", list(STATUSES), ids=lambda c: c.__name__)
def test_a_problem_moved_to_another_field_keeps_its_status(cls):
    problem = cls("items[0]: bad", "items[0]", retry_after=7)
    was = problem_for(problem)
    moved = problem_for(problem.moved("groups[2]: bad", "groups[2]"))
    assert (moved.status, moved.kind, moved.headers) == (was.status, was.kind, was.headers)
    assert (moved.message, moved.field) == ("groups[2]: bad", "groups[2]")


def test_the_error_family_s_answers_are_chosen_here_too():
    from jurybox.rubrics.errors import ExecutionError, InputError, InstallError

    def answer(exc: BaseException) -> tuple:
        got = problem_for(exc)
        return got.status, got.kind, got.message, got.field

    assert answer(InputError("bad", field="items[1]")) == (
        422,
        "invalid_request",
        "bad",
        "items[1]",
    )
    assert answer(ExecutionError("judge down")) == (503, "unavailable", "judge down", None)
    assert answer(InstallError("needs torch")) == (500, "internal", "needs torch", None)
    assert answer(KeyError("x"))[:2] == (500, "internal")
    assert answer(KeyError("x"))[2].startswith("KeyError: the service failed")
