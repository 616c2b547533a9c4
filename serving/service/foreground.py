"""The scoring service in the foreground on a local or joined Ray (`serve_jury`, for serve).

It checks the judges' weights before starting Ray, starts (or joins) Ray and Serve, deploys the
application `build_jury_app` builds, says each judge ready, serves until Ctrl-C or SIGTERM (or a
``stop`` event), lets the requests in flight finish, and deletes the application (and stops the
Ray it started).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jurybox.rubrics.errors import ExecutionError
from jurybox.serving.options import command_line, option
from jurybox.serving.service.config import ServiceConfig

if TYPE_CHECKING:
    from jurybox.judges import JurySpec
    from jurybox.serving.service.config import ResolvedConfig

Say = Callable[[str], None]

_QUIET = {"log_level": "WARNING", "enable_access_log": False}


@command_line(
    host=option(help="Address the HTTP server listens on."),
    port=option(help="Port the HTTP server listens on."),
    address=option(
        help="Join this Ray cluster (default: $RAY_ADDRESS, else start a local Ray).",
        show_default=False,
    ),
    drain_timeout=option(
        help="On Ctrl-C or SIGTERM: seconds to let requests in flight finish (new ones get 503) "
        "before stopping; a second Ctrl-C stops at once.",
        min=0,
    ),
    startup_timeout=option(help="Seconds to wait for every judge to load before giving up.", min=1),
)
def serve_jury(
    config: ServiceConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    address: str | None = None,
    drain_timeout: float = 30.0,
    startup_timeout: float = 900.0,
    say: Say | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve the jury over HTTP until Ctrl-C or SIGTERM, then shut the application down.

    One Ray Serve deployment per judge and a validating ingress, at ``http://host:port``.

    Args:
        config: What to serve: the jury, rubrics, maps, limits.
        host: Address the HTTP server listens on.
        port: Port the HTTP server listens on.
        address: Join this Ray cluster (default: ``$RAY_ADDRESS``, else start a local Ray;
            a local Ray's judges' weights are checked before it starts).
        drain_timeout: On the stop: seconds to let requests in flight finish (new ones get
            503) before stopping.
        startup_timeout: Seconds to wait for every judge to load before giving up.
        say: Where the progress lines go (each judge ready, serving, shutting down; default:
            stderr).
        stop: An event that stops the service when set (default: Ctrl-C or SIGTERM set it,
            and a second Ctrl-C stops at once; only in the main thread).

    Raises:
        InputError: The configuration cannot be served (e.g. ``ModelNotAvailable``: judges
            whose weights are missing, one line each).
        ExecutionError: A judge or the ingress could not start, or not all were ready after
            ``startup_timeout``.
    """
    say = say or _stderr
    plan = config.resolve()
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        check_models(plan.jury_spec())
    _run(config, plan, host, port, address, startup_timeout, drain_timeout, say, stop)


def check_models(spec: JurySpec) -> None:
    """Check, before starting Ray, that every judge's weights are where its jury says.

    What fails is a path that does not exist or a model package not installed, so that a typo
    fails in a second with one line rather than in each replica Serve starts. (Joining a
    cluster, the nodes' files count, not this machine's: Serve reports those.)

    Raises:
        ModelNotAvailable: Every judge whose weights are missing, one line each.
    """
    from jurybox.judges.backends.registry import backend_kind
    from jurybox.judges.weights import ModelNotAvailable, resolve

    missing = []
    for judge in spec.judges:
        if backend_kind(judge.backend).weights:
            try:
                resolve(judge.model, judge.revision)
            except ModelNotAvailable as exc:
                missing.append(f"judge {judge.name}: {exc}")
    if missing:
        raise ModelNotAvailable("\n".join(missing))


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run(
    config: ServiceConfig,
    plan: ResolvedConfig,
    host: str,
    port: int,
    address: str | None,
    startup_timeout: float,
    drain_timeout: float,
    say: Say,
    stop: threading.Event | None,
) -> None:
    import ray
    from ray import serve

    from jurybox.serving.service.builder import APP_NAME, INGRESS, build_jury_app

    # Serve's driver-side INFO lines ("Started Serve", "Deleting app") say nothing the notes
    # below do not; warnings still show.
    logging.getLogger("ray.serve").setLevel(logging.WARNING)
    spec = plan.jury_spec()
    own_ray = address is None
    _start_ray(spec, plan, address)
    stop = stop if stop is not None else _stop_on_signals()
    serving = False
    try:
        serve.start(
            http_options={
                "host": host,
                "port": port,
                "request_timeout_s": config.limits.request_timeout_s + 30,
            },
            logging_config=_QUIET,
        )
        app = build_jury_app(config)
        serve.run_many(
            [serve.RunTarget(app, name=APP_NAME, route_prefix="/", logging_config=_QUIET)],
            wait_for_applications_running=False,
        )
        _wait_until_ready(spec, plan, stop, startup_timeout, say)
        if not stop.is_set():
            serving = True
            say(
                f"jurybox is serving jury {spec.name} at http://{host}:{port} "
                f"(docs: http://{host}:{port}/docs); Ctrl-C to stop"
            )
        while not stop.is_set():
            stop.wait(1.0)
        if serving:
            _drain(serve.get_deployment_handle(INGRESS, app_name=APP_NAME), drain_timeout, say)
        say("shutting down ...")
    finally:
        try:
            # Only this application goes (its replicas stop gracefully): on a joined cluster
            # other applications keep running, and Serve's own actors go with a Ray this
            # process started. (serve.shutdown() also made Ray print a failed
            # ServeController.graceful_shutdown task at every Ctrl-C.)
            serve.delete(APP_NAME)
        finally:
            if own_ray:
                ray.shutdown()


