"""One well-formed probe to a trainer's reward URL, before the run: what ``jurybox check-reward`` calls.

A trainer that meets a configuration error mid-run says little: OpenRLHF drops the body of a 422,
retries five times and fails the step on ``'NoneType' object has no attribute 'size'`` (the
cause is only in the service's log). `check_reward` sends one request as the trainer will
(OpenRLHF's body to its ``--reward.remote_url``, or the adapters' ``POST /v1/score`` and the
reward read from the verdict), checks the answer, and says each problem in plain words.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from jurybox.serving.options import argument, command_line, option

Route = Literal["openrlhf", "score"]
Say = Callable[[str], None]

#: The probe: a plain question, a plain answer, a reference (the label).
QUESTION = "What causes brown rings on tomato leaves after rain?"
RESPONSE = "Early blight, a fungal disease; remove the infected leaves."
LABEL = "Early blight (Alternaria solani): remove infected leaves, mulch, copper fungicide."
#: OpenRLHF's prompt after a chat template (ChatML), and its query: prompt, response, end token.
PROMPT = f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n"


@dataclass
class RewardCheck:
    """What the probe found.

    Attributes:
        problems: Each problem in plain words, with what to change (none: the URL is usable).
        notes: What was sent and what came back, one line each.
    """

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the probe found no problem."""
        return not self.problems


@dataclass
class Target:
    """Where the probe goes and what it asks, from the URL and the options."""

    route: Route
    base: str  # scheme://host:port, without credentials
    rubric: str | None
    token: str | None
    # The OpenRLHF route's parameters (and the unscored policy, on either route).
    query: dict[str, str] = field(default_factory=dict)


def target(
    url: str, route: Route | None, rubric: str | None, token: str | None, unscored: str | None
) -> Target:
    """The probe's target: OpenRLHF's URL as it will be given, or the service's base URL.

    The token as the trainer will send it: OpenRLHF's from the URL's credentials alone (none
    there, none sent), the adapters' ``token`` (their ``token_env``); the rubric from the route's
    path unless given; ``unscored`` set in the query when given.
    """
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.hostname or "", "", "", "")) + (
        f":{parts.port}" if parts.port else ""
    )
    path = parts.path.rstrip("/")
    found = route or ("openrlhf" if "/v1/openrlhf/" in path + "/" else "score")
    if found == "openrlhf" and "/v1/openrlhf/" in path:
        rubric = rubric or path.rsplit("/", 1)[-1]
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if unscored is not None:
        query["unscored"] = unscored
    return Target(found, base, rubric, parts.password if found == "openrlhf" else token, query)


