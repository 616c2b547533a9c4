"""The item a rubric judges: one thing to score (a question, a response, a reference, ...), and
what identifies it. The bottom of the contract: the rubric and the verdict modules build on it,
and it names neither."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

# A pairwise item's two answers, and the orders a judge sees them in: "ab" (A first), "ba".
PAIR_FIELDS = ("response_a", "response_b")
Order = Literal["ab", "ba"]
Winner = Literal["a", "b", "tie"]


class NeedsInputs(Protocol):
    """What :meth:`Item.missing` asks of a rubric: the inputs it needs."""

    @property
    def inputs(self) -> Sequence[str]: ...


class Item(BaseModel):
    """One thing to judge. Fields beyond the core ones (entity names, goals ...) live in ``extra``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    question: str | None = None
    response: str | None = None
    reference: str | None = None
    context: str | None = None
    images: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """Every field by name, as rubric templates see them."""
        out = dict(self.extra)
        out.update(
            question=self.question,
            response=self.response,
            reference=self.reference,
            context=self.context,
            images=self.images,
        )
        return out

    @property
    def empty_answer(self) -> bool:
        """Whether the answer judged is empty: the response, or (an item without one) either
        answer of a pair."""
        answers: list[Any] = [self.response]
        if self.response is None and any(n in self.extra for n in PAIR_FIELDS):
            answers = [self.extra.get(n) for n in PAIR_FIELDS]
        return any(not (a or "").strip() for a in answers if a is None or isinstance(a, str))

    def missing(self, rubric: NeedsInputs) -> list[str]:
        """Inputs the rubric needs that this item lacks. An empty *response* is not missing: a
        model that answered nothing gets judged for it, and stays in the denominator. An empty
        list is a value (e.g. no missing goals)."""
        values = self.fields()
        return [
            n for n in rubric.inputs
            if values.get(n) is None
            or (n not in ("response", *PAIR_FIELDS) and values.get(n) == "")
        ]


def input_hash(item: Item) -> str:
    """Identity of what was judged (every field of the item, its id included): a resumed run
    notices changed predictions or --map by it, and the verdict cache is keyed by it."""
    import hashlib
    import json

    blob = json.dumps(item.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
