"""Judges against human labels: what ``jurybox agree`` calls.

`agreement_with_humans` is the agreement report (with ``--length-control``, the
length-controlled jury score beside it); `benchmark_means` is ``agree --ppi``, each criterion's
benchmark mean by PPI++.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from jurybox.serving.options import (
    CRITERIA,
    HUMAN,
    JUDGED,
    PROVENANCE,
    RUBRIC,
    SEED,
    VALUE,
    command_line,
    option,
)
from jurybox.serving.runs.inputs import load_inputs, scaled_inputs

if TYPE_CHECKING:
    from jurybox.calibration import AgreementReport, JudgeOutput
    from jurybox.calibration.audits.length_control import LengthControl
    from jurybox.calibration.estimates.active import MeanEstimate
    from jurybox.rubrics import Rubric

Level = Literal["auto", "nominal", "ordinal", "interval", "ratio"]
ValueChoice = Literal["score", "expected"]

_FEW_ITEMS = 10


@dataclass
class Agreement:
    """The agreement of a judged file with human labels, and what to say of it.

    Attributes:
        report: The agreement report (its ``to_text``, ``to_dict`` and ``write_html``).
        output: The verdicts it was measured on.
        rubric: The rubric whose scales were used (None: inferred from the values).
        level: Krippendorff alpha's level of measurement asked for.
        length_control: Per criterion the length-controlled jury score, when asked for.
        notes: Warnings: partial joins, inferred scales, few labelled items.
    """

    report: AgreementReport
    output: JudgeOutput
    rubric: Rubric | None
    level: str
    length_control: list[LengthControl] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The agreement as ``jurybox agree --json`` prints it."""
        payload = self.report.to_dict()
        payload.update(
            rubric=self.rubric.name if self.rubric else None,
            provenance=self.output.provenance,
            level=self.level,
            warnings=self.notes,
        )
        if self.length_control is not None:
            payload["length_control"] = [c.to_dict() for c in self.length_control]
        return payload


