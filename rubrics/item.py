"""The item a rubric judges: one thing to score, and what identifies it.

An item is a question, a response, a reference, ... The bottom of the contract: the rubric and the
verdict modules build on it, and it names neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from .points import Point, read_points

if TYPE_CHECKING:
    from .images import Image

# A pairwise item's two answers, and the orders a judge sees them in: "ab" (A first), "ba".
PAIR_FIELDS = ("response_a", "response_b")
Order = Literal["ab", "ba"]
Winner = Literal["a", "b", "tie"]


class NeedsInputs(Protocol):
    """What `Item.missing` asks of a rubric: the inputs it needs."""

    @property
    def inputs(self) -> Sequence[str]:
        """The item fields the rubric needs."""
        ...


class Item(BaseModel):
    """One thing to judge. Fields beyond the core ones (entity names, goals ...) live in ``extra``.

    ``images`` are references (paths, ``file://``, ``data:`` or ``http(s)://`` URLs). Once they
    are loaded (`with_images`, for a jury with judges that see images), the item holds the
    checked images themselves (`loaded_images`: in this process and when pickled, never
    in its JSON) and their digests in ``image_digests``, so the item's identity
    (`input_hash`, the verdict cache's key) is their content, not only their paths.

    Attributes:
        id: What identifies the item (not empty).
        question: The question asked.
        response: The answer judged.
        reference: A reference answer.
        context: Context the answer was given.
        images: The item's images, as references.
        extra: Fields beyond the core ones, by name (e.g. a pair's ``response_a`` and
            ``response_b``).
        image_digests: The digests of the loaded images, in order (empty: not loaded).
        checklist: The item's own checklist (`Point` s; read by `read_points`, so
            HealthBench's ``{"criterion", "points", "tags"}`` rows as they are), for a
            checklist rubric.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    question: str | None = None
    response: str | None = None
    reference: str | None = None
    context: str | None = None
    images: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)
    image_digests: list[str] = Field(
        default_factory=list,
        description="The digests of the loaded images, in order (empty: not loaded).",
    )
    checklist: list[Point] | None = Field(
        None,
        description="The item's own checklist: each point's criterion (or text), its points "
        "(negative for a pitfall), an optional tag (essential, important, optional) and tags.",
    )
    _loaded: tuple[Image, ...] = PrivateAttr(default=())

    @field_validator("checklist", mode="before")
    @classmethod
    def _read_checklist(cls, raw: Any) -> Any:
        return None if raw is None else read_points(raw, "checklist")

    def fields(self) -> dict[str, Any]:
        """Every field by name, as rubric templates see them.

        An inline image, a ``data:`` URL, is shown as ``inline image N``, never its bytes.
        """
        out = dict(self.extra)
        out.update(
            question=self.question,
            response=self.response,
            reference=self.reference,
            context=self.context,
            images=[
                f"inline image {k + 1}" if ref.startswith("data:") else ref
                for k, ref in enumerate(self.images)
            ],
        )
        if self.checklist is not None:
            out["checklist"] = [p.shown() for p in self.checklist]
        return out

    def with_images(self, images: Sequence[Image]) -> Item:
        """This item holding its loaded ``images`` (one per reference, in order).

        Args:
            images: The loaded images, one per reference of ``images``, in order.

        Returns:
            A copy of the item with the images and their digests.

        Raises:
            ValueError: There is not one image per reference.
        """
        if len(images) != len(self.images):
            raise ValueError(
                f"item {self.id!r}: {len(images)} loaded images for {len(self.images)} references"
            )
        out = self.model_copy(update={"image_digests": [im.digest for im in images]})
        out._loaded = tuple(images)
        return out

    @property
    def loaded_images(self) -> tuple[Image, ...]:
        """The images `with_images` gave this item (empty when not loaded)."""
        return self._loaded

    @property
    def images_pending(self) -> bool:
        """Whether the item names images that it does not hold loaded."""
        return bool(self.images) and len(self._loaded) != len(self.images)

    @property
    def empty_answer(self) -> bool:
        """Whether the answer judged is empty.

        The answer is the response, or (an item without one) either answer of a pair.
        """
        answers: list[Any] = [self.response]
        if self.response is None and any(n in self.extra for n in PAIR_FIELDS):
            answers = [self.extra.get(n) for n in PAIR_FIELDS]
        return any(not (a or "").strip() for a in answers if a is None or isinstance(a, str))

    def missing(self, rubric: NeedsInputs) -> list[str]:
        """Inputs the rubric needs that this item lacks.

        An empty *response* is not missing: a model that answered nothing gets judged for it, and
        stays in the denominator. An empty list is a value (e.g. no missing goals).

        Args:
            rubric: The rubric (anything with its ``inputs``).

        Returns:
            The names of the inputs missing, in the rubric's order.
        """
        values = self.fields()
        return [
            n
            for n in rubric.inputs
            if values.get(n) is None
            or (n not in ("response", *PAIR_FIELDS) and values.get(n) == "")
        ]


def input_hash(item: Item) -> str:
    """Identity of what was judged: every field of the item, and its loaded images' digests.

    The id is among the fields. A resumed run notices changed predictions or --map by it, and the
    verdict cache is keyed by it. An item whose images were not loaded (no judge sees them)
    hashes as before images were loaded anywhere, and one without a checklist as before
    checklists existed.

    Args:
        item: The item judged.

    Returns:
        The first 16 hex digits of the SHA-256 of the item's JSON.
    """
    import hashlib
    import json

    unset = {"image_digests"} if not item.image_digests else set()
    if item.checklist is None:
        unset.add("checklist")
    data = item.model_dump(mode="json", exclude=unset or None)
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
