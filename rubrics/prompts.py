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
    return _placed(rubric, item, criteria, order)[0]


def render_prompt(
    rubric: RubricLike, item: Item, criteria: Sequence[CriterionLike], order: str | None = None
) -> tuple[list[Message], Place | None, Pieces | None]:
    """`render_messages`, where the template puts the item's images, and the messages' pieces.

    The place is that of its ``{{ images_here }}`` (the first, where it has several), or None when
    it has none. The marker renders as nothing, so a judge that sees no images gets the messages as
    they would be without it.

    The pieces are each message's content as ``(text, is_item)`` pieces: the template's own text,
    and each of the item's strings where it was inserted (`item_pieces`), so that a judge is
    given the item's strings as text and only the template's text can hold its control tokens.
    They are None where the template shows an item string changed (a filter) or decides on it in
    a way its pieces cannot follow: the messages' contents are then the item's text as a whole.
    """
    messages, place = _placed(rubric, item, criteria, order)
    return messages, place, item_pieces(rubric, item, criteria, order, messages)


def _placed(
    rubric: RubricLike, item: Item, criteria: Sequence[CriterionLike], order: str | None
) -> tuple[list[Message], Place | None]:
    # A mark no item can hold: it is new at every call.
    mark = f"\x00{IMAGE_PLACE}-{secrets.token_hex(8)}\x00"
    messages = _render(rubric, item.fields(), item.id, criteria, order, mark)
    place: Place | None = None
    for k, message in enumerate(messages):
        at = message["content"].find(mark)
        if at < 0:
            continue
        if place is None:
            place = (k, at)
        message["content"] = message["content"].replace(mark, "")
    return messages, place


def _render(
    rubric: RubricLike,
    fields: dict[str, Any],
    item_id: str,
    criteria: Sequence[CriterionLike],
    order: str | None,
    image_mark: str,
) -> list[Message]:
    context = dict(fields)
    context[IMAGE_PLACE] = image_mark
    for name in (*rubric.inputs, *rubric.optional_inputs):
        context.setdefault(name, None)
    if rubric.pairwise:
        first, second = context.get("response_a"), context.get("response_b")
        if order == "ba":
            first, second = second, first
        context.update(first=first, second=second)
    context.update(
        id=item_id,
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
    return messages


# A piece of a prompt: its text, and whether it is an item's string (text, never control tokens).
Piece = tuple[str, bool]
# Each message's content as pieces.
Pieces = tuple[tuple[Piece, ...], ...]


class Marks:
    """Unique marks standing in for strings, and the strings they stand for.

    A mark is ``⟦nonce hex⟧``, with a nonce new at each `Marks`, of printable characters (a
    list's or dict's ``repr`` keeps them); `split` cuts a text at the marks back into pieces.
    """

    END = "\u27e7"

    def __init__(self, *avoid: str) -> None:
        while True:  # a nonce none of ``avoid`` holds (the first, but for 1 in 2**64)
            self.start = f"\u27e6{secrets.token_hex(8)}"
            if not any(self.start in text for text in avoid):
                break
        self.values: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, text: str) -> str:
        """The mark standing for ``text``."""
        k = self._index.get(text)
        if k is None:
            k = self._index[text] = len(self.values)
            self.values.append(text)
        return f"{self.start}{k:x}{self.END}"

    def mark(self, value: Any) -> Any:
        """``value`` with each string in it, at any depth (dict keys too), marked."""
        if isinstance(value, str):
            return self(value) if value else value
        if isinstance(value, dict):
            out = _Keyed({self.mark(k): self.mark(v) for k, v in value.items()})
            out.originals = {k: self.mark(v) for k, v in value.items()}
            return out
        if isinstance(value, (list, tuple)):
            return type(value)(self.mark(v) for v in value)
        if value is None or isinstance(value, (bool, int, float)):
            return value  # digits and words of Python's: never a control token
        # Anything else (a set, bytes, an object) renders as its text: marked as that text, so
        # a template that only shows it gives back its pieces, and one that does more does not.
        text = str(value)
        return self(text) if text else value

    def split(self, text: str) -> list[Piece] | None:
        """``text`` as pieces, each mark the string it stands for; None for a mark cut apart."""
        parts = text.split(self.start)
        pieces: list[Piece] = [(parts[0], False)] if parts[0] else []
        for part in parts[1:]:
            k, end, rest = part.partition(self.END)
            if not end or not k or k.strip("0123456789abcdef") or int(k, 16) >= len(self.values):
                return None
            pieces.append((self.values[int(k, 16)], True))
            if rest:
                pieces.append((rest, False))
        return pieces


