"""OpenRLHF's remote reward-model protocol, as its client speaks it.

As of openrlhf 0.11: ``openrlhf.utils.agent.SingleTurnAgentExecutor._fetch_rewards_via_http``.

OpenRLHF posts ``{"query": [...], "prompts": [...], "labels": [...]}`` to the URL given as
``--reward.remote_url`` exactly as given (no route appended), with no header but the JSON content
type, and reads ``rewards`` (required), ``scores`` (the filter's score, else the rewards) and
``extra_logs`` (numbers it logs per sample) from the answer. ``query`` is the prompt and the
response decoded together, special tokens included, where the prompt may have been cut from the left
to fit ``max_len`` (the policy saw only its end); ``prompts`` the whole prompt as the dataset gave
it (chat template applied); ``labels`` the dataset's label column (``--data.label_key``; empty
strings without one).

So jurybox answers ``POST /v1/openrlhf/{rubric}``: the item's question is the prompt, its response
the query after the prompt (or after the prompt's end that the query begins with), special tokens at
its end dropped; its reference the label when there is one. The reward options are query parameters
(``score``, ``scale``, ``calibrated``, ``unscored``, as `jurybox.rubrics.reward.RewardSpec`;
``scores`` for OpenRLHF's filter); the token, where the service has one, comes in the URL's
credentials (``http://jurybox:TOKEN@host:8000/ ...``: OpenRLHF's HTTP client sends them as Basic
auth).

What an unscored sample becomes has no default: OpenRLHF drops an error's body, retries and then
fails the step far from the cause, so the URL (``?unscored=error`` or a number) or the service
(``jurybox serve --openrlhf-unscored``) must say it. With a number, ``extra_logs`` carries
``jurybox/unscored`` (0 or 1) and ``jurybox/unscored_reason`` (a code of
`jurybox.judges.parsing.REASON_CODES`, by position; 0 when scored) for every sample, which OpenRLHF
logs beside its own metrics.

``?prechecks=on`` (with ``precheck_reward=<number>``) and ``?canaries=<share>`` guard the reward
against a policy that games it: `jurybox.serving.service.guards`.

This module is the route's protocol: its wire models (`OpenRLHFRequest`, `OpenRLHFResponse`),
its query parameters (`Options`) and how a decoded query is read back into a prompt and a response.
The route's serving logic is `jurybox.serving.service.openrlhf`. Everything here is linear in the
body's size: no regular expression runs on a client's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from jurybox.rubrics.reward import Scale

# Special tokens a decoded query may end with (the response's end-of-sequence, any padding):
# the fixed ones, and any ``<|...|>`` of at most this many characters inside.
_FIXED_SPECIAL = ("</s>", "<eos>", "<pad>", "<end_of_turn>", "<｜end▁of▁sentence｜>")
_MAX_SPECIAL_NAME = 40
# The least of a prompt's end that a query must begin with when the prompt was cut from the
# left (fewer characters could match by chance).
MIN_PROMPT_TAIL = 16

Filter = Literal["reward", "agreement"]


@dataclass(frozen=True)
class Options:
    """The route's query parameters.

    The reward (`reward_options`), ``scores``, and the guards
    (`jurybox.serving.service.guards`): ``prechecks`` (samples not worth judging are not sent),
    ``precheck_reward`` (their reward; None: the unscored value) and ``canaries`` (the share of
    samples that add a canary).
    """

    score: str | None = None
    scale: Scale = "unit"
    calibrated: bool = False
    unscored: str | None = None
    scores: Filter = "reward"
    prechecks: bool = False
    precheck_reward: float | None = None
    canaries: float = 0.0


class OpenRLHFRequest(BaseModel):
    """The body OpenRLHF's remote reward client posts: parallel lists, one entry per sample."""

    model_config = ConfigDict(extra="allow")

    query: list[str] = Field(
        min_length=1,
        description="Prompt and response, decoded together "
        "(special tokens included); at most the service's max_items.",
    )
    prompts: list[str] | None = Field(
        None,
        description="The prompts as the dataset gave "
        "them (the query may begin with only their end).",
    )
    labels: list[str | None] | None = Field(
        None, description="The dataset's labels (the reference), or empty strings."
    )


class OpenRLHFResponse(BaseModel):
    """What OpenRLHF reads: rewards, scores and extra logs per sample.

    ``rewards`` per sample, ``scores`` (its filter's number: the rewards, or the jury's agreement)
    and ``extra_logs`` (numbers it logs).
    """

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, float | list[float]]


def strip_trailing_special(text: str) -> str:
    """``text`` without the special tokens (and whitespace) it ends with.

    Linear in what it strips, whatever the text.
    """
    while True:
        text = text.rstrip()
        for token in _FIXED_SPECIAL:
            if text.endswith(token):
                text = text[: -len(token)]
                break
        else:
            if not text.endswith("|>"):
                return text
            start = text.rfind("<|", max(0, len(text) - _MAX_SPECIAL_NAME - 4), len(text) - 2)
            name = text[start + 2 : -2] if start >= 0 else ""
            if not name or any(c in name for c in "|<>"):
                return text
            text = text[:start]


def _longest_tail_prefix(prompt: str, query: str) -> int:
    """The length of the longest end of ``prompt`` that ``query`` begins with.

    The prefix function of ``query + NUL + prompt``, over code points: linear time.
    """
    head = query[: len(prompt)]
    s = [ord(c) for c in head] + [-1] + [ord(c) for c in prompt]
    pi = [0] * len(s)
    for i in range(1, len(s)):
        k = pi[i - 1]
        while k and s[i] != s[k]:
            k = pi[k - 1]
        if s[i] == s[k]:
            k += 1
        pi[i] = k
    return pi[-1]


def response_of(query: str, prompt: str) -> str | None:
    """The response in ``query``: what follows ``prompt``, or follows the end of it.

    What follows ``prompt``, or the end of ``prompt`` that the query begins with when OpenRLHF cut
    the prompt from the left (a cut inside a character decodes as U+FFFD: those are skipped); None
    when the query begins with neither.
    """
    if query.startswith(prompt):
        return query[len(prompt) :]
    rest = query.lstrip("\ufffd") if query[:4].count("\ufffd") else query
    if len(rest) < len(query) - 3:  # more than a cut character's worth
        return None
    tail = _longest_tail_prefix(prompt, rest)
    if tail < min(MIN_PROMPT_TAIL, len(prompt)):
        return None
    return rest[tail:]
