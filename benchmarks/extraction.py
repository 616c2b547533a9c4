r"""Which option a multiple-choice response commits to: the last explicit answer wins.

Explicit answers, found anywhere in the response (case-insensitive, markdown emphasis ignored):

* an answer cue followed by an option label: "The answer is (3)", "Answer: 3", "**Final
  answer:** (3)", "the correct answer is option B", "answer is: **C**", "<answer>2</answer>",
  "\boxed{4}"; also "the correct option is B", "I choose (B)", "Option B is correct";
* an answer cue followed by an option's text instead of its label ("The answer is mitochondrial
  fission"; the longest option text that the words after the cue start with);
* a bold parenthesised label on its own, "**(3)**", unless the response bolds several different
  labels (then it is listing the options, not answering);
* a response that is nothing but a label ("B", "(3).") or an option's text.

Labels are the item's own: numbers from 1 (MicroVQA's prompt numbers options from 1), so "10"
is option 10 and never option 1; or letters (MIR), where a lowercase letter counts only when it
is set off ("(b)", "b.", end of line), so "the answer is a bird" names no option. When a label
is followed by text ("The answer is (3) Golgi"), the label decides.

A response with no explicit answer is ``none``; one whose last explicit answer names no option
of the item ("The answer is (7)" of five) is ``invalid``. Both are unparseable: the packs count
them wrong and keep them in the denominator.

The public evaluators get these wrong: MicroVQA's regex ``answer is \*?\*?\(?([0-9])\)?``
takes the *first* match, one digit ("answer is (10)" reads as 1), is case-sensitive ("Answer
is (2)" is missed) and misses "Answer: 3" and "The answer is: 3"; MIR's takes the first,
case-sensitive letter after "Option" ("Option A is wrong, option C is right" reads as A).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["answered", "none", "invalid"]

_F = r"[\s*_`]*"  # whitespace and markdown emphasis between words
_OPTION_WORD = rf"(?:(?:option|choice){_F}(?:number|no\.?)?{_F})?"
_CUES = re.compile(
    "|".join(
        [
            # "answer is", "answer:", "answer would be", "final answer is:", "answer to this question is"
            (
                rf"\banswer\b(?:\s+to\s+(?:this|the)\s+question)?{_F}"
                rf"(?:(?:is|would\s+be|will\s+be|should\s+be|must\s+be)\b{_F}[:=\-–—]?|[:=\-–—])"
                rf"{_F}{_OPTION_WORD}"
            ),
            # "the correct option is", "best choice:"
            rf"\b(?:correct|right|best)\s+(?:option|choice)(?:\s+is\b|{_F}[:=])\s*{_F}{_OPTION_WORD}",
            # "I choose", "I'd pick", "I will go with"
            rf"\bi(?:\s+would|\s+will|'ll|'d)?\s+(?:choose|select|pick|go\s+with)\b{_F}{_OPTION_WORD}",
            r"<answer>\s*",
            r"\\boxed\{\s*",
        ]
    ),
    re.IGNORECASE,
)
_NUMBER = re.compile(rf"[(\[{{]?{_F}(\d{{1,2}})(?!\d){_F}[)\]}}]?")
_LETTER = re.compile(rf"([(\[{{]?)({_F})([A-Za-z])(?![A-Za-z0-9'’]){_F}([)\]}}]?)")
# "Option B is correct", "(3) is the correct answer"
_AFTER = re.compile(
    r"(?:\b(?:option|choice)\s*|(?=[(\[]))(?P<label>[(\[]?\s*(?:\d{1,2}|[A-Za-z])\s*[)\]]?)"
    r"\s+is\s+(?:the\s+)?(?:correct|right|best)\b",
    re.IGNORECASE,
)
_BOLD = re.compile(r"\*\*\s*[(\[]\s*(?P<label>\d{1,2}|[A-Za-z])\s*[)\]]\s*\*\*")


@dataclass(frozen=True)
class Choice:
    """The option a response commits to.

    Attributes:
        index: The option's index, 0-based; None unless ``answered``.
        status: ``answered``, ``none`` (no explicit answer) or ``invalid`` (the last explicit answer
            names no option of the item).
        label: The label as read.
        evidence: The text that decided.
    """

    index: int | None
    status: Status
    label: str | None = None
    evidence: str = ""

    @property
    def parsed(self) -> bool:
        """Whether the response named one of the item's options (status ``answered``)."""
        return self.status == "answered"


def number_labels(n: int) -> list[str]:
    """Option labels ``1`` to ``n``, as MicroVQA numbers its options.

    Args:
        n: How many options.

    Returns:
        The labels.
    """
    return [str(i) for i in range(1, n + 1)]


def letter_labels(n: int) -> list[str]:
    """Option labels ``A`` onwards, ``n`` of them, as MIR letters its options.

    Args:
        n: How many options.

    Returns:
        The labels.
    """
    return [chr(ord("A") + i) for i in range(n)]


