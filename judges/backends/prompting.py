"""Prompt text of the local backends: chat templates, plain and vision prompts, their lengths.

Re-exported by `jurybox.judges.backends.base`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .protocol import JudgeConfigError, Message, Request


def require_chat_template(spec: Any, tokenizer: Any) -> None:
    """Refuse a judge that asks for chat prompts when ``tokenizer`` has no chat template.

    Raises:
        JudgeConfigError: The judge's ``prompt_format`` is ``chat`` and the tokenizer has no
            chat template.
    """
    if spec.prompt_format == "chat" and not getattr(tokenizer, "chat_template", None):
        raise JudgeConfigError(
            f"judge {spec.name}: model {spec.model} has no chat template; "
            "set prompt_format: plain in the jury file"
        )


def bos_prefix(tokenizer: Any) -> str:
    """The BOS text a plain prompt needs.

    Prompts are tokenized without special tokens (chat templates write their own), so a plain
    prompt must carry the BOS the tokenizer would normally add: Gemma degrades badly without it.
    """
    adds_bos = tokenizer.bos_token is not None and (
        tokenizer("x").input_ids[:1] == [tokenizer.bos_token_id]
    )
    return tokenizer.bos_token if adds_bos else ""


def plain_prompt(messages: list[Message]) -> str:
    """The messages framed as one document for a base model (``prompt_format: plain``).

    The document ends where the JSON answer begins.
    """
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


def vision_prompt_text(
    spec: Any, tokenizer: Any, request: Request, messages: list[Message] | None = None
) -> str:
    """The text a judge that sees images is given for ``request``.

    It is the chat template over the messages as parts, an image part where each image goes (the
    template writes the model's image placeholder there), the same for every backend that
    tokenizes locally; ``messages``, when given, stand in for the request's own (e.g. escaped).
    """
    from ..images import chat_parts

    if messages is not None:
        request = replace(request, messages=messages)
    return tokenizer.apply_chat_template(
        chat_parts(request),
        add_generation_prompt=True,
        tokenize=False,
        **spec.reasoning.template_kwargs,
    )


def require_vision_chat(spec: Any) -> None:
    """Refuse a judge that sees images with plain prompts.

    Images go into chat messages, which a base model's plain framing has none of.

    Raises:
        JudgeConfigError: The judge sees images and its ``prompt_format`` is not ``chat``.
    """
    if spec.prompt_format != "chat":
        raise JudgeConfigError(
            f"judge {spec.name}: a judge that sees images (vision) needs "
            "prompt_format: chat; set vision: false to judge on text"
        )


# Prompt length beyond which a judge on a CPU refuses an item unless its jury file sets
# max_prompt_tokens: attention over tens of thousands of tokens takes minutes and many GB there.
CPU_MAX_PROMPT_TOKENS = 8192


def length_error(spec: Any, n_tokens: int, context: int, on_cpu: bool) -> str | None:
    """Why a prompt of ``n_tokens`` is not given to this judge, or None when it may be.

    A prompt is refused when it is longer than the judge's ``max_prompt_tokens`` (default: 8192 on
    a CPU, the context elsewhere), or too long to leave room for the answer (and the thinking
    budget) in the model's context.
    """
    limit = spec.execution.max_prompt_tokens or (CPU_MAX_PROMPT_TOKENS if on_cpu else None)
    if limit is not None and n_tokens > limit:
        source = (
            "its max_prompt_tokens"
            if spec.execution.max_prompt_tokens
            else "the default max_prompt_tokens on a CPU"
        )
        return (
            f"prompt is {n_tokens} tokens, more than {limit} ({source}); set "
            f"max_prompt_tokens for judge {spec.name} in the jury file if the machine can "
            "hold it"
        )
    budget = spec.sampling.max_tokens
    if spec.reasoning.mode == "think":
        budget += spec.reasoning.budget_tokens
    if n_tokens + budget > context:
        return (
            f"prompt is {n_tokens} tokens; with up to {budget} new tokens it exceeds the "
            f"{context}-token context of judge {spec.name}"
        )
    return None


def prompt_char_limit(spec: Any, tokenizer: Any, context: int, on_cpu: bool) -> int:
    """The most characters a prompt within the judge's token limit can have.

    The limit (its ``max_prompt_tokens``, else the CPU default or its context) times the longest
    token's text. A longer prompt is refused before it is tokenized, which for megabytes of text
    would take the judge longer than judging.
    """
    tokens = spec.execution.max_prompt_tokens or (CPU_MAX_PROMPT_TOKENS if on_cpu else context)
    longest = max((len(t) for t in tokenizer.get_vocab()), default=1)
    return tokens * max(1, longest)


def encode_prompts(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """``tokenizer(texts, add_special_tokens=False)["input_ids"]``: each prompt's token ids.

    A fast tokenizer called through transformers also computes character offsets and builds a
    BatchEncoding; on a ~550-token judge prompt that is 25-45% of the time, so when that call
    would do nothing but ``encode_batch`` (no padding, truncation or special-token splitting
    set, no overridden encoding), the tokenizers library's ``encode_batch_fast`` (the same ids,
    no offsets) is called directly.
    """
    if not texts:
        return []
    backend = plain_backend(tokenizer)
    if (
        backend is None
        or backend.padding is not None
        or backend.truncation is not None
        or backend.encode_special_tokens != bool(getattr(tokenizer, "split_special_tokens", False))
        or not hasattr(backend, "encode_batch_fast")
    ):
        return list(tokenizer(texts, add_special_tokens=False)["input_ids"])
    return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=False)]


def backend_note(backend: object) -> str | None:
    """What a loaded backend says a run should know, or None.

    That is its encoder's ``note``, where it has one.
    """
    return getattr(getattr(backend, "encoder", None), "note", None)


def plain_backend(tokenizer: Any) -> Any:
    """The tokenizers-library tokenizer behind a transformers fast tokenizer, else None.

    Only for a tokenizer whose encoding and decoding are transformers' own (not overridden by its
    class).
    """
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another transformers layout: keep its calls
        return None
    if not isinstance(tokenizer, TokenizersBackend):
        return None
    if hasattr(tokenizer, "_switch_to_input_mode"):  # encoder-decoder modes change the backend
        return None
    cls = type(tokenizer)
    own = (
        ("__call__", PreTrainedTokenizerBase),
        ("decode", PreTrainedTokenizerBase),
        ("_encode_plus", TokenizersBackend),
        ("_decode", TokenizersBackend),
    )
    if any(getattr(cls, name, None) is not getattr(base, name, None) for name, base in own):
        return None
    return getattr(tokenizer, "backend_tokenizer", None)
