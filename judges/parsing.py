"""Reading a judge's answer: the chosen score per criterion, and the probability the judge gave
each point of the scale (from token logprobs), hence an expected score.

Constrained judges answer with exactly one JSON object. Unconstrained ones (a server without
structured outputs) may ramble; the fallback takes the *last* answer they give, never the first.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from jurybox.rubrics import Criterion

from .backends.base import TokenStep

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


def _value_position(text: str, start: int, name: str) -> int | None:
    """Offset of the first character of the value of key ``name`` in the object at ``start``."""
    m = re.compile(r'"' + re.escape(name) + r'"\s*:\s*"?').search(text, start)
    return m.end() if m else None


# "name: value" in free text. The name must stand alone (accuracy, not reasoning_accuracy) and
# the value must end (a cut-off "1" of "10" is no answer).
_LOOSE = r'(?<![\w])["\']?{name}["\']?\s*[:=]\s*["\']?([A-Za-z]+|-?\d+(?:\.\d+)?)(?![\w.])'


def parse_answers(text: str, criteria: list[Criterion], complete: bool = True) -> dict[str, Answer]:
    """Each criterion's answer. ``complete=False`` (the output was cut at max_tokens) accepts only
    whole JSON objects: free-text matches near a cut could be half a number."""
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
            hits = list(re.finditer(_LOOSE.format(name=re.escape(c.name)), text, re.IGNORECASE))
            if hits and complete:
                raw, position = hits[-1].group(1), hits[-1].start(1)
        if raw is None:
            snippet = text.strip()[-80:] or "(empty output)"
            answers[c.name] = Answer(error=f"no answer for {c.name!r} in the judge's output: {snippet!r}")
            continue
        try:
            value = c.scale.parse(raw)
        except ValueError as exc:
            answers[c.name] = Answer(error=f"{c.name}: {exc}")
            continue
        answers[c.name] = Answer(value=value, label=c.scale.label_of(value), position=position)
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
    step = next((s for s in steps if s.offset <= position < s.offset + len(s.text)), None)
    if step is None:
        return None
    prefix = step.text[: position - step.offset]
    answers = criterion.scale.answer_texts()
    lowered = {a.lower(): a for a in answers}
    mass: dict[str, float] = {}
    unattributed = 0.0
    for alt, logprob in step.top.items():
        if not alt.startswith(prefix):
            continue  # diverges before the value: another answer shape, not a score
        p = math.exp(logprob)
        rest = alt[len(prefix) :].lower()
        matches = [
            a
            for a in lowered
            if rest and (a.startswith(rest) or (rest.startswith(a) and not rest[len(a)].isalnum()))
        ]
        if len(matches) == 1:
            key = lowered[matches[0]]
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
    if distribution is None:
        return None
    values = criterion.scale.answer_texts()
    return float(sum(values[a] * p for a, p in distribution.items()))
