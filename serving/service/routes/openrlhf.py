"""POST /v1/openrlhf/{rubric}: the route of `jurybox.serving.service.openrlhf`.

Its wire models: `jurybox.serving.service.openrlhf_protocol`.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from jurybox.serving.service.guard import request_id
from jurybox.serving.service.openrlhf import answer_openrlhf
from jurybox.serving.service.openrlhf_protocol import OpenRLHFRequest, OpenRLHFResponse, Options
from jurybox.serving.service.routes import ERRORS, v1
from jurybox.serving.service.scoring import ScoringService


def router(service: ScoringService) -> APIRouter:
    """The OpenRLHF route, around one replica's scoring service."""
    routes = APIRouter()

    @routes.post(
        "/v1/openrlhf/{rubric}",
        response_model=OpenRLHFResponse,
        responses=ERRORS,
        **v1(service),
        summary="OpenRLHF's remote reward model (--reward.remote_url)",
    )
    async def openrlhf(
        http: Request,
        rubric: str,
        request: OpenRLHFRequest,
        score: str | None = None,
        scale: Literal["unit", "raw"] = "unit",
        calibrated: bool = False,
        unscored: str | None = None,
        scores: Literal["reward", "agreement"] = "reward",
        prechecks: bool = Query(
            False, description="on: a sample not worth judging (a master key...) is not sent."
        ),
        precheck_reward: float | None = Query(
            None, description="A pre-checked sample's reward (default: the unscored value)."
        ),
        canaries: float = Query(
            0.0, ge=0, le=1, description="One canary every ceil(1/canaries) samples (0: none)."
        ),
    ) -> Response:
        """The jury's reward for each of OpenRLHF's samples.

        See `jurybox.serving.service.openrlhf`. The rubric's formula (or ``score``), on [0, 1]
        unless ``scale=raw``. ``unscored`` is required (here or as the service's
        ``--openrlhf-unscored``): ``error`` (a 422: OpenRLHF's step then fails) or the reward an
        unscored sample gets, flagged in ``extra_logs``. ``scores``: what OpenRLHF's dynamic filter
        reads (the reward, or the jury's agreement). The token, where the service has one, in the
        URL: ``http://jurybox:TOKEN@host:port/v1/openrlhf/RUBRIC?unscored=0``.

        Guards (`jurybox.serving.service.guards`): ``prechecks=on`` does not send a sample not
        worth judging (empty, punctuation only, the question echoed, a known master key): it is
        unscored with its reason (code ``prechecked``), rewarded ``precheck_reward`` (else the
        unscored value); ``canaries=0.03`` adds a canary (an exploit response built from the
        sample's prompt) every 34th sample, judged with the samples and never among the
        rewards: ``extra_logs`` gains ``jurybox/prechecked``, ``jurybox/canary_reward`` and
        ``jurybox/canary_alarm``. Where the service was started with ``--sentinel-url``, a share
        of the samples is scored by that second service afterwards (never a URL of the
        request's): ``extra_logs`` gains ``jurybox/sentinel_gap`` and ``jurybox/sentinel_alarm``.
        """
        options = Options(
            score, scale, calibrated, unscored, scores, prechecks, precheck_reward, canaries
        )
        return Response(
            await answer_openrlhf(service, rubric, request, options, request_id(http)),
            media_type="application/json",
        )

    return routes
