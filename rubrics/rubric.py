"""A rubric: its criteria and their scales, the inputs it needs, how judges are asked, a formula.

How judges are asked is its template, mode and orders; the formula over the criteria is
optional.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import cached_property, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .formula import Formula
from .item import PAIR_FIELDS, Item, Order
from .points import ChecklistRule
from .prompts import check_template, placeholders

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Level(BaseModel):
    """One point of a scale: the number it counts as, an optional label, and what it means.

    Attributes:
        value: The number the point counts as.
        label: The label a judge writes for it, on a labelled scale.
        description: What the point means.
    """

    model_config = _FROZEN

    value: float
    label: str | None = None
    description: str = ""


class Scale(BaseModel):
    """The values a criterion (or a human label column) may take.

    A scale is one of three kinds:

    * an integer range: ``min``/``max``, with a description per level in ``levels``;
    * named labels: ``labels`` maps label -> value (e.g. yes: 1, no: 0);
    * explicit numbers: ``values`` lists the points (e.g. [0, 0.5, 1]).

    A judge answers a number of the scale, or one of the label strings. `parse` reads a
    judge's answer and a human's label alike.

    Attributes:
        min: The range's lowest integer.
        max: The range's highest integer (at most 100 above ``min``).
        levels: A description per integer of the range.
        labels: Each label's value; labels start with different letters.
        label_descriptions: A description per label.
        explicit: The explicit numbers (``values`` in a file), at least two, distinct.
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
        """A scale from a Scale, a list of values, or a mapping.

        The mapping holds a scale's fields; also the ``{"values": [...], "labels": {...}}`` form
        of older calibration maps.

        Args:
            spec: A `Scale`, a list of values, or a mapping.

        Returns:
            The scale (``spec`` itself when it is one).
        """
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
        """Every point of the scale as a `Level`.

        Labels come in their given order, explicit values ascending, or each integer of the range
        with its level description.
        """
        if self.labels:
            return [
                Level(value=v, label=k, description=self.label_descriptions.get(k, ""))
                for k, v in self.labels.items()
            ]
        if self.explicit:
            return [Level(value=v) for v in sorted(self.explicit)]
        assert self.min is not None and self.max is not None
        return [
            Level(value=v, description=self.levels.get(v, ""))
            for v in range(self.min, self.max + 1)
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
        """The JSON schema of an answer on this scale.

        It is an ``enum`` of the label strings, of the numbers, or of the range's integers.
        """
        if self.labels:
            return {"type": "string", "enum": list(self.labels)}
        if self.explicit:
            return {"type": "number", "enum": [_number(v) for v in self.values]}
        return {"type": "integer", "enum": [int(v) for v in self.values]}

    def answer_texts(self) -> dict[str, float]:
        """The text a judge writes for each point, mapped to its value.

        The text is what follows the JSON key.
        """
        if self.labels:
            return dict(self.labels)
        return {str(_number(v)): float(v) for v in self.values}

    def parse(self, raw: Any) -> float:
        """A judge's answer or a human's label as a value of this scale.

        Args:
            raw: A number, a numeric string, or a label in any case.

        Returns:
            The scale's value.

        Raises:
            ValueError: ``raw`` is not a value of the scale (the message says what was
                expected).
        """
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
                    raise ValueError(
                        f"{text!r} is not a label of the scale (not one of {list(self.labels)})"
                    ) from None
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
        """Nearest scale value for each number of an array (ties to the lower); NaN stays NaN.

        Args:
            x: A number or an array of them.

        Returns:
            A numpy array of the same shape, on the scale.
        """
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
        """The text `describe` returns.

        It has one indented line per point, a quoted label or the number, followed by its
        description when it has one.
        """
        lines = []
        for p in self.points:
            name = f'"{p.label}"' if p.label is not None else str(_number(p.value))
            lines.append(f"  {name}: {p.description}" if p.description else f"  {name}")
        return "\n".join(lines)


def _number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else v


class Criterion(BaseModel):
    """One thing a rubric scores: its name, what it means, and its scale.

    It takes no weight (weights go in the rubric's formula).

    Attributes:
        name: A lowercase identifier.
        description: What the criterion means, as judges are told.
        scale: The values its score may take.
    """

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
    """A set of criteria, the inputs they need, how judges are asked, and an optional formula.

    Attributes:
        name: The rubric's name (a file's stem when the file gives none).
        description: What the rubric is for.
        version: The rubric's version.
        inputs: The item fields it needs (default: question and response).
        optional_inputs: The item fields its template may use; an item may lack them.
        mode: ``joint`` (one judge call scores every criterion), ``per_criterion`` (one call per
            criterion) or ``pairwise`` (two answers compared, in both orders).
        inconsistent: What a pairwise judge's vote is when its two orders disagree: a ``tie``,
            or ``unscored`` with the reason.
        system: The system prompt.
        template: The Jinja2 prompt template (rendered in a sandbox).
        criteria: What the rubric scores, at least one, with different names.
        formula: A formula over the criteria (e.g. MIRAGE's weighted sum), if any.
        checklist: A checklist rubric's rule: each item is judged on its own checklist
            (`Item.checklist`), how its points are judged and how the item is scored
            (`ChecklistRule`); None for an ordinary rubric.
    """

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
    checklist: ChecklistRule | None = None

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
        if self.checklist is not None:
            self._check_checklist()
        if self.formula is not None:
            unknown = sorted(set(self.formula.names) - set(names))
            if unknown:
                raise ValueError(
                    f"formula {self.formula.expression!r} names unknown criteria {unknown}"
                )
            if self.formula.name in names:
                raise ValueError(f"formula name {self.formula.name!r} clashes with a criterion")
        # Fail at load time, not on the first item, if the template does not render.
        fields, extra = placeholders(self)
        check_template(self, Item(id="check", **fields, extra=extra))
        return self

    def _check_checklist(self) -> None:
        assert self.checklist is not None
        if "checklist" not in self.inputs:
            raise ValueError(
                "a checklist rubric judges each item's checklist: list checklist under inputs"
            )
        if self.mode == "pairwise":
            raise ValueError("a checklist rubric judges one answer: mode pairwise does not apply")
        if self.checklist.score == "implicit":  # its own criteria, judged on the whole list
            return
        met = self.criteria[0]
        if len(self.criteria) != 1 or met.name != "met":
            raise ValueError(
                "a checklist rubric with score: points has one criterion, met (is the point "
                f"met?), got {self.criterion_names}"
            )
        if met.scale.values != [0.0, 1.0]:
            raise ValueError(
                'criterion met: its scale is met (1) or not (0), e.g. labels {"yes": 1, '
                f'"no": 0}}; got {met.scale.short()}'
            )
        if self.formula is not None:
            raise ValueError(
                "a checklist rubric with score: points scores items by the points met; it "
                "takes no formula"
            )
        if self.mode != "joint":
            raise ValueError("a checklist rubric with score: points is judged in mode joint")

    def unit_rubric(self, n: int | None = None) -> Rubric:
        """The ordinary rubric a checklist rubric's units are judged by (`rubrics.checklist`).

        Args:
            n: With ``calls: all_points``: the points of the items judged together (the unit
                rubric has criteria ``p1`` .. ``p<n>`` on met's scale). Not given with
                ``per_point``.

        Returns:
            ``per_point``: ``<name>.point``, whose one criterion ``met`` is judged on an item
            holding one point (``point``, ``point_points`` and ``point_tag`` among its fields,
            no checklist). ``all_points``: ``<name>.all<n>``. ``score: implicit``: the rubric
            itself (its items are its units).

        Raises:
            ValueError: The rubric is no checklist rubric, or ``n`` does not fit its calls.
        """
        rule = self.checklist
        if rule is None:
            raise ValueError(f"rubric {self.name} is not a checklist rubric")
        if rule.score == "implicit":
            return self
        if (n is None) != (rule.calls == "per_point") or (n is not None and n < 1):
            raise ValueError(
                f"unit_rubric({n}): calls {rule.calls} takes "
                + ("no n" if rule.calls == "per_point" else "the number of points, at least 1")
            )
        return _unit_rubric(self.model_dump_json(), n)

    def _make_unit_rubric(self, n: int | None) -> Rubric:
        met = self.criteria[0]
        common: dict[str, Any] = {
            "description": self.description,
            "version": self.version,
            "mode": "joint",
            "system": self.system,
            "template": self.template,
        }
        if n is None:
            common.update(
                name=f"{self.name}.point",
                inputs=[i for i in self.inputs if i != "checklist"] + ["point"],
                optional_inputs=[
                    *(i for i in self.optional_inputs if i not in ("point_points", "point_tag")),
                    "point_points",
                    "point_tag",
                ],
                criteria=[met],
            )
        else:
            common.update(
                name=f"{self.name}.all{n}",
                inputs=list(self.inputs),
                optional_inputs=list(self.optional_inputs),
                criteria=[
                    Criterion(name=f"p{k}", description=f"checklist point {k}", scale=met.scale)
                    for k in range(1, n + 1)
                ],
            )
        return Rubric.model_validate(common)

    def _check_pairwise(self) -> None:
        lacking = [n for n in PAIR_FIELDS if n not in self.inputs]
        if lacking:
            raise ValueError(
                f"a pairwise rubric compares response_a with response_b: list "
                f"{lacking} under inputs"
            )
        for c in self.criteria:
            values = c.scale.values
            if (min(values), max(values)) != (0.0, 1.0) or any(
                not any(math.isclose(1 - v, w, abs_tol=1e-9) for w in values) for v in values
            ):
                raise ValueError(
                    f"criterion {c.name}: a pairwise scale runs from 0 (the second answer is "
                    "better) to 1 (the first is), symmetric about 0.5 so that swapping the "
                    'answers maps each point to another, e.g. labels {"1": 1, "tie": 0.5, '
                    f'"2": 0}}; got {c.scale.short()}'
                )
        if len(self.criteria) > 1 and self.formula is None:
            raise ValueError(
                "a pairwise rubric with several criteria needs a formula: the "
                "winner is read from it (e.g. formula: {name: overall, expression: "
                "(accuracy + completeness) / 2})"
            )

    @property
    def pairwise(self) -> bool:
        """Whether the rubric compares two answers (``mode: pairwise``)."""
        return self.mode == "pairwise"

    @property
    def orders(self) -> tuple[Order | None, ...]:
        """The orders every judge is shown each item in.

        A pairwise rubric has two (A first, then B first); any other has none.
        """
        return ("ab", "ba") if self.mode == "pairwise" else (None,)

    @property
    def judge_calls(self) -> int:
        """Judge calls per item and judge: calls times orders."""
        return len(self.calls()) * len(self.orders)

    def criterion(self, name: str) -> Criterion:
        """The criterion called ``name``.

        Raises:
            KeyError: The rubric has no criterion called ``name``.
        """
        for c in self.criteria:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def criterion_names(self) -> list[str]:
        """The criteria's names, in rubric order."""
        return [c.name for c in self.criteria]

    def calls(self) -> list[list[Criterion]]:
        """The criteria each judge call scores.

        All at once (joint, pairwise) or one per call (a pairwise rubric asks each call in both
        `orders`).
        """
        if self.mode != "per_criterion":
            return [list(self.criteria)]
        return [[c] for c in self.criteria]


@lru_cache(maxsize=256)
def _unit_rubric(rubric: str, n: int | None) -> Rubric:
    """`Rubric.unit_rubric`, made once per rubric (its JSON: rubrics are frozen) and n.

    (A cache in the rubric itself would make two equal rubrics compare unequal.)
    """
    return Rubric.model_validate_json(rubric)._make_unit_rubric(n)
