"""One reward definition for every trainer and harness jurybox plugs into.

Those are TRL, OpenRLHF, verl and Inspect AI. The definition says which number of a verdict is
the reward, on what range, and what an unscored item becomes.

* **Which number**: the rubric's formula by default (its only criterion when it has none), or
  any criterion by name; with ``calibrated=True`` the calibrated value the verdict carries (a
  service or run with a calibration map), never the raw one in its place.
* **Range**: ``scale="unit"`` maps the number's range onto [0, 1] (a criterion's scale; a
  formula's range over its criteria's scales, which must be linear in them, else state it with
  ``low``/``high``); ``scale="raw"`` leaves it on the rubric's scale.
* **Unscored**: never a silent 0. ``unscored="none"`` gives ``None`` (a client that skips a
  missing reward, as TRL does), ``unscored="error"`` raises `UnscoredReward` (the step
  stops, naming the items and why), a number gives that number: the user's explicit choice.

>>> from jurybox.rubrics import load_rubric
>>> reward = RewardSpec().bind(load_rubric("mirage-mg"))  # its formula, weighted_sum
>>> reward.score, reward.low, reward.high
('weighted_sum', 0.0, 1.0)
>>> RewardSpec(score="accuracy", unscored="none").bind(load_rubric("general")).high
4.0
"""

from __future__ import annotations

import codecs
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import InputError, JuryboxError
from .rubric import Rubric
from .verdict import VerdictRecord

Unscored = Literal["none", "error"] | float
Scale = Literal["unit", "raw"]


def _to_fffd(exc: UnicodeError) -> tuple[str | bytes, int]:
    """The UTF-8 encoder's error handler: U+FFFD's bytes for each character it cannot encode."""
    assert isinstance(exc, UnicodeEncodeError)
    return "\ufffd".encode() * (exc.end - exc.start), exc.end


codecs.register_error("jurybox.fffd", _to_fffd)


