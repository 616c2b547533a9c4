"""Reading a judge's answer: the chosen score per criterion, and its probabilities.

The probabilities are those the judge gave each point of the scale (from token logprobs), hence
an expected score.

Constrained judges answer with exactly one JSON object. Unconstrained ones (a server without
structured outputs) may ramble; the fallback takes the *last* answer they give, never the first.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from jurybox.rubrics import Criterion

from .backends.protocol import TokenStep

_DECODER = json.JSONDecoder()
# Share of a position's probability that may fall on tokens we cannot tie to one scale point
# before the distribution is declared unknown.
UNATTRIBUTED_TOLERANCE = 0.01


@dataclass(frozen=True)
class Answer:
    """One criterion's answer, or the reason there is none."""

    value: float | None = None
    label: str | None = None
    error: str | None = None
    position: int | None = None  # offset in the text where the answer's value begins


def _json_objects(text: str) -> list[tuple[int, dict]]:
    """Every JSON object in ``text`` with the offset it starts at."""
    found = []
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = _DECODER.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            found.append((match.start(), obj))
    return found


@functools.lru_cache(maxsize=1024)
def _key_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r'"' + re.escape(name) + r'"\s*:\s*"?')


def _value_position(text: str, start: int, name: str) -> int | None:
    """Offset of the first character of the value of key ``name`` in the object at ``start``."""
    m = _key_pattern(name).search(text, start)
    return m.end() if m else None


# "name: value" in free text. The name must stand alone (accuracy, not reasoning_accuracy) and
# the value must end (a cut-off "1" of "10" is no answer).
_LOOSE = r'(?<![\w])["\']?{name}["\']?\s*[:=]\s*["\']?([A-Za-z]+|-?\d+(?:\.\d+)?)(?![\w.])'


@functools.lru_cache(maxsize=1024)
def _loose_pattern(name: str) -> re.Pattern[str]:
    return re.compile(_LOOSE.format(name=re.escape(name)), re.IGNORECASE)


@dataclass(frozen=True)
class _ScaleTexts:
    """What reading answers needs from a criterion's scale, computed once per criterion.

    A Scale's points are rebuilt (as validated models) on every access, which cost ~40 us per
    answer read here.
    """

    scale: Any  # the criterion's Scale
    answers: dict[str, float]  # Scale.answer_texts()
    lowered: dict[str, str]  # lower-cased answer text -> answer text
    parsed: dict[Any, float]  # Scale.parse of the answers a judge usually writes
    labels: dict[float, str | None]  # Scale.label_of of each value
    # (prefix of the value in its token, alternative token's text) -> the answer text the
    # alternative spells, None (none or several), or _DIVERGES: the same few pairs recur at
    # every score position of every answer, so each is worked out once
    attributed: dict[tuple[str, str], Any] = field(default_factory=dict)

    @classmethod
    def of(cls, criterion: Criterion) -> _ScaleTexts:
        scale = criterion.scale
        answers = scale.answer_texts()
        parsed: dict[Any, float] = {}
        for key in (*answers, *answers.values()):
            try:
                parsed[key] = scale.parse(key)
            except ValueError:  # not expected of a scale's own points; Scale.parse will say
                pass
        return cls(
            scale,
            answers,
            {a.lower(): a for a in answers},
            parsed,
            {v: scale.label_of(v) for v in parsed.values()},
        )

    def parse(self, raw: Any) -> float:
        """``Scale.parse(raw)``."""
        # Only exact int/float/str keys: True == 1 and 1.0 == 1 would hit the table for a bool,
        # which Scale.parse refuses; anything else goes to Scale.parse and its error messages.
        if type(raw) in (int, float, str):
            value = self.parsed.get(raw)
            if value is not None:
                return value
        return self.scale.parse(raw)

    def label_of(self, value: float) -> str | None:
        """``Scale.label_of(value)``."""
        return self.labels[value] if value in self.labels else self.scale.label_of(value)

    def attribute(self, prefix: str, alt: str) -> Any:
        """The answer text an alternative token spells where the value begins.

        It may carry punctuation after it, e.g. '3,'; None when it fits no answer or several
        (e.g. '1' on a 0-10 scale); _DIVERGES when it departs from the value's prefix (another
        answer shape).
        """
        found = self.attributed.get((prefix, alt), _MISSING)
        if found is not _MISSING:
            return found
        if not alt.startswith(prefix):
            found = _DIVERGES
        else:
            rest = alt[len(prefix) :].lower()
            matches = [
                a
                for a in self.lowered
                if rest
                and (a.startswith(rest) or (rest.startswith(a) and not rest[len(a)].isalnum()))
            ]
            found = self.lowered[matches[0]] if len(matches) == 1 else None
        if len(self.attributed) < 65536:  # bounded: alternatives are tokens of one vocabulary
            self.attributed[(prefix, alt)] = found
        return found


_MISSING = object()
_DIVERGES = object()


# Criteria are frozen and long-lived (a rubric's), but pydantic models are neither hashable nor
# weak-referenceable: key by identity and keep the criterion alive beside its entry, so an id
# is never reused while its entry exists.
_SCALE_TEXTS: dict[int, tuple[Criterion, _ScaleTexts]] = {}


def _scale_texts(criterion: Criterion) -> _ScaleTexts:
    entry = _SCALE_TEXTS.get(id(criterion))
    if entry is None or entry[0] is not criterion:
        if len(_SCALE_TEXTS) >= 4096:
            _SCALE_TEXTS.clear()
        entry = (criterion, _ScaleTexts.of(criterion))
        _SCALE_TEXTS[id(criterion)] = entry
    return entry[1]


