"""The contract every part of jurybox speaks: rubrics, the items they judge, votes and verdicts."""

from __future__ import annotations

import math
from collections import Counter
from functools import cached_property
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from .errors import InputError
from .formula import Formula

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# A pairwise item's two answers, and the orders a judge sees them in: "ab" (A first), "ba".
PAIR_FIELDS = ("response_a", "response_b")
Order = Literal["ab", "ba"]
Winner = Literal["a", "b", "tie"]


class Level(BaseModel):
    """One point of a scale: the number it counts as, an optional label, and what it means."""

    model_config = _FROZEN

    value: float
    label: str | None = None
    description: str = ""


class Scale(BaseModel):
    """The values a criterion (or a human label column) may take. One of three kinds:

    * an integer range: ``min``/``max``, with a description per level in ``levels``;
    * named labels: ``labels`` maps label -> value (e.g. yes: 1, no: 0);
    * explicit numbers: ``values`` lists the points (e.g. [0, 0.5, 1]).

    A judge answers a number of the scale, or one of the label strings. :meth:`parse` reads a
    judge's answer and a human's label alike.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    min: int | None = None
    max: int | None = None
    levels: dict[int, str] = Field(default_factory=dict)
    labels: dict[str, float] = Field(default_factory=dict)
    label_descriptions: dict[str, str] = Field(default_factory=dict)
    explicit: list[float] = Field(default_factory=list, alias="values")

    @field_validator("labels", mode="before")
    @classmethod
    def _quoted_labels(cls, labels: Any) -> Any:
        if isinstance(labels, dict):
            unquoted = [k for k in labels if isinstance(k, bool)]
            if unquoted:
                raise ValueError(
                    f"label {unquoted[0]!r} is a YAML boolean: quote yes/no/on/off labels, "
                    'e.g. labels: {"yes": 1, "no": 0}'
                )
        return labels

    @model_validator(mode="after")
    def _one_kind(self) -> Scale:
        has_range = self.min is not None or self.max is not None
        kinds = sum([has_range, bool(self.labels), bool(self.explicit)])
        if kinds > 1:
            raise ValueError("a scale is a range (min/max), labels or values: one of them")
        if kinds == 0:
            raise ValueError("a scale needs min and max (an integer range), labels, or values")
        if has_range:
            if self.min is None or self.max is None:
                raise ValueError("a range scale needs both min and max")
            if self.max <= self.min:
                raise ValueError(f"max ({self.max}) must be greater than min ({self.min})")
            if self.max - self.min > 100:
                raise ValueError("a range scale may have at most 101 points")
            outside = sorted(k for k in self.levels if not self.min <= k <= self.max)
            if outside:
                raise ValueError(f"levels {outside} lie outside {self.min}..{self.max}")
        elif self.explicit:
            if len(set(self.explicit)) != len(self.explicit) or len(self.explicit) < 2:
                raise ValueError(f"values {self.explicit} must be at least two distinct numbers")
            if not all(math.isfinite(v) for v in self.explicit):
                raise ValueError(f"values {self.explicit} must be finite")
        else:
            if len(self.labels) < 2:
                raise ValueError("a labelled scale needs at least two labels")
            firsts = [lab[:1].lower() for lab in self.labels]
            if any(not lab.strip() for lab in self.labels):
                raise ValueError("labels must be non-empty")
            # The expected score is read from the first token of the label; labels that begin
            # alike would make that token ambiguous.
            if len(set(firsts)) != len(firsts):
                raise ValueError(
                    f"labels {list(self.labels)} must start with different letters "
                    "(the score distribution is read at the label's first token)"
                )
            if len(set(self.labels.values())) != len(self.labels):
                raise ValueError(f"labels {self.labels} must have distinct values")
            unknown = sorted(set(self.label_descriptions) - set(self.labels))
            if unknown:
                raise ValueError(f"label_descriptions name unknown labels {unknown}")
        return self

    @classmethod
    def coerce(cls, spec: Any) -> Scale:
        """A scale from a Scale, a list of values, or a mapping (a scale's fields; also the
        ``{"values": [...], "labels": {...}}`` form of older calibration maps)."""
        if isinstance(spec, Scale):
            return spec
        if isinstance(spec, dict):
            if spec.get("labels"):
                return cls(labels=spec["labels"])
            return cls.model_validate(spec)
        return cls(explicit=[float(v) for v in spec])

    @property
    def is_labelled(self) -> bool:
        """Whether the scale is named labels (a judge answers a label string, not a number)."""
        return bool(self.labels)

    # Scales are frozen: what is derived from them is computed once (rendering and parsing ask
    # for it for every item).
    @cached_property
    def points(self) -> list[Level]:
        """Every point of the scale as a :class:`Level`: labels in their given order, explicit
        values ascending, or each integer of the range with its level description."""
        if self.labels:
            return [
                Level(value=v, label=k, description=self.label_descriptions.get(k, ""))
                for k, v in self.labels.items()
            ]
        if self.explicit:
            return [Level(value=v) for v in sorted(self.explicit)]
        assert self.min is not None and self.max is not None
        return [
            Level(value=v, description=self.levels.get(v, "")) for v in range(self.min, self.max + 1)
        ]

    @cached_property
    def values(self) -> list[float]:
        """The scale's numbers, ascending."""
        return sorted(p.value for p in self.points)

    @property
    def low(self) -> float:
        """The scale's lowest value."""
        return min(self.values)

    @property
    def high(self) -> float:
        """The scale's highest value."""
        return max(self.values)

    def compact(self) -> dict[str, Any]:
        """The scale without descriptions, as stored in calibration maps."""
        if self.labels:
            return {"labels": dict(self.labels)}
        if self.explicit:
            return {"values": self.values}
        return {"min": self.min, "max": self.max}

    def short(self) -> str:
        """A brief form for messages: the label list, the value list, or ``min..max``."""
        if self.labels:
            return str(list(self.labels))
        if self.explicit:
            return str([_number(v) for v in self.values])
        return f"{self.min}..{self.max}"

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of an answer on this scale: an ``enum`` of the label strings, of the
        numbers, or of the range's integers."""
        if self.labels:
            return {"type": "string", "enum": list(self.labels)}
        if self.explicit:
            return {"type": "number", "enum": [_number(v) for v in self.values]}
        return {"type": "integer", "enum": [int(v) for v in self.values]}

    def answer_texts(self) -> dict[str, float]:
        """The text a judge writes for each point (what follows the JSON key), mapped to its value."""
        if self.labels:
            return dict(self.labels)
        return {str(_number(v)): float(v) for v in self.values}

    def parse(self, raw: Any) -> float:
        """A judge's answer or a human's label as a value of this scale: a number, a numeric
        string, or a label in any case. ValueError says what was expected."""
        if isinstance(raw, bool):
            raise ValueError(f"{raw!r} is a boolean; write the scale value (e.g. 1/0) or label")
        if isinstance(raw, str):
            text = raw.strip()
            for label, value in self.labels.items():
                if text.lower() == label.lower():
                    return value
            try:
                number = float(text)
            except ValueError:
                if self.labels:
                    raise ValueError(f"{text!r} is not a label of the scale (not one of "
                                     f"{list(self.labels)})") from None
                raise ValueError(f"{text!r} is not a number") from None
        elif isinstance(raw, (int, float)):
            number = float(raw)
        else:
            raise ValueError(f"{raw!r} is not a value of the scale {self.short()}")
        if not math.isfinite(number):
            raise ValueError(f"{raw!r} is not finite")
        for v in self.values:
            if math.isclose(number, v, rel_tol=1e-9, abs_tol=1e-9):
                return v
        if self.min is not None and self.max is not None and not self.min <= number <= self.max:
            raise ValueError(f"{raw!r} is not on the scale (outside the scale {self.short()})")
        raise ValueError(f"{raw!r} is not on the scale {self.short()}")

    def snap(self, x: Any) -> Any:
        """Nearest scale value for each number of an array (ties to the lower); NaN stays NaN."""
        import numpy as np

        vals = np.asarray(self.values, dtype=float)
        x = np.asarray(x, dtype=float)
        idx = np.abs(x[..., None] - vals).argmin(axis=-1)
        return np.where(np.isnan(x), np.nan, vals[idx])

    def label_of(self, value: float) -> str | None:
        """The label whose value equals ``value``; None if there is none (or no labels)."""
        for label, v in self.labels.items():
            if v == value:
                return label
        return None

    def describe(self) -> str:
        """Human-readable scale for prompts."""
        return self.description_text

    @cached_property
    def description_text(self) -> str:
        """The text :meth:`describe` returns: one indented line per point, a quoted label or the
        number, followed by its description when it has one."""
        lines = []
        for p in self.points:
            name = f'"{p.label}"' if p.label is not None else str(_number(p.value))
            lines.append(f"  {name}: {p.description}" if p.description else f"  {name}")
        return "\n".join(lines)


