"""The service's HTTP layer: each route's FastAPI definition, in the module of its route.

One `fastapi.APIRouter` per feature, built around one replica's scoring service (`router`
in each module): `score` (POST /v1/score), `groups` (POST /v1/groups), `openrlhf`
(POST /v1/openrlhf/{rubric}), `info` (provenance, rubrics, the jury) and `health` (/healthz,
/metrics). Each calls its own module's serving logic (which knows nothing of HTTP) and turns its
answer into a response; the ingress (`jurybox.serving.service.ingress.build_app`) composes them,
in this order (the OpenAPI document's), with the checks every request passes first.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
from fastapi import Security
from fastapi.security import HTTPBearer

from jurybox.serving.service.protocol import ErrorResponse
from jurybox.serving.service.scoring import ScoringService

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 408, 411, 413, 422, 429, 503, 504)
}


def _plain(value: Any) -> Any:
    """What msgspec cannot encode itself: numpy scalars, as their Python values."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


encode = msgspec.json.Encoder(enc_hook=_plain).encode


def v1(service: ScoringService) -> dict[str, Any]:
    """The keyword arguments every /v1 route's decorator takes.

    The token check is the middleware's (`jurybox.serving.service.guard.checked`); this only
    documents the scheme, so that /docs asks for the token and "Try it out" sends it.
    """
    return {
        "dependencies": [Security(HTTPBearer(auto_error=False))]
        if service.token is not None
        else []
    }
