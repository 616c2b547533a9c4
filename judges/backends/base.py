"""What the local backends share: those that tokenize prompts themselves.

The local backends are transformers, vLLM and replay. They share prompt text, prompts built
from their pieces (the template's text with its control tokens, the item's strings as text:
`prompt_pieces`, `PieceEncoder`, `escape_pieces`), detokenizing, and token steps from
logprobs. The contract a backend fulfils is
`jurybox.judges.backends.protocol`.

The rooms, every name importable from here: `jurybox.judges.backends.prompting` (chat
templates, prompt text, lengths, encoding), `.detokenize` (detokenizing, token steps from
logprobs), `.control_tokens` (control tokens, escaping, prompts from their pieces).
"""

from __future__ import annotations

from .control_tokens import (
    GENERIC_CONTROL,
    JOINER,
    MAX_ESCAPE_PASSES,
    ControlTokens,
    PieceEncoder,
    escape_messages,
    escape_pieces,
    escaped_prompt,
    prompt_pieces,
    request_pieces,
)
from .detokenize import (
    Detokenizer,
    steps_from_logprobs,
)
from .prompting import (
    CPU_MAX_PROMPT_TOKENS,
    backend_note,
    bos_prefix,
    encode_prompts,
    length_error,
    plain_prompt,
    prompt_char_limit,
    prompt_text,
    require_chat_template,
    require_vision_chat,
    vision_prompt_text,
)

__all__ = [
    "CPU_MAX_PROMPT_TOKENS",
    "GENERIC_CONTROL",
    "JOINER",
    "MAX_ESCAPE_PASSES",
    "ControlTokens",
    "Detokenizer",
    "PieceEncoder",
    "backend_note",
    "bos_prefix",
    "encode_prompts",
    "escape_messages",
    "escape_pieces",
    "escaped_prompt",
    "length_error",
    "plain_prompt",
    "prompt_char_limit",
    "prompt_pieces",
    "prompt_text",
    "request_pieces",
    "require_chat_template",
    "require_vision_chat",
    "steps_from_logprobs",
    "vision_prompt_text",
]