class _Keyed(dict[Any, Any]):
    """A dict with marked keys that a template can still index by the original keys."""

    originals: dict[Any, Any]

    def __missing__(self, key: Any) -> Any:
        return self.originals[key]


def item_pieces(
    rubric: RubricLike,
    item: Item,
    criteria: Sequence[CriterionLike],
    order: str | None,
    messages: list[Message],
) -> Pieces | None:
    """The pieces of ``messages`` (rendered for ``item``), or None where they cannot be told.

    The template is rendered again with each of the item's strings replaced by a mark
    (`Marks`), and the text cut at the marks; the pieces count only when they give back
    ``messages`` exactly (a template that changes an item string, ``upper``, or decides on its
    length, makes other text, and has none).
    """
    fields = item.fields()
    marks = Marks(rubric.template, rubric.system)
    try:
        # (the fields' names are the template's variables, never rendered: only their values)
        values = {name: marks.mark(value) for name, value in fields.items()}
        marked = _render(rubric, values, marks(item.id), criteria, order, image_mark="")
    except Exception:  # a template that needs the real strings (e.g. a number's comparison)
        return None
    if any(marks.start in value for value in marks.values):  # (1 in 2**64)
        return None
    out = []
    for message, real in zip(marked, messages):
        pieces = marks.split(message["content"])
        if pieces is None:
            return None
        pieces = _strip(pieces)
        if "".join(t for t, _ in pieces) != real["content"]:
            return None
        out.append(tuple(pieces))
    return tuple(out)


def _strip(pieces: list[Piece]) -> list[Piece]:
    """``pieces`` without the whitespace at the ends of their joined text (as ``str.strip``)."""
    while pieces and not pieces[0][0].strip():
        pieces.pop(0)
    while pieces and not pieces[-1][0].strip():
        pieces.pop()
    if pieces:
        pieces[0] = (pieces[0][0].lstrip(), pieces[0][1])
        pieces[-1] = (pieces[-1][0].rstrip(), pieces[-1][1])
    return pieces


def placeholders(rubric: RubricLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields and the extra fields of an item with a placeholder for each input.

    The inputs are the rubric's; `check_template` renders the item. A ``checklist`` input is
    `SAMPLE_CHECKLIST`; a checklist rubric judged point by point also gets its units' fields
    (``point``, ``point_points``, a number, and ``point_tag``).
    """
    names = set(rubric.inputs) | set(rubric.optional_inputs)
    core = {"question", "response", "reference", "context"}
    names.discard(IMAGE_PLACE)
    fields: dict[str, Any] = {n: f"<{n}>" for n in names & core}
    extra: dict[str, Any] = {n: f"<{n}>" for n in names - core - {"images", "checklist"}}
    if "checklist" in names:  # a checklist rubric: two points, one of them a pitfall
        fields["checklist"] = SAMPLE_CHECKLIST
    rule = getattr(rubric, "checklist", None)
    if rule is not None and getattr(rule, "calls", None) == "per_point" and rule.score == "points":
        names |= {"point", "point_points", "point_tag"}  # its units' fields (`Rubric.unit_rubric`)
    if "point" in names:
        extra["point"] = "<point>"
    if "point_points" in names:  # a number: templates compare it (a pitfall's is below 0)
        extra["point_points"] = SAMPLE_CHECKLIST[0]["points"]
    if "point_tag" in names:
        extra["point_tag"] = SAMPLE_CHECKLIST[0]["tag"]
    return fields, extra


#: The checklist of `placeholders`' item.
SAMPLE_CHECKLIST: list[dict[str, Any]] = [
    {"text": "<point 1>", "points": 5, "tag": "essential"},
    {"text": "<point 2>", "points": -2, "tag": None},
]


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
