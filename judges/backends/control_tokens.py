"""Control tokens: an item's strings kept as text in a prompt built from its pieces.

The template's text keeps its control tokens; an item's text that holds one is escaped with a
word joiner (`escape_pieces`), and `PieceEncoder` encodes the pieces. Re-exported by
`jurybox.judges.backends.base`.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from jurybox.rubrics.prompts import Marks, Piece

from .prompting import (
    encode_prompts,
    plain_backend,
    prompt_text,
    vision_prompt_text,
)
from .protocol import Message, Request


def _trie_pattern(words: Sequence[str]) -> re.Pattern[str] | None:
    """A regular expression matching any of ``words`` in time linear in the text.

    The words form a trie (each alternation's branches start with different characters, so a
    match never backtracks further than one word's length).
    """
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return re.compile(emit(trie)) if trie else None


class ControlTokens:
    """A tokenizer's control tokens (its special tokens: ``<|im_end|>``, ``<start_of_turn>``...).

    Finding them is linear in the text (a trie), and matches as the tokenizer does: leftmost,
    longest.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        decoder = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        words = {t.content for t in decoder.values() if getattr(t, "special", False)}
        words |= set(getattr(tokenizer, "all_special_tokens", []) or [])
        self.words = sorted(w for w in words if w)
        self.pattern = _trie_pattern(self.words)

    def find(self, text: str) -> str | None:
        """The first control token in ``text``, or None."""
        if self.pattern is None:
            return None
        match = self.pattern.search(text)
        return match.group(0) if match else None


def request_pieces(request: Request, pattern: re.Pattern[str] | None) -> list[list[Piece]] | str:
    """Each of ``request``'s messages as ``(text, is_item)`` pieces, or why it cannot be given.

    They are the rubric's pieces (`jurybox.rubrics.prompts.item_pieces`). A request without
    them (its template changed the item's text) has each content as the item's text, and is
    refused when that holds a control token (a match of ``pattern``, the judge's own, or of
    `GENERIC_CONTROL`, so that every judge of a jury refuses alike): whose it is cannot be told.
    """
    if request.pieces is not None:
        return [list(p) for p in request.pieces]
    for message in request.messages:
        # The judge's own control tokens and the usual chat templates' (`GENERIC_CONTROL`), so
        # that every judge of a jury refuses alike: an item's author cannot pick which judge
        # votes by writing another judge's token (found in review).
        found = (pattern.search(message["content"]) if pattern is not None else None) or (
            GENERIC_CONTROL.search(message["content"])
        )
        if found:
            return (
                f"the prompt holds the judge's control token {found.group(0)!r}, and the "
                "rubric's template shows the item's text changed (a filter), so the item's "
                "text cannot be told from the template's; remove the token from the item"
            )
    return [[(m["content"], True)] if m["content"] else [] for m in request.messages]


def prompt_pieces(
    spec: Any,
    tokenizer: Any,
    bos: str,
    request: Request,
    vision: bool,
    pattern: re.Pattern[str] | None,
) -> list[Piece] | str:
    """The judge's whole prompt as ``(text, is_item)`` pieces, or why it cannot be given.

    The prompt is that of `prompt_text` (or `vision_prompt_text` for a judge that sees images):
    the messages' pieces (`request_pieces`) through the chat template (or plain framing), each
    item piece as a `Marks` mark, and the text cut at the marks. Every path builds the judge's
    input from these: the local backends tokenize the template's pieces with their control
    tokens and the item's as text (`PieceEncoder`); a processor or a server given text gets the
    item's pieces escaped (`escape_pieces`). A chat template that changes the item's text (so
    the pieces do not give back the prompt) is refused.
    """
    per_message = request_pieces(request, pattern)
    if isinstance(per_message, str):
        return per_message
    marks = Marks()
    messages = [
        {**m, "content": "".join(marks(t) if item else t for t, item in pieces)}
        for m, pieces in zip(request.messages, per_message)
    ]
    if vision:
        place = request.image_place
        if place is not None and place[0] < len(per_message):
            marked_texts = [marks(t) if item else t for t, item in per_message[place[0]]]
            place = (place[0], _moved(per_message[place[0]], place[1], marked_texts))
        marked = replace(request, messages=messages, image_place=place)
        text = vision_prompt_text(spec, tokenizer, marked)
        real = vision_prompt_text(spec, tokenizer, request)
    else:
        text = prompt_text(spec, tokenizer, bos, messages)
        real = prompt_text(spec, tokenizer, bos, request.messages)
    pieces = marks.split(text)
    if pieces is None or "".join(t for t, _ in pieces) != real:
        return (
            f"judge {spec.name}'s chat template changes the item's text, so the item's text "
            "cannot be told from the template's in its prompt"
        )
    return pieces


def escaped_prompt(
    spec: Any,
    tokenizer: Any,
    bos: str,
    request: Request,
    vision: bool,
    pattern: re.Pattern[str] | None,
) -> list[Piece] | str:
    """`prompt_pieces` with the item's pieces escaped (`escape_pieces`), or why there are none.

    For a prompt tokenized whole (a vision-language model's processor, with its images): the
    joined text has only the template's control tokens.
    """
    pieces = prompt_pieces(spec, tokenizer, bos, request, vision, pattern)
    return pieces if isinstance(pieces, str) else escape_pieces(pieces, pattern)


def _moved(pieces: list[Piece], offset: int, texts: Sequence[str]) -> int:
    """Where character ``offset`` of the pieces' text is once item piece ``k`` is ``texts[k]``.

    An offset at an item piece's edge stays at that edge.
    """
    real = new = 0
    for (text, item), now in zip(pieces, texts):
        if offset <= real + len(text) and not (item and offset > real):
            return new + (offset - real)
        real += len(text)
        new += len(now)
    return new


def escape_messages(
    request: Request, pattern: re.Pattern[str] | None = None
) -> tuple[list[Message], tuple[int, int] | None] | str:
    """``request``'s messages with the item's pieces escaped, and where its images go now.

    For a server that tokenizes the messages with its own chat template (the openai backend):
    each message's pieces (`request_pieces`) are escaped where the item's strings are inserted
    (`escape_pieces`; by default against `GENERIC_CONTROL`, the usual chat templates' control
    tokens). Returns why the request cannot be sent instead, where the pieces cannot be told
    or escaped.
    """
    pattern = GENERIC_CONTROL if pattern is None else pattern
    per_message = request_pieces(request, pattern)
    if isinstance(per_message, str):
        return per_message
    messages: list[Message] = []
    escaped_all: list[list[Piece]] = []
    for message, pieces in zip(request.messages, per_message):
        escaped = escape_pieces(pieces, pattern)
        if isinstance(escaped, str):
            return escaped
        escaped_all.append(escaped)
        messages.append({**message, "content": "".join(t for t, _ in escaped)})
    place = request.image_place
    if place is not None and place[0] < len(per_message):
        k = place[0]
        place = (k, _moved(per_message[k], place[1], [t for t, _ in escaped_all[k]]))
    return messages, place


# A word joiner (U+2060): written into an item's text where a control token would otherwise
# begin or run on, so that a tokenizer reads text. No control token holds one.
JOINER = "\u2060"
MAX_ESCAPE_PASSES = 64


def escape_pieces(pieces: Sequence[Piece], pattern: re.Pattern[str] | None) -> list[Piece] | str:
    """``pieces`` with their item pieces escaped: no control token of their joined text touches one.

    A control token (a match of ``pattern``, found leftmost-longest, as a tokenizer's added-token
    matcher does) that lies inside an item piece gets a word joiner after its first character;
    one that runs from the template's text or another piece into an item piece gets a word
    joiner at that piece's edge. The joined text is searched again until no control token
    touches an item piece, so whatever the item pieces hold, and however they lie next to each
    other or to the template's text, only the template's own control tokens are left.

    Returns:
        The escaped pieces, or why they could not be escaped (a one-character control token
        in an item's text, or more than ``MAX_ESCAPE_PASSES`` searches).
    """
    out = list(pieces)
    if pattern is None:
        return out
    for _ in range(MAX_ESCAPE_PASSES):
        starts, at = [], 0
        for text, _ in out:
            starts.append(at)
            at += len(text)
        joined = "".join(t for t, _ in out)
        cuts: dict[int, set[int]] = {}  # piece -> offsets in it where a joiner goes
        for m in pattern.finditer(joined):
            for k, (text, item) in enumerate(out):
                lo, hi = starts[k], starts[k] + len(text)
                if not item or m.end() <= lo or m.start() >= hi:
                    continue
                if m.start() >= lo:  # it begins inside: break it after its first character
                    if m.end() - m.start() < 2:
                        return (
                            f"the item's text holds the one-character control token "
                            f"{m.group(0)!r}, which cannot be escaped"
                        )
                    cuts.setdefault(k, set()).add(m.start() - lo + 1)
                else:  # it runs into this piece from before: break it at the piece's start
                    cuts.setdefault(k, set()).add(0)
                break
        if not cuts:
            return out
        for k, offsets in cuts.items():
            text = out[k][0]
            bounds = [0, *sorted(offsets), len(text)]
            out[k] = (JOINER.join(text[a:b] for a, b in itertools.pairwise(bounds)), True)
    return f"the item's text could not be escaped in {MAX_ESCAPE_PASSES} passes"


def _spaces_forward(pieces: Sequence[Piece]) -> list[Piece]:
    """``pieces`` with the spaces that end a template piece moved to the item piece after it.

    A word's tokens hold the space before it (`` Ohio``): the spaces before an item string are
    tokenized with it, as they would be in the whole prompt. Spaces are never a control token's
    (`PieceEncoder` checks it of its tokenizer).
    """
    out = list(pieces)
    for k in range(len(out) - 1):
        (text, item), (after, after_item) = out[k], out[k + 1]
        if item or not after_item or not text or text[-1] not in " \t":
            continue
        kept = text.rstrip(" \t")
        out[k] = (kept, False)
        out[k + 1] = (text[len(kept) :] + after, True)
    return out


class PieceEncoder:
    """A prompt's ids from its pieces, so that only the template's text has control tokens.

    The template's pieces (`prompt_pieces`) are tokenized with their control tokens live, and
    remembered (they repeat from prompt to prompt: the rubric's preamble, the chat template's
    turns); each item piece is tokenized as text (``split_special_tokens``); the ids are joined.
    No arrangement of item strings can make a live control token: each is tokenized alone, as
    text. Tokenizing in pieces keeps the tokenizer from merging across a piece's edge, so a few
    ids at the edges can differ from tokenizing the prompt whole (see ``perf/RESULTS.md``).
    """

    MEMO = 1024  # template pieces remembered
    MEMO_CHARS = 1 << 15  # longest template piece remembered

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        controls = ControlTokens(tokenizer)
        self.pattern = controls.pattern
        # Spaces before an item string go with it, unless they can be part of a control token.
        self._forward = not any(" " in w or "\t" in w for w in controls.words)
        self._memo: OrderedDict[str, list[int]] = OrderedDict()
        self._lock = threading.Lock()  # the tokenizer's special-token switch is shared state

    def __call__(self, prompts: Sequence[Sequence[Piece]]) -> list[list[int]]:
        """Each prompt's ids, its pieces' ids joined."""
        if self._forward:
            prompts = [_spaces_forward(p) for p in prompts]
        items = [t for p in prompts for t, item in p if item and t]
        with self._lock:  # the memo too: backends may encode from several threads
            memo = self._memo
            template = dict.fromkeys(t for p in prompts for t, item in p if not item and t)
            known = {t: memo[t] for t in template if t in memo}
            live = [t for t in template if t not in known]
            live_ids = encode_prompts(self.tokenizer, live) if live else []
            item_ids = self._as_text(items) if items else []
            # This call's ids are its own (``known``) before the memo is trimmed, so a piece
            # evicted by the pieces this call adds is never looked up again (found in review).
            known.update(zip(live, live_ids))
            for text in template:
                if len(text) <= self.MEMO_CHARS:
                    memo[text] = known[text]
                    memo.move_to_end(text)
            while len(memo) > self.MEMO:
                memo.popitem(last=False)
        out: list[list[int]] = []
        k = 0
        for prompt in prompts:
            ids: list[int] = []
            for text, item in prompt:
                if item:
                    if text:
                        ids.extend(item_ids[k])
                        k += 1
                elif text:
                    ids.extend(known[text])
            out.append(ids)
        return out

    def _as_text(self, texts: list[str]) -> list[list[int]]:
        """Each text's ids with special tokens split (read as text)."""
        backend = plain_backend(self.tokenizer)
        if (
            backend is None
            or backend.padding is not None
            or backend.truncation is not None
            or not hasattr(backend, "encode_batch_fast")
        ):
            return list(
                self.tokenizer(texts, add_special_tokens=False, split_special_tokens=True)[
                    "input_ids"
                ]
            )
        before = backend.encode_special_tokens
        backend.encode_special_tokens = True
        try:
            return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=False)]
        finally:
            backend.encode_special_tokens = before

    def encode(
        self, spec: Any, bos: str, requests: Sequence[Request], vision: bool, max_chars: int | None
    ) -> list[list[int] | str]:
        """Each request's prompt ids, or why it cannot be given to the judge.

        A prompt is refused for more than ``max_chars`` characters (more than the judge's token
        limit could hold, found without tokenizing it: see `prompt_char_limit`), or where its
        pieces cannot be told (`prompt_pieces`).
        """
        out: list[list[int] | str] = []
        todo: list[tuple[int, list[Piece]]] = []
        for request in requests:
            pieces = prompt_pieces(spec, self.tokenizer, bos, request, vision, self.pattern)
            if not isinstance(pieces, str):
                n = sum(len(t) for t, _ in pieces)
                if max_chars is not None and n > max_chars:
                    pieces = (
                        f"prompt is {n} characters, more than the judge's token limit could "
                        f"hold ({max_chars} characters); it was not tokenized"
                    )
                else:
                    todo.append((len(out), pieces))
            out.append(pieces if isinstance(pieces, str) else [])
        for (i, _), ids in zip(todo, self([p for _, p in todo])):
            out[i] = ids
        return out


# Control tokens of the usual chat templates, for a server whose tokenizer is not ours (the
# openai backend): an item's text holding one is sent with a word joiner (U+2060) after its
# first character, so the server's tokenizer reads text. Bounded repeats: linear in the text.
GENERIC_CONTROL = re.compile(
    r"<\|[^|<>\n]{1,64}\|>|<｜[^｜<>\n]{1,64}｜>|</?s>|\[/?INST\]|</?think>"
    r"|<(?:start|end)_of_turn>|<(?:bos|eos|pad|unk|mask)>|<\|?endoftext\|?>"
)
