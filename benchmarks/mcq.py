"""Multiple-choice scoring shared by the MicroVQA and MIR packs.

Extract each response's answer by the rules of `.extraction`, optionally let a jury read the answers
the rules cannot (the ``mcq-extract`` rubric), and report accuracy overall and per group with the
unparseable share.

Every item stays in every denominator: an unanswered item (no prediction, or an empty response) and
an unparseable response (no explicit answer, or one that names no option) count as wrong. The judge
fallback is reported beside the rules-only numbers, never folded into them, so the headline accuracy
is reproducible without a model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from jurybox.rubrics import Item, load_rubric

from .data import Predictions
from .extraction import Choice, extract_choice
from .judging import Judge, Judged
from .report import UNANSWERED, Metric, MetricOptions, Missing, Table, by_group, mean_metric


@dataclass(frozen=True)
class McqItem:
    """One multiple-choice item.

    Its question, option labels and texts, the 0-based index of the right option, its group (task or
    scenario group) and its row in the data file.
    """

    id: str
    question: str
    labels: list[str]
    options: list[str]
    gold: int  # 0-based
    group: str
    row: int
    extra: dict[str, Any] = field(default_factory=dict)
    images: list[str] = field(default_factory=list)  # shown to judges that see images

    def options_text(self) -> str:
        """The options as the judge sees them.

        Numbered from 1, with the item's own labels where they are not those numbers.
        """
        numbered = [lab == str(i) for i, lab in enumerate(self.labels, start=1)]
        return "\n".join(
            f"{i}. {opt}" if same else f"{i}. ({lab}) {opt}"
            for i, (lab, opt, same) in enumerate(zip(self.labels, self.options, numbered), start=1)
        )


@dataclass
class McqOutcome:
    """What was read from one item's response.

    The rules' choice (None when unanswered) and the jury's fallback reading of an unparseable one.
    """

    item: McqItem
    choice: Choice | None  # None: unanswered
    fallback: Choice | None = None  # the jury's reading of an unparseable response

    @property
    def correct(self) -> float | Missing:
        """1.0 when the rules' choice is the right option, else 0.0.

        UNANSWERED without a prediction.
        """
        if self.choice is None:
            return UNANSWERED
        return float(self.choice.parsed and self.choice.index == self.item.gold)

    @property
    def final(self) -> Choice | None:
        """The rules' choice, or the jury's where the rules found none."""
        if self.choice is not None and not self.choice.parsed and self.fallback is not None:
            return self.fallback
        return self.choice

    @property
    def correct_with_fallback(self) -> float | Missing:
        """As `correct`, for `final` (the jury's reading where the rules found none)."""
        final = self.final
        if final is None:
            return UNANSWERED
        return float(final.parsed and final.index == self.item.gold)


def extract_all(items: Sequence[McqItem], predictions: Predictions) -> list[McqOutcome]:
    """One outcome per item, in order: the rules' choice from its prediction, None if unanswered."""
    outcomes = []
    for item in items:
        p = predictions.get(item.id)
        choice = None if p is None else extract_choice(p.response, item.labels, item.options)
        outcomes.append(McqOutcome(item, choice))
    return outcomes


def judge_fallback(
    outcomes: Sequence[McqOutcome], predictions: Predictions, judge: Judge, task: str
) -> Judged:
    """Ask the jury which option each unparseable response chose (``mcq-extract``)."""
    todo = [o for o in outcomes if o.choice is not None and not o.choice.parsed]
    rubric = load_rubric("mcq-extract")
    items = [
        Item(
            id=o.item.id,
            question=o.item.question,
            response=predictions.get(o.item.id).response,  # type: ignore[union-attr]
            extra={"options": o.item.options_text()},
            images=o.item.images,
        )
        for o in todo
    ]
    judged = judge(task, rubric, items) if items else Judged({})
    for o in todo:
        record = judged.records.get(o.item.id)
        value = record.scores.get("answer") if record is not None else None
        o.fallback = _judge_choice(value, o.item, record is not None)
    return judged


def _judge_choice(value: float | None, item: McqItem, has_verdict: bool) -> Choice:
    if value is None:
        why = "no verdict" if not has_verdict else "the jury gave no answer"
        return Choice(None, "none", evidence=f"jury: {why}")
    if not float(value).is_integer():
        return Choice(None, "none", evidence=f"jury: judges disagree (mean {value:g})")
    k = int(value)
    if 1 <= k <= len(item.labels):
        return Choice(k - 1, "answered", item.labels[k - 1], evidence=f"jury: option {k}")
    if k == 0:
        return Choice(None, "none", evidence="jury: no single final answer")
    return Choice(None, "invalid", str(k), evidence=f"jury: option {k} of {len(item.labels)}")


def mcq_metrics(
    outcomes: Sequence[McqOutcome], order: Sequence[str], judged: bool, by: str
) -> dict[str, Metric | dict[str, Metric]]:
    """The accuracies and shares: overall, by group, unparseable and unanswered.

    Accuracy, accuracy by group (``accuracy_by_<by>``), unparseable and unanswered shares; with a
    judge, the same accuracies with the fallback and the share still unparseable.
    """
    groups = [o.item.group for o in outcomes]
    share: MetricOptions = {"kind": "share", "wrong": "wrong"}
    correct = [o.correct for o in outcomes]
    metrics: dict[str, Any] = {
        "accuracy": mean_metric(correct, **share),
        f"accuracy_by_{by}": by_group(correct, groups, order, **share),
        "unparseable": _share(
            [_unparseable(o.choice) for o in outcomes],
            "share of all items whose response has no readable answer "
            "(no explicit answer, or one naming no option)",
        ),
        "unanswered": _share(
            [float(o.choice is None) for o in outcomes],
            "share of all items with no prediction or an empty response",
        ),
    }
    if judged:
        with_fallback = [o.correct_with_fallback for o in outcomes]
        metrics["accuracy_with_fallback"] = mean_metric(with_fallback, **share)
        metrics[f"accuracy_by_{by}_with_fallback"] = by_group(with_fallback, groups, order, **share)
        metrics["unparseable_after_fallback"] = _share(
            [_unparseable(o.final) for o in outcomes],
            "share of all items whose answer neither the rules nor the jury could read",
        )
    return metrics


def _unparseable(choice: Choice | None) -> float:
    return float(choice is not None and not choice.parsed)


def _share(values: Sequence[float], what: str) -> Metric:
    return dataclasses.replace(mean_metric(values, kind="share"), counted=what)


def mcq_table(
    title: str, metrics: dict[str, Any], names: dict[str, str], judged: bool, by: str
) -> Table:
    """The paper-style accuracy table.

    Overall, each group (shown by ``names``) and the unparseable share, with a row for the judge
    fallback when ``judged``.
    """
    groups = list(metrics[f"accuracy_by_{by}"])
    columns = ["Overall", *[names.get(g, g) for g in groups], "Unparseable"]
    rows = [
        (
            "accuracy (%)",
            [
                metrics["accuracy"],
                *[metrics[f"accuracy_by_{by}"][g] for g in groups],
                metrics["unparseable"],
            ],
        )
    ]
    if judged:
        rows.append(
            (
                "with judge fallback (%)",
                [
                    metrics["accuracy_with_fallback"],
                    *[metrics[f"accuracy_by_{by}_with_fallback"][g] for g in groups],
                    metrics["unparseable_after_fallback"],
                ],
            )
        )
    return Table(title, columns, rows)


def item_rows(outcomes: Sequence[McqOutcome], group_name: str) -> list[dict[str, Any]]:
    """One row per item for ``--out``: what was read from the response and whether it is right."""
    rows = []
    for o in outcomes:
        c, f = o.choice, o.fallback
        rows.append(
            {
                "id": o.item.id,
                group_name: o.item.group,
                "gold": o.item.labels[o.item.gold],
                "status": "unanswered" if c is None else c.status,
                "answer": c.label if c is not None else None,
                "evidence": c.evidence if c is not None else None,
                "correct": o.correct == 1.0,
                **(
                    {
                        "jury_answer": f.label,
                        "jury_status": f.status,
                        "correct_with_fallback": o.correct_with_fallback == 1.0,
                    }
                    if f is not None
                    else {}
                ),
            }
        )
    return rows


def counts(outcomes: Sequence[McqOutcome]) -> dict[str, int]:
    """Items, answered items, unparseable items and, when a fallback ran, those the jury read."""
    out = {
        "items": len(outcomes),
        "answered": sum(o.choice is not None for o in outcomes),
        "unparseable_items": sum(o.choice is not None and not o.choice.parsed for o in outcomes),
    }
    if any(o.fallback is not None for o in outcomes):
        out["judge_extracted"] = sum(o.fallback is not None and o.fallback.parsed for o in outcomes)
    return out


def unanswered_ids(outcomes: Sequence[McqOutcome]) -> list[str]:
    """The ids of the items without an answered prediction."""
    return [o.item.id for o in outcomes if o.choice is None]


def unparseable_ids(outcomes: Sequence[McqOutcome]) -> list[str]:
    """The ids of the answered items whose response the rules could not read."""
    return [o.item.id for o in outcomes if o.choice is not None and not o.choice.parsed]