@command_line(
    human=HUMAN,
    judged=JUDGED,
    rubric=RUBRIC,
    value=VALUE,
    level=option(
        help="Krippendorff alpha's level of measurement for every alpha in the report. `auto`: "
        "nominal for labelled scales (yes/no), interval for numeric ones."
    ),
    criteria=CRITERIA,
    resamples=option(help="Bootstrap resamples per CI.", min=1),
    confidence=option(help="CI level.", min=0.5, max=0.999),
    provenance=PROVENANCE,
    seed=SEED,
    length_control=option(
        "--length-control",
        type=Path | None,
        help="The predictions file that was judged: also report each "
        "criterion's length-controlled jury score (the judges' length bias, fitted on the "
        "human labels, removed; controlled to the reference answers' median length) and "
        "whether it raises agreement with the humans under 5-fold cross-validation.",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
)
def agreement_with_humans(
    human: str | Path,
    judged: str | Path,
    *,
    rubric: str | None = None,
    value: ValueChoice = "score",
    level: Level = "auto",
    criteria: Sequence[str] = (),
    resamples: int = 1000,
    confidence: float = 0.95,
    provenance: str | None = None,
    seed: int = 0,
    length_control: str | Path | None = None,
) -> Agreement:
    """Agreement between judges and human labels, with bootstrap CIs over items.

    Per criterion: human-human alpha (the ceiling a judge can reach); each judge and the jury's
    aggregated score against the human consensus; every pair of judges, and alpha across all
    judges. A statistic the data cannot define is undefined with the reason.

    Checklist verdicts judged point by point take point labels (``p1``, ``p2`` ... yes/no, an
    optional ``score``; `jurybox.calibration.data.points`): the report is per point, pooled
    over items as ``met``, and per item ``score`` (`point_agreement`).

    Args:
        human: Human labels: JSONL or CSV with an id column, an optional rater column and one
            column per criterion.
        judged: Verdicts written by ``jurybox judge`` (a JSONL file or a directory of shards).
        rubric: A rubric name or YAML file giving each criterion's scale (default: the
            verdicts').
        value: Each vote's ``score`` or its logprob-``expected`` score.
        level: Krippendorff alpha's level of measurement (``auto``: nominal for labelled
            scales, interval for numeric ones).
        criteria: Only these criteria (default: every judged criterion the labels have).
        resamples: Bootstrap resamples per CI.
        confidence: The CIs' level.
        provenance: Only the verdicts with this provenance hash.
        seed: The bootstrap's random seed.
        length_control: The predictions file that was judged: also each criterion's
            length-controlled jury score, fitted on the human labels.

    Returns:
        The report, the rubric and the notes to show.

    Raises:
        InputError: The labels or verdicts cannot be used, nothing joins, or length control
            without a rubric jurybox knows.
    """
    from jurybox.calibration import agreement_report
    from jurybox.calibration.data.points import point_judged

    output, rubric_def, notes = load_inputs(Path(judged), rubric, provenance, pairwise=True)
    if point_judged(output):
        if length_control is not None:
            from jurybox.rubrics.errors import InputError

            raise InputError(
                "--length-control is not built for checklist verdicts (judged point by point)",
                field="length_control",
            )
        report = point_agreement(
            Path(human),
            output,
            value=value,
            level=level,
            n_resamples=resamples,
            confidence=confidence,
            seed=seed,
        )
        notes += report.joined.summary.warnings() if report.joined else []
        notes += _point_notes(report)
        return Agreement(report, output, rubric_def, level, None, notes)
    report = agreement_report(
        human,
        output,
        scales=rubric_def,
        value=value,
        criteria=list(criteria) or None,
        level=level,
        n_resamples=resamples,
        confidence=confidence,
        seed=seed,
    )
    controls = (
        _length_control(
            Path(length_control), output, report, rubric_def, resamples, confidence, seed
        )
        if length_control is not None
        else None
    )
    notes += report.joined.summary.warnings() if report.joined else []
    for crit in report.criteria.values():
        if crit.n_items < _FEW_ITEMS:
            items = "item" if crit.n_items == 1 else "items"
            notes.append(
                f"{crit.criterion}: only {crit.n_items} labelled {items} joined; the CIs are wide"
            )
            break
    return Agreement(report, output, rubric_def, level, controls, notes)


def point_agreement(
    human: Path,
    output: JudgeOutput,
    *,
    value: ValueChoice = "score",
    level: str = "auto",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AgreementReport:
    """Agreement on checklist verdicts: per point (pooled, ``met``) and per item ``score``.

    The point labels file and the pooling are `jurybox.calibration.data.points`'; each part is
    the ordinary report (`agreement_report`) on the pooled points and on the items, merged;
    ``met``'s intervals resample items, each with all its points (`_by_item`).
    """
    from jurybox.calibration import agreement_report
    from jurybox.calibration.data.points import (
        MET,
        MET_SCALE,
        SCORE,
        SCORE_SCALE,
        has_scores,
        item_output,
        load_point_labels,
        pooled_output,
    )
    from jurybox.calibration.reports.report import AgreementReport as Report

    labels = load_point_labels(human, output)
    settings: dict[str, Any] = {
        "value": value,
        "level": level,
        "n_resamples": n_resamples,
        "confidence": confidence,
        "seed": seed,
    }
    met = agreement_report(labels.met, pooled_output(output), scales={MET: MET_SCALE}, **settings)
    if met.joined is not None and MET in met.criteria:
        boot = {"n_resamples": n_resamples, "confidence": confidence, "seed": seed}
        met.criteria[MET] = _by_item(met.joined.criteria[MET], met.criteria[MET], level, boot)
    criteria = dict(met.criteria)
    join_summary = dict(met.join_summary)
    join_text = f"points: {met.join_text}"
    joined = met.joined
    if has_scores(labels):
        score = agreement_report(
            labels.score, item_output(output), scales={SCORE: SCORE_SCALE}, **settings
        )
        criteria.update(score.criteria)
        join_summary["item_scores"] = {
            **score.join_summary,
            "from_point_labels": labels.from_points,
            "from_score_column": labels.from_column,
        }
        join_text += f"; item scores: {score.join_text}"
        if joined is not None and score.joined is not None:
            joined.criteria.update(score.joined.criteria)
    sources = {"human_labels": str(human), "judge_output": output.source}
    return Report(
        criteria, join_summary, join_text, value, confidence, n_resamples, sources, joined
    )


def _by_item(data: Any, found: Any, level: str, boot: dict[str, Any]) -> Any:
    """``met``'s statistics again with intervals that resample items, not points.

    The points of an item are judged, and labelled, together, so they are not independent:
    each bootstrap resample draws items (clusters) with replacement and takes all their
    labelled points; the values are the report's, only the intervals change.
    """
    import dataclasses
    from itertools import combinations

    import numpy as np

    from jurybox.calibration import bootstrap_ci
    from jurybox.calibration.reports.report import (
        JURY,
        default_level,
        judge_human_stats,
        judge_judge_stats,
    )
    from jurybox.calibration.stats.alpha import Level as AlphaLevel
    from jurybox.calibration.stats.alpha import krippendorff_alpha

    kind = cast("AlphaLevel", default_level(data) if level == "auto" else level)
    items = np.array([i.rpartition("::")[0] for i in data.ids])
    method = "percentile bootstrap over items (all of an item's points together)"

    def clustered(fn: Any, keep: Any, *arrays: Any) -> Any:
        _, group = np.unique(items[keep], return_inverse=True)
        members = [np.flatnonzero(group == g) for g in range(int(group.max(initial=-1)) + 1)]
        kept = [a[..., keep] for a in arrays]

        def statistic(drawn: Any) -> Any:
            idx = np.concatenate([members[int(g)] for g in drawn] or [np.array([], dtype=int)])
            return fn(*(a[..., idx] for a in kept))

        got = bootstrap_ci(statistic, np.arange(len(members)), **boot)
        if isinstance(got, dict):
            return {k: v.with_ci(v.ci, ci_method=method) for k, v in got.items()}
        return got.with_ci(got.ci, ci_method=method)

    def alpha(m: Any) -> Any:
        return krippendorff_alpha(data.scale.snap(m) if kind == "nominal" else m, kind)

    everything = np.ones(len(data.ids), dtype=bool)
    human_human = dict(found.human_human)
    if data.human.shape[0] >= 2:
        human_human = {f"alpha[{kind}]": clustered(alpha, everything, data.human)}
    h_mean, h_ref = data.human_mean, data.human_reference
    labelled = ~np.isnan(h_mean)
    fn = judge_human_stats(data, kind)
    systems = {**data.judges, JURY: data.jury}
    judge_human = {
        name: clustered(fn, labelled & ~np.isnan(x), x, h_ref, h_mean)
        for name, x in systems.items()
    }
    pair = judge_judge_stats(data, kind)
    judge_judge = {}
    for a, b in combinations(sorted(data.judges), 2):
        xa, xb = data.judges[a], data.judges[b]
        judge_judge[f"{a} | {b}"] = clustered(pair, ~(np.isnan(xa) | np.isnan(xb)), xa, xb)
    judges_alpha = found.judges_alpha
    if len(data.judges) >= 2:
        stack = np.vstack([data.judges[j] for j in sorted(data.judges)])
        judges_alpha = clustered(alpha, everything, stack)
    return dataclasses.replace(
        found,
        human_human=human_human,
        judge_human=judge_human,
        judge_judge=judge_judge,
        judges_alpha=judges_alpha,
    )


def refuse_points(output: JudgeOutput, what: str) -> None:
    """Refuse ``what`` on checklist verdicts judged point by point, which it is not built for.

    Raises:
        InputError: The verdicts are such.
    """
    from jurybox.calibration.data.points import point_judged
    from jurybox.rubrics.errors import InputError

    if point_judged(output):
        raise InputError(
            f"{what} is not built for checklist verdicts judged point by point; "
            "`jurybox agree` (per point and item score) and `jurybox calibrate` (met) are"
        )


def _point_notes(report: AgreementReport) -> list[str]:
    """What to say of an agreement per point: what is pooled, how the intervals resample."""
    notes = []
    met = report.criteria.get("met")
    if met is not None:
        ids = report.joined.criteria["met"].ids if report.joined else []
        items = {i.rpartition("::")[0] for i in ids}
        notes.append(
            f"met: {met.n_items} labelled points of {len(items)} items pooled (a point is "
            "its item's, never joined by key across items); the intervals resample items, "
            "each with all its points (its points are not independent)"
        )
    if "score" not in report.criteria:
        notes.append(
            "score: no rater labelled every point of an item or gave a score column: no "
            "agreement on item scores"
        )
    return notes


def _length_control(
    predictions: Path,
    output: JudgeOutput,
    report: AgreementReport,
    rubric_def: Rubric | None,
    resamples: int,
    confidence: float,
    seed: int,
) -> list[LengthControl]:
    """Per criterion the length-controlled jury score, fitted on the labels the report joined."""
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.lengths import length_controls

    if rubric_def is None:
        raise InputError("the verdicts name no rubric jurybox knows: give --rubric")
    if report.joined is None:
        return []
    return length_controls(
        predictions,
        output,
        rubric_def,
        human=report.joined,
        resamples=resamples,
        confidence=confidence,
        seed=seed,
    )


@dataclass
class BenchmarkMeans:
    """Each criterion's benchmark mean (the mean human label over every judged item).

    Attributes:
        estimates: Criterion -> its estimate, or why there is none.
        design: ``active`` when labels were chosen for the benchmark mean, else ``uniform``.
        pool: How many judged items the mean is over.
        confidence: The intervals' level.
        notes: Warnings: label rows naming items without a verdict, inferred scales.
    """

    estimates: dict[str, MeanEstimate | str]
    design: str
    pool: int
    confidence: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The estimates as ``jurybox agree --ppi --json`` prints them."""
        from jurybox.calibration.estimates.active import MeanEstimate

        return {
            "design": self.design,
            "pool": self.pool,
            "confidence": self.confidence,
            "warnings": self.notes,
            "criteria": {
                c: e.to_dict() if isinstance(e, MeanEstimate) else {"estimate": None, "reason": e}
                for c, e in self.estimates.items()
            },
        }


def benchmark_means(
    human: str | Path,
    judged: str | Path,
    *,
    rubric: str | None = None,
    provenance: str | None = None,
    criteria: Sequence[str] = (),
    confidence: float = 0.95,
) -> BenchmarkMeans:
    """Each criterion's benchmark mean by PPI++, with its CI (``jurybox agree --ppi``).

    The jury's scores on all items corrected by the labelled ones: the normal (Student)
    interval once 5 labelled items are another level than the jury's score, before that the
    betting interval at that count. Labels chosen actively (``jurybox label --goal
    benchmark-mean``) are weighted by their inclusion probabilities, others taken as a simple
    random sample.

    Args:
        human: Human labels (the labels file a labelling page writes, or any labels file).
        judged: Verdicts written by ``jurybox judge`` for every item of the benchmark.
        rubric: A rubric name or YAML file (default: the verdicts').
        provenance: Only the verdicts with this provenance hash.
        criteria: Only these criteria (default: every criterion).
        confidence: The intervals' level.

    Returns:
        Each criterion's estimate (or why there is none), the design and the notes.

    Raises:
        InputError: The labels or verdicts cannot be used.
    """
    from jurybox.calibration.data.labels import label_rows
    from jurybox.calibration.estimates.active import (
        design_of,
        mean_estimates,
        pool_model,
        pool_probabilities,
    )

    output, _, notes, scales = scaled_inputs(Path(judged), rubric, provenance, list(criteria))
    refuse_points(output, "--ppi")
    lines = [row for row in label_rows(Path(human)) if row.get("id") is not None]
    pool = {r.id: r.scores for r in output.records}
    strays = sum(str(row["id"]) not in pool for row in lines)
    if strays:
        notes.append(f"{strays} label row(s) name items without a verdict: left out")
    design = design_of(lines)
    result = mean_estimates(
        lines,
        pool,
        scales,
        confidence=confidence,
        criteria=list(criteria) or None,
        model=pool_model(output.records, scales),
        probabilities=pool_probabilities(output.records, scales) if design == "active" else None,
    )
    return BenchmarkMeans(dict(result), design, len(pool), confidence, notes)
