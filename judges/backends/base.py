"""What a backend does: turn prompts into raw outputs and token logprobs. Nothing else.

Prompt rendering, parsing and score distributions live in jurybox.judges and are shared by every
backend, so a judgment means the same thing whichever engine produced it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from jurybox.rubrics.errors import InputError

Message = dict[str, str]


class JudgeConfigError(InputError):
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


# Prompt length beyond which a judge on a CPU refuses an item unless its jury file sets
# max_prompt_tokens: attention over tens of thousands of tokens takes minutes and many GB there.
CPU_MAX_PROMPT_TOKENS = 8192


def length_error(spec: Any, n_tokens: int, context: int, on_cpu: bool) -> str | None:
    """Why a prompt of ``n_tokens`` is not given to this judge, or None when it may be: longer
    than the judge's ``max_prompt_tokens`` (default: 8192 on a CPU, the context elsewhere), or
    too long to leave room for the answer (and the thinking budget) in the model's context."""
    limit = spec.execution.max_prompt_tokens or (CPU_MAX_PROMPT_TOKENS if on_cpu else None)
    if limit is not None and n_tokens > limit:
        source = "its max_prompt_tokens" if spec.execution.max_prompt_tokens else \
            "the default max_prompt_tokens on a CPU"
        return (f"prompt is {n_tokens} tokens, more than {limit} ({source}); set "
                f"max_prompt_tokens for judge {spec.name} in the jury file if the machine can "
                "hold it")
    budget = spec.sampling.max_tokens
    if spec.reasoning.mode == "think":
        budget += spec.reasoning.budget_tokens
    if n_tokens + budget > context:
        return (f"prompt is {n_tokens} tokens; with up to {budget} new tokens it exceeds the "
                f"{context}-token context of judge {spec.name}")
    return None


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
