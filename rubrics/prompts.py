"""Prompt rendering: one rubric template, rendered the same way by every execution layer.

Templates are Jinja2 in a sandbox with strict undefined variables, so a typo in a rubric file
fails when the rubric loads rather than producing a prompt with a hole in it.
"""

from __future__ import annotations

import math
import re
import secrets
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .item import Item, Order

if TYPE_CHECKING:
    from collections.abc import Sequence


# What rendering reads of a rubric and its criteria (jurybox.rubrics.rubric's Rubric and
# Criterion have it): the rubric's module validates a template by rendering it here, so these
# types live on this side and the import goes one way, rubric -> prompts.
class ScaleLike(Protocol):
    """What rendering reads of a criterion's scale."""

    @property
    def is_labelled(self) -> bool:
        """Whether the scale is named labels."""
        ...

    @property
    def labels(self) -> dict[str, float]:
        """Each label's value (empty unless labelled)."""
        ...

    @property
    def min(self) -> int | None:
        """The range's lowest integer, if a range."""
        ...

    @property
    def max(self) -> int | None:
        """The range's highest integer, if a range."""
        ...

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of an answer on the scale."""
        ...


class CriterionLike(Protocol):
    """What rendering reads of a criterion."""

    @property
    def name(self) -> str:
        """The criterion's name."""
        ...

    @property
    def scale(self) -> ScaleLike:
        """The criterion's scale."""
        ...


class RubricLike(Protocol):
    """What rendering reads of a rubric."""

    @property
    def inputs(self) -> list[str]:
        """The item fields the rubric needs."""
        ...

    @property
    def optional_inputs(self) -> list[str]:
        """The item fields its template may use."""
        ...

    @property
    def template(self) -> str:
        """The prompt template."""
        ...

    @property
    def system(self) -> str:
        """The system prompt."""
        ...

    @property
    def pairwise(self) -> bool:
        """Whether the rubric compares two answers."""
        ...

    @property
    def orders(self) -> tuple[Order | None, ...]:
        """The orders every judge is shown each item in."""
        ...

    def calls(self) -> Sequence[Sequence[CriterionLike]]:
        """The criteria each judge call scores."""
        ...


Message = dict[str, str]


