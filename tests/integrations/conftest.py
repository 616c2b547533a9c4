"""Fixtures of the integrations' tests: the session's service (``user_service``,
tests/conftest.py) and a client of it."""

from __future__ import annotations

import pytest


@pytest.fixture
def token(monkeypatch):
    """The session service's token in the environment variable the adapters read."""
    from service_helpers import USER_SERVICE_TOKEN, USER_SERVICE_TOKEN_ENV

    monkeypatch.setenv(USER_SERVICE_TOKEN_ENV, USER_SERVICE_TOKEN)
    return USER_SERVICE_TOKEN_ENV


@pytest.fixture
def v1_score(user_service):
    """``v1_score(rubric, items)``: the verdict records POST /v1/score gives (the reference
    the adapters' rewards must equal)."""
    from service_helpers import USER_SERVICE_TOKEN

    from jurybox.serving import Client

    client = Client(user_service, token=USER_SERVICE_TOKEN)
    yield lambda rubric, items: client.score_records(rubric, items, allow_empty=True)
    client.close()