def _number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


class Criterion(BaseModel):
    """One thing a rubric scores: a lowercase identifier name, what it means, and its scale. It
    takes no weight (weights go in the rubric's formula)."""

    model_config = _FROZEN

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str
    scale: Scale

    @model_validator(mode="before")
    @classmethod
    def _no_weight(cls, data: Any) -> Any:
        # A weight here would be accepted and silently ignored: weights belong in the formula,
        # where they are stated and used.
        if isinstance(data, dict) and "weight" in data:
            raise ValueError(
                "criteria have no weight: state weights in the rubric's formula, e.g. "
                "formula: {name: weighted_sum, expression: (2*accuracy + relevance) / 3}"
            )
        return data


class Rubric(BaseModel):
    """A set of criteria, the inputs they need, how judges are asked, and an optional formula."""

    model_config = _FROZEN

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    version: str = "1"
    inputs: list[str] = Field(default_factory=lambda: ["question", "response"])
    optional_inputs: list[str] = Field(default_factory=list)
    mode: Literal["joint", "per_criterion", "pairwise"] = "joint"
    inconsistent: Literal["tie", "unscored"] = "tie"
    system: str = ""
    template: str
    criteria: list[Criterion] = Field(min_length=1)
    formula: Formula | None = None

    @field_validator("inputs", "optional_inputs")
    @classmethod
    def _identifiers(cls, names: list[str]) -> list[str]:
        bad = [n for n in names if not n.isidentifier()]
        if bad:
            raise ValueError(f"input names must be identifiers, got {bad}")
        return names

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        names = [c.name for c in self.criteria]
        dupes = sorted(n for n, k in Counter(names).items() if k > 1)  # linear: names may be many
        if dupes:
            raise ValueError(f"criteria names repeat: {dupes}")
        if "id" in self.inputs:
            raise ValueError("'id' is not a judged input")
        if self.mode == "pairwise":
            self._check_pairwise()
        if self.formula is not None:
            unknown = sorted(set(self.formula.names) - set(names))
            if unknown:
                raise ValueError(f"formula {self.formula.expression!r} names unknown criteria {unknown}")
            if self.formula.name in names:
                raise ValueError(f"formula name {self.formula.name!r} clashes with a criterion")
        # Fail at load time, not on the first item, if the template does not render.
        from .prompts import check_template, placeholders

        fields, extra = placeholders(self)
        check_template(self, Item(id="check", **fields, extra=extra))
        return self

    def _check_pairwise(self) -> None:
        lacking = [n for n in PAIR_FIELDS if n not in self.inputs]
        if lacking:
            raise ValueError(f"a pairwise rubric compares response_a with response_b: list "
                             f"{lacking} under inputs")
        for c in self.criteria:
            values = c.scale.values
            if (min(values), max(values)) != (0.0, 1.0) or any(
                    not any(math.isclose(1 - v, w, abs_tol=1e-9) for w in values) for v in values):
                raise ValueError(
                    f"criterion {c.name}: a pairwise scale runs from 0 (the second answer is "
                    "better) to 1 (the first is), symmetric about 0.5 so that swapping the "
                    'answers maps each point to another, e.g. labels {"1": 1, "tie": 0.5, '
                    f'"2": 0}}; got {c.scale.short()}')
        if len(self.criteria) > 1 and self.formula is None:
            raise ValueError("a pairwise rubric with several criteria needs a formula: the "
                             "winner is read from it (e.g. formula: {name: overall, expression: "
                             "(accuracy + completeness) / 2})")

    @property
    def pairwise(self) -> bool:
        """Whether the rubric compares two answers (``mode: pairwise``)."""
        return self.mode == "pairwise"

    @property
    def orders(self) -> tuple[Order | None, ...]:
        """The orders every judge is shown each item in: a pairwise rubric's two (A first, then
        B first), or none."""
        return ("ab", "ba") if self.mode == "pairwise" else (None,)

    @property
    def judge_calls(self) -> int:
        """Judge calls per item and judge: calls times orders."""
        return len(self.calls()) * len(self.orders)

    def criterion(self, name: str) -> Criterion:
        """The criterion called ``name``; KeyError if the rubric has none."""
        for c in self.criteria:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def criterion_names(self) -> list[str]:
        """The criteria's names, in rubric order."""
        return [c.name for c in self.criteria]

    def calls(self) -> list[list[Criterion]]:
        """The criteria each judge call scores: all at once (joint, pairwise) or one per call
        (a pairwise rubric asks each call in both :attr:`orders`)."""
        if self.mode != "per_criterion":
            return [list(self.criteria)]
        return [[c] for c in self.criteria]


