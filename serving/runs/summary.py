"""The summary at the end of a bulk run, computed from the output records.

Computed from the output, a resumed run summarises everything judged, not only what this
invocation added.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from jurybox.calibration import krippendorff_alpha
from jurybox.calibration.stats.stat import mean_ci
from jurybox.judges.parsing import reason_kind
from jurybox.rubrics import Rubric, VerdictRecord
from jurybox.rubrics.pairwise import inconsistent_judges


@dataclass
class CriterionSummary:
    """One row of the summary: a criterion (or formula, or calibrated value).

    Its scored and unscored items, the mean of the scored ones with its CI, and the judges'
    agreement (Krippendorff's alpha, where two or more judges voted on it).
    """

    name: str
    n_scored: int
    n_unscored: int
    mean: float | None
    ci: tuple[float, float] | None
    judge_agreement: dict[str, Any] | None = None


@dataclass
class Summary:
    """The summary of a bulk run.

    Items scored and unscored, per-criterion rows, per judge its votes, unscored votes and their
    commonest reasons, rejected rows, empty responses judged and, for a cascade, items decided
    per stage.
    """

    items: int
    scored: int
    unscored: int
    criteria: list[CriterionSummary]
    judges: dict[str, dict[str, Any]]
    rejected_rows: int = 0
    empty_responses: int = 0
    notes: list[str] = field(default_factory=list)
    stages: dict[int, int] = field(default_factory=dict)  # cascaded juries: items per stage
    pairwise: dict[str, Any] | None = None  # pairwise rubrics: winners, inconsistent judges
    length_control: list[dict[str, Any]] | None = None  # judge --length-control
    #: judge --conformal: items with intervals, and those routed to a human (--route-width)
    intervals: int = 0
    routed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain data (``stages`` only for a cascade; the notes left out)."""
        return {
            "items": self.items,
            "scored": self.scored,
            "unscored": self.unscored,
            "rejected_rows": self.rejected_rows,
            "empty_responses": self.empty_responses,
            "criteria": [c.__dict__ for c in self.criteria],
            "judges": self.judges,
            **(
                {"stages": {str(k): v for k, v in sorted(self.stages.items())}}
                if self.stages
                else {}
            ),
            **({"pairwise": self.pairwise} if self.pairwise is not None else {}),
            **({"length_control": self.length_control} if self.length_control is not None else {}),
            **({"intervals": self.intervals, "routed": self.routed} if self.intervals else {}),
        }


def summarize(
    records: Iterable[VerdictRecord | dict[str, Any]],
    rubric: Rubric,
    rejected_rows: int = 0,
    empty_responses: int = 0,
) -> Summary:
    """The summary of verdict records, read once as a stream.

    Per item it keeps a few numbers (scores, judges' votes) in flat arrays, never the records.

    Args:
        records: The verdict records (or their dicts), streamed.
        rubric: The rubric they were judged with.
        rejected_rows: The rows the run rejected, for the summary's count.
        empty_responses: The items with an empty response that were judged.

    Returns:
        The summary.
    """
    names = list(rubric.criterion_names)
    if rubric.formula is not None:
        names.append(rubric.formula.name)
    if rubric.checklist is not None and rubric.checklist.score == "points":
        names = [rubric.checklist.name]  # the item's score (its points vary by item)
    labelled = {c.name for c in rubric.criteria if c.scale.is_labelled}
    judges: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"votes": 0, "unscored": 0, "reasons": Counter()}
    )
    scores = {name: array("d") for name in names}
    calibrated: dict[str, array] = {}
    # votes[criterion][judge] -> that judge's score per item (NaN: no scored vote)
    grid: dict[str, dict[str, array]] = defaultdict(dict)
    n = n_scored = with_intervals = routed = 0
    stages: Counter[int] = Counter()
    pairs = PairTally(rubric)
    for n, raw in enumerate(records, start=1):
        rec = VerdictRecord.from_record(raw, f"record {n}")
        n_scored += rec.status == "scored"
        with_intervals += rec.interval is not None
        routed += rec.route is not None
        if rec.stage is not None:
            stages[rec.stage.stage] += 1
        for name in names:
            scores[name].append(_number(rec.scores.get(name)))
        if rec.calibrated is not None:
            for name in names:
                if name in rec.calibrated:
                    if name not in calibrated:  # (not setdefault: its default is built each call)
                        calibrated[name] = array("d", [math.nan]) * (n - 1)
                    calibrated[name].append(_number(rec.calibrated[name]))
        for column in calibrated.values():
            if len(column) < n:
                column.append(math.nan)
        # A pairwise judge votes twice per criterion (both orders): its mean enters agreement.
        cast_votes: dict[tuple[str, str], list[float]] = defaultdict(list)
        for vote in rec.votes:
            j = judges[vote.judge]
            j["votes"] += 1
            if vote.score is None:
                j["unscored"] += 1
                j["reasons"][reason_kind(vote.error or "")] += 1
            else:
                cast_votes[vote.criterion, vote.judge].append(vote.score)
        for (criterion, judge), got in cast_votes.items():
            by_judge = grid[criterion]
            if judge not in by_judge:
                by_judge[judge] = array("d", [math.nan]) * (n - 1)
            by_judge[judge].append(sum(got) / len(got))
        if rubric.pairwise:
            pairs.add(rec)
        for by_judge in grid.values():
            for column in by_judge.values():
                if len(column) < n:
                    column.append(math.nan)
    criteria = []
    for name in names:
        values = np.frombuffer(scores[name], dtype=float) if n else np.empty(0)
        scored = values[~np.isnan(values)]
        mean, ci = mean_ci(scored)
        agreement = None
        judged = grid.get(name)
        if judged and len(judged) >= 2:
            matrix = np.vstack([np.frombuffer(c, dtype=float) for c in judged.values()])
            level: Literal["nominal", "interval"] = "nominal" if name in labelled else "interval"
            stat = krippendorff_alpha(matrix, level)
            agreement = {
                "statistic": f"krippendorff_alpha[{level}]",
                "value": stat.value,
                "reason": stat.reason,
                "units": stat.n,
            }
        criteria.append(
            CriterionSummary(name, int(scored.size), n - int(scored.size), mean, ci, agreement)
        )
    for name, column in calibrated.items():
        values = np.frombuffer(column, dtype=float)
        scored = values[~np.isnan(values)]
        mean, ci = mean_ci(scored)
        criteria.append(
            CriterionSummary(
                f"{name} (calibrated)", int(scored.size), n - int(scored.size), mean, ci
            )
        )
    judge_rows = {
        k: {
            "votes": v["votes"],
            "unscored": v["unscored"],
            "top_reasons": [f"{reason} ({c})" for reason, c in v["reasons"].most_common(3)],
        }
        for k, v in judges.items()
    }
    return Summary(
        n,
        n_scored,
        n - n_scored,
        criteria,
        judge_rows,
        rejected_rows,
        empty_responses,
        stages=dict(stages),
        pairwise=pairs.to_dict() if rubric.pairwise else None,
        intervals=with_intervals,
        routed=routed,
    )


