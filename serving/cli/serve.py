"""``jurybox serve``: run the scoring service in the foreground on a local or joined Ray."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import given_to, note, options_of, reported
from jurybox.serving.service.config import ServiceConfig
from jurybox.serving.service.foreground import serve_jury


@options_of(
    ServiceConfig,
    serve_jury,
    place={
        "host": "token_env",
        "port": "token_env",
        "address": "cors_origins",
        "no_cache": "drain_timeout",
    },
)
def serve(
    options: dict[str, Any],
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
            **given_to(ServiceConfig, options),
            verdict_cache=str(verdict_cache.default_path()) if use_cache else None,
        )
        if print_config:
            import yaml

            from jurybox.serving.service.builder import serve_config

            typer.echo(yaml.safe_dump(serve_config(config, port=options["port"]), sort_keys=False))
            return
        serve_jury(config, **given_to(serve_jury, options), say=note)