class Item(BaseModel):
    """One thing to judge. Fields beyond the core ones (entity names, goals ...) live in ``extra``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    question: str | None = None
    response: str | None = None
    reference: str | None = None
    context: str | None = None
    images: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """Every field by name, as rubric templates see them."""
        out = dict(self.extra)
        out.update(
            question=self.question,
            response=self.response,
            reference=self.reference,
            context=self.context,
            images=self.images,
        )
        return out

    @property
    def empty_answer(self) -> bool:
        """Whether the answer judged is empty: the response, or (an item without one) either
        answer of a pair."""
        answers: list[Any] = [self.response]
        if self.response is None and any(n in self.extra for n in PAIR_FIELDS):
            answers = [self.extra.get(n) for n in PAIR_FIELDS]
        return any(not (a or "").strip() for a in answers if a is None or isinstance(a, str))

    def missing(self, rubric: Rubric) -> list[str]:
        """Inputs the rubric needs that this item lacks. An empty *response* is not missing: a
        model that answered nothing gets judged for it, and stays in the denominator. An empty
        list is a value (e.g. no missing goals)."""
        values = self.fields()
        return [
            n for n in rubric.inputs
            if values.get(n) is None
            or (n not in ("response", *PAIR_FIELDS) and values.get(n) == "")
        ]


class Vote(BaseModel):
    """One judge's score for one criterion of one item, or why there is none."""

    model_config = ConfigDict(frozen=True)

    judge: str
    criterion: str
    score: float | None = None
    label: str | None = None
    expected: float | None = None
    distribution: dict[str, float] | None = None
    error: str | None = None
    latency_s: float | None = None
    raw: str | None = None
    reasoning: str | None = None
    order: Order | None = None

    @model_validator(mode="after")
    def _scored_or_explained(self) -> Vote:
        if (self.score is None) == (self.error is None):
            raise ValueError("a vote has either a score or an error, exactly one")
        return self

    @property
    def scored(self) -> bool:
        """Whether the vote has a score (otherwise it has an error)."""
        return self.score is not None


