"""What one request may ask for, and how much work the service takes on at once.

`Limits` is a field of `jurybox.serving.service.config.ServiceConfig` (and re-exported there);
the fields its `command_line` marks are ``jurybox serve``'s options.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from jurybox.rubrics.points import ChecklistRule
from jurybox.serving.options import command_line, option


@command_line(
    max_items=option(help="Most items in one request (413 beyond).", min=1),
    max_body_bytes=option(help="Largest request body in bytes (413 beyond).", min=1024),
    max_field_chars=option(help="Longest item field in characters (422 beyond).", min=1),
    max_concurrent=option(
        help="Batches judged at once; requests that find no free slot wait, and those of one "
        "rubric that wait together are judged together (one call per judge).",
        min=1,
    ),
    max_queued=option(help="Requests waiting for a slot; beyond, 429 with Retry-After.", min=0),
    request_timeout_s=option(
        "--request-timeout",
        help="Seconds one request may take, waiting included (504 beyond).",
        min=1,
    ),
    max_judge_calls=option(
        help="Most judge calls one request may buy: items x calls per item of its rubric "
        "(413 beyond).",
        min=1,
    ),
    max_points=option(
        help="Most checklist points of one item, for a checklist rubric (413 beyond, before any "
        "judge runs).",
        min=1,
    ),
    max_prompt_chars=option(
        help="Longest prompt a request may render for one judge call, in characters (413 "
        "beyond): a short inline template can render a huge one.",
        min=1000,
    ),
    max_request_prompt_chars=option(
        help="Most prompt text one request may render in all, in characters (413 beyond).",
        min=1000,
    ),
    body_timeout_s=option(
        "--body-timeout",
        help="Seconds a client may take to send a request's body (408 beyond): a body that "
        "trickles in holds a slot of the ingress.",
        min=0.1,
    ),
    max_client_requests=option(
        help="Requests one client address may have open at once on an ingress replica (429 "
        "beyond).",
        min=1,
    ),
)
class Limits(BaseModel):
    """What one request may ask for, and how much work the service takes on at once.

    The fields marked above are ``jurybox serve``'s options.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_body_bytes: int = Field(8 << 20, ge=1024, description="Largest request body (413 beyond).")
    max_items: int = Field(256, ge=1, description="Most items in one request (413 beyond).")
    max_field_chars: int = Field(100_000, ge=1, description="Longest item field (422 beyond).")
    max_judge_calls: int = Field(
        2048,
        ge=1,
        description="Most judge calls one request may "
        "buy: items x calls per item (one, or one per criterion for a "
        "per-criterion rubric, or one per point for a checklist rubric's per_point calls), "
        "per judge; 413 beyond.",
    )
    max_points: int = Field(
        ChecklistRule.model_fields["max_points"].default,
        ge=1,
        description="Most checklist points of one item, for a checklist rubric (413 beyond, "
        "before any judge runs; a rubric's own checklist: max_points bounds it too). Each point "
        "is a field: its text within max_field_chars; with calls: per_point each is a judge "
        "call, counted against max_judge_calls.",
    )
    max_criteria: int = Field(
        32, ge=1, description="Most criteria of an inline rubric (413 beyond)."
    )
    max_scale_points: int = Field(
        101,
        ge=2,
        description="Most labels, values or levels of one scale of an inline rubric (413 beyond).",
    )
    max_template_chars: int = Field(
        50_000,
        ge=100,
        description="Longest template plus system prompt of an inline rubric (413 beyond).",
    )
    max_rubric_chars: int = Field(
        100_000,
        ge=1000,
        description="Most text in an inline rubric "
        "in all: every name, description, label, version, template "
        "and formula (413 beyond).",
    )
    max_rubric_values: int = Field(
        5_000,
        ge=100,
        description="Most values in an inline "
        "rubric (strings, numbers, keys and list entries: inputs, "
        "criteria, labels; 413 beyond).",
    )
    max_prompt_chars: int = Field(
        200_000,
        ge=1000,
        description="Longest prompt a request may "
        "render for one judge call (413 beyond): about 50,000 "
        "tokens.",
    )
    max_request_prompt_chars: int = Field(
        16_000_000,
        ge=1000,
        description="Most prompt text "
        "one request may render in all, over its items and "
        "calls (413 beyond).",
    )
    max_image_bytes: int = Field(
        4 << 20,
        ge=1024,
        description="Largest inline image of an "
        "item, decoded from its base64 (413 beyond, checked before "
        "decoding it).",
    )
    max_image_pixels: int = Field(
        16_777_216,
        ge=1024,
        description="Most pixels of one image "
        "(width x height, read from its header before any pixel is "
        "decoded: a decompression bomb is refused; 413 beyond).",
    )
    max_images_per_item: int = Field(8, ge=1, description="Most images of one item (413 beyond).")
    max_request_image_bytes: int = Field(
        6 << 20,
        ge=1024,
        description="Most image bytes one "
        "request may carry in all (413 beyond). Each image "
        "also counts against max_prompt_chars and "
        "max_request_prompt_chars as its estimated tokens "
        "(jurybox.rubrics.images.image_tokens) x 4 "
        "characters, per judge call that shows it.",
    )
    max_render_s: float = Field(
        10.0,
        gt=0.0,
        description="Time an inline rubric may take to "
        "validate and render a request's prompts (422 beyond).",
    )
    max_nesting: int = Field(
        20,
        ge=2,
        description="Deepest nesting of lists and objects in an "
        "item or inline rubric (422 beyond).",
    )
    max_concurrent: int = Field(
        4,
        ge=1,
        description="Batches the service judges at once (each "
        "ingress replica takes its share); a request that finds no "
        "free slot waits, and the requests of one rubric that wait "
        "together are judged together, in one call per judge.",
    )
    max_queued: int = Field(
        64,
        ge=0,
        description="Requests waiting for a slot (shared out as "
        "max_concurrent is); beyond, the answer is 429 with Retry-After "
        "instead of unbounded latency.",
    )
    request_timeout_s: float = Field(
        600.0, gt=0.0, description="Deadline of one request, queueing included (504 beyond)."
    )
    body_timeout_s: float = Field(
        10.0,
        gt=0.0,
        description="Time a client may take to send "
        "a request's body once its headers arrived (408 beyond).",
    )
    max_client_requests: int = Field(
        256,
        ge=1,
        description="Requests one client address may "
        "have open at once on an ingress replica, the open "
        "routes included (429 beyond).",
    )
    max_render_queued: int = Field(
        8,
        ge=0,
        description="Inline-rubric requests waiting for a "
        "render worker (each replica has two); beyond, 429 with "
        "Retry-After.",
    )
