"""Judges that see images: which judges do, and the items' images loaded for them.

The images are loaded once, checked (`jurybox.rubrics.images`). Here too: what a run says about
images a judge is not shown, and a request as chat messages with image parts, which every backend
that shows images builds its prompt from.

A judge sees images when its jury entry says ``vision: true``, or says nothing and its model's
config has a vision tower. Every judge is asked the same `Request`: a text-only judge is
given its ``messages`` (the prompt it would get without images), a judge that sees images the
same messages with the images placed where the rubric's template says (``{{ images_here }}``)
or, where it says nothing, as the first parts of the last user message.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from jurybox.rubrics import Item
from jurybox.rubrics.images import ImagePolicy, load_images
from jurybox.rubrics.prompts import IMAGE_PLACE

from .backends.protocol import Request

if TYPE_CHECKING:
    from .spec import JudgeSpec, JurySpec


def sees_images(judge: JudgeSpec) -> bool:
    """Whether ``judge`` is shown the items' images: its ``vision``, else its model's config."""
    if judge.vision is not None:
        return judge.vision
    return _model_sees_images(judge.model, judge.revision, judge.backend)


@lru_cache(maxsize=64)
def _model_sees_images(model: str, revision: str | None, backend: str) -> bool:
    from .weights import model_config

    config = model_config(model, revision, backend)
    return config is not None and isinstance(config.get("vision_config"), dict)


def jury_sees_images(jury: JurySpec) -> bool:
    """Whether any judge of ``jury`` sees images (else the items' images are never loaded)."""
    return any(sees_images(j) for j in jury.judges)


def load_item_images(items: Sequence[Item], policy: ImagePolicy) -> list[Item]:
    """``items`` with their images loaded and checked.

    Those that hold them already, or name none, are as they are.

    Raises:
        ImageError: An image cannot be shown to a judge (naming the item and the image).
    """
    return [
        it.with_images(load_images(it.images, policy, item=it.id)) if it.images_pending else it
        for it in items
    ]


def image_notes(
    judge: JudgeSpec, rubric_name: str, requests: Sequence[Request | None]
) -> list[str]:
    """What a run should say once about ``judge`` and the items' images in ``requests``.

    That is a text-only judge asked about items with images (judged on their text), or a judge
    that sees images given a rubric with no place for them (shown first in the user message).
    """
    with_images = [r for r in requests if r is not None and r.images]
    if not with_images:
        return []
    if not sees_images(judge):
        return [
            f"judge {judge.name} does not see images (vision: false, or a text-only "
            "model): the items' images were not shown to it; it judged their text"
        ]
    if any(r.image_place is None for r in with_images):
        return [
            f"rubric {rubric_name} has no place for images in its template "
            f"({{{{ {IMAGE_PLACE} }}}}): judge {judge.name} was shown each item's images "
            "as the first parts of the user message"
        ]
    return []


def chat_parts(request: Request, image_part: Any = None) -> list[dict[str, Any]]:
    """``request.messages`` with every content a list of parts.

    That is what the chat templates of vision-language models take: text parts, and one image part
    per image where the template placed them (``request.image_place``), else first in the last user
    message. ``image_part(image)`` makes an image's part (default ``{"type": "image"}``, the
    processor being given the pixels separately).
    """

    def part(k: int) -> dict[str, Any]:
        return image_part(request.images[k]) if image_part is not None else {"type": "image"}

    place = request.image_place
    if place is None and request.images:
        users = [k for k, m in enumerate(request.messages) if m["role"] == "user"]
        place = (users[-1] if users else len(request.messages) - 1, 0)
    out: list[dict[str, Any]] = []
    for k, message in enumerate(request.messages):
        text = message["content"]
        if place is None or k != place[0] or not request.images:
            out.append({"role": message["role"], "content": [{"type": "text", "text": text}]})
            continue
        before, after = text[: place[1]], text[place[1] :]
        parts: list[dict[str, Any]] = [{"type": "text", "text": before}] if before else []
        parts += [part(i) for i in range(len(request.images))]
        if after:
            parts.append({"type": "text", "text": after})
        out.append({"role": message["role"], "content": parts})
    return out
