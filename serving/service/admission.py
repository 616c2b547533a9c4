"""What a score request must pass before any judge sees it, and where that work runs.

`prepare` turns a request's rubric and items into the judges' requests: text that is
Unicode, nesting within bounds, items as ``jurybox judge`` reads them, a number of judge calls
within the service's limit, every prompt rendered. It is linear in the request's size.

A rubric the service knows is the operator's: its requests are prepared in a thread, off the
event loop. An inline rubric is the client's, and its template is code: it is checked against the
size limits before it is even parsed, then validated and rendered in a worker process
(`jurybox.serving.service.workers.Workers`) with a time budget and a memory cap, so a template
that loops for hours or builds a huge string costs one killed worker, never a stalled route or the
ingress's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from pydantic import ValidationError

from jurybox.judges.images import materialize_images
from jurybox.judges.judging import Requests, render_requests
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.checklist import units
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.formula import MAX_FORMULA_CHARS
from jurybox.rubrics.images import Image, ImageError, ImagePolicy, image_tokens
from jurybox.rubrics.item_fields import FieldError, to_item
from jurybox.rubrics.loading import format_validation_error
from jurybox.serving.errors import Invalid, TooLarge
from jurybox.serving.service.checklists import Units, check_points, unit_field
from jurybox.serving.service.config import Limits

# What one image token counts as against the prompt budgets (max_prompt_chars is "about 50,000
# tokens" for 200,000 characters).
CHARS_PER_IMAGE_TOKEN = 4


#: A request's rubric, its items, and its judge calls: a checklist rubric's per unit group.
Prepared = tuple[Rubric, list[Item], Requests | Units]

#: Images a group request decoded once, by the reference its items carry (`shared_ref`). Set in
#: that request's own task, so the threads and worker calls it makes see them and no other
#: request can name them.
SHARED_IMAGES: ContextVar[Mapping[str, Image] | None] = ContextVar(
    "jurybox_shared_images", default=None
)


def shared_ref(image: Image) -> str:
    """The reference an item built from a group carries for one of the group's decoded images.

    A ``data:`` URL (so a template that shows ``images`` shows "inline image N", as for a score
    item), resolved only through `SHARED_IMAGES`: sent by a client, it is a 422 (not base64).
    """
    return f"data:image/x-jurybox-shared;digest={image.digest},"


def no_images_seen(jury_name: str, where: str) -> Invalid:
    """The 422 for images sent to a jury none of whose judges sees images (not decoded)."""
    return Invalid(
        f"{where}: no judge of this jury sees images (jury {jury_name}), so they would be "
        "ignored; send it without images (or serve a jury with a judge that sees images: "
        "vision: true)",
        where,
    )


def prepare(
    rubric: Rubric | dict[str, Any],
    raw_items: Sequence[Item | dict[str, Any]],
    limits: Limits,
    allow_empty: bool,
    seen_by: str | None = None,
) -> Prepared:
    """The rubric, the items and every judge call's prompt of a request, checked.

    A `RequestProblem` (`Invalid`, `TooLarge`) naming the field (or limit) at fault otherwise.
    ``seen_by``: None when a judge of the jury sees images, else the jury's name, and an item's
    images are a 422 before any of them is decoded. An `Item` (one a group request's job built)
    is checked as a client's fields are (`item_fields`).
    """
    try:
        if isinstance(rubric, dict):
            rubric = _inline_rubric(rubric, limits)
        calls = rubric.judge_calls  # (a checklist rubric's: at least this, per item)
        if len(raw_items) * calls > limits.max_judge_calls:
            raise TooLarge(
                f"{len(raw_items)} items x {calls} judge calls "
                f"per item (rubric {rubric.name}) = {len(raw_items) * calls} judge "
                f"calls; this service takes at most {limits.max_judge_calls} per "
                "request (max_judge_calls): send fewer items",
                "items",
            )
        items: list[Item] = []
        seen: dict[str, int] = {}
        for i, entry in enumerate(raw_items):
            fields = item_fields(entry) if isinstance(entry, Item) else entry
            check_text(fields, f"items[{i}]", limits.max_nesting)
            try:
                item = to_item(fields, {}, rubric, limits.max_field_chars, allow_empty)
            except FieldError as exc:
                raise Invalid(
                    f"items[{i}].{exc.field}: {exc.message}",
                    f"items[{i}].{exc.field}",
                ) from None
            if item.id in seen:
                raise Invalid(
                    f"items[{i}].id: duplicate id {item.id!r} (also items[{seen[item.id]}])",
                    f"items[{i}].id",
                )
            seen[item.id] = i
            if seen_by is not None and item.images:
                raise no_images_seen(seen_by, f"items[{i}].images")
            items.append(item)
        if rubric.checklist is not None:
            check_points(rubric, items, limits)
        items = inline_images(items, limits)
        if rubric.checklist is not None:
            return rubric, items, _unit_requests(rubric, items, limits)
        requests = render_requests(rubric, items)
        check_prompts(requests, limits)
        return rubric, items, requests
    except InputError as exc:  # e.g. items lacking an input the rubric needs
        raise Invalid(str(exc), exc.field) from None
    except MemoryError:
        raise _out_of_memory() from None


def _unit_requests(rubric: Rubric, items: list[Item], limits: Limits) -> Units:
    """A checklist rubric's unit groups and their judge calls, rendered and checked."""
    groups = units(rubric, items)
    requests = [render_requests(group.rubric, list(group.items)) for group in groups]
    total = 0
    for group, calls in zip(groups, requests):
        total = check_prompts(calls, limits, total, unit_field(items, group))
    return Units(groups, requests)


def item_fields(item: Item) -> dict[str, Any]:
    """An item's fields as a client would send them (its images by reference, as they are)."""
    fields = {k: v for k, v in item.fields().items() if v is not None and v != []}
    if item.checklist is not None:  # every field of each point (fields() shows what prompts show)
        fields["checklist"] = [p.model_dump(mode="json") for p in item.checklist]
    if item.images:  # the references themselves (fields() shows an inline one by its number)
        fields["images"] = list(item.images)
    return {"id": item.id, **fields}


def prompt_sizes(
    rubric: Rubric | dict[str, Any], raw_items: list[dict[str, Any]], limits: Limits
) -> list[tuple[int, int]]:
    """Per item, its prompts' characters in all and its largest prompt's (as `check_prompts` counts).

    For estimates of what a group request's rounds render, from a few probe items; an inline
    rubric (a dict) is validated here (run this in a worker). A field that cannot make an item is
    an `InputError` naming it (``field``: ``items[i].name``), for the caller to place.
    """
    try:
        if isinstance(rubric, dict):
            rubric = _inline_rubric(rubric, limits)
        made = []
        for i, fields in enumerate(raw_items):
            try:
                made.append(to_item(fields, {}, rubric, limits.max_field_chars, True))
            except FieldError as exc:
                raise InputError(exc.message, field=f"items[{i}].{exc.field}") from None
        made = inline_images(made, limits)
        if rubric.checklist is not None:  # an item's prompts: its units'
            out = [(0, 0)] * len(made)
            for group in units(rubric, made):
                for u, size in enumerate(_sizes(render_requests(group.rubric, list(group.items)))):
                    i = group.owner[u][0]
                    out[i] = (out[i][0] + size[0], max(out[i][1], size[1]))
            return out
        return _sizes(render_requests(rubric, made))
    except MemoryError:
        raise _out_of_memory() from None


def _sizes(requests: Requests) -> list[tuple[int, int]]:
    """Per item of ``requests``, its prompts' characters in all and its largest prompt's."""
    n = len(requests.calls)
    sizes = [_size(r) if r is not None else 0 for r in requests.requests]
    return [
        (sum(sizes[k * n : k * n + n]), max(sizes[k * n : k * n + n]))
        for k in range(len(requests.item_ids))
    ]


def _size(request: Any) -> int:
    return sum(len(m["content"]) for m in request.messages) + CHARS_PER_IMAGE_TOKEN * sum(
        image_tokens(im.width, im.height) for im in request.images
    )


def image_policy(limits: Limits) -> ImagePolicy:
    """The images a request may carry: inline only, within the service's limits.

    Inline: ``data:`` URLs or base64; no file is read and no URL fetched on a client's word.
    """
    return ImagePolicy(
        max_bytes=limits.max_image_bytes,
        max_pixels=limits.max_image_pixels,
        max_images=limits.max_images_per_item,
        inline_only=True,
    )


def inline_images(items: list[Item], limits: Limits) -> list[Item]:
    """The items holding their images, decoded and checked.

    In the caller's thread or worker: never on the event loop. 413 naming the image over a limit, or
    the request's images over ``max_request_image_bytes`` in all; 422 naming one that is not an
    inline image or not an image at all.
    """
    policy = image_policy(limits)
    shared = SHARED_IMAGES.get() or {}
    total = 0
    out = []
    for i, item in enumerate(items):
        if not item.images:
            out.append(item)
            continue
        if all(ref in shared for ref in item.images):  # decoded and counted once, by its group
            out.append(item.with_images([shared[ref] for ref in item.images]))
            continue
        try:
            images = materialize_images(item, policy).loaded_images
        except ImageError as exc:
            where = f"items[{i}].{exc.field or 'images'}"
            raise (TooLarge if exc.too_large else Invalid)(f"{where}: {exc}", where) from None
        total += sum(len(im.data) for im in images)
        if total > limits.max_request_image_bytes:
            raise TooLarge(
                f"the request's images have more than {total:,} "
                "bytes in all; this service takes at most "
                f"{limits.max_request_image_bytes:,} (max_request_image_bytes)",
                f"items[{i}].images",
            )
        out.append(item.with_images(images))
    return out


def inline_rubric(ref: dict[str, Any], limits: Limits) -> Rubric:
    """An inline rubric, validated (in a worker: see `jurybox.serving.service.workers`)."""
    try:
        return _inline_rubric(ref, limits)
    except MemoryError:
        raise _out_of_memory() from None


def _out_of_memory() -> Invalid:
    return Invalid(
        "the inline rubric's template needs more memory than the service allows a template",
        "rubric.template",
    )


def _inline_rubric(ref: dict[str, Any], limits: Limits) -> Rubric:
    check_inline(ref, limits)
    try:
        return Rubric.model_validate(ref)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Invalid(
            format_validation_error("inline rubric", exc),
            "rubric" + (f".{where}" if where else ""),
        ) from None


def check_rubric_size(ref: dict[str, Any], limits: Limits) -> None:
    """413 naming the limit when an inline rubric is larger than the service takes.

    Checked on the raw request, before validating or compiling anything of it.
    """
    template = sum(len(ref[k]) for k in ("template", "system") if isinstance(ref.get(k), str))
    if template > limits.max_template_chars:
        raise TooLarge(
            f"the inline rubric's template and system prompt "
            f"have {template} characters; this service takes at most "
            f"{limits.max_template_chars} (max_template_chars)",
            "rubric.template",
        )
    formula = ref.get("formula")
    expression = formula.get("expression") if isinstance(formula, dict) else None
    if isinstance(expression, str) and len(expression) > MAX_FORMULA_CHARS:
        raise Invalid(
            f"the formula has {len(expression)} "
            f"characters; a formula may have at most {MAX_FORMULA_CHARS}",
            "rubric.formula.expression",
        )
    criteria = ref.get("criteria")
    if not isinstance(criteria, list):
        return  # validation says what is wrong
    if len(criteria) > limits.max_criteria:
        raise TooLarge(
            f"the inline rubric has {len(criteria)} criteria; "
            f"this service takes at most {limits.max_criteria} (max_criteria)",
            "rubric.criteria",
        )
    for k, criterion in enumerate(criteria):
        scale = criterion.get("scale") if isinstance(criterion, dict) else None
        parts = (
            [scale.get(key) for key in ("labels", "values", "levels")]
            if isinstance(scale, dict)
            else [scale]
        )
        points = max((len(p) for p in parts if isinstance(p, (list, dict))), default=0)
        if points > limits.max_scale_points:
            raise TooLarge(
                f"rubric.criteria[{k}].scale has {points} "
                f"points; this service takes at most {limits.max_scale_points} "
                "per scale (max_scale_points)",
                f"rubric.criteria[{k}].scale",
            )


def check_text(value: Any, where: str, max_nesting: int) -> tuple[int, int]:
    r"""The characters and values in ``value``, or a 422 for a lone surrogate or too deep nesting.

    422 names the first string (key or value, at any depth) that holds a lone surrogate, or the
    first value nested deeper than ``max_nesting``; else the characters of every string and the
    number of values (strings, numbers, keys, list entries) in ``value`` are returned. JSON may
    escape a lone surrogate (``"\ud800"``), but it is no Unicode text, so no tokenizer, hash or
    output file could take it. Iterative, so no depth makes it recurse.
    """
    chars = values = 0
    stack = [(value, where, 0)]
    while stack:
        node, path, depth = stack.pop()
        values += 1
        if isinstance(node, str):
            chars += len(node)
            try:
                node.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise Invalid(
                    f"{path}: holds a lone surrogate "
                    f"({node[exc.start]!r} at character {exc.start}), which is not "
                    "valid Unicode text; send UTF-8 text",
                    path,
                ) from None
        elif isinstance(node, (dict, list)):
            if depth >= max_nesting:
                raise Invalid(
                    f"{path}: nested more than "
                    f"{max_nesting} levels deep; this service takes at most "
                    f"{max_nesting} (max_nesting)",
                    path,
                )
            if isinstance(node, dict):
                for key, child in node.items():
                    stack.append((key, path, depth))
                    stack.append((child, f"{path}.{key}", depth + 1))
            else:
                stack.extend((child, f"{path}[{k}]", depth + 1) for k, child in enumerate(node))
    return chars, values


def check_inline(ref: dict[str, Any], limits: Limits) -> None:
    """An inline rubric checked as raw data, before it is parsed, pickled or sent anywhere.

    Valid text, nesting, and its size in all (every name, description, label, version and template:
    each is rendered into prompts or kept per request) and by part.
    """
    chars, values = check_text(ref, "rubric", limits.max_nesting)
    check_rubric_size(ref, limits)  # the specific limits first: they name the part at fault
    if chars > limits.max_rubric_chars:
        raise TooLarge(
            f"the inline rubric has {chars} characters of text "
            f"in all; this service takes at most {limits.max_rubric_chars} "
            "(max_rubric_chars)",
            "rubric",
        )
    if values > limits.max_rubric_values:
        raise TooLarge(
            f"the inline rubric has {values} values (strings, "
            f"numbers, keys, list entries); this service takes at most "
            f"{limits.max_rubric_values} (max_rubric_values)",
            "rubric",
        )


def check_prompts(
    requests: Requests,
    limits: Limits,
    before: int = 0,
    where: Callable[[int], str] | None = None,
) -> int:
    """413 naming the item when a rendered prompt, or the request's prompts in all, are too long.

    A rendered prompt (one judge call's messages) longer than ``max_prompt_chars``, or the request's
    prompts together longer than ``max_request_prompt_chars``: a short template can render a huge
    prompt, which no judge should be asked to tokenize. An image counts as its estimated tokens
    (`image_tokens`) x `CHARS_PER_IMAGE_TOKEN` characters. ``before``: the characters of the
    request's prompts counted already (a checklist rubric's other unit groups); ``where``: the
    client's field an item of ``requests`` comes from (default ``items[i]``). Returns the
    request's prompt characters so far.
    """
    n_calls = len(requests.calls)
    total = before
    for k, request in enumerate(requests.requests):
        if request is None:
            continue
        size = _size(request)
        total += size
        if size > limits.max_prompt_chars:
            item = requests.item_ids[k // n_calls]
            field = where(k // n_calls) if where is not None else f"items[{k // n_calls}]"
            raise TooLarge(
                f"item {item!r}: its prompt has {size} "
                f"characters; this service takes at most {limits.max_prompt_chars} "
                "per judge call (max_prompt_chars)",
                field,
            )
    if total > limits.max_request_prompt_chars:
        raise TooLarge(
            f"the request's prompts have {total} characters in "
            f"all; this service takes at most {limits.max_request_prompt_chars} "
            "(max_request_prompt_chars): send fewer items",
            "items",
        )
    return total