# The most characters (or list elements) one ``*`` in a template may make, and the most digits of
# one ``**``: a template is a prompt, and a prompt of millions of characters is no prompt.
MAX_PRODUCT = 1_000_000
MAX_POWER_DIGITS = 1_000


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox, with ``*`` and ``**`` bounded.

    Intercepting them also keeps Jinja from folding them at compile time: ``{{ 'x' * 10**9 }}``
    would otherwise be computed when the template compiles, and kept in the compiled template's
    constants.
    """

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._safe: dict[tuple[type, str], bool] = {}

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # Jinja's answer depends only on the object's type and the name (private names, a
        # function's or generator's internals, the mutating methods of lists, dicts and sets),
        # and asking it costs ~3 us: a template reads ~20 attributes per item (each criterion's
        # name, description and scale), so the answer is kept per (type, name).
        cls = type(obj)
        if obj.__class__ is not cls:  # a proxy: ask every time
            return super().is_safe_attribute(obj, attr, value)
        key = (cls, attr)
        safe = self._safe.get(key)
        if safe is None:
            safe = super().is_safe_attribute(obj, attr, value)
            if len(self._safe) >= 4096:
                self._safe.clear()
            self._safe[key] = safe
        return safe

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if (
                    isinstance(seq, (str, list, tuple))
                    and isinstance(times, int)
                    and len(seq) * times > MAX_PRODUCT
                ):
                    raise SecurityError(
                        f"a repetition of {len(seq) * times} elements; "
                        f"templates may make at most {MAX_PRODUCT}"
                    )
        elif operator == "**" and isinstance(left, int) and isinstance(right, int):
            digits = abs(right) * math.log10(abs(left)) if abs(left) > 1 else 0
            if digits > MAX_POWER_DIGITS:
                raise SecurityError(
                    f"a power of about {digits:.0f} digits; templates may make "
                    f"at most {MAX_POWER_DIGITS}"
                )
        return super().call_binop(context, operator, left, right)


@lru_cache(maxsize=1)
def _env() -> ImmutableSandboxedEnvironment:
    return _Sandbox(
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


@lru_cache(maxsize=256)
def _compile(source: str) -> jinja2.Template:
    return _env().from_string(source)


@lru_cache(maxsize=256)
def _static(source: str) -> str | None:
    """A template that uses no variable, rendered; None when it uses one."""
    from jinja2 import meta

    if meta.find_undeclared_variables(_env().parse(source)):
        return None
    return _compile(source).render().strip()


def output_format(criteria: Sequence[CriterionLike]) -> str:
    """The instruction that tells the judge which JSON object to answer with."""
    slots = []
    for c in criteria:
        if c.scale.is_labelled:
            allowed = " or ".join(f'"{label}"' for label in c.scale.labels)
        else:
            allowed = f"integer {c.scale.min}-{c.scale.max}"
        slots.append(f'"{c.name}": <{allowed}>')
    return "Answer with only this JSON object, filled in: {" + ", ".join(slots) + "}"


def output_schema(criteria: Sequence[CriterionLike]) -> dict[str, Any]:
    """The JSON schema a constrained judge must follow: one property per criterion, in order.

    Args:
        criteria: The criteria of one judge call.

    Returns:
        An object schema whose properties, all required and no others, are the criteria's
        answers on their scales.
    """
    return {
        "type": "object",
        "properties": {c.name: c.scale.json_schema() for c in criteria},
        "required": [c.name for c in criteria],
        "additionalProperties": False,
    }


# The template variable that marks where a judge that sees images is shown the item's images.
IMAGE_PLACE = "images_here"
# Where in the messages the images go: (message index, character offset in its content).
Place = tuple[int, int]


def render_messages(
    rubric: RubricLike, item: Item, criteria: Sequence[CriterionLike], order: str | None = None
) -> list[Message]:
    """The chat messages a judge gets for ``item`` on ``criteria``.

    They are the rubric's system prompt (when it has one) and its template, rendered with the
    item's fields, the criteria and the output format.

    Args:
        rubric: The rubric whose template is rendered.
        item: The item judged.
        criteria: The criteria of the judge call (one of ``rubric.calls()``).
        order: For a pairwise rubric, the order its template's ``first`` and ``second`` show
            response_a and response_b in: ``"ab"`` (the default) or ``"ba"``.

    Returns:
        The messages: a system message when the rubric has a system prompt, then the user
        message.
    """
    return render_prompt(rubric, item, criteria, order)[0]


def render_prompt(
    rubric: RubricLike, item: Item, criteria: Sequence[CriterionLike], order: str | None = None
) -> tuple[list[Message], Place | None]:
    """`render_messages`, and where the template puts the item's images.

    The place is that of its ``{{ images_here }}`` (the first, where it has several), or None when
    it has none. The marker renders as nothing, so a judge that sees no images gets the messages as
    they would be without it.
    """
    # A mark no item can hold: it is new at every call.
    mark = f"\x00{IMAGE_PLACE}-{secrets.token_hex(8)}\x00"
    context = dict(item.fields())
    context[IMAGE_PLACE] = mark
    for name in (*rubric.inputs, *rubric.optional_inputs):
        context.setdefault(name, None)
    if rubric.pairwise:
        first, second = context.get("response_a"), context.get("response_b")
        if order == "ba":
            first, second = second, first
        context.update(first=first, second=second)
    context.update(
        id=item.id,
        criteria=criteria,
        rubric=rubric,
        output_format=output_format(criteria),
    )
    user = _compile(rubric.template).render(context).strip()
    messages: list[Message] = []
    if rubric.system.strip():
        system = _static(rubric.system)  # most system prompts name no variable: render them once
        if system is None:
            system = _compile(rubric.system).render(context).strip()
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": user})
    place: Place | None = None
    for k, message in enumerate(messages):
        at = message["content"].find(mark)
        if at < 0:
            continue
        if place is None:
            place = (k, at)
        message["content"] = message["content"].replace(mark, "")
    return messages, place


def placeholders(rubric: RubricLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields and the extra fields of an item with a placeholder for each input.

    The inputs are the rubric's; `check_template` renders the item.
    """
    names = set(rubric.inputs) | set(rubric.optional_inputs)
    core = {"question", "response", "reference", "context"}
    names.discard(IMAGE_PLACE)
    return ({n: f"<{n}>" for n in names & core}, {n: f"<{n}>" for n in names - core - {"images"}})


def check_template(rubric: RubricLike, sample: Item) -> None:
    """Render the rubric once on ``sample`` (an item of `placeholders`).

    Raises:
        ValueError: The template does not render (naming what is wrong).
    """
    try:
        for call in rubric.calls():
            for order in rubric.orders:
                render_messages(rubric, sample, call, order)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"template syntax error on line {exc.lineno}: {exc.message}") from None
    except jinja2.UndefinedError as exc:
        name = re.match(r"'([^']+)' is undefined", exc.message or "")
        if name:
            raise ValueError(
                f"template uses {name[1]!r}, which is not an input of the rubric; declare it "
                "under inputs or optional_inputs"
            ) from None
        raise ValueError(f"template fails to render: {exc.message}") from None
    except SecurityError as exc:
        raise ValueError(f"template does something the sandbox forbids: {exc}") from None
    except Exception as exc:  # e.g. {{ 1/0 }}: any error a template expression raises
        raise ValueError(f"template fails to render: {type(exc).__name__}: {exc}") from None
