"""What judging produces: each judge's vote per criterion, and the jury's verdict on an item.

A verdict has its record: one line of a results file, one verdict of the HTTP API.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import ErrorDetails

from .errors import InputError
from .item import Order, Winner


class Vote(BaseModel):
    """One judge's score for one criterion of one item, or why there is none.

    A vote has either a score or an error, exactly one.

    Attributes:
        judge: The judge's name.
        criterion: The criterion's name.
        score: The score the judge chose (in a pairwise call, A's share: 1 when A is better).
        label: The label the judge answered, on a labelled scale.
        expected: The expected score under the judge's distribution, where it could be read.
        distribution: The judge's probability per point of the scale (its answer text), where
            it could be read from token logprobs.
        error: Why there is no score (an unscored vote).
        latency_s: Seconds the judge's call took.
        raw: The judge's raw output.
        reasoning: The judge's reasoning, when kept.
        order: The order the answers were shown in (``"ab"`` or ``"ba"``), in a pairwise call.
        images: The digests of the item's images the judge was shown in this call (absent: it
            was shown none).
    """

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
    images: list[str] | None = Field(
        None,
        description="The digests of the item's images this judge was shown in this call "
        "(absent: it was shown none, being text-only or the item having none).",
    )

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
    """The jury's result on one criterion of one item.

    Attributes:
        score: The jury's score, or None when there is none.
        n_votes: Votes cast on the criterion.
        n_scored: Scored votes among them.
        std: The scored votes' standard deviation.
        range: The highest minus the lowest scored vote.
        reason: Why there is no score.
    """

    model_config = ConfigDict(frozen=True)

    score: float | None
    n_votes: int
    n_scored: int
    std: float | None = None
    range: float | None = None
    reason: str | None = None


class StageDecision(BaseModel):
    """Which stage of a cascaded jury decided an item, and why.

    Attributes:
        stage: The deciding stage (1 = the first).
        of: The cascade's number of stages.
        confidence: The stage's confidence in its verdict; None for the last stage, which
            decides regardless.
        threshold: The confidence the stage needed.
        reason: Why this stage decided.
    """

    model_config = ConfigDict(frozen=True)

    stage: int = Field(ge=1, description="The deciding stage (1 = the first).")
    of: int = Field(ge=2, description="The cascade's number of stages.")
    confidence: float | None = Field(
        None,
        description="The stage's confidence in its verdict (pooled score-distribution "
        "mass, minimum over criteria); null for the last stage, which decides regardless.",
    )
    threshold: float | None = Field(None, description="The confidence the stage needed.")
    reason: str = Field(description="Why this stage decided.")


class PointResult(BaseModel):
    """One checklist point's decision: the point, and whether the jury found it met.

    Attributes:
        text: The point's text.
        points: Its points (negative: a pitfall, met when the answer commits it).
        tag: Its tag, where it has one.
        met: The jury's value: 1 met, 0 not, between them the jury's mean probability of met
            (``use: expected``); None: unscored (the reason in ``reason``), or not judged on its
            own (``score: implicit``).
        reason: Why ``met`` is None.
    """

    model_config = ConfigDict(frozen=True)

    text: str = Field(description="The point's text.")
    points: float = Field(description="Its points (negative: a pitfall).")
    tag: str | None = Field(None, description="Its tag (essential, important, optional).")
    met: float | None = Field(
        description="The jury's value: 1 met, 0 not, between them the jury's mean probability "
        "of met; null: unscored (see reason) or not judged on its own (score: implicit)."
    )
    reason: str | None = Field(None, description="Why met is null.")


class Verdict(BaseModel):
    """The jury's decision on one item.

    Attributes:
        id: The item's id.
        status: ``scored``: every criterion (and the formula) has a value; ``unscored``: see
            ``reasons``.
        rubric: The rubric's name.
        jury: The jury's name.
        provenance: The hash of everything the verdict depends on (`provenance`).
        scores: Per criterion (and the rubric's formula): the jury's score, or None.
        criteria: Per criterion: the jury's result, with the votes' count and spread.
        votes: Every judge's vote per criterion.
        reasons: Why a score is None.
        stage: A cascaded jury's deciding stage and why.
        pairwise: Whether the rubric compares two answers.
        winner: A pairwise verdict's better answer: ``a``, ``b`` or ``tie`` (None with the reason
            in ``reasons``).
        p_a: A pairwise verdict's probability that A is better, from the judges' distributions.
        inconsistent: Each pairwise judge whose two orders pointed to different answers, on
            which criterion, and what it chose in each.
        left_out: Each juror left out of the verdict (``"judge: why"``): a failing juror its
            batch flagged (`jurybox.judges.jurors`); its votes stay in ``votes``.
        flagged: Each juror of the verdict its batch flagged as failing (``"judge: why"``),
            whether or not it was left out.
        points: A checklist rubric's verdict: each point's decision by key, in checklist
            order (``criteria`` and ``votes`` hold each point under its key too).
        dropped: A checklist rubric's verdict: the keys of the points dropout left out (not
            judged, outside the score's denominator).
    """

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
    left_out: list[str] = Field(default_factory=list)
    flagged: list[str] = Field(default_factory=list)
    points: dict[str, PointResult] | None = None
    dropped: list[str] = Field(default_factory=list)

    @classmethod
    def from_record(cls, record: VerdictRecord) -> Verdict:
        """The verdict a record was written from.

        What a record does not keep, such as the raw output of scored votes, stays unset.

        Args:
            record: The verdict as written.

        Returns:
            The verdict.
        """
        reasons: dict[str, str] = {}
        for reason in record.reasons:
            name, _, why = reason.partition(": ")
            reasons.setdefault(name, why)
        criteria = {}
        for name, spread in record.disagreement.items():
            criteria[name] = CriterionResult(
                score=record.scores.get(name),
                n_votes=len({v.judge for v in record.votes if v.criterion == name}),
                n_scored=spread.n,
                std=spread.std,
                range=spread.range,
                reason=reasons.get(name),
            )
        return cls(
            id=record.id,
            status=record.status,
            rubric=record.rubric,
            jury=record.jury,
            provenance=record.provenance,
            scores=record.scores,
            criteria=criteria,
            votes=record.votes,
            reasons=record.reasons,
            stage=record.stage,
            pairwise="winner" in record.model_fields_set,
            winner=record.winner,
            p_a=record.p_a,
            inconsistent=record.inconsistent,
            left_out=record.left_out,
            flagged=record.flagged,
            points=record.points,
            dropped=record.dropped,
        )

    def verdict_record(self, keep_raw: bool = False) -> VerdictRecord:
        """This verdict as written, as a `VerdictRecord`.

        Args:
            keep_raw: Keep the judge's raw output in scored votes too; unscored ones always keep
                it, as the evidence of what went wrong.

        Returns:
            The record.
        """
        votes = (
            self.votes
            if keep_raw
            else [v.model_copy(update={"raw": None}) if v.scored else v for v in self.votes]
        )
        pair: dict[str, Any] = (
            {"winner": self.winner, "p_a": self.p_a, "inconsistent": self.inconsistent}
            if self.pairwise
            else {}
        )
        return VerdictRecord(
            id=self.id,
            status=self.status,
            rubric=self.rubric,
            jury=self.jury,
            provenance=self.provenance,
            scores=self.scores,
            reasons=self.reasons,
            disagreement={
                name: Disagreement(n=r.n_scored, std=r.std, range=r.range)
                for name, r in self.criteria.items()
            },
            votes=votes,
            stage=self.stage,
            **pair,
            left_out=self.left_out,
            flagged=self.flagged,
            points=self.points,
            dropped=self.dropped,
        )

    def to_record(self, keep_raw: bool = False, input: str | None = None) -> dict[str, Any]:
        """The JSON line written for this verdict (`VerdictRecord` as data).

        It is the same data as ``self.verdict_record(keep_raw).to_dict()``, built directly. This
        runs once per judged item; copying every vote and validating a VerdictRecord only to dump
        it again cost ~4x more. A verdict's fields were validated when it was made (it is
        frozen), so the record's fields are copies of them; the votes go through pydantic's own
        serializer.

        Args:
            keep_raw: Keep the judge's raw output in scored votes too (unscored ones keep it).
            input: The judged input's hash, written as ``input`` when given.

        Returns:
            The record as JSON-ready data.
        """
        votes = _VOTES.dump_python(self.votes, mode="json")
        for vote in votes:
            # A scored vote keeps its raw output only when asked (VerdictRecord.to_dict's rule).
            if vote["score"] is not None and (not keep_raw or vote["raw"] is None):
                del vote["raw"]
            if vote["order"] is None:
                del vote["order"]
            if vote["images"] is None:
                del vote["images"]
        record = {
            "id": self.id,
            "status": self.status,
            "rubric": self.rubric,
            "jury": self.jury,
            "provenance": self.provenance,
            "scores": dict(self.scores),
            "reasons": list(self.reasons),
            "disagreement": {
                name: {"n": r.n_scored, "std": r.std, "range": r.range}
                for name, r in self.criteria.items()
            },
            "votes": votes,
        }
        if self.stage is not None:
            record["stage"] = self.stage.model_dump(mode="json")
        if self.pairwise:
            record["winner"] = self.winner
            record["p_a"] = self.p_a
            record["inconsistent"] = list(self.inconsistent)
        if self.left_out:
            record["left_out"] = list(self.left_out)
        if self.flagged:
            record["flagged"] = list(self.flagged)
        if self.points is not None:
            record["points"] = {k: p.model_dump(mode="json") for k, p in self.points.items()}
        if self.dropped:
            record["dropped"] = list(self.dropped)
        if input is not None:
            record["input"] = input
        return record


_VOTES = TypeAdapter(list[Vote])


class Disagreement(BaseModel):
    """How far the judges were apart on one criterion of one item.

    Attributes:
        n: Scored votes on the criterion.
        std: The scored votes' standard deviation.
        range: The highest minus the lowest scored vote.
    """

    model_config = ConfigDict(frozen=True)

    n: int = Field(description="Scored votes on the criterion.")
    std: float | None = Field(None, description="Standard deviation of the scored votes.")
    range: float | None = Field(None, description="Highest minus lowest scored vote.")


class Route(BaseModel):
    """Where a verdict should go next: to a human, and why (``judge --route-width``)."""

    model_config = ConfigDict(frozen=True)

    to: Literal["human"] = Field(description="Who should look at the item.")
    reasons: list[str] = Field(
        description="Why: each criterion whose interval is too wide or missing."
    )


class VerdictRecord(BaseModel):
    """A verdict as written: one line of a results file, one verdict of the HTTP API.

    `Verdict.to_record` writes it; every reader (resume, summary, agreement, calibration)
    reads it back through `from_record`, which names the field at fault when a line is not
    a verdict. Each field's description says more (see the results file's format).

    Attributes:
        id: The item's id.
        status: ``scored``: every criterion (and the formula) has a value; ``unscored``: see
            ``reasons``.
        rubric: The rubric's name.
        jury: The jury's name.
        provenance: The hash of rubric, judges, weights and aggregation.
        scores: Per criterion (and the rubric's formula): the jury's score, or None.
        reasons: Why a score is None.
        disagreement: Per criterion: how far the judges were apart.
        votes: Every judge's vote per criterion.
        input: The hash of the judged input (bulk runs).
        calibrated: Calibrated scores, when a calibration map was applied.
        calibration: The calibration map applied (``file:hash``).
        interval: Per criterion, the conformal interval that holds a human's label with the
            map's probability, when a conformal map was applied.
        route: To a human, with the reasons, when an interval is too wide (or missing).
        stage: A cascaded jury's deciding stage and why.
        winner: Pairwise rubrics: the better answer, ``a``, ``b`` or ``tie``.
        p_a: Pairwise rubrics: the jury's probability that A is better.
        inconsistent: Pairwise rubrics: each judge whose two orders pointed to different
            answers.
        left_out: Each juror left out of the verdict, as ``"judge: why"``.
        flagged: Each juror of the verdict its batch flagged as failing, as ``"judge: why"``.
        points: Checklist rubrics: each point's decision by key, in checklist order.
        dropped: Checklist rubrics: the keys of the points dropout left out.
    """

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="The item's id.")
    status: Literal["scored", "unscored"] = Field(
        description="scored: every criterion (and the formula) has a value; unscored: see reasons."
    )
    rubric: str = Field(description="The rubric's name.")
    jury: str = Field(description="The jury's name.")
    provenance: str = Field(description="Hash of rubric, judges, weights and aggregation.")
    scores: dict[str, float | None] = Field(
        description="Per criterion (and the rubric's formula): the jury's score, or null."
    )
    reasons: list[str] = Field(default_factory=list, description="Why a score is null.")
    disagreement: dict[str, Disagreement] = Field(default_factory=dict)
    votes: list[Vote] = Field(default_factory=list, description="Every judge's vote per criterion.")
    input: str | None = Field(None, description="Hash of the judged input (bulk runs).")
    calibrated: dict[str, float | None] | None = Field(
        None, description="Calibrated scores, when a calibration map was applied."
    )
    calibration: str | None = Field(None, description="The calibration map applied (file:hash).")
    interval: dict[str, list[float] | None] | None = Field(
        None,
        description="Per criterion, the conformal interval [low, high] that holds a "
        "human's label with the map's probability (null where the jury did not score it), when "
        "a conformal map was applied.",
    )
    route: Route | None = Field(
        None,
        description="To a human, with the reasons, when an interval is wider than "
        "--route-width (or missing).",
    )
    stage: StageDecision | None = Field(
        None, description="A cascaded jury's deciding stage and why (absent without stages)."
    )
    winner: Winner | None = Field(
        None,
        description="Pairwise rubrics: the better answer, a (response_a), b or tie; null "
        "with the reason in reasons (absent for other rubrics).",
    )
    p_a: float | None = Field(
        None,
        description="Pairwise rubrics: the jury's probability that A is better (the "
        "judges' answer distributions, both orders averaged); null without distributions.",
    )
    inconsistent: list[str] = Field(
        default_factory=list,
        description="Pairwise rubrics: each judge whose two orders "
        "pointed to different answers, on which criterion, and what it chose in each (counted "
        "as a tie or unscored, as the rubric says).",
    )
    left_out: list[str] = Field(
        default_factory=list,
        description='Each juror left out of this verdict, as "judge: why": a judge its '
        "batch flagged as failing (collapsed, refused or departed) when the jury leaves flagged "
        "jurors out; its votes stay in votes. The scores are the other judges' (absent when "
        "no juror was left out).",
    )
    flagged: list[str] = Field(
        default_factory=list,
        description='Each juror of this verdict its batch flagged as failing, as "judge: why" '
        "(collapsed, refused or departed), whether or not the jury left it out (absent when "
        "none was flagged).",
    )
    points: dict[str, PointResult] | None = Field(
        None,
        description="Checklist rubrics: each point's decision by key (p1, p2 ...), in checklist "
        "order; scores, disagreement and votes hold each point under its key too, and scores "
        "the item's score (absent for other rubrics).",
    )
    dropped: list[str] = Field(
        default_factory=list,
        description="Checklist rubrics: the keys of the points rubric dropout left out, not "
        "judged and outside the score's denominator (absent when none was).",
    )

    @classmethod
    def from_record(cls, record: Any, where: str = "record") -> VerdictRecord:
        """Read a record (a parsed JSON line).

        Args:
            record: The parsed line (or a `VerdictRecord`, returned as it is).
            where: Where the record comes from, for the message (e.g. a file and line).

        Returns:
            The record, validated.

        Raises:
            InputError: The line is not a jurybox verdict (naming ``where`` and the field).
        """
        if isinstance(record, cls):
            return record
        try:
            return cls.model_validate(record)
        except ValidationError as exc:
            ident = record.get("id") if isinstance(record, dict) else None
            at = f"{where} (id {ident!r})" if ident is not None else where
            problems = [_problem(err) for err in exc.errors(include_url=False)[:5]]
            first = exc.errors(include_url=False)[0]
            raise InputError(
                f"{at}: not a jurybox verdict: " + "; ".join(problems),
                field=_location(first["loc"]),
            ) from None

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data.

        The optional fields are there only when set, and a scored vote's ``raw`` only when kept.
        """
        data = self.model_dump(
            mode="json",
            exclude={
                k
                for k in ("input", "calibrated", "calibration", "interval", "route", "stage")
                if getattr(self, k) is None
            }
            | ({"winner", "p_a", "inconsistent"} - self.model_fields_set)
            | (set() if self.left_out else {"left_out"})
            | (set() if self.flagged else {"flagged"})
            | (set() if self.points is not None else {"points"})
            | (set() if self.dropped else {"dropped"}),
        )
        for vote in data["votes"]:
            if vote["raw"] is None and vote["score"] is not None:
                del vote["raw"]
            if vote["order"] is None:
                del vote["order"]
            if vote["images"] is None:
                del vote["images"]
        return data


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
