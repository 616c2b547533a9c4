"""OpenRLHF's remote reward-model protocol, as its client speaks it (openrlhf 0.11:
``openrlhf.utils.agent.SingleTurnAgentExecutor._fetch_rewards_via_http``).

OpenRLHF posts ``{"query": [...], "prompts": [...], "labels": [...]}`` to the URL given as
``--reward.remote_url`` exactly as given (no route appended), with no header but the JSON
content type, and reads ``rewards`` (required), ``scores`` (the filter's score, else the
rewards) and ``extra_logs`` (numbers it logs) from the answer. ``query`` is the prompt and
the response decoded together, special tokens included; ``prompts`` the prompt as the policy
saw it (chat template applied); ``labels`` the dataset's label column (``--data.label_key``;
empty strings without one).

So jurybox answers ``POST /v1/openrlhf/{rubric}``: the item's question is the prompt, its
response the query after the prompt (special tokens at its end dropped), its reference the
label when there is one. The reward options are query parameters (``score``, ``scale``,
``calibrated``, ``unscored``, as :class:`jurybox.rubrics.reward.RewardSpec`); the token, where
the service has one, comes in the URL's credentials (``http://jurybox:TOKEN@host:8000/...``:
OpenRLHF's HTTP client sends them as Basic auth). An unscored reward is an error by default
(422, naming the items: OpenRLHF cannot take a missing reward, and its retries then stop the
step) unless ``unscored`` gives a value.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jurybox.rubrics.reward import Reward, RewardSpec, Scale, Unscored, UnscoredReward

from .errors import HTTPProblem

# Special tokens a decoded query ends with (the response's end-of-sequence, any padding).
_TRAILING_SPECIAL = re.compile(r"(?:\s*(?:<\|[^|<>]{1,40}\|>|</s>|<eos>|<pad>|<end_of_turn>))+\s*$")


class OpenRLHFRequest(BaseModel):
    """The body OpenRLHF's remote reward client posts: parallel lists, one entry per sample."""

    model_config = ConfigDict(extra="allow")

    query: list[str] = Field(min_length=1, description="Prompt and response, decoded together "
                             "(special tokens included); at most the service's max_items.")
    prompts: list[str] | None = Field(None, description="The prompts as the policy saw them.")
    labels: list[str | None] | None = Field(None, description="The dataset's labels (the "
                                            "reference), or empty strings.")


class OpenRLHFResponse(BaseModel):
    """What OpenRLHF reads: ``rewards`` per sample, ``scores`` (the same here) and
    ``extra_logs`` (numbers; ``jurybox_unscored`` is the count of unscored rewards)."""

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, float]


def items_of(request: OpenRLHFRequest) -> list[dict[str, Any]]:
    """The score request's items: question = prompt, response = the query after the prompt
    (its trailing special tokens dropped), reference = the label (when not empty)."""
    n = len(request.query)
    for name in ("prompts", "labels"):
        given = getattr(request, name)
        if given is not None and len(given) != n:
            raise HTTPProblem(422, "invalid_request", f"{name} has {len(given)} entries and query "
                              f"{n}: OpenRLHF sends one of each per sample", name)
    items = []
    for k, query in enumerate(request.query):
        prompt = request.prompts[k] if request.prompts is not None else ""
        if prompt and not query.startswith(prompt):
            raise HTTPProblem(422, "invalid_request", "the query does not begin with its prompt: "
                              "OpenRLHF's query is the prompt followed by the response",
                              f"query[{k}]")
        response = _TRAILING_SPECIAL.sub("", query[len(prompt):])
        item: dict[str, Any] = {"id": str(k), "question": prompt, "response": response}
        label = request.labels[k] if request.labels is not None else None
        if label:
            item["reference"] = label
        items.append(item)
    return items


def answer(reward: Reward, records: list[dict[str, Any]]) -> dict[str, Any]:
    """OpenRLHF's answer for the verdicts; 422 naming the unscored items when the reward's
    unscored policy is an error (a missing reward is not a number OpenRLHF can use)."""
    unscored = reward.count_unscored(records)
    try:
        values = reward.values(records)
    except UnscoredReward as exc:
        raise HTTPProblem(422, "unscored", f"{exc} (as a query parameter here: "
                          "?unscored=0.5)", "unscored") from None
    numbers = [float(v) for v in values if v is not None]  # (unscored=none is refused before)
    return {"rewards": numbers, "scores": numbers,
            "extra_logs": {"jurybox_unscored": float(unscored)}}


def reward_options(score: str | None, scale: Scale, calibrated: bool, unscored: str) -> RewardSpec:
    """The reward of the route's query parameters; 422 naming the parameter at fault."""
    policy: Unscored = "error"
    if unscored != "error":
        try:
            policy = float(unscored)
        except ValueError:
            raise HTTPProblem(422, "invalid_request", f"unscored={unscored!r}: give error (the "
                              "default: an unscored sample is a 422) or the number its reward "
                              "should be (OpenRLHF needs a number for every sample)",
                              "unscored") from None
    try:
        return RewardSpec(score=score, scale=scale, calibrated=calibrated, unscored=policy)
    except ValueError as exc:
        raise HTTPProblem(422, "invalid_request", f"bad reward options: {exc}",
                          "unscored") from None