class CriterionResult(BaseModel):
    """The jury's result on one criterion of one item: the score (None when there is none, with
    ``reason`` saying why), how many votes were cast and scored, and their spread."""

    model_config = ConfigDict(frozen=True)

    score: float | None
    n_votes: int
    n_scored: int
    std: float | None = None
    range: float | None = None
    reason: str | None = None


class StageDecision(BaseModel):
    """Which stage of a cascaded jury decided an item, and why."""

    model_config = ConfigDict(frozen=True)

    stage: int = Field(ge=1, description="The deciding stage (1 = the first).")
    of: int = Field(ge=2, description="The cascade's number of stages.")
    confidence: float | None = Field(
        None, description="The stage's confidence in its verdict (pooled score-distribution "
        "mass, minimum over criteria); null for the last stage, which decides regardless.")
    threshold: float | None = Field(None, description="The confidence the stage needed.")
    reason: str = Field(description="Why this stage decided.")


class Verdict(BaseModel):
    """The jury's decision on one item."""

    model_config = ConfigDict(frozen=True)

    id: str
    status: Literal["scored", "unscored"]
    rubric: str
    jury: str
    provenance: str
    scores: dict[str, float | None]
    criteria: dict[str, CriterionResult]
    votes: list[Vote]
    reasons: list[str] = Field(default_factory=list)
    stage: StageDecision | None = None
    pairwise: bool = False
    winner: Winner | None = None
    p_a: float | None = None
    inconsistent: list[str] = Field(default_factory=list)

    @classmethod
    def from_record(cls, record: VerdictRecord) -> Verdict:
        """The verdict a record was written from (what a record does not keep, such as the raw
        output of scored votes, stays unset)."""
        reasons: dict[str, str] = {}
        for reason in record.reasons:
            name, _, why = reason.partition(": ")
            reasons.setdefault(name, why)
        criteria = {}
        for name, spread in record.disagreement.items():
            criteria[name] = CriterionResult(
                score=record.scores.get(name),
                n_votes=len({v.judge for v in record.votes if v.criterion == name}),
                n_scored=spread.n, std=spread.std, range=spread.range,
                reason=reasons.get(name))
        return cls(id=record.id, status=record.status, rubric=record.rubric, jury=record.jury,
                   provenance=record.provenance, scores=record.scores, criteria=criteria,
                   votes=record.votes, reasons=record.reasons, stage=record.stage,
                   pairwise="winner" in record.model_fields_set, winner=record.winner,
                   p_a=record.p_a, inconsistent=record.inconsistent)

    def verdict_record(self, keep_raw: bool = False) -> VerdictRecord:
        """This verdict as written, as a :class:`VerdictRecord`. Scored votes drop the judge's
        raw output unless ``keep_raw``; unscored ones keep it, as the evidence of what went
        wrong."""
        votes = self.votes if keep_raw else [
            v.model_copy(update={"raw": None}) if v.scored else v for v in self.votes]
        pair: dict[str, Any] = {"winner": self.winner, "p_a": self.p_a,
                                "inconsistent": self.inconsistent} if self.pairwise else {}
        return VerdictRecord(
            id=self.id,
            status=self.status,
            rubric=self.rubric,
            jury=self.jury,
            provenance=self.provenance,
            scores=self.scores,
            reasons=self.reasons,
            disagreement={name: Disagreement(n=r.n_scored, std=r.std, range=r.range)
                          for name, r in self.criteria.items()},
            votes=votes,
            stage=self.stage,
            **pair,
        )

    def to_record(self, keep_raw: bool = False, input: str | None = None) -> dict[str, Any]:
        """The JSON line written for this verdict (:class:`VerdictRecord` as data): the same
        data as ``self.verdict_record(keep_raw).to_dict()`` (plus ``input``, the judged
        input's hash, when given), built directly. This runs once per judged
        item; copying every vote and validating a VerdictRecord only to dump it again cost ~4x
        more. A verdict's fields were validated when it was made (it is frozen), so the record's
        fields are copies of them; the votes go through pydantic's own serializer."""
        votes = _VOTES.dump_python(self.votes, mode="json")
        for vote in votes:
            # A scored vote keeps its raw output only when asked (VerdictRecord.to_dict's rule).
            if vote["score"] is not None and (not keep_raw or vote["raw"] is None):
                del vote["raw"]
            if vote["order"] is None:
                del vote["order"]
        record = {
            "id": self.id,
            "status": self.status,
            "rubric": self.rubric,
            "jury": self.jury,
            "provenance": self.provenance,
            "scores": dict(self.scores),
            "reasons": list(self.reasons),
            "disagreement": {name: {"n": r.n_scored, "std": r.std, "range": r.range}
                             for name, r in self.criteria.items()},
            "votes": votes,
        }
        if self.stage is not None:
            record["stage"] = self.stage.model_dump(mode="json")
        if self.pairwise:
            record["winner"] = self.winner
            record["p_a"] = self.p_a
            record["inconsistent"] = list(self.inconsistent)
        if input is not None:
            record["input"] = input
        return record