class PairTally:
    """A pairwise run's winners, and each judge's position bias.

    Per judge, the pairs it answered in both orders and the ones where the two orders disagreed
    (position bias).
    """

    def __init__(self, rubric: Rubric) -> None:
        self.rubric = rubric
        self.winners: Counter[str] = Counter()
        self.both: Counter[str] = Counter()
        self.flips: Counter[str] = Counter()

    def add(self, rec: VerdictRecord) -> None:
        """Count one verdict: its winner, per judge its orders and flips (first criterion)."""
        self.winners[rec.winner or "none"] += 1
        orders: dict[str, set[str]] = defaultdict(set)
        for v in rec.votes:
            if v.scored and v.criterion == self.rubric.criteria[0].name and v.order:
                orders[v.judge].add(v.order)
        for judge, seen in orders.items():
            self.both[judge] += len(seen) == 2
        for judge, criterion in inconsistent_judges(self.rubric, rec.votes):
            if criterion == self.rubric.criteria[0].name:
                self.flips[judge] += 1

    def to_dict(self) -> dict[str, Any]:
        """The tally as plain data: the winners, the criterion counted, and per judge its pairs."""
        return {
            "winners": {k: self.winners.get(k, 0) for k in ("a", "b", "tie", "none")},
            "criterion": self.rubric.criteria[0].name,
            "judges": {
                j: {"both_orders": n, "inconsistent": self.flips.get(j, 0)}
                for j, n in self.both.items()
            },
        }


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


def render(summary: Summary, console: Any) -> None:
    """Print the summary as rich tables."""
    from rich.table import Table

    t = Table(
        title=f"{summary.items} items: {summary.scored} scored, {summary.unscored} unscored"
        + (f"; {summary.rejected_rows} rows rejected" if summary.rejected_rows else "")
        + (f"; {summary.empty_responses} empty responses judged" if summary.empty_responses else "")
    )
    for col in ("criterion", "n", "mean", "95% CI", "unscored", "judge agreement (alpha)"):
        t.add_column(col, justify="left" if col == "criterion" else "right")
    for c in summary.criteria:
        ci = f"[{c.ci[0]:.3f}, {c.ci[1]:.3f}]" if c.ci else "-"
        mean = f"{c.mean:.3f}" if c.mean is not None else "-"
        if c.judge_agreement is None:
            agree = "-"
        elif c.judge_agreement["value"] is None:
            agree = f"undefined: {c.judge_agreement['reason'].split(' (')[0]}"
        else:
            agree = f"{c.judge_agreement['value']:.3f}"
        t.add_row(c.name, str(c.n_scored), mean, ci, str(c.n_unscored), agree)
    console.print(t)
    if summary.intervals:
        console.print(
            f"conformal intervals on {summary.intervals} items; routed to a human: "
            f"{summary.routed} ({summary.routed / summary.items:.0%})",
            highlight=False,
        )
    if summary.stages:
        console.print(
            "cascade: "
            + ", ".join(
                f"stage {k} decided {v} item{'s' if v != 1 else ''} ({v / summary.items:.0%})"
                for k, v in sorted(summary.stages.items())
            ),
            highlight=False,
        )
    if summary.pairwise is not None:
        w = summary.pairwise["winners"]
        console.print(
            f"pairwise (a mean is A's share: 1 = A better, ties count half): A won {w['a']}, "
            f"B won {w['b']}, tie {w['tie']}" + (f", no winner {w['none']}" if w["none"] else ""),
            highlight=False,
        )
        for name, row in summary.pairwise["judges"].items():
            if row["both_orders"]:
                console.print(
                    f"  {name}: inconsistent under order swap on {row['inconsistent']} of "
                    f"{row['both_orders']} pairs ({row['inconsistent'] / row['both_orders']:.0%}"
                    f"; {summary.pairwise['criterion']})",
                    highlight=False,
                )
    if summary.length_control:
        console.print("length control (the jury's score, length in words):", highlight=False)
        for row in summary.length_control:
            console.print(
                ("  + " if row["raises_agreement"] else "    ") + row["finding"],
                highlight=False,
                markup=False,
            )
    if summary.judges:
        j = Table(title="judges")
        for col in ("judge", "votes", "unscored", "most common reasons"):
            j.add_column(col)
        for name, row in summary.judges.items():
            j.add_row(
                name, str(row["votes"]), str(row["unscored"]), "; ".join(row["top_reasons"]) or "-"
            )
        console.print(j)
