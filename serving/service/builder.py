"""Building the scoring service as a Ray Serve application.

One deployment per judge (sized from the jury file's execution settings) and the ingress. The same
builder serves ``jurybox serve``, ``serve run jurybox.serving.service.builder:build_jury_app
jury=tiny`` and a config file for ``serve deploy`` or a KubeRay RayService (``jurybox serve
--print-config``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from jurybox.judges import JudgeSpec, JurySpec
from jurybox.serving.service.config import AUTO_INGRESS_REPLICAS, STATE_ACTOR, ServiceConfig

if TYPE_CHECKING:
    from ray.serve import Deployment

APP_NAME = "jurybox"
INGRESS = "JuryIngress"
IMPORT_PATH = "jurybox.serving.service.builder:build_jury_app"
STATE_CLASS = "jurybox.serving.service.shared:IngressState"
INGRESS_CPUS = 0.5  # logical CPUs reserved per ingress replica
INGRESS_MAX_ONGOING = 1024  # requests one ingress replica holds open at once, at least
# How Ray Serve runs a replica's code (read by Serve in each replica process): on the replica's
# own event loop rather than a second one in a thread of its own, and a handle's router on that
# loop too. The hops between the loops were about half of the ingress's CPU per request; with
# both off, an 8-item request from one client took ~4 ms less and 8 clients got ~30% more
# throughput on 2 cores (perf/serve_load.py --backend replay; perf/RESULTS.md). Nothing of ours
# blocks the loop: rendering, the cache and generates run in threads or worker processes.
REPLICA_ENV = {
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
}


def judge_deployment_name(judge: str) -> str:
    """The Serve deployment of the judge named ``judge``."""
    return f"judge-{judge}"


def _in_replica_env(actor_options: dict[str, Any]) -> dict[str, Any]:
    """``actor_options`` with `REPLICA_ENV` in its runtime environment."""
    runtime_env = actor_options.get("runtime_env", {})
    return {
        **actor_options,
        "runtime_env": {
            **runtime_env,
            "env_vars": {**REPLICA_ENV, **runtime_env.get("env_vars", {})},
        },
    }


def judge_options(judge: JudgeSpec) -> dict[str, Any]:
    """Ray Serve options for one judge's deployment, from its execution settings."""
    options = judge.execution.serve_options()
    return {
        "name": judge_deployment_name(judge.name),
        **options,
        "ray_actor_options": _in_replica_env(options["ray_actor_options"]),
        # Loading a model takes a while; a slow first health check is not a dead replica.
        "health_check_period_s": 10,
        "health_check_timeout_s": 60,
        "graceful_shutdown_timeout_s": 60,
    }


def ingress_options(config: ServiceConfig, replicas: int) -> dict[str, Any]:
    """Ray Serve options for the ingress deployment.

    ``replicas`` replicas sharing their metrics and drain through a deployment actor
    (`jurybox.serving.service.shared`); every request is let through to the replica's gate, which
    answers 429 itself.
    """
    limits = config.limits
    # Every request is let through to the replica, whose own checks refuse with a JSON error
    # and Retry-After (the gate, a client's share, a body's time): Serve's own refusal is a
    # plain-text 503 without Retry-After. Open requests cost the replica little (a slow body,
    # /healthz, a request waiting at the gate), so the room is wide.
    ongoing = max(
        INGRESS_MAX_ONGOING,
        4 * limits.max_client_requests,
        limits.max_concurrent + limits.max_queued + 8,
    )
    return {
        "name": INGRESS,
        "num_replicas": replicas,
        "max_ongoing_requests": ongoing,
        "max_queued_requests": ongoing,
        "ray_actor_options": _in_replica_env({"num_cpus": INGRESS_CPUS}),
        "deployment_actors": [
            {"name": STATE_ACTOR, "actor_class": STATE_CLASS, "actor_options": {"num_cpus": 0}}
        ],
    }


