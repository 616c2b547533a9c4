"""Cascaded juries: the judges of a stage run only on the items earlier stages did not settle.

A jury with ``stages`` (see `Stage`) judges an item with stage 1's judges first. The stage's verdict
combines its judges' votes as the jury would; its **confidence** is the pooled probability, over
those judges' score distributions, of scores within ``confidence.tolerance`` of that verdict
(snapped to the scale), the minimum over the criteria (``confidence.criteria``, default all). A
criterion whose verdict is unscored, or one of whose scored votes has no distribution (an API
without logprobs) or one that is not a probability distribution (NaN, negative, not summing to 1),
gives confidence 0 (`confidence_and_reason` says which): a stage is trusted only on what it can
measure. At or above the stage's threshold the item leaves with that verdict; otherwise the next
stage adds its judges and decides in the same way, and the last stage decides with the whole jury,
exactly as a jury without stages would. Every verdict of a cascaded jury says which stage decided it
and why (``Verdict.stage``).

`StagePlan` is the one statement of that walk (which judges each stage runs, and how an
item's votes so far settle it after a stage); `Steps` walks it for a batch of rendered
requests (``Jury.score`` in-process, the HTTP service), and the Ray engine walks it as a pipeline
(one map per judge, a gate after each stage but the last, then the last stage's decision), so
every engine runs a cascade the same way, each with its own way of calling judges. A jury
without stages is a single stage with every judge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jurybox.rubrics import Rubric, StageDecision, Verdict, Vote

from .judging import JudgeFailed, Requests, decide
from .spec import JudgeSpec, JurySpec


def confidence(
    verdict: Any, scales: Mapping[str, Any], criteria: Iterable[str], tolerance: float = 0.0
) -> float:
    """A stage's confidence in its verdict.

    It is the minimum over ``criteria`` of the pooled probability of the scores within
    ``tolerance`` of the verdict. ``verdict`` is a Verdict or a VerdictRecord (anything with
    ``scores`` and ``votes``); ``scales`` maps criteria to scales. 0 where it cannot be measured
    (see `confidence_and_reason`).
    """
    return confidence_and_reason(verdict, scales, criteria, tolerance)[0]


def confidence_and_reason(
    verdict: Any, scales: Mapping[str, Any], criteria: Iterable[str], tolerance: float = 0.0
) -> tuple[float, str | None]:
    """`confidence`, and why it is 0 when it cannot be measured.

    It cannot be measured when a criterion's verdict is unscored, or one of its scored votes has no
    score distribution (an API without logprobs) or one that is not a probability distribution (NaN,
    negative, or not summing to 1: records from a file or another tool can carry such).
    """
    lowest = 1.0
    for criterion in criteria:
        value, reason = _criterion_confidence(verdict, criterion, scales[criterion], tolerance)
        if reason is not None:
            return 0.0, reason
        lowest = min(lowest, value)
    return lowest, None


# How far from 1 a distribution's probabilities may sum (rounding in a file) and still be one.
_NORMALISED = 0.01


def _criterion_confidence(
    verdict: Any, criterion: str, scale: Any, tolerance: float
) -> tuple[float, str | None]:
    value = verdict.scores.get(criterion)
    if value is None:
        return 0.0, f"{criterion}: the stage's verdict is unscored"
    decided = float(scale.snap(value))
    votes = [v for v in verdict.votes if v.criterion == criterion and v.scored]
    if not votes:
        return 0.0, f"{criterion}: no scored vote"
    mass = 0.0
    for vote in votes:
        if not vote.distribution:
            return 0.0, f"{criterion}: judge {vote.judge} has no score distribution"
        probabilities = list(vote.distribution.values())
        if (
            not all(math.isfinite(p) and p >= 0.0 for p in probabilities)
            or abs(sum(probabilities) - 1.0) > _NORMALISED
        ):
            return 0.0, (
                f"{criterion}: judge {vote.judge}'s score distribution is not a "
                "probability distribution (NaN, negative, or not summing to 1)"
            )
        for answer, p in vote.distribution.items():
            if abs(scale.parse(answer) - decided) <= tolerance + 1e-9:
                mass += p
    return mass / len(votes), None


@dataclass(frozen=True)
class StagePlan:
    """A jury's stages: the judges each adds, and how the votes so far settle an item.

    The stages are in order (one stage with every judge for a jury without stages); the votes
    gathered so far settle an item after stage ``k``.
    """

    jury: JurySpec
    stages: tuple[tuple[JudgeSpec, ...], ...]

    @classmethod
    def of(cls, jury: JurySpec) -> StagePlan:
        """The plan of ``jury``: each stage's judges by name.

        A jury that is not cascaded has a single stage with every judge.
        """
        by_name = {j.name: j for j in jury.judges}
        names = (
            [s.judges for s in jury.stages] if jury.cascaded else [[j.name for j in jury.judges]]
        )
        return cls(jury, tuple(tuple(by_name[n] for n in stage) for stage in names))

    @property
    def last(self) -> int:
        """The index of the last stage (which decides every item that reaches it)."""
        return len(self.stages) - 1

    def members(self, k: int) -> list[JudgeSpec]:
        """The judges whose votes an item has after stage ``k``: stages 0..k, in jury order."""
        names = {j.name for stage in self.stages[: k + 1] for j in stage}
        return [j for j in self.jury.judges if j.name in names]

    def settle(
        self,
        rubric: Rubric,
        prov: str,
        k: int,
        item_id: str,
        votes_by_judge: Mapping[str, Sequence[Vote]],
        earlier: Sequence[float] = (),
    ) -> tuple[Verdict | None, float | None]:
        """`settle` after stage ``k`` with the votes of every judge run so far.

        The votes are by judge name, gathered in the jury's judge order, as a jury without stages
        decides.
        """
        votes = [
            v for j in self.jury.judges if j.name in votes_by_judge for v in votes_by_judge[j.name]
        ]
        return settle(rubric, self.jury, prov, k, item_id, votes, earlier)


class Steps:
    """The walk through a jury's stages for one batch of rendered requests.

    ```python
    steps = Steps(rubric, jury, provenance, requests)
    while (step := steps.next()) is not None:
        judges, open_requests = step
        steps.add([judge_votes(j, backend_of(j), open_requests) for j in judges])
    verdicts = steps.verdicts()
    ```
    """

    def __init__(self, rubric: Rubric, jury: JurySpec, prov: str, requests: Requests) -> None:
        self.rubric, self.jury, self.prov, self.requests = rubric, jury, prov, requests
        self.plan = StagePlan.of(jury)
        self._k = 0
        self._open = list(range(len(requests.item_ids)))
        self._votes: dict[str, list[list[Vote]]] = {}
        self._verdicts: list[Verdict | None] = [None] * len(requests.item_ids)
        self._confidence: list[list[float]] = [[] for _ in requests.item_ids]

    def next(self) -> tuple[list[JudgeSpec], Requests] | None:
        """The judges to run next and the requests of the items still open; None when done."""
        if not self._open or self._k > self.plan.last:
            return None
        return list(self.plan.stages[self._k]), self.requests.subset(self._open)

    def add(self, votes_by_judge: Sequence[Sequence[Sequence[Vote]]]) -> None:
        """The votes of the judges `next` named (in its order) on the open items."""
        judges = self.plan.stages[self._k]
        if len(votes_by_judge) != len(judges):
            raise JudgeFailed(
                f"votes from {len(votes_by_judge)} judges for a stage of {len(judges)}"
            )
        for judge, per_item in zip(judges, votes_by_judge):
            if len(per_item) != len(self._open):
                raise JudgeFailed(
                    f"judge {judge.name}: votes for {len(per_item)} items, "
                    f"expected {len(self._open)}"
                )
            if judge.name not in self._votes:
                self._votes[judge.name] = [[] for _ in self.requests.item_ids]
            column = self._votes[judge.name]
            for i, votes in zip(self._open, per_item):
                column[i] = list(votes)
        still_open = []
        for i in self._open:
            verdict, conf = self.plan.settle(
                self.rubric,
                self.prov,
                self._k,
                self.requests.item_ids[i],
                {name: column[i] for name, column in self._votes.items()},
                self._confidence[i],
            )
            if verdict is None:
                self._confidence[i].append(conf)  # type: ignore[arg-type]
                still_open.append(i)
            else:
                self._verdicts[i] = verdict
        self._open = still_open
        self._k += 1

    def verdicts(self) -> list[Verdict]:
        """One verdict per request's item, in order.

        Raises:
            JudgeFailed: Some item has no verdict yet (not every step's votes were added).
        """
        missing = [self.requests.item_ids[i] for i, v in enumerate(self._verdicts) if v is None]
        if missing:
            raise JudgeFailed(
                f"no verdict yet for {len(missing)} item(s), e.g. {missing[:3]}: "
                "every step's votes must be added"
            )
        return list(self._verdicts)  # type: ignore[arg-type]


def settle(
    rubric: Rubric,
    jury: JurySpec,
    prov: str,
    k: int,
    item_id: str,
    votes: list[Vote],
    earlier: Sequence[float] = (),
) -> tuple[Verdict | None, float | None]:
    """The verdict on one item after stage ``k`` (0-based), and the stage's confidence.

    The verdict comes from the votes of the stage's judges and every earlier stage's. It is final at
    the last stage (or for a jury without stages), else only when the confidence reaches the stage's
    threshold; None means go on. ``earlier``: the confidences of the stages before (for the reason).
    """
    if not jury.cascaded:
        return decide(rubric, jury, prov, item_id, votes), None
    n = len(jury.stages)
    if k == n - 1:
        verdict = decide(rubric, jury, prov, item_id, votes)
        shown = ", ".join(f"{c:.4g}" for c in earlier)
        why = (
            f"no earlier stage reached its threshold (their confidence: {shown}); the last "
            "stage decides every item that reaches it"
        )
        return verdict.model_copy(update={"stage": StageDecision(stage=n, of=n, reason=why)}), None
    verdict = decide(rubric, jury.stage_jury(k), prov, item_id, votes)
    threshold = jury.stages[k].threshold
    assert threshold is not None  # JurySpec checks it
    scales = {c.name: c.scale for c in rubric.criteria}
    conf = confidence(
        verdict, scales, jury.confidence.criteria or list(scales), jury.confidence.tolerance
    )
    if verdict.status != "scored" or conf < threshold:
        return None, conf  # an unscored stage verdict always goes on
    return verdict.model_copy(
        update={
            "stage": StageDecision(
                stage=k + 1,
                of=n,
                confidence=conf,
                threshold=threshold,
                reason=f"confidence {conf:.4g} reached the stage's threshold {threshold:g}",
            )
        }
    ), conf
