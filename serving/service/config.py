"""The scoring service's configuration, validated when the application is built.

A bad jury, rubric or calibration map fails the deploy, never a request. The configuration is turned
into the plain data the deployments receive, so a cluster needs none of the files the driver read.

The rooms: `ServiceConfig` (here: what ``jurybox serve`` and `build_jury_app` take), `Limits`
(`jurybox.serving.service.limits`) and `ResolvedConfig` with the loading of the files it is read
from (`jurybox.serving.service.resolved`); both are importable from here too.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jurybox.judges import load_jury_spec, provenance
from jurybox.rubrics import list_rubrics, load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.serving.options import command_line, nested, option
from jurybox.serving.service.limits import Limits
from jurybox.serving.service.resolved import (
    ResolvedConfig,
    calibration_entry,
    conformal_entry,
    one_per_rubric,
    rubric_files,
)
from jurybox.serving.service.sentinel import check_sentinel

__all__ = [
    "AUTO_INGRESS_MIN_CPUS",
    "AUTO_INGRESS_REPLICAS",
    "STATE_ACTOR",
    "Limits",
    "ResolvedConfig",
    "ServiceConfig",
]

# The ingress replicas a machine with enough CPUs starts by default (see ServiceConfig).
AUTO_INGRESS_REPLICAS = 2
AUTO_INGRESS_MIN_CPUS = 8
# The ingress replicas' shared state: a deployment actor of the ingress, by this name (the
# builder declares it, the ingress looks it up).
STATE_ACTOR = "ingress-state"


@command_line(
    jury=option("--jury", "-j", help="Shipped jury name or a jury YAML file.", show_default=False),
    rubrics=option(
        "--rubrics",
        type=list[Path],
        help="Rubric YAML file or directory of them, served beside the shipped rubrics "
        "(repeatable).",
        show_default=False,
    ),
    calibration=option(
        "--calibration",
        type=list[Path],
        help="Calibration map (from `jurybox calibrate`) to apply to the verdicts of the rubric "
        "it was fitted for (repeatable).",
        show_default=False,
    ),
    conformal=option(
        "--conformal",
        type=list[Path],
        help="Conformal map (from `jurybox calibrate --conformal`): the verdicts of the rubric "
        "it was fitted for carry each criterion's `interval` (repeatable, one per rubric).",
        show_default=False,
    ),
    route_width=option(
        "--route-width",
        help="With --conformal: a verdict whose interval on a criterion is wider than this (in "
        "the scale's units; 0: anything but a single level) or missing carries `route` (to a "
        "human, with the reasons).",
        min=0.0,
        show_default=False,
    ),
    token_env=option(
        "--token-env",
        help="Environment variable holding a token: every /v1 call must then send "
        "`Authorization: Bearer <token>`.",
        show_default=False,
    ),
    cors_origins=option(
        "--cors-origin",
        help="Allow this browser origin (CORS is off unless given; repeatable).",
        show_default=False,
    ),
    limits=nested(),
    ingress_replicas=option(
        help="Replicas of the ingress: when one dies, the others answer meanwhile and a "
        "client's retry reaches them (--max-concurrent and --max-queued are shared out among "
        f"them). Default: {AUTO_INGRESS_REPLICAS} where this machine has at least "
        f"{AUTO_INGRESS_MIN_CPUS} CPUs, else 1.",
        min=1,
        show_default=False,
    ),
    openrlhf_unscored=option(
        "--openrlhf-unscored",
        help="The reward of an unscored sample on /v1/openrlhf/ when the URL does not give "
        "?unscored=: a number (flagged in OpenRLHF's extra_logs), or error (a 422, which stops "
        "OpenRLHF's step). Without it the URL must say.",
        show_default=False,
    ),
    juror_checks=option(
        "--juror-checks/--no-juror-checks",
        help="Flag failing jurors in each request's verdicts: a judge collapsed onto one value, "
        "refusing, or departed from the others (three judges or more); counted in /metrics as "
        "jurybox_juror_flags_total.",
    ),
    leave_out_flagged=option(
        "--leave-out-flagged",
        help="With --juror-checks: decide each request's verdicts without the jurors flagged in "
        "it, naming them in each verdict's `left_out` (such verdicts are never cached).",
    ),
    sentinel_url=option(
        "--sentinel-url",
        help="A second jurybox service (http://host:port) that scores a random --sentinel-share "
        "of /v1/openrlhf/'s scored samples as a held-out sentinel: each request's extra_logs "
        "gain jurybox/sentinel_gap, (1 + reward - sentinel) / 2, and jurybox/sentinel_alarm, "
        "raised by an anytime-valid drift test per client, rubric and options. It must serve "
        "the route's rubrics by the same names. Its cost: its judge calls on that share of the "
        "samples, at most 4 calls in flight per client, rubric and options; never the rewards' "
        "latency, and a sentinel that fails is logged and counted, never an error. Set here "
        "only: a client's request never names it.",
        show_default=False,
    ),
    sentinel_token_env=option(
        "--sentinel-token-env",
        help="Environment variable holding the --sentinel-url service's token.",
        show_default=False,
    ),
    sentinel_share=option(
        help="With --sentinel-url: the share of /v1/openrlhf/'s scored samples the sentinel "
        "scores, more than 0 and at most 1: one in every ceil(1/share) counted across requests, "
        "so a share that is not 1/n is rounded to 1/ceil(1/share) (0.3 gives 25%; 0.05: one in "
        "20, about 5% more judge calls with a sentinel jury the size of the reward's).",
    ),
)
class ServiceConfig(BaseModel):
    """Arguments of `jurybox.serving.service.builder.build_jury_app` (and of ``jurybox serve``).

    The fields marked above (and `Limits`' marked fields) are ``jurybox serve``'s options.

    Attributes:
        jury: Shipped jury name or jury YAML file.
        rubrics: Rubric YAML files, or directories of them, served beside the shipped rubrics.
        calibration: Calibration maps (from ``jurybox calibrate``) applied to the verdicts of the
            rubric each was fitted for.
        conformal: Conformal maps (from ``jurybox calibrate --conformal``): the verdicts of the
            rubric each was fitted for carry per-criterion intervals.
        route_width: With conformal maps: a verdict whose interval on a criterion is wider than this
            (or missing) carries route: to a human, with the reasons.
        token_env: Environment variable holding the bearer token every /v1 call must present (never
            the token itself).
        openrlhf_unscored: What an unscored sample's reward is on /v1/openrlhf/ when its URL does
            not say: 'error' (a 422) or a number; None: the URL must say (?unscored=).
        cors_origins: Origins allowed by CORS (none: CORS off).
        limits: What one request may ask for, and how much work the service takes on at once
            (`Limits`).
        health_timeout_s: How long /healthz waits for a judge to answer.
        verdict_cache: SQLite file of the verdict cache (items judged before with the same
            configuration are answered from it, touching no judge); None: no cache.
        ingress_replicas: Replicas of the ingress (a request in flight on one that dies is retried
            by the client at another, which answers meanwhile); None: `AUTO_INGRESS_REPLICAS`
            where this machine has at least `AUTO_INGRESS_MIN_CPUS` CPUs, else 1.
        juror_checks: Flag failing jurors in each request's verdicts
            (`jurybox.judges.jurors`), counted in /metrics.
        leave_out_flagged: Decide each request's verdicts without the jurors flagged in it
            (naming them in ``left_out``); needs ``juror_checks``.
        sentinel_url: A second jurybox service (``http(s)://host:port``) that scores a share of
            the OpenRLHF route's samples as a held-out sentinel
            (`jurybox.serving.service.sentinel`); None: no sentinel. Set here, never by a client.
        sentinel_token_env: Environment variable holding the sentinel service's token.
        sentinel_share: The share of the route's scored samples the sentinel scores (one in
            every ceil(1/share), counted across requests).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    jury: str = Field(description="Shipped jury name or jury YAML file.")
    rubrics: list[str] = Field(
        default_factory=list,
        description="Rubric YAML files, or directories of them, served beside the shipped rubrics.",
    )
    calibration: list[str] = Field(
        default_factory=list,
        description="Calibration maps (from "
        "`jurybox calibrate`) applied to the verdicts of the rubric "
        "each was fitted for.",
    )
    conformal: list[str] = Field(
        default_factory=list,
        description="Conformal maps (from "
        "`jurybox calibrate --conformal`): the verdicts of the rubric "
        "each was fitted for carry per-criterion intervals.",
    )
    route_width: float | None = Field(
        None,
        ge=0.0,
        description="With conformal maps: a verdict "
        "whose interval on a criterion is wider than this (or "
        "missing) carries route: to a human, with the reasons.",
    )
    token_env: str | None = Field(
        None,
        description="Environment variable holding the bearer "
        "token every /v1 call must present (never the token itself).",
    )
    openrlhf_unscored: str | None = Field(
        None,
        description="What an unscored sample's reward "
        "is on /v1/openrlhf/ when its URL does not say: "
        "'error' (a 422) or a number; None: the URL must "
        "say (?unscored=).",
    )
    cors_origins: list[str] = Field(
        default_factory=list, description="Origins allowed by CORS (none: CORS off)."
    )
    limits: Limits = Field(default_factory=Limits)
    health_timeout_s: float = Field(
        3.0, gt=0.0, description="How long /healthz waits for a judge to answer."
    )
    verdict_cache: str | None = Field(
        None,
        description="SQLite file of the verdict cache "
        "(items judged before with the same configuration are "
        "answered from it, touching no judge); None: no cache.",
    )
    ingress_replicas: int | None = Field(
        None,
        ge=1,
        description="Replicas of the ingress (a "
        "request in flight on one that dies is retried by the "
        "client at another, which answers meanwhile); None: "
        f"{AUTO_INGRESS_REPLICAS} where this machine has at "
        f"least {AUTO_INGRESS_MIN_CPUS} CPUs, else 1.",
    )

    juror_checks: bool = Field(
        False,
        description="Flag failing jurors (collapsed, refused, departed) in each request's "
        "verdicts, counted in /metrics as jurybox_juror_flags_total.",
    )
    leave_out_flagged: bool = Field(
        False,
        description="Decide each request's verdicts without the jurors flagged in it, naming "
        "them in left_out (never stored in the verdict cache); needs juror_checks.",
    )

    sentinel_url: str | None = Field(
        None,
        description="A second jurybox service (http(s)://host:port) that scores a share of the "
        "OpenRLHF route's samples as a held-out sentinel; None: no sentinel.",
    )
    sentinel_token_env: str | None = Field(
        None, description="Environment variable holding the sentinel service's token."
    )
    sentinel_share: float = Field(
        0.05,
        description="The share of the OpenRLHF route's scored samples the sentinel scores "
        "(one in every ceil(1/share), counted across requests).",
    )

    @field_validator("rubrics", "calibration", "conformal", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        """Paths as the strings they spell (``jurybox serve`` reads them as paths)."""
        if isinstance(value, list | tuple):
            return [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        return value

    @field_validator("openrlhf_unscored")
    @classmethod
    def _policy(cls, value: str | None) -> str | None:
        if value is None or value == "error":
            return value
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"openrlhf_unscored {value!r}: give error or a number") from None
        if not math.isfinite(number):
            raise ValueError(f"openrlhf_unscored {value!r}: give a finite number")
        return value

    def ingress_count(self) -> int:
        """The ingress replicas to start.

        ``ingress_replicas``, or by default 2 on a machine with the CPUs for them (never more than
        ``max_concurrent``: each replica scores at least one request at once).

        Returns:
            The number of ingress replicas.

        Raises:
            InputError: ``ingress_replicas`` is more than ``max_concurrent``.
        """
        limits = self.limits
        if self.ingress_replicas is None:
            auto = AUTO_INGRESS_REPLICAS if (os.cpu_count() or 1) >= AUTO_INGRESS_MIN_CPUS else 1
            return min(auto, limits.max_concurrent)
        if self.ingress_replicas > limits.max_concurrent:
            raise InputError(
                f"--ingress-replicas {self.ingress_replicas}: each ingress replica "
                "scores at least one request at once, so this needs "
                f"--max-concurrent {self.ingress_replicas} or more (it is "
                f"{limits.max_concurrent})",
                field="ingress_replicas",
            )
        return self.ingress_replicas

    def resolve(self) -> ResolvedConfig:
        """Everything the deployments need, checked now.

        Returns:
            The validated configuration as plain data, for the deployments.

        Raises:
            InputError: A jury, rubric or calibration map that cannot be loaded, a map fitted for no
                rubric this service knows, two maps of one kind for one rubric, ``route_width``
                without conformal maps, an unset ``token_env``, or too many ingress replicas.
        """
        spec = load_jury_spec(self.jury)
        rubrics = {name: load_rubric(name) for name in list_rubrics()}
        for path in self.rubrics:
            for file in rubric_files(Path(path)):
                rubric = load_rubric(file)
                rubrics[rubric.name] = rubric
        provenances = {name: provenance(r, spec) for name, r in rubrics.items()}
        maps = [calibration_entry(Path(path), provenances) for path in self.calibration]
        conformal = [conformal_entry(Path(path), provenances) for path in self.conformal]
        for kind, entries in (("--calibration", maps), ("--conformal", conformal)):
            one_per_rubric(kind, entries)
        if self.route_width is not None and not conformal:
            raise InputError(
                "--route-width routes on conformal intervals: give --conformal MAP too",
                field="route_width",
            )
        if self.leave_out_flagged and not self.juror_checks:
            raise InputError(
                "--leave-out-flagged leaves out the jurors --juror-checks flags: give it too",
                field="leave_out_flagged",
            )
        if self.token_env is not None and not os.environ.get(self.token_env):
            raise InputError(
                f"--token-env {self.token_env}: the environment variable is not set "
                "(or empty); set it to the token clients must send",
                field="token_env",
            )
        check_sentinel(self.sentinel_url, self.sentinel_share)
        if self.sentinel_token_env is not None and self.sentinel_url is None:
            raise InputError(
                "--sentinel-token-env is the token of the service --sentinel-url names: "
                "give --sentinel-url too",
                field="sentinel_token_env",
            )
        env = self.sentinel_token_env
        if env is not None and not os.environ.get(env):
            raise InputError(
                f"--sentinel-token-env {env}: the environment variable is not set (or empty); "
                "set it to the sentinel service's token",
                field="sentinel_token_env",
            )
        return ResolvedConfig(
            jury=spec.model_dump(mode="json"),
            rubrics={n: r.model_dump(mode="json", by_alias=True) for n, r in rubrics.items()},
            calibration=maps,
            conformal=conformal,
            route_width=self.route_width,
            token_env=self.token_env,
            openrlhf_unscored=self.openrlhf_unscored,
            cors_origins=list(self.cors_origins),
            limits=self.limits,
            health_timeout_s=self.health_timeout_s,
            verdict_cache=self.verdict_cache,
            ingress_replicas=self.ingress_count(),
            juror_checks=self.juror_checks,
            leave_out_flagged=self.leave_out_flagged,
            sentinel_url=self.sentinel_url,
            sentinel_token_env=self.sentinel_token_env,
            sentinel_share=self.sentinel_share,
        )
