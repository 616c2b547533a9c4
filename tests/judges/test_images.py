"""Judges that see images (#55), on the replay jury and without a model: images loaded once and
checked (bounds before decoding, clear errors naming the item and the file), placed where the
template says, shown to the judges that see them and not to the others (said once), the verdict
cache keyed by their content, and `jurybox judge` on a MIRAGE-style file with images."""

from __future__ import annotations

import base64
import json
import struct
import time
import zlib
from pathlib import Path

import pytest
from vision_helpers import LEAF, ROWS, SPOTS, items, write_rows, write_vision_replay_jury

from jurybox.judges import Jury
from jurybox.judges.cache import VerdictCache
from jurybox.judges.judging import render_requests
from jurybox.rubrics import Item, input_hash, load_rubric
from jurybox.rubrics.images import ImageError, ImagePolicy, load_image, load_images


def data_url(path: Path, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode()}"


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` and whose pixels are a few bytes: what
    a decompression bomb's header looks like."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body))
            + kind
            + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


@pytest.fixture(scope="module")
def vision_replay(tmp_path_factory) -> Path:
    return write_vision_replay_jury(tmp_path_factory.mktemp("vision") / "jury.yaml")


@pytest.fixture(scope="module")
def replay_vision(vision_replay):
    jury = Jury.load(vision_replay)
    jury.load_backends()
    yield jury
    jury.close()


# -- loading and checking ---------------------------------------------------------------------


def test_an_image_is_the_same_whichever_way_it_is_given(tmp_path):
    by_path = load_image(str(SPOTS))
    assert (by_path.format, by_path.width, by_path.height) == ("JPEG", 80, 80)
    same = [
        load_image(SPOTS.as_uri()),
        load_image(data_url(SPOTS, "image/jpeg")),
        load_image("spots.jpg", ImagePolicy(root=str(SPOTS.parent))),
        load_image(base64.b64encode(SPOTS.read_bytes()).decode(), ImagePolicy(inline_only=True)),
    ]
    assert {im.digest for im in same} == {by_path.digest}
    assert by_path.digest != load_image(str(LEAF)).digest
    assert load_image(data_url(LEAF)).data == LEAF.read_bytes()  # never re-encoded


@pytest.mark.parametrize(
    "ref,policy,says,too_large",
    [
        ("missing.png", ImagePolicy(), "no such file", False),
        ("https://example.org/leaf.png", ImagePolicy(), "not fetched unless allowed", False),
        (str(LEAF), ImagePolicy(inline_only=True), "only inline images", False),
        ("data:image/png,abc", ImagePolicy(), "must be base64", False),
        ("data:image/png;base64,@@@@", ImagePolicy(), "not valid base64", False),
        (str(SPOTS), ImagePolicy(max_bytes=1024), "more than the limit of 1,024", True),
        (str(SPOTS), ImagePolicy(max_pixels=1000), "80x80 = 6,400 pixels", True),
        (str(SPOTS), ImagePolicy(formats=("PNG",)), "not an image of a format taken here", False),
    ],
)
def test_a_bad_image_is_refused_naming_the_item_and_the_image(ref, policy, says, too_large):
    with pytest.raises(ImageError) as caught:
        load_images([ref], policy, item="q7")
    assert "item 'q7': images[0]" in str(caught.value) and says in str(caught.value)
    assert caught.value.field == "images[0]" and caught.value.too_large is too_large


def test_corrupt_and_bomb_images_are_refused_before_any_judge(tmp_path):
    not_image = tmp_path / "notes.png"
    not_image.write_text("a grower's notes, not a photo")
    truncated = tmp_path / "cut.jpg"
    truncated.write_bytes(SPOTS.read_bytes()[:400])
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(png_header(60_000, 60_000))  # 3.6 gigapixels in 100 bytes
    with pytest.raises(ImageError, match="not an image of a format"):
        load_image(str(not_image))
    with pytest.raises(ImageError, match="unreadable image"):
        load_image(str(truncated))
    began = time.process_time()  # CPU time: other processes' load does not count
    with pytest.raises(ImageError, match="pixels") as caught:
        load_image(str(bomb))
    assert caught.value.too_large and time.process_time() - began < 1.0  # never decoded
    with pytest.raises(ImageError, match="more than the limit of 2 per item"):
        load_images([str(LEAF)] * 3, ImagePolicy(max_images=2), item="many")


# -- the item, the prompt, the cache ------------------------------------------------------------


def test_the_template_places_the_images_and_a_text_only_prompt_is_unchanged():
    rubric = load_rubric("mirage-id")
    (plain,) = items(ROWS[3:])  # no image
    item = items(ROWS[:1])[0]
    shown = item.with_images(load_images(item.images))
    (with_images,) = render_requests(rubric, [shown]).requests
    (without,) = render_requests(rubric, [item]).requests
    assert with_images is not None and without is not None
    assert with_images.messages == without.messages  # what a text-only judge is given
    assert [im.digest for im in with_images.images] == shown.image_digests and not without.images
    k, at = with_images.image_place
    assert with_images.messages[k]["content"][at:].startswith(item.question)
    (general,) = render_requests(
        load_rubric("general"), [shown.model_copy(update={"reference": "x"})]
    ).requests
    assert general is not None and general.image_place is None  # no place: chat parts
    assert render_requests(rubric, [plain]).requests[0].image_place is not None


def test_the_cache_key_is_the_images_content(tmp_path):
    photo = tmp_path / "photo.png"
    photo.write_bytes(LEAF.read_bytes())
    item = Item(id="a", question="q", response="r", images=[str(photo)])
    first = item.with_images(load_images(item.images))
    photo.write_bytes(SPOTS.read_bytes())  # the same path, another photo
    second = item.with_images(load_images(item.images))
    assert input_hash(first) != input_hash(second) != input_hash(item)
    assert input_hash(Item(id="b")) == input_hash(Item(id="b").with_images([]))


# -- judging on the replay jury -----------------------------------------------------------------


def test_vision_judges_see_the_images_and_text_only_judges_are_said_once(replay_vision):
    rubric = load_rubric("mirage-id")
    verdicts = replay_vision.score(rubric, items())
    backend = replay_vision.backend(replay_vision.spec.judges[0])
    assert backend.replayed == len(ROWS) and backend.unrecorded == 0  # recorded prompts + images
    digests = {it.id: [load_image(p).digest for p in it.images] for it in items()}
    for verdict in verdicts:
        for vote in verdict.votes:
            want = digests[verdict.id] if vote.judge == "tiny-idefics3" else []
            assert (vote.images or []) == want, (verdict.id, vote.judge)
        record = verdict.to_record()
        assert all(
            ("images" in v) == (v["judge"] == "tiny-idefics3" and bool(digests[verdict.id]))
            for v in record["votes"]
        )
    dist = {
        v.id: next(
            x.distribution
            for x in v.votes
            if x.judge == "tiny-idefics3" and x.criterion == "reasoning_accuracy"
        )
        for v in verdicts
    }
    assert dist["v1"] != dist["v2"]  # another image, another answer distribution
    notes = replay_vision.notes()
    assert sum("smollm2-135m does not see images" in n for n in notes) == 1
    replay_vision.score(rubric, items())
    assert sum("does not see images" in n for n in replay_vision.notes()) == 1  # once a run


class _Noting:
    """A backend that notes how many images each request it receives carries."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.received = inner, inner.name, []

    def generate(self, requests, cancelled=None):
        self.received += [len(r.images) for r in requests]
        return self.inner.generate(requests, cancelled=cancelled)

    def close(self) -> None:
        self.inner.close()


def test_a_backend_receives_images_only_when_its_judge_sees_them(vision_replay, replay_vision):
    """Whether a judge sees images is decided where the jury asks it: the text-only judge's
    backend receives its requests without the images (and the verdicts are those of the jury
    whose backends filtered them themselves); a backend is made from the spec with ``vision``
    decided, never unset, so no backend looks at the model's config itself."""
    from jurybox.judges.backends.registry import make_backend
    from jurybox.judges.spec import JurySpec

    spec = replay_vision.spec
    noting = {j.name: _Noting(make_backend(j)) for j in spec.judges}
    rubric = load_rubric("mirage-id")
    with Jury(spec, backends=noting) as jury:
        verdicts = jury.score(rubric, items())
    assert any(noting["tiny-idefics3"].received)
    assert noting["smollm2-135m"].received and not any(noting["smollm2-135m"].received)
    assert [v.scores for v in verdicts] == [v.scores for v in replay_vision.score(rubric, items())]
    unset = spec.judges[1].model_copy(update={"vision": None})  # SmolLM2: no vision tower
    with Jury(JurySpec.model_validate({**spec.model_dump(), "judges": [unset]})) as jury:
        assert jury.backend(jury.spec.judges[0]).spec.vision is False


def test_a_rubric_without_a_place_shows_the_images_first_and_says_so(replay_vision):
    two = [it.model_copy(update={"reference": "see the photo"}) for it in items(ROWS[:2])]
    (verdict, _) = replay_vision.score(load_rubric("general"), two)
    assert next(v for v in verdict.votes if v.judge == "tiny-idefics3").images
    assert any("rubric general has no place for images" in n for n in replay_vision.notes())


def test_judge_a_mirage_file_with_images_loses_nothing(vision_replay, tmp_path):
    from jurybox.serving.runs.plan import RunPlan

    bad = [
        {
            "id": "gone",
            "question": "q",
            "response": "r",
            "entity_name": "x",
            "images": ["missing.jpg"],
        },
        {
            "id": "text",
            "question": "q",
            "response": "r",
            "entity_name": "x",
            "images": ["notes.png"],
        },
    ]
    predictions = write_rows(tmp_path / "run" / "mmst.jsonl", ROWS + bad)
    (predictions.parent / "notes.png").write_text("not a photo")
    out = tmp_path / "out.jsonl"
    plan = RunPlan(
        "mirage-id", predictions=str(predictions), jury=str(vision_replay), out=out, cache=False
    )
    try:
        report = plan.run()
    finally:
        plan.close()
    assert report.judged == len(ROWS) and report.n_row_errors == 2
    errors = sorted(f"{e.field}: {e.message}" for e in report.row_errors)
    assert errors[0].startswith("images[0]: item 'gone': images[0] missing.jpg: no such file")
    assert errors[1].startswith("images[0]: item 'text': images[0] notes.png: not an image")
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(records) == {r["id"] for r in ROWS}
    seen = {v["judge"]: v.get("images") for v in records["v3"]["votes"]}
    assert seen["tiny-idefics3"] == [load_image(str(LEAF)).digest, load_image(str(SPOTS)).digest]
    assert seen["smollm2-135m"] is None
    assert any("does not see images" in n for n in report.notes)


def test_the_verdict_cache_answers_the_same_images_again(vision_replay, tmp_path):
    cache = VerdictCache(tmp_path / "verdicts.sqlite")
    with Jury.load(vision_replay, cache=cache) as jury:
        first = jury.score(load_rubric("mirage-id"), items()[:2])
        again = jury.score(load_rubric("mirage-id"), items()[:2])
        assert jury.cache_hits == 2 and again == first
