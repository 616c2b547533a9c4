"""The contract of a judge backend: what turns a judge's prompts into outputs and logprobs.

A backend turns a judge's prompts into raw outputs and token logprobs, and nothing else:
rendering prompts, parsing answers and score distributions are the judging path's
(`jurybox.judges.judging`), shared by every backend, so a judgment means the same thing
whichever engine produced it.

A backend is any object with this shape. Register your own under a name (see
`jurybox.judges.backends.registry`: `register`, or the ``jurybox.backends`` entry point group of
a package) and a jury file's ``backend: <name>`` uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.images import Image
from jurybox.rubrics.prompts import Pieces

Message = dict[str, str]

# Asked by a long generate between its steps: True once nobody waits for its outputs any more.
CancelCheck = Callable[[], bool]


class Backend(Protocol):
    """A judge's engine: one `Generation` per `Request`, in order.

    ``cancelled``, when given, is asked between the generate's steps: once it returns True
    (every caller of the batch left, or passed its deadline) the backend raises
    `GenerationCancelled` soon after, instead of finishing outputs nobody reads. A
    backend that cannot stop early ignores it.

    Attributes:
        name: The judge's name, as its jury file gives it.
    """

    name: str

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        """Generate an answer to each request.

        Trouble with one prompt is that generation's ``error`` (an unscored vote); an exception
        means the judge as a whole failed.

        Args:
            requests: The prompts, with the schema each answer follows.
            cancelled: Asked between the generate's steps; once it returns True nobody waits
                for the outputs any more.

        Returns:
            One `Generation` per request, in order.

        Raises:
            GenerationCancelled: ``cancelled`` returned True before the outputs were done (a
                backend that cannot stop early never raises it).
        """
        ...

    def close(self) -> None:
        """Release what the backend holds (its model, engine or connections)."""
        ...


@runtime_checkable
class AsyncBackend(Backend, Protocol):
    """A backend that can generate on an event loop.

    The async vLLM engine and the OpenAI client are such backends; the scoring service runs every
    other backend in a batching thread.
    """

    async def agenerate(self, requests: list[Request]) -> list[Generation]:
        """As ``generate``, awaited on the caller's event loop (cancelling the caller stops it).

        Args:
            requests: The prompts, with the schema each answer follows.

        Returns:
            One `Generation` per request, in order.
        """
        ...


@dataclass(frozen=True)
class Request:
    """One prompt for a backend: the rubric's chat messages and the JSON schema the answer follows.

    Attributes:
        messages: The rubric's chat messages, rendered for the item.
        schema: The JSON schema the answer follows.
        pieces: Each message's content as ``(text, is_item)`` pieces: the template's text, and
            each of the item's strings where the template put it, which a judge must read as
            text, never as its control tokens (`jurybox.rubrics.prompts.item_pieces`). None:
            the item's text cannot be told from the template's (a template that changes it),
            and each content is read as the item's (`jurybox.judges.backends.base.request_pieces`).
        images: The item's images (content and digest), for a judge that sees images; a
            text-only judge is given ``messages`` alone, as if there were none.
        image_place: Where the rubric's template put the images (message index, character
            offset: its ``{{ images_here }}``), or None when it has no place for them: then
            they are the first parts of the last user message
            (`jurybox.judges.images.chat_parts`).
    """

    messages: list[Message]
    schema: dict[str, Any]
    pieces: Pieces | None = None
    images: tuple[Image, ...] = ()
    image_place: tuple[int, int] | None = None


class TokenStep:
    """One generated token, with the top alternatives at its position.

    The alternatives (appended text -> logprob) are computed only when asked for.

    Args:
        offset: Where the token starts in the answer text.
        text: The token's text.
        top: The top alternatives at that position (appended text -> logprob), or a function
            that makes them (called with ``index`` when one is given, so one function can serve
            every step of an answer).
        index: The argument ``top`` is called with, when it is a function.
    """

    __slots__ = ("_index", "_make_top", "_top", "offset", "text")

    _top: Mapping[str, float] | None
    _make_top: Callable[..., Mapping[str, float]] | None

    def __init__(
        self,
        offset: int,
        text: str,
        top: Mapping[str, float] | Callable[..., Mapping[str, float]],
        index: int | None = None,
    ) -> None:
        self.offset = offset
        self.text = text
        self._index = index
        if callable(top):
            self._top, self._make_top = None, top
        else:
            self._top, self._make_top = top, None

    @property
    def top(self) -> Mapping[str, float]:
        """The top alternatives at this position (appended text -> logprob).

        They are made on first access when the step was given a function.
        """
        if self._top is None:
            assert self._make_top is not None
            self._top = self._make_top() if self._index is None else self._make_top(self._index)
        return self._top


@dataclass
class Generation:
    """A backend's output for one request: the answer text (after any reasoning), or an error.

    Attributes:
        text: The answer text, after any reasoning.
        steps: The answer's tokens with their top alternatives (empty without logprobs).
        reasoning: The model's reasoning before the answer, if any.
        error: Why this prompt has no answer (the vote is unscored), or None.
        finish_reason: Why generation stopped (``"length"``: cut at ``max_tokens``).
        latency_s: Seconds the generation took.
        prompt_tokens: The prompt's length in tokens.
        output_tokens: The output's length in tokens.
    """

    text: str = ""
    steps: list[TokenStep] = field(default_factory=list)
    reasoning: str | None = None
    error: str | None = None
    finish_reason: str | None = None
    latency_s: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0


class GenerationCancelled(Exception):
    """A generate stopped early: nobody waits for its outputs any more.

    Its cancel check said so (every client of its batch left, or passed its deadline). Not a
    failure of the judge: there is nobody to report to, and a generation cut off mid-answer is no
    answer, so none is returned.
    """


class JudgeConfigError(InputError):
    """A judge that cannot run as specified here.

    Its backend is not installed, or its spec does not fit its model (e.g. chat prompts for a
    model without a chat template).
    """