_VOTES = TypeAdapter(list[Vote])


class Disagreement(BaseModel):
    """How far the judges were apart on one criterion of one item."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(description="Scored votes on the criterion.")
    std: float | None = Field(None, description="Standard deviation of the scored votes.")
    range: float | None = Field(None, description="Highest minus lowest scored vote.")


class Route(BaseModel):
    """Where a verdict should go next: to a human, and why (``judge --route-width``)."""

    model_config = ConfigDict(frozen=True)

    to: Literal["human"] = Field(description="Who should look at the item.")
    reasons: list[str] = Field(description="Why: each criterion whose interval is too wide or "
                                           "missing.")


class VerdictRecord(BaseModel):
    """A verdict as written: one line of a results file, one verdict of the HTTP API.

    :meth:`Verdict.to_record` writes it; every reader (resume, summary, agreement, calibration)
    reads it back through :meth:`from_record`, which names the field at fault when a line is not
    a verdict.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="The item's id.")
    status: Literal["scored", "unscored"] = Field(
        description="scored: every criterion (and the formula) has a value; unscored: see reasons.")
    rubric: str = Field(description="The rubric's name.")
    jury: str = Field(description="The jury's name.")
    provenance: str = Field(description="Hash of rubric, judges, weights and aggregation.")
    scores: dict[str, float | None] = Field(
        description="Per criterion (and the rubric's formula): the jury's score, or null.")
    reasons: list[str] = Field(default_factory=list, description="Why a score is null.")
    disagreement: dict[str, Disagreement] = Field(default_factory=dict)
    votes: list[Vote] = Field(default_factory=list, description="Every judge's vote per criterion.")
    input: str | None = Field(None, description="Hash of the judged input (bulk runs).")
    calibrated: dict[str, float | None] | None = Field(
        None, description="Calibrated scores, when a calibration map was applied.")
    calibration: str | None = Field(None, description="The calibration map applied (file:hash).")
    interval: dict[str, list[float] | None] | None = Field(
        None, description="Per criterion, the conformal interval [low, high] that holds a "
        "human's label with the map's probability (null where the jury did not score it), when "
        "a conformal map was applied.")
    route: Route | None = Field(
        None, description="To a human, with the reasons, when an interval is wider than "
        "--route-width (or missing).")
    stage: StageDecision | None = Field(
        None, description="A cascaded jury's deciding stage and why (absent without stages).")
    winner: Winner | None = Field(
        None, description="Pairwise rubrics: the better answer, a (response_a), b or tie; null "
        "with the reason in reasons (absent for other rubrics).")
    p_a: float | None = Field(
        None, description="Pairwise rubrics: the jury's probability that A is better (the "
        "judges' answer distributions, both orders averaged); null without distributions.")
    inconsistent: list[str] = Field(
        default_factory=list, description="Pairwise rubrics: each judge whose two orders "
        "pointed to different answers, on which criterion, and what it chose in each (counted "
        "as a tie or unscored, as the rubric says).")

    @classmethod
    def from_record(cls, record: Any, where: str = "record") -> VerdictRecord:
        """Read a record (a parsed JSON line); InputError naming ``where`` and the field."""
        if isinstance(record, cls):
            return record
        try:
            return cls.model_validate(record)
        except ValidationError as exc:
            ident = record.get("id") if isinstance(record, dict) else None
            at = f"{where} (id {ident!r})" if ident is not None else where
            problems = [_problem(err) for err in exc.errors(include_url=False)[:5]]
            first = exc.errors(include_url=False)[0]
            raise InputError(f"{at}: not a jurybox verdict: " + "; ".join(problems),
                             field=_location(first["loc"])) from None

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data: the optional fields only when set, and a scored vote's ``raw``
        only when kept."""
        data = self.model_dump(mode="json", exclude={
            k for k in ("input", "calibrated", "calibration", "interval", "route", "stage")
            if getattr(self, k) is None}
            | ({"winner", "p_a", "inconsistent"} - self.model_fields_set))
        for vote in data["votes"]:
            if vote["raw"] is None and vote["score"] is not None:
                del vote["raw"]
            if vote["order"] is None:
                del vote["order"]
        return data


def input_hash(item: Item) -> str:
    """Identity of what was judged (every field of the item, its id included): a resumed run
    notices changed predictions or --map by it, and the verdict cache is keyed by it."""
    import hashlib
    import json

    blob = json.dumps(item.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _location(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(record)"


def _problem(err: ErrorDetails) -> str:
    where = _location(err["loc"])
    kind = err["type"]
    got = err.get("input")
    if kind == "missing":
        return f"{where}: missing"
    if kind in ("float_parsing", "float_type"):
        return f"{where}: {got!r:.40} is not a number or null"
    if kind in ("dict_type", "model_type"):
        return f"{where}: expected an object, got {got!r:.40}"
    if kind == "list_type":
        return f"{where}: expected a list, got {got!r:.40}"
    return f"{where}: {err['msg'].removeprefix('Value error, ')}"