def build_jury_app(args: dict[str, Any] | ServiceConfig) -> Any:
    """The Serve application for ``args``: the builder a config file's ``import_path`` names.

    One parameter, as Ray Serve requires of a builder that takes a config's ``args`` (``serve
    deploy``, ``serve run ... jury=tiny``). Everything is validated here: a bad jury, rubric or
    calibration map fails the deploy, not a request.

    Args:
        args: The fields of `ServiceConfig`, or one.

    Returns:
        The Ray Serve application (a bound ingress deployment), for ``serve.run``.

    Raises:
        InputError: A jury, rubric or calibration map that cannot be loaded or does not fit, or
            settings that contradict one another (the error names the field).
    """
    return jury_app(args)


def jury_app(
    args: dict[str, Any] | ServiceConfig, backend_factory: Callable[[JudgeSpec], Any] | None = None
) -> Any:
    """The Serve application for ``args`` (the fields of `ServiceConfig`).

    Everything is validated here: a bad jury, rubric or calibration map fails the deploy, not a
    request.

    ``backend_factory(judge_spec)`` replaces every judge's backend (benchmarks and tests: e.g.
    ``perf/serve_load.py --backend replay``, as ``judge_with_ray`` takes one); it travels to the
    judge replicas pickled (by value when defined in ``__main__``). Not a config field: no config
    file or ``jurybox serve`` option can reach it.
    """
    from ray import serve
    from ray.serve.config import DeploymentActorConfig

    from jurybox.serving.service.deployments import JudgeServer
    from jurybox.serving.service.ingress import JuryIngress

    config = args if isinstance(args, ServiceConfig) else ServiceConfig.model_validate(args)
    plan = config.resolve()
    spec = plan.jury_spec()
    # serve.deployment(cls) is a Deployment; Ray annotates only its decorator-factory form.
    judge_cls = cast("Deployment", serve.deployment(JudgeServer))
    extra = () if backend_factory is None else (backend_factory,)
    # A model that fails to load fails alike on a second try, and each try loads it again: the
    # first failure of a judge's first start is the answer (Serve's default is 3 tries; a
    # replica that dies once its judge has started is still replaced). Set here, not in
    # judge_options: Serve's config files have no such field, and keep what the code sets.
    judges = {
        j.name: judge_cls.options(**judge_options(j), max_constructor_retry_count=1).bind(
            j.model_dump(mode="json"), *extra
        )
        for j in spec.judges
    }
    # Late-bound ingress: the replica builds its FastAPI app after __init__
    # (JuryIngress.__serve_build_asgi_app__), so no route is a rewritten method.
    ingress_cls = cast("Deployment", serve.deployment(serve.ingress()(JuryIngress)))
    options = ingress_options(config, plan.ingress_replicas)
    options["deployment_actors"] = [
        DeploymentActorConfig(**actor) for actor in options["deployment_actors"]
    ]
    return ingress_cls.options(**options).bind(plan.model_dump(mode="json"), judges)


def serve_config(config: ServiceConfig, host: str = "0.0.0.0", port: int = 8000) -> dict[str, Any]:
    """A Ray Serve config file (``serve deploy``, KubeRay's ``serveConfigV2``) for ``config``.

    Per-judge resources, replicas and autoscaling, placement bundles for tensor parallelism.
    """
    plan = config.resolve()  # validate now, as the cluster will
    spec: JurySpec = plan.jury_spec()
    # A cluster has the CPUs for two ingress replicas, whatever this machine has.
    replicas = config.ingress_replicas or min(AUTO_INGRESS_REPLICAS, config.limits.max_concurrent)
    deployments = [ingress_options(config, replicas)] + [judge_options(j) for j in spec.judges]
    return {
        "proxy_location": "EveryNode",
        "http_options": {
            "host": host,
            "port": port,
            "request_timeout_s": config.limits.request_timeout_s + 30,
        },
        "applications": [
            {
                "name": APP_NAME,
                "route_prefix": "/",
                "import_path": IMPORT_PATH,
                "args": config.model_dump(mode="json", exclude_defaults=True),
                "deployments": deployments,
            }
        ],
    }
