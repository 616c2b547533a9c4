"""The one mapping from errors to HTTP answers, for every HTTP surface of jurybox.

Every HTTP surface (the scoring service and the labelling page) answers errors through it: every
error leaves as a JSON body ``{"error": {"type", "message", "field"}}`` with a 4xx for bad
requests and a 5xx only when the server itself cannot answer. The service and the page raise the
problem they meet by name (`TooLarge`, `Overloaded`, ...: `jurybox.serving.errors`, which knows
nothing of HTTP: a message, a field, seconds to wait) and `STATUSES` here is the one choice of a
status and a kind for each; `problem_for` turns any exception into its answer (`HTTPProblem`:
status, kind, message, field, headers), `body` is the answer's JSON.
`tests/serving/service/test_problem_statuses.py` checks that no module of ``serving/service`` or
``serving/labelling`` builds an answer itself. The names of ``serving/errors.py`` stay importable
from here.
"""

from __future__ import annotations

import re
from typing import Any

from jurybox.rubrics.errors import ExecutionError, InputError, JuryboxError
from jurybox.serving.errors import (
    BadRequest,
    Invalid,
    LengthRequired,
    NotFound,
    Overloaded,
    RequestProblem,
    SlowBody,
    TimedOut,
    TooLarge,
    Unauthorized,
    Unavailable,
    Unscorable,
)

__all__ = [  # the problems by name, kept importable from here
    "STATUSES",
    "BadRequest",
    "HTTPProblem",
    "Invalid",
    "LengthRequired",
    "NotFound",
    "Overloaded",
    "RequestProblem",
    "SlowBody",
    "TimedOut",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "Unscorable",
    "answer_to",
    "body",
    "http_problem",
    "problem_for",
    "validation_field",
    "validation_problem",
]


class HTTPProblem(Exception):
    """An answer other than 200 (`problem_for`'s; raised by the HTTP layer itself).

    It holds its status, its kind, what is wrong and the field at fault.

    Args:
        status: The HTTP status code.
        kind: The error's ``type``: invalid_request, unauthorized, not_found, too_large,
            overloaded, timeout, unscored, unavailable, internal.
        message: What is wrong, in words.
        field: The field at fault, if any.
        headers: Headers the answer carries (e.g. ``Retry-After``); none by default.
    """

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.field = status, kind, message, field
        self.headers = headers or {}

    def __reduce__(self) -> tuple[Any, ...]:  # raised in a worker process, answered here
        return HTTPProblem, (self.status, self.kind, self.message, self.field, self.headers)


#: The one choice of a status and a kind for each problem a request meets (serving/errors.py).
STATUSES: dict[type[RequestProblem], tuple[int, str]] = {
    Invalid: (422, "invalid_request"),
    Unscorable: (422, "unscored"),
    BadRequest: (400, "invalid_request"),
    Unauthorized: (401, "unauthorized"),
    NotFound: (404, "not_found"),
    SlowBody: (408, "timeout"),
    LengthRequired: (411, "invalid_request"),
    TooLarge: (413, "too_large"),
    Overloaded: (429, "overloaded"),
    Unavailable: (503, "unavailable"),
    TimedOut: (504, "timeout"),
}


def answer_to(problem: RequestProblem) -> HTTPProblem:
    """The HTTP answer to ``problem``: its class's status and kind (`STATUSES`), and its headers.

    Its wait as ``Retry-After``, `Unauthorized`'s scheme as ``WWW-Authenticate``, and
    ``Connection: close`` after a `SlowBody` (the rest of the body is never read).
    """
    status, kind = next(STATUSES[c] for c in type(problem).__mro__ if c in STATUSES)
    headers = {}
    if problem.retry_after is not None:
        headers["Retry-After"] = str(problem.retry_after)
    if isinstance(problem, Unauthorized) and problem.scheme is not None:
        headers["WWW-Authenticate"] = problem.scheme
    if isinstance(problem, SlowBody):
        headers["Connection"] = "close"
    return HTTPProblem(status, kind, problem.message, problem.field, headers)