def extract_choice(
    response: str | None, labels: Sequence[str], options: Sequence[str] = ()
) -> Choice:
    """The option ``response`` answers: the last explicit answer wins (see the module's text).

    Args:
        response: The model's response.
        labels: The options' labels (all numbers or all letters).
        options: The options' texts (optional, for answers given by text).

    Returns:
        The choice, with its status and the text that decided.
    """
    if not response or not response.strip():
        return Choice(None, "none")
    numeric = all(lab.isdigit() for lab in labels)
    index_of = {_key(lab, numeric): i for i, lab in enumerate(labels)}
    candidates: list[tuple[int, Choice]] = []

    def add(pos: int, label: str, evidence: str) -> None:
        i = index_of.get(_key(label, numeric))
        status: Status = "answered" if i is not None else "invalid"
        candidates.append((pos, Choice(i, status, label, evidence.strip())))

    for cue in _CUES.finditer(response):
        at = cue.end()
        label = _label_at(response, at, numeric, index_of)
        evidence = response[cue.start() : min(len(response), at + 40)].split("\n")[0]
        if label is not None and _key(label, numeric) in index_of:
            add(at, label, evidence)
            continue
        i = _text_choice(response[at:], options)  # "The answer is x." where x is an option
        if i is not None:
            candidates.append((at, Choice(i, "answered", labels[i], evidence.strip())))
        elif label is not None:
            add(at, label, evidence)
    for m in _AFTER.finditer(response):
        label = m.group("label").strip("()[] \t")
        if label.isdigit() == numeric and (
            numeric or label.isupper() or m.group("label").startswith(("(", "["))
        ):
            add(m.start("label"), label, m.group(0))
    bold = [m for m in _BOLD.finditer(response) if m.group("label").isdigit() == numeric]
    if len({_key(m.group("label"), numeric) for m in bold}) == 1:
        for m in bold:
            add(m.start("label"), m.group("label"), m.group(0))
    if not candidates:
        whole = _whole(response, labels, options, numeric, index_of)
        if whole is not None:
            return whole
        return Choice(None, "none")
    return max(candidates, key=lambda c: c[0])[1]


def _key(label: str, numeric: bool) -> str:
    return str(int(label)) if numeric and label.isdigit() else label.upper()


def _label_at(text: str, at: int, numeric: bool, index_of: dict[str, int]) -> str | None:
    """The option label that starts at ``at`` (after a cue), if any."""
    if numeric:
        m = _NUMBER.match(text, at)
        if m is None or re.match(r"[.,]\d", text[m.end(1) : m.end(1) + 2]):
            return None  # "3.5", "1,000": a number, not an option
        return m.group(1)
    m = _LETTER.match(text, at)
    if m is None:
        return None
    opened, emphasis, letter, closed = m.group(1), m.group(2), m.group(3), m.group(4)
    after = text[m.end(3) :]
    set_off = bool(
        opened
        or closed
        or "*" in emphasis
        or "_" in emphasis
        or re.match(r"[\s*_`]*(?:[.,;:!?]|$)", after)
    )
    if letter.islower() and not set_off:
        return None  # "the answer is a bird"
    if letter.upper() not in index_of and not set_off and re.match(r"\s+[a-z]", after):
        return None  # "the answer is I think (B)": a word, not a label
    return letter


_WORDS = re.compile(r"[^0-9a-z]+")


def _norm(text: str) -> str:
    return _WORDS.sub(" ", text.lower()).strip()


def _text_choice(after: str, options: Sequence[str]) -> int | None:
    """The option whose text the words after a cue start with (the longest such option)."""
    if not options:
        return None
    words = _norm(after.split("\n", 1)[0].strip() or after.strip().split("\n", 1)[0])
    words = re.sub(r"^(?:that|to|the option|option)\s+", "", words)
    if not words or words.startswith("not "):
        return None
    best: int | None = None
    for i, option in enumerate(options):
        o = _norm(option)
        matches = o and (words == o or words.startswith(o + " "))
        if matches and (best is None or len(o) > len(_norm(options[best]))):
            best = i
    return best


def _whole(
    response: str,
    labels: Sequence[str],
    options: Sequence[str],
    numeric: bool,
    index_of: dict[str, int],
) -> Choice | None:
    """A response that is nothing but a label or an option's text."""
    bare = response.strip().strip("*_`\"' \t\n.:")
    m = re.fullmatch(r"[(\[]?\s*(\d{1,2}|[A-Za-z])\s*[)\]]?\.?", bare)
    if m and m.group(1).isdigit() == numeric:
        i = index_of.get(_key(m.group(1), numeric))
        return Choice(i, "answered" if i is not None else "invalid", m.group(1), bare)
    text = _norm(response)
    for i, option in enumerate(options):
        if text and text == _norm(option):
            return Choice(i, "answered", labels[i], response.strip()[:60])
    return None


def parse_label(text: str, labels: Sequence[str], options: Sequence[str] = ()) -> int | None:
    """A gold answer written as a label ("B", "(3)") or an option's text, as an index."""
    numeric = all(lab.isdigit() for lab in labels)
    index_of = {_key(lab, numeric): i for i, lab in enumerate(labels)}
    choice = _whole(str(text), labels, options, numeric, index_of)
    return choice.index if choice is not None else None
