"""Judges that see images: which judges do, and the items' images materialised for them.

`materialize_images` is the one step that turns an item's image references into checked images
(`jurybox.rubrics.images`: limits, and an error naming the item and the image); the jury, the Ray
engine, the scoring service's admission and its Python client all call it. Here too: what a run
says about images a judge is not shown, and a request as chat messages with image parts, which
every backend that shows images builds its prompt from.

A judge sees images when its jury entry says ``vision: true``, or says nothing and its model's
config has a vision tower. Every judge is asked the same `Request`: a text-only judge is
given its ``messages`` (the prompt it would get without images), a judge that sees images the
same messages with the images placed where the rubric's template says (``{{ images_here }}``)
or, where it says nothing, as the first parts of the last user message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from jurybox.rubrics import Item
from jurybox.rubrics.images import ImagePolicy, is_inline, load_image, load_images
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


def decide_vision(judge: JudgeSpec) -> JudgeSpec:
    """``judge`` with its ``vision`` decided (`sees_images`): what its backend is made from.

    The jury, the Ray engine's judge stage and the service's judge replicas make every backend
    from it, so a backend reads ``spec.vision`` (a judge that sees images loads its model's
    processor, frames every prompt as message parts) and never looks at the model's config.
    """
    seen = sees_images(judge)
    return judge if judge.vision is seen else judge.model_copy(update={"vision": seen})


def shown(judge: JudgeSpec, requests: Sequence[Request]) -> list[Request]:
    """``requests`` as ``judge``'s backend receives them.

    Every judge is asked the same requests; a judge that does not see images receives them
    without their images (the prompt it would get for the item's text alone), so a backend is
    given images only when its judge sees them.
    """
    if not any(r.images for r in requests) or sees_images(judge):
        return list(requests)
    return [replace(r, images=()) if r.images else r for r in requests]


def jury_sees_images(jury: JurySpec) -> bool:
    """Whether any judge of ``jury`` sees images (else the items' images are never loaded)."""
    return any(sees_images(j) for j in jury.judges)


def materialize_images(item: Item, policy: ImagePolicy, *, files_only: bool = False) -> Item:
    """``item`` holding its images: every reference read once and checked.

    This is the one step that turns an item's image references into images a judge can be shown,
    whichever way jurybox runs (the jury in-process, the Ray engine's read stage, the scoring
    service's admission, the service's Python client): the policy's limits (bytes, pixels, sides,
    formats, images per item) and one error, naming the item and the image (its index and
    reference). An item that holds its images already, or names none, is returned as it is.

    With ``files_only`` (a client sending the item to a service that takes images inline only),
    the image files are read and checked here and the item comes back naming them as ``data:``
    URLs of their bytes; its inline references are left as they are, for the service to check
    under its own limits (the count of images per item too), and nothing is held loaded.

    Args:
        item: The item, its images named by reference.
        policy: Where the images may come from and how large they may be.
        files_only: Read the image files only and send them inline (see above).

    Returns:
        The item with its loaded images (`Item.loaded_images`), or, with ``files_only``, with
        its image files as ``data:`` URLs.

    Raises:
        ImageError: An image cannot be shown to a judge: missing, unreadable, not an image, of a
            format not taken or over a limit (``too_large``); the message names the item and
            the image.
    """
    if files_only:
        if not any(not is_inline(ref) for ref in item.images):
            return item
        refs = [
            ref if is_inline(ref) else load_image(ref, policy, item=item.id, where=f"images[{k}]")
            for k, ref in enumerate(item.images)
        ]
        inline = [ref if isinstance(ref, str) else ref.data_url() for ref in refs]
        return item.model_copy(update={"images": inline})
    if not item.images_pending:
        return item
    return item.with_images(load_images(item.images, policy, item=item.id))


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
