"""What every request to the scoring service passes before its route runs, cheapest first.

One client's share of the replica, auth (a bearer token, or Basic credentials whose password is
it), the drain, the body's size and the time it may take to arrive; each refusal a JSON error
(`jurybox.serving.problems`). Used by the ingress's middleware
(`jurybox.serving.service.ingress.build_app`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from jurybox.serving.errors import (
    BadRequest,
    LengthRequired,
    Overloaded,
    SlowBody,
    TooLarge,
    Unauthorized,
    Unavailable,
)
from jurybox.serving.problems import body, problem_for
from jurybox.serving.service.calls import RETRY_AFTER_UNAVAILABLE_S
from jurybox.serving.service.gate import CLIENT

if TYPE_CHECKING:
    from jurybox.serving.service.scoring import ScoringService


def problem_response(error: BaseException) -> JSONResponse:
    """``error`` as the JSON answer every error is (`jurybox.serving.problems.problem_for`'s)."""
    problem = problem_for(error)
    return JSONResponse(body(problem), status_code=problem.status, headers=problem.headers)


async def checked(service: ScoringService, request: Request, call_next: Any) -> Response:
    """The checks every request passes before its route runs, cheapest first.

    Each refusal a JSON error: one client's share of the replica, auth, drain, the body's size and
    the time it may take to arrive.
    """
    client = request.client.host if request.client is not None else ""
    CLIENT.set(client)  # (the route runs in a copy of this context: `ScoringService` reads it)
    with service.clients.held(client) as admitted:
        if not admitted:
            limit = service.limits.max_client_requests
            return problem_response(
                Overloaded(
                    f"this client has {limit} requests open "
                    f"here already (max_client_requests); wait for them, or "
                    "send more items per request",
                    retry_after=1,
                )
            )
        authorization = request.headers.getlist("authorization")
        if len(authorization) > 1:
            return problem_response(
                BadRequest(
                    f"the request has {len(authorization)} Authorization headers; send one",
                )
            )
        given = _given_token(authorization[0] if authorization else "")
        if (
            request.url.path.startswith("/v1/")
            and service.token is not None
            and not hmac.compare_digest(given, service.token.encode())
        ):
            return problem_response(
                Unauthorized(
                    "missing or wrong bearer token "
                    "(Authorization: Bearer <token>; a client that can only "
                    "put it in the URL: http://jurybox:<token>@host/...)",
                    scheme="Bearer",
                )
            )
        if service.replica.draining and request.url.path.startswith(
            ("/v1/score", "/v1/groups", "/v1/openrlhf/")
        ):
            return problem_response(
                Unavailable(
                    "the service is shutting down; retry later (or at another replica)",
                    retry_after=RETRY_AFTER_UNAVAILABLE_S,
                )
            )
        limit = service.limits.max_body_bytes
        length = request.headers.get("content-length")
        too_large = TooLarge(
            f"the request body is larger than the "
            f"service's limit of {limit} bytes (max_body_bytes)",
        )
        if length is not None and length.isdigit() and int(length) > limit:
            return problem_response(too_large)
        if length is None and request.method in ("POST", "PUT", "PATCH"):
            # A chunked upload is refused before any of it is read: Ray Serve's replica pulls
            # a request's body from its proxy eagerly, whatever the app reads, so a stream
            # counted up to the limit would still have buffered all that arrived meanwhile
            # (100 MB: +155 MB in the ingress). Every JSON client sends Content-Length.
            return problem_response(
                LengthRequired(
                    "the request has no "
                    "Content-Length (a chunked body); send the body with its "
                    f"Content-Length, at most {limit} bytes (max_body_bytes)",
                )
            )
        if length is not None and request.method in ("POST", "PUT", "PATCH"):
            # A body that trickles in holds a slot of the replica for as long as it takes:
            # it must arrive within body_timeout_s (the route reads it again, from memory).
            timeout = service.limits.body_timeout_s
            try:
                await asyncio.wait_for(request.body(), timeout)
            except TimeoutError:
                return problem_response(
                    SlowBody(
                        f"the request body did not arrive "
                        f"within {timeout:g} s (body_timeout_s); send it at "
                        "once",
                    )
                )
        return await call_next(request)


def request_id(request: Request) -> str:
    """The request's id for logs.

    The client's ``X-Request-ID``, else Ray Serve's own (what Serve answers in ``x-request-id``),
    else empty.
    """
    given = request.headers.get("x-request-id")
    if given:
        return given[:128]
    try:
        from ray import serve

        return str(serve.context._get_serve_request_context().request_id)
    except Exception:  # outside a Serve replica (tests, in-process)
        return ""


def _given_token(authorization: str) -> bytes:
    """The token a request gives: ``Bearer <token>``, or Basic credentials whose password is it.

    Basic credentials are what an HTTP client sends for ``http://user:<token>@host/...``, the only
    way OpenRLHF's reward client can give one. The scheme is case-insensitive (RFC 7235).
    """
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return given.strip().encode()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(given.strip(), validate=True)
        except (binascii.Error, ValueError):
            return b""
        return decoded.partition(b":")[2]
    return b""