def parse_answers(text: str, criteria: list[Criterion], complete: bool = True) -> dict[str, Answer]:
    """Each criterion's answer.

    ``complete=False`` (the output was cut at max_tokens) accepts only whole JSON objects:
    free-text matches near a cut could be half a number.
    """
    names = [c.name for c in criteria]
    objects = [(at, obj) for at, obj in _json_objects(text) if any(n in obj for n in names)]
    answers: dict[str, Answer] = {}
    for c in criteria:
        raw: Any = None
        position = None
        # The last JSON object that has this key is the judge's final answer.
        for at, obj in reversed(objects):
            if c.name in obj:
                raw = obj[c.name]
                position = _value_position(text, at, c.name)
                break
        else:
            hits = list(_loose_pattern(c.name).finditer(text))
            if hits and complete:
                raw, position = hits[-1].group(1), hits[-1].start(1)
        if raw is None:
            snippet = text.strip()[-80:] or "(empty output)"
            answers[c.name] = Answer(
                error=f"no answer for {c.name!r} in the judge's output: {snippet!r}"
            )
            continue
        texts = _scale_texts(c)
        try:
            value = texts.parse(raw)
        except ValueError as exc:
            answers[c.name] = Answer(error=f"{c.name}: {exc}")
            continue
        answers[c.name] = Answer(value=value, label=texts.label_of(value), position=position)
    return answers


def score_distribution(
    criterion: Criterion, steps: list[TokenStep], position: int | None
) -> dict[str, float] | None:
    """Probability over the scale's points at the token where the answer's value begins.

    Each alternative token at that position is attributed to the scale point it spells (it may
    also carry the surrounding punctuation, e.g. ``' 3'`` or ``'3,'``). When the mass cannot be
    attributed (an alternative could start several points, like ``'1'`` on a 0-10 scale, or
    stops short of the value, like a bare quote) beyond a trace, the distribution is unknowable
    from one token: then None, never a guess.
    """
    if position is None or not steps:
        return None
    for step in steps:
        if step.offset <= position < step.offset + len(step.text):
            break
    else:
        return None
    prefix = step.text[: position - step.offset]
    texts = _scale_texts(criterion)
    answers, lowered = texts.answers, texts.lowered
    mass: dict[str, float] = {}
    unattributed = 0.0
    for alt, logprob in step.top.items():
        key = texts.attribute(prefix, alt)
        if key is _DIVERGES:
            continue  # diverges before the value: another answer shape, not a score
        p = math.exp(logprob)
        if key is not None:
            mass[key] = mass.get(key, 0.0) + p
        else:
            unattributed += p
    total = sum(mass.values())
    chosen = next((a for a in lowered if step.text[len(prefix) :].lower().startswith(a)), None)
    if total <= 0.0 or unattributed > UNATTRIBUTED_TOLERANCE * (total + unattributed):
        return None
    if chosen is not None and mass.get(lowered[chosen], 0.0) == 0.0:
        return None
    return {a: mass.get(a, 0.0) / total for a in answers}


def expected_score(criterion: Criterion, distribution: dict[str, float] | None) -> float | None:
    """The mean scale value under ``distribution`` (from `score_distribution`).

    None without a distribution.
    """
    if distribution is None:
        return None
    values = _scale_texts(criterion).answers
    return float(sum(values[a] * p for a, p in distribution.items()))


def reason_kind(error: str) -> str:
    """An unscored vote's reason without its item-specific detail.

    The detail (numbers, quoted judge output) goes, so that reasons can be counted by kind (the
    run summary, the service's metrics). Digits inside names (smollm2-135m, gemma3) are not
    numbers and stay.
    """
    kind = re.sub(
        r"(?<![A-Za-z_])\d+(?:\.\d+)?(?![A-Za-z_\d])", "N", error.split(": '")[0].split(': "')[0]
    )
    return kind[:120] or "unknown"


# Why a vote or verdict has no score, as a closed set of codes (the service's metrics label
# unscored votes with these, and OpenRLHF's logs number them by position): never the error's
# own text, which can carry an item's text or a judge's output.
REASON_CODES = (
    "scored",
    "below_quorum",
    "prompt_too_long",
    "output_cut",
    "thinking_budget",
    "no_answer",
    "off_scale",
    "engine_refused",
    "judge_error",
    "control_token",
    "render_failed",
    "formula_undefined",
    "other",
    "prechecked",  # after "other": OpenRLHF's logs number the codes by position
)

# Phrases of the unscored reasons jurybox writes, first match wins (a reward's reason begins
# with the failed vote's error, then the verdict's "below quorum").
_REASON_PHRASES = (
    ("prechecked", ("pre-check:",)),  # (jurybox.rubrics.exploits.precheck's reasons)
    (
        "prompt_too_long",
        ("tokens; with up to", "prompt is ", "prompt and reasoning are ", "characters, more than"),
    ),
    ("output_cut", ("output cut at max_tokens",)),
    ("thinking_budget", ("thinking budget of",)),
    ("control_token", ("control token",)),
    ("render_failed", ("prompt could not be rendered",)),
    ("no_answer", ("no answer for",)),
    (
        "off_scale",
        (
            "is not on the scale",
            "is not a value of the scale",
            "is not a label of",
            "is not a number",
            "is a boolean",
            "is not finite",
        ),
    ),
    ("engine_refused", ("vLLM refused the request", "vLLM ended the request")),
    ("judge_error", (" failed: ", " at http", "HTTP ")),
    ("formula_undefined", (": undefined (",)),
    ("below_quorum", ("below quorum",)),
)


def reason_code(reason: str) -> str:
    """The code of `REASON_CODES` for an unscored vote's error or a verdict's reasons.

    It is linear in the text: substring tests only.
    """
    head = reason[:2000]  # the phrases come first; an item's text may follow
    for code, phrases in _REASON_PHRASES:
        if any(p in head for p in phrases):
            return code
    return "other"