@command_line(
    url=argument(
        help="The reward URL as the trainer is given it: OpenRLHF's --reward.remote_url "
        "(http://jurybox:TOKEN@HOST:8000/v1/openrlhf/RUBRIC?unscored=0), or the service's "
        "base URL that TRL's and verl's url= names.",
        show_default=False,
    ),
    route=option(
        help="The route the trainer uses: openrlhf (POST its URL, as OpenRLHF does) or score "
        "(POST /v1/score, as TRL's, verl's and Inspect's adapters do). Default: openrlhf "
        "when the URL's path is /v1/openrlhf/..., else score.",
        show_default=False,
    ),
    rubric=option(
        help="The rubric (default: the OpenRLHF URL's last path segment).", show_default=False
    ),
    token_env=option(
        help="The environment variable holding the service's token (unless the URL's "
        "credentials hold it, as OpenRLHF's must).",
    ),
    unscored=option(
        help="The unscored policy to check: openrlhf: replaces the URL's ?unscored= (error "
        "or a number); score: the adapter's unscored= (none, error or a number; default "
        "error).",
        show_default=False,
    ),
    score=option(
        help="score: the reward's score= (a criterion or the formula).", show_default=False
    ),
    label=option(
        help="The probe's label (the reference). --label '' checks a run without labels "
        "(OpenRLHF without --data.label_key sends empty ones).",
    ),
    timeout=option(help="Seconds the probe may take.", min=1),
)
def check_reward(
    url: str,
    *,
    route: Route | None = None,
    rubric: str | None = None,
    token_env: str = "JURYBOX_TOKEN",
    unscored: str | None = None,
    score: str | None = None,
    label: str = LABEL,
    timeout: float = 600.0,
    say: Say | None = None,
) -> RewardCheck:
    """Send one well-formed probe to a reward URL and check the answer, before training.

    It checks what a trainer meets only mid-run: the service is reachable, the token is taken,
    the rubric is the service's, an unscored policy is said (OpenRLHF's ?unscored=), the rubric
    gets the fields it reads (the label: OpenRLHF's --data.label_key), and the answer is one
    finite reward for the probe.

    Args:
        url: The reward URL as the trainer is given it: OpenRLHF's ``--reward.remote_url``
            (``http://jurybox:TOKEN@HOST:8000/v1/openrlhf/RUBRIC?unscored=0``), or the
            service's base URL that TRL's and verl's ``url=`` names.
        route: ``openrlhf`` (POST the URL, as OpenRLHF does) or ``score`` (``POST /v1/score``,
            as the adapters do). Default: ``openrlhf`` when the URL's path is
            ``/v1/openrlhf/...``, else ``score``.
        rubric: The rubric. Default: the OpenRLHF URL's last path segment.
        token_env: The environment variable holding the service's token (the adapters'
            ``token_env``); OpenRLHF's token is the URL's credentials alone.
        unscored: The unscored policy to check: replaces the OpenRLHF URL's ``?unscored=``, or
            the adapters' ``unscored=`` (default ``error``).
        score: The ``score`` route's reward ``score=`` (a criterion or the formula).
        label: The probe's label (the reference); ``""`` checks a run without labels.
        timeout: Seconds the probe may take.
        say: Called with each note as it happens (what is sent, what came back), e.g.
            ``print``; the notes are also in the result.

    Returns:
        The problems found, each in plain words with what to change, and the notes.
    """
    found = RewardCheck()

    def told(line: str) -> None:
        found.notes.append(line)
        if say is not None:
            say(line)

    given = target(url, route, rubric, os.environ.get(token_env) or None, unscored)
    if given.rubric is None:
        found.problems = [
            "name the rubric: --rubric NAME (or give OpenRLHF's URL, which ends in "
            "/v1/openrlhf/RUBRIC)"
        ]
    else:
        found.problems = probe(given, score, label, timeout, token_env, told)
    return found


def probe(
    given: Target, score: str | None, label: str, timeout: float, token_env: str, note: Say
) -> list[str]:
    """The problems the probe found (none: it printed what it got)."""
    import httpx

    # The token as each trainer sends it: OpenRLHF's in the URL (Basic), the adapters' as Bearer.
    auth = ("jurybox", given.token) if given.token and given.route == "openrlhf" else None
    bearer = {"Authorization": f"Bearer {given.token}"} if given.token and not auth else {}
    try:
        with httpx.Client(base_url=given.base, timeout=timeout, auth=auth, headers=bearer) as http:
            if given.route == "openrlhf":
                return _openrlhf(http, given, label, note)
            return _score(http, given, score, label, token_env, note)
    except httpx.HTTPError as exc:
        return [
            f"cannot reach {given.base}: {type(exc).__name__}: {exc} (is jurybox serve running "
            "there, and is the URL's host and port its own?)"
        ]


def _openrlhf(http: Any, given: Target, label: str, note: Say) -> list[str]:
    path = f"/v1/openrlhf/{given.rubric}"
    body = {"query": [PROMPT + RESPONSE + "<|im_end|>"], "prompts": [PROMPT], "labels": [label]}
    where = f"POST {given.base}{path}?{urlencode(given.query)}"
    note(f"probe: {where} (one sample, as OpenRLHF sends it)")
    response = http.post(path, params=given.query, json=body)
    if response.status_code != 200:
        return _refused(response, given, "openrlhf")
    answer = response.json()
    rewards = answer.get("rewards") if isinstance(answer, dict) else None
    if not isinstance(rewards, list) or len(rewards) != 1 or not _finite(rewards[0]):
        return [f"the answer holds no finite reward for the probe: {str(answer)[:300]}"]
    logs = answer.get("extra_logs") or {}
    if logs.get("jurybox/unscored"):
        return [
            f"the probe was unscored (reason code {logs.get('jurybox/unscored_reason')} of "
            "jurybox.judges.parsing.REASON_CODES) and rewarded ?unscored="
            f"{given.query.get('unscored', '(the service default)')}: the jury cannot judge a "
            "plain sample; see the service's log for the cause"
        ]
    note(f"ok: reward {rewards[0]:.4g} for the probe; OpenRLHF can use {where}")
    return []