def policy_text(text: str) -> tuple[str, int]:
    r"""A policy's text as the judges are shown it: each lone surrogate replaced by U+FFFD.

    A completion may hold a lone surrogate (``"\ud800"``: a JSON escape, a bad decode), which is
    no Unicode text: no UTF-8 body, tokenizer or hash takes it. It is replaced as a UTF-8 decoder
    replaces bytes it cannot read, the rest judged as it is, in every adapter (TRL, verl, Inspect)
    and on the OpenRLHF route alike; the service's /v1/score refuses it (a client's own input).

    >>> policy_text("caf\ud800e")
    ('caf\ufffde', 1)

    Args:
        text: The text.

    Returns:
        The text, and how many characters were replaced. Linear in the text.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        fixed = text.encode("utf-8", "jurybox.fffd").decode("utf-8")
        return fixed, fixed.count("\ufffd") - text.count("\ufffd")
    return text, 0


class UnscoredReward(JuryboxError, RuntimeError):
    """Items whose reward is undefined while the reward says ``unscored="error"``.

    Args:
        unscored: Each such item's id and why it has no reward (kept as ``unscored``).
        advice: What the user can do, in the caller's terms (by default a `RewardSpec`'s).
    """

    def __init__(
        self,
        unscored: list[tuple[str, str]],
        advice: str = "The reward's unscored policy is 'error'; give unscored='none' (a client "
        "that skips missing rewards) or an explicit value to use instead",
    ) -> None:
        self.unscored = unscored
        shown = "; ".join(f"{item}: {_short(why)}" for item, why in unscored[:5])
        more = f" (and {len(unscored) - 5} more)" if len(unscored) > 5 else ""
        super().__init__(f"{len(unscored)} item(s) have no reward: {shown}{more}. {advice}")


def _short(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: What each field of a `RewardSpec` takes, for the error that names it.
_TAKES = {
    "unscored": "'none' (the reward is None), 'error' (raise, naming the items) or a finite "
    "number (the reward an unscored item gets)",
    "scale": "'unit' (mapped onto [0, 1]) or 'raw' (the rubric's own scale)",
    "calibrated": "true or false",
    "low": "a number",
    "high": "a number",
    "score": "the name of a criterion or of the rubric's formula",
    "dropout": "a share of each item's checklist points left out per step, in [0, 1) (0: off)",
    "dropout_seed": "an integer (the seed of the points left out)",
}


class RewardSpec(BaseModel):
    """What the reward is (see the module docstring); every adapter takes these fields.

    Attributes:
        score: A criterion or the rubric's formula by name; default: the formula, or the only
            criterion.
        calibrated: Read the calibrated value (the verdict must carry one: a service or run with
            a calibration map).
        scale: ``unit``: mapped onto [0, 1]; ``raw``: the rubric's own scale.
        low: The number's lowest value (default: from the rubric's scales).
        high: The number's highest value (default: from the rubric's scales).
        unscored: What an unscored item's reward is: ``"none"`` (None), ``"error"`` (raise
            `UnscoredReward`), or a number.
        dropout: Rubric dropout, for a checklist rubric: the share of each item's points left
            out at each training step, a seeded random subset (`jurybox.rubrics.checklist.dropout`;
            at least one positive point is kept); 0, the default, judges every point.
        dropout_seed: The seed of the points left out (with the step and, in the trainers'
            adapters, a hash of the item's prompt: its question, context and checklist; the step
            is TRL's ``state.global_step``, elsewhere the adapter's count of batches judged).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: str | None = Field(
        None,
        description="A criterion or the rubric's formula by name; "
        "default: the formula, or the only criterion.",
    )
    calibrated: bool = Field(
        False,
        description="The calibrated value (the verdict must carry "
        "one: a service or run with a calibration map).",
    )
    scale: Scale = Field(
        "unit", description="unit: mapped onto [0, 1]; raw: the rubric's own scale."
    )
    low: float | None = Field(
        None, description="The number's lowest value (default: from the rubric's scales)."
    )
    high: float | None = Field(
        None, description="The number's highest value (default: from the rubric's scales)."
    )
    unscored: Unscored = Field(
        "error",
        description="What an unscored item's reward is: none (None), error (raise), or a number.",
    )
    dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="Rubric dropout: the share of each item's checklist points left out per "
        "training step (0: off).",
    )
    dropout_seed: int = Field(0, description="The seed of the points dropout leaves out.")

    def __init__(self, **fields: Any) -> None:
        """Raises `InputError` naming the field at fault and what it takes, never pydantic's own."""
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            name = str(first["loc"][0]) if first["loc"] else "reward"
            if first["type"] == "extra_forbidden":
                raise InputError(
                    f"the reward has no field {name!r} (its fields: "
                    f"{', '.join(type(self).model_fields)})",
                    field=name,
                ) from None
            takes = _TAKES.get(name, first["msg"])
            raise InputError(
                f"the reward's {name} is {fields.get(name)!r}: it takes {takes}", field=name
            ) from None

    @field_validator("unscored")
    @classmethod
    def _finite(cls, value: Unscored) -> Unscored:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("unscored must be 'none', 'error' or a finite number")
        return value

    def bind(self, rubric: Rubric) -> Reward:
        """This reward on ``rubric``: the number it reads and its range, checked now.

        Args:
            rubric: The rubric the verdicts are judged with.

        Returns:
            The bound reward.

        Raises:
            InputError: The rubric has no such score (or several criteria, no formula and no
                score named), the formula's range is unknown (not linear in its criteria, and
                no ``low``/``high`` given), or the range is empty; naming the field.
        """
        if self.dropout and rubric.checklist is None:
            raise InputError(
                f"the reward's dropout leaves out checklist points; rubric {rubric.name} judges "
                "no checklist (give a checklist rubric, or dropout=0)",
                field="dropout",
            )
        if rubric.checklist is not None and rubric.checklist.expands:
            return self._bind_points(rubric)
        names = [c.name for c in rubric.criteria]
        formula = rubric.formula.name if rubric.formula is not None else None
        score = self.score
        if score is None:
            if formula is not None:
                score = formula
            elif len(names) == 1:
                score = names[0]
            else:
                raise InputError(
                    f"rubric {rubric.name} has {len(names)} criteria and no formula: "
                    f"name the reward's score (one of {', '.join(names)})",
                    field="score",
                )
        if score not in names and score != formula:
            known = names + ([formula] if formula else [])
            raise InputError(
                f"rubric {rubric.name} has no score {score!r} (its scores: {', '.join(known)})",
                field="score",
            )
        low, high = self.low, self.high
        if low is None or high is None:
            found = _range(rubric, score)
            if found is None:
                raise InputError(
                    f"the range of formula {score} of rubric {rubric.name} is not "
                    "linear in its criteria: give the reward's low and high",
                    field="low",
                )
            low = found[0] if low is None else low
            high = found[1] if high is None else high
        if not high > low:
            raise InputError(f"the reward's range [{low}, {high}] is empty", field="high")
        return Reward(spec=self, rubric=rubric.name, score=score, low=float(low), high=float(high))

    def _bind_points(self, rubric: Rubric) -> Reward:
        """A checklist rubric's reward: its item score (HealthBench's rule, on [0, 1])."""
        assert rubric.checklist is not None
        name = rubric.checklist.name
        if self.score is not None and self.score != name:
            raise InputError(
                f"rubric {rubric.name} scores each item by its checklist's points: the reward's "
                f"score is {name!r} (the item's score), not {self.score!r}",
                field="score",
            )
        low = 0.0 if self.low is None else self.low
        high = 1.0 if self.high is None else self.high
        if not high > low:
            raise InputError(f"the reward's range [{low}, {high}] is empty", field="high")
        return Reward(spec=self, rubric=rubric.name, score=name, low=float(low), high=float(high))