# A Starlette (routing, body) error's kind by its status.
_HTTP_KINDS = {401: "unauthorized", 404: "not_found", 413: "too_large"}


def http_problem(status: int, detail: str, headers: dict[str, str] | None = None) -> HTTPProblem:
    """The answer for an error of the HTTP framework itself (no route, a body it cannot parse)."""
    if status == 400 and "parsing the body" in detail:
        detail = (
            "the body could not be read as JSON: it must be UTF-8 JSON, with no value "
            "nested beyond the parser's depth and no integer over 4,300 digits"
        )
    return HTTPProblem(status, _HTTP_KINDS.get(status, "invalid_request"), detail, headers=headers)


def problem_for(exc: BaseException) -> HTTPProblem:
    """The HTTP answer for an exception (the one place that decides).

    Args:
        exc: The exception raised while handling a request.

    Returns:
        ``exc`` itself when it is an HTTPProblem; its class's answer (`STATUSES`) for a
            `RequestProblem`; a 422 for an InputError, a 503 for an ExecutionError, a 500 with
            its message for another jurybox error, else a 500 naming only the error's type.
    """
    if isinstance(exc, HTTPProblem):
        return exc
    if isinstance(exc, RequestProblem):
        return answer_to(exc)
    if isinstance(exc, InputError):
        return HTTPProblem(422, "invalid_request", str(exc), exc.field)
    if isinstance(exc, ExecutionError):
        return HTTPProblem(503, "unavailable", str(exc))
    if isinstance(exc, JuryboxError):
        return HTTPProblem(500, "internal", str(exc))
    return HTTPProblem(
        500, "internal", f"{type(exc).__name__}: the service failed on this request; see its log"
    )


def body(problem: HTTPProblem) -> dict[str, Any]:
    """The JSON body of ``problem``: ``{"error": {"type", "message", "field"}}``."""
    return {"error": {"type": problem.kind, "message": problem.message, "field": problem.field}}


# How pydantic names the member of a union that failed (``items.0.id.str``): no field of ours.
_UNION_MEMBER = re.compile(
    r"^(str|int|float|bool|none|constrained-str|(dict|list|function-\w+)"
    r"\[.*\])$"
)


def validation_field(loc: tuple) -> str | None:
    """The field a validation error's location points at, as a path (None: none).

    ``("body", "items", 2, "reference")`` -> ``items[2].reference``: where the value was (the
    body, the query string, the path: the first element only, so that a field named ``query``
    keeps its name) is left out.
    """
    if loc and loc[0] in ("body", "query", "path", "header"):
        loc = loc[1:]
    parts = [p for p in loc if not (isinstance(p, str) and _UNION_MEMBER.match(p))]
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or None


def validation_problem(errors: list[dict[str, Any]]) -> HTTPProblem:
    """A FastAPI/pydantic validation failure as one 422 naming the first field at fault."""
    first: dict[str, Any] = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    field = validation_field(tuple(first.get("loc", ())))
    shown = []
    for err in errors[:5]:
        where = validation_field(tuple(err.get("loc", ()))) or "request"
        shown.append(f"{where}: {str(err.get('msg', 'invalid')).removeprefix('Value error, ')}")
    if first.get("type") == "json_invalid":
        return HTTPProblem(
            400,
            "invalid_request",
            "the body is not valid JSON: "
            + str(first.get("ctx", {}).get("error", first.get("msg"))),
            None,
        )
    if tuple(first.get("loc", ())) == ("body",) and first.get("type") in (
        "model_attributes_type",
        "dict_type",
        "missing",
    ):
        return HTTPProblem(
            400,
            "invalid_request",
            "the body must be a JSON object (sent with Content-Type: application/json)",
            None,
        )
    return HTTPProblem(422, "invalid_request", "; ".join(shown), field)
