"""The contract of a judge backend: what turns a judge's prompts into raw outputs and token
logprobs. Nothing else: rendering prompts, parsing answers and score distributions are the
judging path's (`jurybox.judges.judging`), shared by every backend, so a judgment means the
same thing whichever engine produced it.

A backend is any object with this shape. Register your own under a name (see
`jurybox.judges.backends.registry`: `register`,
or the ``jurybox.backends`` entry point group of a package) and a jury file's
``backend: <name>`` uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from jurybox.rubrics.errors import InputError
from jurybox.rubrics.images import Image

Message = dict[str, str]

# Asked by a long generate between its steps: True once nobody waits for its outputs any more.
CancelCheck = Callable[[], bool]


class Backend(Protocol):
    """A judge's engine: one `Generation` per `Request`, in order.

    ``cancelled``, when given, is asked between the generate's steps: once it returns True
    (every caller of the batch left, or passed its deadline) the backend raises
    `GenerationCancelled` soon after, instead of finishing outputs nobody reads. A
    backend that cannot stop early ignores it.
    """

    name: str

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        """One Generation per request, in order. Trouble with one prompt is that generation's
        ``error`` (an unscored vote); an exception means the judge as a whole failed.
        """
        ...

    def close(self) -> None:
        """Release what the backend holds (its model, engine or connections)."""
        ...


@runtime_checkable
class AsyncBackend(Backend, Protocol):
    """A backend that can generate on an event loop (the async vLLM engine, the OpenAI
    client); the scoring service runs every other backend in a batching thread.
    """

    async def agenerate(self, requests: list[Request]) -> list[Generation]:
        """As ``generate``, awaited on the caller's event loop (cancelling the caller stops
        it).
        """
        ...


@dataclass(frozen=True)
class Request:
    """One prompt for a backend: the rubric's chat messages and the JSON schema the answer
    follows; ``item_text``: every string of the item's fields rendered into them (its question,
    response, reference, context, inputs and id), which a judge must read as text, never as
    its control tokens (see `ControlTokens`).

    ``images``: the item's images (content and digest), for a judge that sees images; a
    text-only judge is given ``messages`` alone, as if there were none. ``image_place``: where
    the rubric's template put them (message index, character offset: its ``{{ images_here
    }}``), or None when it has no place for them: then they are the first parts of the last
    user message (`jurybox.judges.images.chat_parts`).
    """

    messages: list[Message]
    schema: dict[str, Any]
    item_text: tuple[str, ...] = ()
    images: tuple[Image, ...] = ()
    image_place: tuple[int, int] | None = None


class TokenStep:
    """One generated token: where it starts in the answer text, its text, and the top
    alternatives at that position (appended text -> logprob), computed only when asked for:
    ``top`` is the mapping, or a function that makes it (called with ``index`` when one is
    given, so one function can serve every step of an answer).
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
        """The top alternatives at this position (appended text -> logprob), made on first access
        when the step was given a function.
        """
        if self._top is None:
            assert self._make_top is not None
            self._top = self._make_top() if self._index is None else self._make_top(self._index)
        return self._top


@dataclass
class Generation:
    """A backend's output for one request: the answer text (after any reasoning), or an error."""

    text: str = ""
    steps: list[TokenStep] = field(default_factory=list)
    reasoning: str | None = None
    error: str | None = None
    finish_reason: str | None = None
    latency_s: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0


class GenerationCancelled(Exception):
    """A generate stopped early because its cancel check said that nobody waits for it any more
    (every client of its batch left, or passed its deadline). Not a failure of the judge: there
    is nobody to report to, and a generation cut off mid-answer is no answer, so none is
    returned.
    """


class JudgeConfigError(InputError):
    """A judge that cannot run as specified here: its backend is not installed, or its spec does
    not fit its model (e.g. chat prompts for a model without a chat template).
    """
