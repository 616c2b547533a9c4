"""``jurybox serve``: run the scoring service in the foreground on a local or joined Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import note, options_of, reported
from jurybox.serving.service.config import Limits, ServiceConfig
from jurybox.serving.service.foreground import serve_jury


@options_of(
    serve_jury,
    place={
        **dict.fromkeys(("jury", "rubrics", "calibration", "conformal", "route_width"), "host"),
        "token_env": "address",
        **dict.fromkeys(
            (
                "cors_origin",
                "max_items",
                "max_body_bytes",
                "max_field_chars",
                "max_concurrent",
                "max_queued",
                "request_timeout",
                "max_judge_calls",
                "max_prompt_chars",
                "max_request_prompt_chars",
                "body_timeout",
                "max_client_requests",
                "ingress_replicas",
                "openrlhf_unscored",
                "juror_checks",
                "leave_out_flagged",
                "sentinel_url",
                "sentinel_token_env",
                "sentinel_share",
                "no_cache",
            ),
            "drain_timeout",
        ),
    },
)
def serve(
    options: dict[str, Any],
    jury: Annotated[
        str,
        typer.Option(
            "--jury", "-j", help="Shipped jury name or a jury YAML file.", show_default=False
        ),
    ],
    rubrics: Annotated[
        list[Path],
        typer.Option(
            "--rubrics",
            help="Rubric YAML file or directory of them, served beside the shipped rubrics (repeatable).",
            show_default=False,
        ),
    ] = [],
    calibration: Annotated[
        list[Path],
        typer.Option(
            "--calibration",
            help="Calibration map (from `jurybox calibrate`) to apply to the verdicts of the rubric it was fitted for (repeatable).",
            show_default=False,
        ),
    ] = [],
    conformal: Annotated[
        list[Path],
        typer.Option(
            "--conformal",
            help="Conformal map (from `jurybox calibrate --conformal`): the verdicts of the rubric it was fitted for carry each criterion's `interval` (repeatable, one per rubric).",
            show_default=False,
        ),
    ] = [],
    route_width: Annotated[
        float | None,
        typer.Option(
            "--route-width",
            help="With --conformal: a verdict whose interval on a criterion is wider than this (in the scale's units; 0: anything but a single level) or missing carries `route` (to a human, with the reasons).",
            min=0.0,
            show_default=False,
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            help="Environment variable holding a token: every /v1 call must then send `Authorization: Bearer <token>`.",
            show_default=False,
        ),
    ] = None,
    cors_origin: Annotated[
        list[str],
        typer.Option(
            "--cors-origin",
            help="Allow this browser origin (CORS is off unless given; repeatable).",
            show_default=False,
        ),
    ] = [],
    max_items: Annotated[
        int, typer.Option(help="Most items in one request (413 beyond).", min=1)
    ] = 256,
    max_body_bytes: Annotated[
        int, typer.Option(help="Largest request body in bytes (413 beyond).", min=1024)
    ] = 8 << 20,
    max_field_chars: Annotated[
        int, typer.Option(help="Longest item field in characters (422 beyond).", min=1)
    ] = 100_000,
    max_concurrent: Annotated[
        int,
        typer.Option(
            help="Batches judged at once; requests that find no free slot wait, and those of one rubric that wait together are judged together (one call per judge).",
            min=1,
        ),
    ] = 4,
    max_queued: Annotated[
        int, typer.Option(help="Requests waiting for a slot; beyond, 429 with Retry-After.", min=0)
    ] = 64,
    request_timeout: Annotated[
        float,
        typer.Option(help="Seconds one request may take, waiting included (504 beyond).", min=1),
    ] = 600.0,
    max_judge_calls: Annotated[
        int,
        typer.Option(
            help="Most judge calls one request may buy: items x calls per item of its rubric (413 beyond).",
            min=1,
        ),
    ] = 2048,
    max_prompt_chars: Annotated[
        int,
        typer.Option(
            help="Longest prompt a request may render for one judge call, in characters (413 beyond): a short inline template can render a huge one.",
            min=1000,
        ),
    ] = 200_000,
    max_request_prompt_chars: Annotated[
        int,
        typer.Option(
            help="Most prompt text one request may render in all, in characters (413 beyond).",
            min=1000,
        ),
    ] = 16_000_000,
    body_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds a client may take to send a request's body (408 beyond): a body that trickles in holds a slot of the ingress.",
            min=0.1,
        ),
    ] = 10.0,
    max_client_requests: Annotated[
        int,
        typer.Option(
            help="Requests one client address may have open at once on an ingress replica (429 beyond).",
            min=1,
        ),
    ] = 256,
    ingress_replicas: Annotated[
        int | None,
        typer.Option(
            help="Replicas of the ingress: when one dies, the others answer meanwhile and a client's retry reaches them (--max-concurrent and --max-queued are shared out among them). Default: 2 where this machine has at least 8 CPUs, else 1.",
            min=1,
            show_default=False,
        ),
    ] = None,
    openrlhf_unscored: Annotated[
        str | None,
        typer.Option(
            "--openrlhf-unscored",
            help="The reward of an unscored sample on /v1/openrlhf/ when the URL does not give ?unscored=: a number (flagged in OpenRLHF's extra_logs), or error (a 422, which stops OpenRLHF's step). Without it the URL must say.",
            show_default=False,
        ),
    ] = None,
    juror_checks: Annotated[
        bool,
        typer.Option(
            "--juror-checks/--no-juror-checks",
            help="Flag failing jurors in each request's verdicts: a judge collapsed onto one value, refusing, or departed from the others (three judges or more); counted in /metrics as jurybox_juror_flags_total.",
        ),
    ] = False,
    leave_out_flagged: Annotated[
        bool,
        typer.Option(
            "--leave-out-flagged",
            help="With --juror-checks: decide each request's verdicts without the jurors flagged in it, naming them in each verdict's `left_out` (such verdicts are never cached).",
        ),
    ] = False,
    sentinel_url: Annotated[
        str | None,
        typer.Option(
            "--sentinel-url",
            help="A second jurybox service (http://host:port) that scores a random --sentinel-share of /v1/openrlhf/'s scored samples as a held-out sentinel: each request's extra_logs gain jurybox/sentinel_gap, (1 + reward - sentinel) / 2, and jurybox/sentinel_alarm, raised by an anytime-valid drift test per client, rubric and options. It must serve the route's rubrics by the same names. Its cost: its judge calls on that share of the samples, at most 4 calls in flight per client, rubric and options; never the rewards' latency, and a sentinel that fails is logged and counted, never an error. Set here only: a client's request never names it.",
            show_default=False,
        ),
    ] = None,
    sentinel_token_env: Annotated[
        str | None,
        typer.Option(
            "--sentinel-token-env",
            help="Environment variable holding the --sentinel-url service's token.",
            show_default=False,
        ),
    ] = None,
    sentinel_share: Annotated[
        float,
        typer.Option(
            help="With --sentinel-url: the share of /v1/openrlhf/'s scored samples the sentinel scores, one in every ceil(1/share) counted across requests (0.05: one in 20, about 5% more judge calls with a sentinel jury the size of the reward's).",
            min=0.0,
            max=1.0,
        ),
    ] = 0.05,
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Judge every item, even one this configuration judged before (by default the verdict cache answers those; see `jurybox cache`).",
        ),
    ] = False,
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config",
            help="Print a Ray Serve config file (YAML) for `serve deploy` or a KubeRay RayService, and exit.",
        ),
    ] = False,
) -> None:
    """Serve the jury over HTTP: one Ray Serve deployment per judge and a validating ingress.

    POST /v1/score with {"rubric": NAME or an inline rubric, "items": [...]} returns one
    verdict per item, exactly as `jurybox judge` writes them. OpenAPI at /openapi.json, docs at
    /docs, health at /healthz, Prometheus metrics at /metrics. Runs until Ctrl-C or SIGTERM,
    then shuts the application down.
    """
    from jurybox.judges import cache as verdict_cache

    with reported():
        use_cache = not no_cache and verdict_cache.enabled()
        config = ServiceConfig(
            verdict_cache=str(verdict_cache.default_path()) if use_cache else None,
            jury=jury,
            rubrics=[str(p) for p in rubrics],
            calibration=[str(p) for p in calibration],
            conformal=[str(p) for p in conformal],
            route_width=route_width,
            token_env=token_env,
            cors_origins=cors_origin,
            ingress_replicas=ingress_replicas,
            openrlhf_unscored=openrlhf_unscored,
            juror_checks=juror_checks,
            leave_out_flagged=leave_out_flagged,
            sentinel_url=sentinel_url,
            sentinel_token_env=sentinel_token_env,
            sentinel_share=sentinel_share,
            limits=Limits(
                max_items=max_items,
                max_body_bytes=max_body_bytes,
                max_field_chars=max_field_chars,
                max_concurrent=max_concurrent,
                max_queued=max_queued,
                request_timeout_s=request_timeout,
                max_judge_calls=max_judge_calls,
                max_prompt_chars=max_prompt_chars,
                max_request_prompt_chars=max_request_prompt_chars,
                body_timeout_s=body_timeout,
                max_client_requests=max_client_requests,
            ),
        )
        if print_config:
            import yaml

            from jurybox.serving.service.builder import serve_config

            typer.echo(yaml.safe_dump(serve_config(config, port=options["port"]), sort_keys=False))
            return
        serve_jury(config, **options, say=note)