def _score(
    http: Any, given: Target, score: str | None, label: str, token_env: str, note: Say
) -> list[str]:
    from jurybox.rubrics import Rubric
    from jurybox.rubrics.errors import InputError
    from jurybox.rubrics.reward import RewardSpec

    policy = given.query.get("unscored") or "error"
    try:
        number = float(policy)
    except ValueError:
        number = None
    try:
        spec = RewardSpec(score=score, unscored=policy if number is None else number)
    except InputError as exc:
        return [str(exc)]
    got = http.get(f"/v1/rubrics/{given.rubric}")
    if got.status_code == 404:
        known = http.get("/v1/rubrics")
        names = [r["name"] for r in known.json()["rubrics"]] if known.status_code == 200 else []
        return [f"the service has no rubric {given.rubric!r} (its rubrics: {', '.join(names)})"]
    if got.status_code != 200:
        return _refused(got, given, "score", token_env)
    rubric = Rubric.model_validate(got.json())
    try:
        reward = spec.bind(rubric)
    except InputError as exc:
        return [str(exc)]
    item = {"id": "probe", "question": QUESTION, "response": RESPONSE}
    if label:
        item["reference"] = label
    note(f"probe: POST {given.base}/v1/score (one item, as the adapters send it)")
    response = http.post(
        "/v1/score", json={"rubric": given.rubric, "items": [item], "allow_empty": True}
    )
    if response.status_code != 200:
        return _refused(response, given, "score", token_env)
    (record,) = response.json()["verdicts"]
    value, why = reward.raw(record)
    if value is None:
        return [f"the probe was unscored ({why}): the jury cannot judge a plain sample"]
    note(f"ok: reward {reward.values([record])[0]:.4g} ({reward.name}) for the probe")
    return []


def _refused(response: Any, given: Target, route: Route, token_env: str = "") -> list[str]:
    """A refusal in plain words: the service's message and what to change."""
    try:
        error = response.json()["error"]
        message, fault = str(error.get("message")), error.get("field")
    except (ValueError, KeyError, TypeError):
        message, fault = response.text[:300], None
    status = response.status_code
    said = f"the service answered {status}: {message}"
    if status == 401:
        where = (
            "put it in the URL's credentials (http://jurybox:TOKEN@HOST:PORT/v1/openrlhf/...)"
            if route == "openrlhf"
            else f"set {token_env or 'JURYBOX_TOKEN'} (the adapters' token_env)"
        )
        have = "a token was sent" if given.token else "no token was sent"
        return [f"{said}. The token is wrong or missing ({have}): {where}"]
    if status == 404:
        return [f"{said}. Is {given.base} jurybox serve, and the path its own?"]
    hints = {
        "unscored": "say what an unscored sample's reward is: ?unscored=<number> in the URL, "
        "?unscored=error (a 422: OpenRLHF then fails the step), or jurybox serve "
        "--openrlhf-unscored",
        "labels[0]": "the rubric reads a reference, which OpenRLHF sends from the dataset's label "
        "column: give OpenRLHF --data.label_key COLUMN",
        "rubric": "name one of the service's rubrics (GET /v1/rubrics)",
    }
    hint = hints.get(str(fault)) if fault else None
    if hint is None and "unknown rubric" in message:
        hint = hints["rubric"]
    if hint is None and fault and str(fault).endswith(".reference"):
        hint = "the rubric reads a reference: the trainer must give one (the label)"
    return [f"{said}" + (f". {hint[0].upper()}{hint[1:]}" if hint else "")]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
