"""``jurybox check-reward`` against the session's service (#59): the configuration errors that
end an OpenRLHF run in ``'NoneType' object has no attribute 'size'`` (a bad or missing token, a
wrong rubric, no ``?unscored=``, no label) are said in plain words before training, exit 1; a
good URL gets the probe's reward, exit 0; the adapters' route (POST /v1/score) likewise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from service_helpers import USER_SERVICE_TOKEN

pytestmark = pytest.mark.models

JURYBOX = str(Path(sys.executable).parent / "jurybox")


def check(*args: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JURYBOX_TOKEN"}
    if token is not None:
        env["JURYBOX_TOKEN"] = token
    return subprocess.run(
        [JURYBOX, "check-reward", *args], env=env, capture_output=True, text=True, timeout=300
    )


def openrlhf_url(service: str, tail: str, token: str | None = USER_SERVICE_TOKEN) -> str:
    scheme, rest = service.split("://", 1)
    return f"{scheme}://{'jurybox:' + token + '@' if token else ''}{rest}{tail}"


@pytest.mark.parametrize(
    "tail, token, extra, words",
    [
        (
            "/v1/openrlhf/mirage-mg?unscored=0",
            "not-its-t0ken",
            (),
            "The token is wrong or missing (a token",
        ),
        ("/v1/openrlhf/mirage-mg?unscored=0", None, (), "missing (no token was sent): put it in"),
        ("/v1/openrlhf/nope?unscored=0", USER_SERVICE_TOKEN, (), "unknown rubric 'nope'"),
        ("/v1/openrlhf/mirage-mg", USER_SERVICE_TOKEN, (), "Say what an unscored sample's reward"),
        (
            "/v1/openrlhf/mirage-mg?unscored=0",
            USER_SERVICE_TOKEN,
            ("--label", ""),
            "give OpenRLHF --data.label_key COLUMN",
        ),
        (
            "/v1/openrlhf/mirage-mg?unscored=0",
            USER_SERVICE_TOKEN,
            ("--unscored", "none"),
            "unscored='none': give error (an unscored sample is a 422) or the number",
        ),
    ],
)
def test_a_bad_openrlhf_url_is_said_in_plain_words(user_service, tail, token, extra, words):
    ran = check(openrlhf_url(user_service, tail, token), *extra)
    assert ran.returncode == 1, ran.stderr
    assert "problem: " in ran.stderr and words in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr
    if token:
        assert token not in ran.stderr + ran.stdout  # the URL is shown without its credentials


def test_a_good_url_gets_the_probe_s_reward_on_either_route(user_service):
    ran = check(openrlhf_url(user_service, "/v1/openrlhf/mirage-mg?unscored=error"))
    assert ran.returncode == 0, ran.stderr
    assert "ok: reward " in ran.stderr and "OpenRLHF can use" in ran.stderr
    ran = check(user_service, "--rubric", "mirage-mg", token=USER_SERVICE_TOKEN)
    assert ran.returncode == 0, ran.stderr
    assert "ok: reward " in ran.stderr and "(mirage-mg.weighted_sum)" in ran.stderr


def test_the_adapters_route_says_what_is_wrong(user_service):
    for args, token, words in [
        (
            ("--rubric", "nope"),
            USER_SERVICE_TOKEN,
            "the service has no rubric 'nope' (its rubrics:",
        ),
        (
            ("--rubric", "mirage-mg"),
            "not-its-t0ken",
            "The token is wrong or missing (a token was sent): set",
        ),
        (("--rubric", "mirage-mg", "--unscored", "skip"), USER_SERVICE_TOKEN, "it takes 'none'"),
        (("--rubric", "mirage-mg", "--score", "fluency"), USER_SERVICE_TOKEN, "has no score"),
        ((), USER_SERVICE_TOKEN, "name the rubric: --rubric NAME"),
    ]:
        ran = check(user_service, *args, token=token)
        assert ran.returncode == 1, (args, ran.stderr)
        assert words in ran.stderr, (args, ran.stderr)
