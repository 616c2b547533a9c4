"""Detokenizing, and the token steps a judge's answer is read from (`steps_from_logprobs`).

Re-exported by `jurybox.judges.backends.base`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from .prompting import plain_backend
from .protocol import TokenStep

_WINDOW = 8  # tokens of left context when detokenizing one token (enough for any merge)


class Detokenizer:
    """``tokenizer.decode(ids, skip_special_tokens=False)``, memoized.

    Reading an answer decodes a few dozen short id windows per judgment (each token's text, and
    the alternatives at score positions); through ``tokenizer.decode`` each costs ~20 us, mostly
    the Python wrapper. Constrained answers repeat the same windows (the JSON keys, the scale's
    points), so a memo answers nearly all of them; misses go to the Rust decoder directly when
    that is what ``decode`` does (a fast tokenizer without Python-side clean-up). Decoding is a
    pure function of the ids, so the memo changes no result.
    """

    def __init__(self, tokenizer: Any, cache_size: int = 1 << 16) -> None:
        self.tokenizer = tokenizer
        raw = _rust_decode(tokenizer)
        if raw is None:

            def raw(ids: tuple[int, ...]) -> str:
                return tokenizer.decode(list(ids), skip_special_tokens=False)

        # Bounded memos (thread-safe): decoded id tuples, one token's text after its window,
        # a whole answer's pieces, the alternatives' texts after a prefix.
        self._cached = functools.lru_cache(maxsize=cache_size)(raw)
        self._piece = functools.lru_cache(maxsize=cache_size)(self._window_piece)
        self._pieces = functools.lru_cache(maxsize=cache_size)(self._all_pieces)
        self.appended = functools.lru_cache(maxsize=cache_size)(self._appended)

    def __call__(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, special tokens kept."""
        return self._cached(tuple(ids))

    def _window_piece(self, window: tuple[int, ...]) -> str:
        if len(window) == 1:
            return self._cached(window)
        return self._cached(window)[len(self._cached(window[:-1])) :]

    def _appended(self, prefix: tuple[int, ...], alternatives: tuple[int, ...]) -> tuple[str, ...]:
        """The text each alternative token would add after ``prefix``.

        Memoized as ``appended``: at a score position the prefix and the allowed tokens repeat.
        """
        prev = len(self._cached(prefix))
        return tuple(self._cached(prefix + (alt,))[prev:] for alt in alternatives)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """The text each token adds, such that the pieces join to ``decode(ids)``.

        Each token is decoded with a few tokens of left context (linear, not quadratic, in the
        length); when a tokenizer's merges defeat the window, every prefix is decoded instead.
        """
        return list(self._pieces(tuple(ids)))

    def _all_pieces(self, ids: tuple[int, ...]) -> tuple[str, ...]:
        piece = self._piece
        pieces = tuple(piece(ids[max(0, t - _WINDOW) : t + 1]) for t in range(len(ids)))
        if "".join(pieces) == self._cached(ids):
            return pieces
        texts = [""] + [self._cached(ids[: t + 1]) for t in range(len(ids))]
        return tuple(texts[t + 1][len(texts[t]) :] for t in range(len(ids)))


def _rust_decode(tokenizer: Any) -> Callable[[tuple[int, ...]], str] | None:
    """The tokenizers-library decode that ``tokenizer.decode`` ends in, else None.

    Only when nothing else happens on the way (no clean-up of spaces, no overridden decode).
    """
    backend = plain_backend(tokenizer)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return None
    decode = backend.decode

    def raw(ids: tuple[int, ...]) -> str:
        return decode(ids, skip_special_tokens=False)

    return raw


class _Alternatives:
    """The top alternatives at each position of one answer, as appended text -> logprob.

    They are decoded on first use. One per answer rather than a closure per token: a batch of
    answers keeps all its steps alive at once, and fewer objects mean less garbage-collector work.
    """

    __slots__ = ("decode", "ids", "logprobs")

    def __init__(self, decode: Detokenizer, ids: list[int], logprobs: Any) -> None:
        self.decode = decode
        self.ids = ids
        self.logprobs = logprobs

    def __call__(self, t: int) -> dict[str, float]:
        logprobs = self.logprobs
        position = logprobs[t] if logprobs is not None and t < len(logprobs) else None
        out: dict[str, float] = {}
        if not position:
            return out
        texts = self.decode.appended(tuple(self.ids[:t]), tuple(position))
        for lp, appended in zip(position.values(), texts):
            value = lp.logprob if hasattr(lp, "logprob") else float(lp)
            if value == -math.inf or math.isnan(value):
                continue
            # Alternatives that read the same (different ids, same text) add up.
            out[appended] = (
                math.log(math.exp(out[appended]) + math.exp(value)) if appended in out else value
            )
        return out


def steps_from_logprobs(
    decode: Detokenizer, ids: list[int], logprobs: Any
) -> tuple[str, list[TokenStep]]:
    """Answer text and `TokenStep`s from generated ids and per-position logprobs.

    The logprobs are ``{token_id: logprob}``, or vLLM's ``{token_id: Logprob}``; tokens the
    grammar forbids carry -inf and are left out. The same result as the vLLM backend's own
    version, at a fraction of the cost.
    """
    pieces = decode.pieces(ids)
    alternatives = _Alternatives(decode, list(ids), logprobs)
    steps: list[TokenStep] = []
    offset = 0
    for t, piece in enumerate(pieces):
        steps.append(TokenStep(offset, piece, alternatives, t))
        offset += len(piece)
    return "".join(pieces), steps
