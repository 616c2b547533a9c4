"""The HTTP API of a labelling session over judged items, and the page that uses it.

The API is what the page uses; other tools may use it too. Every error is ``{"error": {"type",
"message", "field"}}`` with a 4xx status naming the field at fault, and nothing is written for
it.

- ``GET /api/next?rater=R``: the next item for rater R (id, fields, images, criteria with their
  scales, why it was chosen, progress); 204 when the goal is met or nothing is left for R.
- ``POST /api/labels`` ``{"id", "rater", "labels": {criterion: value}}``: save a label (200 with
  the judges' votes on the item, now that the rater has judged it, and the progress).
- ``POST /api/skip`` ``{"id", "rater", "reason"}``; ``POST /api/undo`` ``{"rater"}`` (withdraws
  the rater's latest label: the item is offered again).
- ``GET /api/progress``: labelled items, labels per rater, the goal's estimates with their
  intervals, whether the target width is reached.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from jurybox.serving.errors import BadRequest, Invalid, RequestProblem, Unauthorized
from jurybox.serving.labelling.session import LabellingSession
from jurybox.serving.problems import body, problem_for

PAGE = Path(__file__).with_name("page.html")


def build_app(session: LabellingSession, token: str | None = None) -> FastAPI:
    """The FastAPI app of a session: the page at ``/`` and the API under ``/api``.

    Args:
        session: The labelling session the routes answer from.
        token: A bearer token required on /api (``?token=`` for images), or None for none.

    Returns:
        The app, ready for uvicorn.
    """
    app = FastAPI(title="jurybox label", docs_url=None, redoc_url=None)

    def problem(exc: RequestProblem) -> JSONResponse:
        answer = problem_for(exc)
        return JSONResponse(body(answer), status_code=answer.status, headers=answer.headers)

    @app.exception_handler(RequestProblem)
    async def _refused(request: Request, exc: RequestProblem) -> JSONResponse:
        return problem(exc)

    @app.middleware("http")
    async def _auth(request: Request, call_next: Any) -> Response:
        if token is not None and request.url.path.startswith("/api/"):
            scheme, _, given = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer":  # an <img> cannot send a header: ?token= there
                given = (
                    request.query_params.get("token", "")
                    if request.url.path == "/api/image"
                    else ""
                )
            if not hmac.compare_digest(given.strip().encode(), token.encode()):
                return problem(Unauthorized("missing or wrong bearer token"))
        response: Response = await call_next(request)
        return response

    async def body_of(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise BadRequest("the body is not JSON") from None
        if not isinstance(body, dict):
            raise Invalid("the body must be a JSON object")
        return body

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return PAGE.read_text(encoding="utf-8")

    @app.get("/api/next")
    def next_item(rater: str = "") -> Response:
        out = session.next(rater)
        return Response(status_code=204) if out is None else JSONResponse(out)

    @app.post("/api/labels")
    async def save(request: Request) -> dict[str, Any]:
        return session.save(await body_of(request))

    @app.post("/api/skip")
    async def skip(request: Request) -> dict[str, Any]:
        return session.skip(await body_of(request))

    @app.post("/api/undo")
    async def undo(request: Request) -> dict[str, Any]:
        return session.undo(await body_of(request))

    @app.get("/api/progress")
    def progress_now() -> dict[str, Any]:
        return session.progress()

    @app.get("/api/image")
    def image(id: str, n: int = 0) -> Response:
        return FileResponse(session.image(id, n))

    return app
