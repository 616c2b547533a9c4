"""What a backend does: turn prompts into raw outputs and token logprobs. Nothing else.

Prompt rendering, parsing and score distributions live in jurybox.judges and are shared by every
backend, so a judgment means the same thing whichever engine produced it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, str]


class JudgeConfigError(ValueError):
    """A judge that cannot run as specified here: its backend is not installed, or its spec does
    not fit its model (e.g. chat prompts for a model without a chat template)."""


def require_chat_template(spec: Any, tokenizer: Any) -> None:
    if spec.prompt_format == "chat" and not getattr(tokenizer, "chat_template", None):
        raise JudgeConfigError(
            f"judge {spec.name}: model {spec.model} has no chat template; "
            "set prompt_format: plain in the jury file"
        )


def bos_prefix(tokenizer: Any) -> str:
    """The BOS text a plain prompt needs. Prompts are tokenized without special tokens (chat
    templates write their own), so a plain prompt must carry the BOS the tokenizer would
    normally add: Gemma degrades badly without it."""
    adds_bos = tokenizer.bos_token is not None and (
        tokenizer("x").input_ids[:1] == [tokenizer.bos_token_id]
    )
    return tokenizer.bos_token if adds_bos else ""


def plain_prompt(messages: list[Message]) -> str:
    # Base models have no chat template: frame the rubric as a document that ends where the
    # JSON answer begins.
    body = "\n\n".join(m["content"] for m in messages)
    return f"{body}\n\nJSON answer: "


def prompt_text(spec: Any, tokenizer: Any, bos: str, messages: list[Message]) -> str:
    """The exact text a judge is given, the same for every backend that tokenizes locally."""
    if spec.prompt_format == "plain":
        return bos + plain_prompt(messages)
    return tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, **spec.reasoning.template_kwargs
    )


@dataclass(frozen=True)
class Request:
    messages: list[Message]
    schema: dict[str, Any]


class TokenStep:
    """One generated token: where it starts in the answer text, its text, and the top
    alternatives at that position (appended text -> logprob), computed only when asked for."""

    __slots__ = ("offset", "text", "_top", "_make_top")

    def __init__(
        self,
        offset: int,
        text: str,
        top: Mapping[str, float] | Callable[[], Mapping[str, float]],
    ) -> None:
        self.offset = offset
        self.text = text
        if callable(top):
            self._top, self._make_top = None, top
        else:
            self._top, self._make_top = top, None

    @property
    def top(self) -> Mapping[str, float]:
        if self._top is None:
            assert self._make_top is not None
            self._top = self._make_top()
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


class Backend(Protocol):
    name: str

    def generate(self, requests: list[Request]) -> list[Generation]: ...

    def close(self) -> None: ...
