"""A reward read from the judges' expected scores instead of their chosen ones.

A judge's chosen score (the mode of its answer distribution) is coarse: the tiny jury gives
smollm2's accuracy a 0 on the first three examples while its expected scores are 0.555, 0.545
and 0.521. The expected score (the probability-weighted mean over the scale, read from the
judge's logprobs at its answer) keeps that resolution: G-Eval's reason for it, ties broken by
the judge's own uncertainty. A jury file can combine expected scores always (``aggregation:
use: expected``); `ResolvedReward` makes it a choice of the reward instead
(``use="expected"``), per verdict: the verdict is decided again from its own votes with the
jury's aggregation combining expected scores (`jurybox.judges.judging.decide`: the same
aggregation, quorum, formula and, for a pairwise rubric, both orders averaged), but only where
every scored vote has a distribution; elsewhere the chosen scores stand and the reading says
why (`Reading.used`, `Reading.note`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from jurybox.rubrics import Rubric, VerdictRecord
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import Reward, RewardSpec

from .spec import JurySpec

Use = Literal["score", "expected"]


@dataclass(frozen=True)
class Reading:
    """A verdict's reward before the unscored policy.

    ``value`` is on the reward's scale (None and ``why`` when it has none); ``used`` says which
    scores it was read from, and ``note`` why the chosen scores stood where expected ones were
    asked for.
    """

    value: float | None
    why: str
    used: Use
    note: str = ""


def expected_blocker(jury: JurySpec) -> str | None:
    """Why this jury's verdicts cannot be decided from expected scores (None: they can)."""
    agg = jury.aggregation
    if "majority" in (agg.method, *agg.methods.values()):
        return (
            "the jury votes by majority, which needs chosen scores (expected scores are "
            "continuous and almost never tie into a majority)"
        )
    if jury.stages:
        return "a cascaded jury's verdict is its deciding stage's, read as it was decided"
    return None


def redecided(
    record: VerdictRecord | Mapping[str, Any], rubric: Rubric, jury: JurySpec
) -> tuple[VerdictRecord, str]:
    """The verdict decided again from its votes with the jury combining expected scores.

    Returned with ``""``; or the verdict as it was and why, when some scored vote has no expected
    score (a judge without logprobs, an answer whose distribution could not be read) or the jury
    cannot combine them (`expected_blocker`).
    """
    from .judging import decide

    rec = record if isinstance(record, VerdictRecord) else VerdictRecord.from_record(record)
    blocked = expected_blocker(jury)
    if blocked is not None:
        return rec, blocked
    lacking = next((v for v in rec.votes if v.scored and v.expected is None), None)
    if lacking is not None:
        return rec, (
            f"{lacking.judge} gave no distribution on {lacking.criterion} (its chosen score stands)"
        )
    if not any(v.scored for v in rec.votes):
        return rec, ""
    expected = jury.model_copy(
        update={"aggregation": jury.aggregation.model_copy(update={"use": "expected"})}
    )
    verdict = decide(rubric, expected, rec.provenance, rec.id, list(rec.votes))
    return verdict.verdict_record().model_copy(update={"input": rec.input}), ""


@dataclass(frozen=True)
class ResolvedReward:
    """A `Reward` read from chosen scores or expected scores.

    Chosen scores (``use="score"``) are the verdict's own; for expected scores
    (``use="expected"``) see the module docstring.
    """

    reward: Reward
    rubric: Rubric
    jury: JurySpec
    use: Use = "score"

    @classmethod
    def bind(
        cls, spec: RewardSpec, rubric: Rubric, jury: JurySpec, use: Use = "score"
    ) -> ResolvedReward:
        """``spec`` on ``rubric`` and ``jury``.

        Raises:
            InputError: The reward cannot be read from expected scores (a calibrated one: the
                map was fitted on the verdicts as decided), naming the field.
        """
        if use not in ("score", "expected"):
            raise InputError(f"use must be 'score' or 'expected', got {use!r}", field="use")
        if use == "expected" and spec.calibrated:
            raise InputError(
                "use='expected' reads the judges' expected scores; a calibrated "
                "reward reads the calibration map's value of the verdict as "
                "decided: give one of the two",
                field="use",
            )
        return cls(spec.bind(rubric), rubric, jury, use)

    @property
    def name(self) -> str:
        """The reward's name for logs, with ``(expected)`` when it reads expected scores."""
        return self.reward.name + (" (expected)" if self.use == "expected" else "")

    def record(
        self, record: VerdictRecord | Mapping[str, Any]
    ) -> tuple[VerdictRecord | Mapping[str, Any], Use, str]:
        """The verdict the reward reads, which scores it holds and why the chosen ones stood.

        The verdict is decided again from expected scores where asked and possible; the reason is
        there only if the chosen scores stood.
        """
        if self.use == "score":
            return record, "score", ""
        rec, note = redecided(record, self.rubric, self.jury)
        return rec, ("score" if note else "expected"), note

    def read(self, record: VerdictRecord | Mapping[str, Any]) -> Reading:
        """The reward of one verdict on its scale (``unit`` or ``raw``), before its policy.

        The policy is the reward's for unscored verdicts.
        """
        rec, used, note = self.record(record)
        raw, why = self.reward.raw(rec)
        if raw is None:
            return Reading(None, why, used, note)
        return Reading(self.unit(raw), "", used, note)

    def unit(self, raw: float) -> float:
        """A raw value on the reward's scale (``unit``: mapped onto [0, 1])."""
        reward = self.reward
        return (
            raw if reward.spec.scale == "raw" else (raw - reward.low) / (reward.high - reward.low)
        )