def _range(rubric: Rubric, score: str) -> tuple[float, float] | None:
    """The range of ``score`` over the criteria's scales.

    It is a criterion's scale, or a formula's extremes over them when it is linear in them
    (checked at random points; a rounding formula rounds its extremes, as rounding keeps order).
    """
    for c in rubric.criteria:
        if c.name == score:
            return c.scale.low, c.scale.high
    assert rubric.formula is not None
    digits = rubric.formula.digits
    formula = rubric.formula.model_copy(update={"digits": None})
    used = [c for c in rubric.criteria if c.name in set(formula.names)]
    lows = {c.name: c.scale.low for c in used}
    base = formula.evaluate(lows)
    if base is None:
        return None
    slope: dict[str, float] = {}
    for c in used:
        top = formula.evaluate({**lows, c.name: c.scale.high})
        if top is None:
            return None
        slope[c.name] = (top - base) / (c.scale.high - c.scale.low)
    rng = random.Random(0)
    for _ in range(16):
        point = {c.name: rng.uniform(c.scale.low, c.scale.high) for c in used}
        value = formula.evaluate(point)
        linear = base + sum(slope[n] * (point[n] - lows[n]) for n in slope)
        if value is None or not math.isclose(value, linear, rel_tol=1e-9, abs_tol=1e-9):
            return None
    spans = {c.name: slope[c.name] * (c.scale.high - c.scale.low) for c in used}
    low = base + sum(s for s in spans.values() if s < 0)
    high = base + sum(s for s in spans.values() if s > 0)
    if digits is not None:
        low, high = round(low, digits), round(high, digits)
    return low, high


@dataclass(frozen=True)
class Reward:
    """A `RewardSpec` bound to one rubric: `value` of a verdict.

    Made by `RewardSpec.bind`.

    Attributes:
        spec: The reward's definition.
        rubric: The rubric's name.
        score: The criterion or formula the reward reads.
        low: The number's lowest value (mapped to 0 on the ``unit`` scale).
        high: The number's highest value (mapped to 1 on the ``unit`` scale).
    """

    spec: RewardSpec
    rubric: str
    score: str
    low: float
    high: float

    @property
    def name(self) -> str:
        """What the reward is, for logs.

        E.g. ``general.accuracy`` or ``mirage-mg.weighted_sum (calibrated)``.
        """
        return f"{self.rubric}.{self.score}" + (" (calibrated)" if self.spec.calibrated else "")

    def raw(self, record: VerdictRecord | Mapping[str, Any]) -> tuple[float | None, str]:
        """The verdict's number on its own scale, or None and why it has none.

        Args:
            record: The verdict record (or its JSON data).

        Returns:
            The number and ``""``, or None and why there is none.

        Raises:
            InputError: The data is not a verdict, or the reward is calibrated and the verdict
                carries no calibrated scores.
        """
        rec = record if isinstance(record, VerdictRecord) else VerdictRecord.from_record(record)
        if self.spec.calibrated:
            if rec.calibrated is None:
                raise InputError(
                    f"item {rec.id}: the reward is the calibrated {self.score} but "
                    "the verdict carries no calibrated scores (start the service or "
                    "the run with a calibration map)",
                    field="calibrated",
                )
            value = rec.calibrated.get(self.score)
        else:
            value = rec.scores.get(self.score)
        if value is None:
            why = "; ".join(rec.reasons) or f"no {self.score} score"
            failed = next((v for v in rec.votes if v.error), None)
            if failed is not None:  # what went wrong first, where a judge said so
                why = f"{failed.judge}: {failed.error}; {why}"
            return None, why
        return float(value), ""

    def value(self, record: VerdictRecord | Mapping[str, Any]) -> float | None:
        """The reward of one verdict, the unscored policy applied.

        Args:
            record: The verdict record (or its JSON data).

        Returns:
            The reward, or None for an unscored verdict under ``unscored="none"``.

        Raises:
            InputError: The data is not a verdict, or the reward is calibrated and the verdict
                carries no calibrated scores.
            UnscoredReward: The verdict has no reward and the policy is ``"error"``.
        """
        return self.values([record])[0]

    def values(self, records: Iterable[VerdictRecord | Mapping[str, Any]]) -> list[float | None]:
        """The rewards of ``records``, in order, the unscored policy applied.

        Args:
            records: The verdict records (or their JSON data).

        Returns:
            One reward per record; None for an unscored verdict under ``unscored="none"``.

        Raises:
            InputError: A record is not a verdict, or the reward is calibrated and a verdict
                carries no calibrated scores.
            UnscoredReward: Some verdicts have no reward and the policy is ``"error"`` (one
                error naming every unscored item).
        """
        out: list[float | None] = []
        missing: list[tuple[str, str]] = []
        for record in records:
            raw, why = self.raw(record)
            if raw is None:
                ident = record.id if isinstance(record, VerdictRecord) else str(record.get("id"))
                missing.append((ident, why))
                policy = self.spec.unscored
                out.append(None if policy in ("none", "error") else float(policy))
            else:
                out.append(
                    raw if self.spec.scale == "raw" else (raw - self.low) / (self.high - self.low)
                )
        if missing and self.spec.unscored == "error":
            raise UnscoredReward(missing)
        return out

    def count_unscored(self, records: Iterable[VerdictRecord | Mapping[str, Any]]) -> int:
        """How many of ``records`` have no reward (before the unscored policy).

        Args:
            records: The verdict records (or their JSON data).

        Returns:
            The count.
        """
        return sum(self.raw(r)[0] is None for r in records)
