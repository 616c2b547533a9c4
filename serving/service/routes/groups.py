"""POST /v1/groups: the route of `jurybox.serving.service.groups` (wire models: `groups_protocol`)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from jurybox.serving.service.groups import answer_groups
from jurybox.serving.service.groups_protocol import GroupRequest, GroupResponse
from jurybox.serving.service.routes import ERRORS, encode, v1
from jurybox.serving.service.scoring import ScoringService


def router(service: ScoringService) -> APIRouter:
    """The groups route, around one replica's scoring service."""
    routes = APIRouter()

    @routes.post(
        "/v1/groups",
        response_model=GroupResponse,
        responses=ERRORS,
        **v1(service),
        summary="Reward groups of completions against each other (GRPO's groups)",
    )
    async def groups(request: GroupRequest) -> Response:
        """Each group's completions rewarded against each other (see `jurybox.judges.groups`).

        Compared in pairs on a pairwise rubric, each pair in both orders (round_robin, regular,
        swiss, anchor), scored together in one call per judge (listwise), or scored alone
        (pointwise); each reward with the comparisons behind it. The groups' completions count
        against max_items and the design's judge calls against max_judge_calls, before any judge
        runs.
        """
        return Response(
            encode({"groups": await answer_groups(service, request)}),
            media_type="application/json",
        )

    return routes
