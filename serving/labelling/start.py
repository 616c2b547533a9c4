"""A labelling session started over judged items: the design, the order, the labels file.

What ``jurybox label`` starts before it serves the page (`.app`): the labels file opened, the
goal's checks, the benchmark mean's design chosen, the selector and the session.

```python
from jurybox.serving.runs.inputs import judged_items
from jurybox.serving.labelling.start import start_session

judged = judged_items(Path("preds.jsonl"), Path("out.judged.jsonl"))
session = start_session(judged.items, judged.verdicts, judged.rubric, Path("labels.jsonl"))
session.next("ann")          # what the page's GET /api/next answers
# or serve its page until Ctrl-C: jurybox.serving.labelling.foreground.serve_session(session)
```
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jurybox.calibration.data.label_store import LabelStore
from jurybox.rubrics import Item, Rubric, VerdictRecord
from jurybox.rubrics.errors import InputError
from jurybox.serving.labelling.session import LabellingSession
from jurybox.serving.options import (
    SEQUENCE_HELP,
    DesignKind,
    Goal,
    SequenceKind,
    command_line,
    option,
)


@command_line(
    labels=option(
        "--labels",
        "-l",
        help="The human labels file to write (created, or appended to; one JSON line per label).",
        show_default=False,
    ),
    goal=option(
        type=Goal,
        help="What the labels are for: `agreement` (the jury's and judges' agreement with "
        "humans) and `cascade` (fitting a cascade's threshold) offer items in a uniform random "
        "order, which their estimates and guarantees need; `benchmark-mean` (the benchmark's "
        "mean score, `jurybox agree --ppi`) chooses items actively, the likelier the more the "
        "jury is unsure of them, and weights each label by its recorded probability (it saves "
        "labels where the jury's uncertainty is calibrated; a jury confidently wrong on some "
        "items can need more labels than a uniform order); `review` offers only the items a "
        "conformal map routed to a human (`jurybox judge --conformal MAP --route-width W`), "
        "the widest interval first, recorded as such and refused by every statistic (they are "
        "the jury's least sure items). The progress shown is a confidence sequence, valid "
        "whenever the labelling stops.",
    ),
    target_width=option(
        help="Stop when every criterion's 95% confidence sequence is at most this half-width: of "
        "the jury's agreement with the humans (a share, e.g. 0.05), or for benchmark-mean of the "
        "mean score (in the scale's units, e.g. 0.1); the page then says so.",
        min=0.0,
        show_default=False,
    ),
    sequence=option(type=SequenceKind, help=SEQUENCE_HELP),
    design=option(
        type=DesignKind,
        help="Goal benchmark-mean: how items are chosen. `active`: by the jury's uncertainty "
        "(weighted by their probabilities); `uniform`: a uniform random order; `auto`: with "
        "--target-width, the one the plan finds needs fewer labels under --sequence (as "
        "`jurybox labels plan` compares them), else active.",
    ),
    stratify=option(
        "--stratify",
        help="Goal agreement: offer items in three strata by the jury's uncertainty (its "
        "surest, middle and least sure thirds), random within each and in proportion to their "
        "sizes at every point, so even a few labels cover the items the jury is unsure of while "
        "the labels stay a representative (self-weighting) sample.",
    ),
    overlap=option(
        help="Share of a rater's items that another rater labelled too, so that human-human "
        "agreement (the ceiling `jurybox agree` reports) is measured.",
        min=0.0,
        max=1.0,
    ),
    show_judges=option(
        "--show-judges",
        help="Show the judges' votes before the item is labelled (by default they appear only "
        "after, beside the label).",
    ),
    seed=option(help="Seed of the random order (the same for every rater of the file)."),
)
def start_session(
    items: Mapping[str, Item],
    verdicts: Mapping[str, VerdictRecord],
    rubric: Rubric,
    labels: Path,
    *,
    goal: str = "agreement",
    target_width: float | None = None,
    sequence: str = "asymptotic",
    design: str = "auto",
    stratify: bool = False,
    overlap: float = 0.0,
    show_judges: bool = False,
    seed: int = 0,
    notes: list[str] | None = None,
    warnings: list[str] | None = None,
) -> LabellingSession:
    """A labelling session over judged items, appending to the labels file ``labels``.

    Args:
        items: The judged items by id.
        verdicts: Each item's verdict record, by id.
        rubric: The rubric the items were judged with.
        labels: The labels file (created if missing; a line cut short by a crash is removed).
        goal: agreement, benchmark-mean, cascade or review (the items a conformal map routed).
        target_width: The interval half-width at which labelling may stop.
        sequence: Goal benchmark-mean: the confidence sequence (asymptotic or betting).
        design: Goal benchmark-mean: active, uniform, or auto (`pick_design`); other goals
            take ``auto`` only.
        stratify: Stratify the order by the jury's uncertainty.
        overlap: The share of items offered to a second rater.
        show_judges: Show the judges' votes with the next item.
        seed: The random seed of the order.
        notes: Where what to tell the user goes (default: nowhere).
        warnings: Where what to warn the user of goes (default: nowhere).

    Returns:
        The session; its ``store`` is the open labels file (close it when done).

    Raises:
        InputError: The goal's options do not fit (the labels file is closed again).
    """
    from jurybox.calibration.estimates.selection import Selector

    notes = [] if notes is None else notes
    store = LabelStore(labels)
    if store.repaired:
        notes.append(
            f"{labels}: its last line was cut short by a crash (never saved) and is removed"
        )
    try:
        if rubric.checklist is not None and rubric.checklist.score == "points":
            _point_by_point(goal, target_width, stratify)
        uncertainty = None
        if goal == "benchmark-mean" or stratify:
            from jurybox.calibration.estimates.active import item_uncertainty

            scales = {c.name: c.scale for c in rubric.criteria}
            uncertainty = {i: item_uncertainty(verdicts[i], scales) for i in items}
        if goal != "benchmark-mean" and target_width is not None and not 0 < target_width < 0.5:
            raise InputError(
                f"--target-width {target_width}: for goal {goal} it is a half-width "
                "of an agreement rate, between 0 and 0.5",
                field="target_width",
            )
        routed = routed_items(items, verdicts) if goal == "review" else None
        if goal == "benchmark-mean":
            design = pick_design(
                design,
                [verdicts[i] for i in items],
                rubric,
                target_width,
                sequence,
                store,
                notes,
                warnings,
            )
        elif design != "auto":
            raise InputError(
                f"--design is for goal benchmark-mean; goal {goal} takes items "
                "as its estimate needs them",
                field="design",
            )
        selector = Selector(
            list(items),
            goal,
            seed=seed,
            overlap=overlap,
            uncertainty=uncertainty,
            stratify=stratify,
            routed=routed,
            design=design if goal == "benchmark-mean" else "active",
        )
        return LabellingSession(
            items,
            {i: verdicts[i] for i in items},
            rubric,
            store,
            selector,
            target_width=target_width,
            show_judges=show_judges,
            sequence=sequence,
        )
    except Exception:
        store.close()
        raise


def _point_by_point(goal: str, target_width: float | None, stratify: bool) -> None:
    """Refuse what a checklist rubric labelled point by point does not have yet.

    Each item's points are its own (``p1`` of one item is not ``p1`` of another), so there is
    no per-criterion estimate to stop on, to stratify by or to weight a benchmark mean with.
    """
    refused = (
        "--goal benchmark-mean"
        if goal == "benchmark-mean"
        else "--target-width"
        if target_width is not None
        else "--stratify"
        if stratify
        else None
    )
    if refused is not None:
        raise InputError(
            f"{refused} is not built for a checklist rubric labelled point by point (each "
            "item's points are its own: there is no per-criterion estimate); label with goal "
            "agreement, cascade or review and measure with `jurybox agree`",
            field=refused.removeprefix("--").split()[0].replace("-", "_"),
        )


def pick_design(
    design: str,
    records: list[Any],
    rubric_def: Any,
    width: float | None,
    sequence: str,
    store: LabelStore,
    notes: list[str] | None = None,
    warnings: list[str] | None = None,
) -> str:
    """Goal benchmark-mean's design: as given, or (``auto``) the one needing fewer labels.

    ``auto`` picks the design the plan finds needs fewer labels under ``sequence`` (every
    criterion's need, the largest compared); a file that already holds labels keeps the design
    they were chosen by. What to tell the user goes to ``notes`` and ``warnings``.
    """
    notes = [] if notes is None else notes
    warnings = [] if warnings is None else warnings
    from jurybox.calibration.estimates.active import (
        design_of,
        plan_mean,
        pool_model,
        pool_probabilities,
    )
    from jurybox.calibration.estimates.selection import labelled

    lines = [line for line in store.latest().values() if labelled(line)]
    if lines:
        made = design_of(lines) if design == "auto" else design
        if design_of(lines) != made:
            warnings.append(
                f"the labels file holds labels chosen {design_of(lines)}ly: a session mixing "
                "two designs cannot be estimated; label into another file"
            )
        return design_of(lines)
    if design != "auto":
        return design
    if width is None:
        notes.append(
            "--design auto without --target-width: the active choice (give a target width "
            "to compare it with a uniform order)"
        )
        return "active"
    scales = {c.name: c.scale for c in rubric_def.criteria}
    plans = plan_mean(
        [],
        {r.id: r.scores for r in records},
        pool_model(records, scales),
        scales,
        width,
        pool_probabilities(records, scales),
        sequence=True,
        method=sequence,
        compare=True,
    )
    needs = {
        kind: max(
            (row["designs"][kind] or float("inf") for row in plans.values() if "designs" in row),
            default=float("inf"),
        )
        for kind in ("active", "uniform")
    }
    pick = "uniform" if needs["uniform"] < needs["active"] else "active"
    for criterion, row in plans.items():
        if "designs" in row:
            notes.append(f"{criterion}: {row['designs']['why']}")

    def count(n: float) -> str:
        return "more than the pool holds" if n == float("inf") else f"{n:g}"

    notes.append(
        f"--design auto: {pick} (the larger of the criteria's needs: active "
        f"{count(needs['active'])}, uniform {count(needs['uniform'])} labels)"
    )
    return pick


def routed_items(items: Mapping[str, Any], verdicts: Mapping[str, Any]) -> dict[str, str]:
    """Goal review: the items whose verdict a conformal map routed to a human, with the reasons.

    Widest interval first (an item without an interval on a criterion counts as the widest).
    """

    def widest(record: Any) -> float:
        widths = [
            float("inf") if iv is None else iv[1] - iv[0] for iv in (record.interval or {}).values()
        ]
        return max(widths, default=float("inf"))

    routed = [verdicts[i] for i in items if verdicts[i].route is not None]
    routed.sort(key=lambda r: -widest(r))
    return {r.id: "; ".join(r.route.reasons) for r in routed}