def _start_ray(spec: JurySpec, plan: ResolvedConfig, address: str | None) -> None:
    """Start a Ray for the service here (``address`` None), or join the one at ``address``."""
    import ray

    from jurybox.serving.service.builder import INGRESS_CPUS

    if address is None:
        # Logical CPUs for every judge replica, the ingress replicas and Serve's own actors
        # (JurySpec.ray_cpus). Ray annotates logging_level as int but takes a level name (its
        # own default is "info").
        ray.init(
            num_cpus=spec.ray_cpus(light=1.5 + INGRESS_CPUS * plan.ingress_replicas),
            include_dashboard=False,
            logging_level="WARNING",  # type: ignore[arg-type]
        )
    else:
        ray.init(address=address, logging_level="WARNING")  # type: ignore[arg-type]  # as above


def _stop_on_signals() -> threading.Event:
    """An event Ctrl-C or SIGTERM sets; a second Ctrl-C raises KeyboardInterrupt at once."""
    stop = threading.Event()

    def on_signal(*_: object) -> None:
        if stop.is_set():  # a second Ctrl-C: stop now, whatever is in flight
            raise KeyboardInterrupt
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    return stop


def _wait_until_ready(
    spec: JurySpec,
    plan: ResolvedConfig,
    stop: threading.Event,
    startup_timeout: float,
    say: Say,
) -> None:
    """Say each judge and the ingress ready as Serve reports them; fail on one that cannot start.

    Raises:
        ExecutionError: A deployment failed, or not all were ready after ``startup_timeout``.
    """
    from ray import serve

    from jurybox.serving.service.builder import APP_NAME, INGRESS, judge_deployment_name

    say(f"starting jury {spec.name}: {', '.join(j.name for j in spec.judges)} ...")
    began = time.monotonic()
    pending = {judge_deployment_name(j.name): j.name for j in spec.judges}
    pending[INGRESS] = (
        "ingress" if plan.ingress_replicas == 1 else f"ingress ({plan.ingress_replicas} replicas)"
    )
    while pending and not stop.is_set():
        status = serve.status().applications.get(APP_NAME)
        deployments = status.deployments if status else {}
        for name in list(pending):
            d = deployments.get(name)
            if d is None:
                continue
            if d.status == "HEALTHY":
                say(f"{pending.pop(name)} ready ({time.monotonic() - began:.0f} s)")
            elif d.status in ("DEPLOY_FAILED", "UNHEALTHY") and d.message:
                raise ExecutionError(f"{pending[name]} could not start: {d.message}")
        if time.monotonic() - began > startup_timeout:
            raise ExecutionError(
                f"still not ready after {startup_timeout:.0f} s: "
                f"{', '.join(pending.values())} (raise --startup-timeout if loading "
                "the models takes longer here)"
            )
        stop.wait(1.0)


def _drain(ingress: Any, timeout_s: float, say: Say) -> None:
    """Let the requests in flight finish (at most ``timeout_s``) while new ones get 503."""
    say(f"finishing the requests in flight (at most {timeout_s:g} s; Ctrl-C again to stop now) ...")
    try:
        left = ingress.drain.remote(timeout_s).result(timeout_s=timeout_s + 30)
    except KeyboardInterrupt:
        say("stopping now")
        return
    except Exception as exc:  # the ingress is gone already: nothing in flight to wait for
        say(f"could not drain the ingress ({type(exc).__name__}); stopping")
        return
    if left:
        say(f"{left} request(s) still in flight after {timeout_s:g} s; stopping them")
