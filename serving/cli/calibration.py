"""``jurybox agree`` and ``jurybox calibrate``: judges against human labels, from the shell.

Both read a human labels file (format in `jurybox.calibration.data.labels`) and the JSONL
written by ``jurybox judge``, join them on ``id`` and take each criterion's scale from the rubric
the verdicts name (``--rubric`` overrides it), so labels off the scale are rejected rather than
silently widening it. Bad input ends with exit code 2 and a message naming the file, row and
field; partial joins and undefined statistics are reported, never hidden or printed as nan.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from jurybox.serving.cli.console import dumps, fail, note, reported, warn
from jurybox.serving.runs.inputs import load_inputs

if TYPE_CHECKING:
    from jurybox.calibration import JudgeOutput
    from jurybox.rubrics import Rubric
    from jurybox.serving.runs.calibrate import FittedMap

Level = Literal["auto", "nominal", "ordinal", "interval", "ratio"]
ValueChoice = Literal["score", "expected"]

_FEW_ITEMS = 10

HumanArg = Annotated[
    Path,
    typer.Argument(
        help="Human labels: JSONL or CSV with an id column, an optional rater column (several rows "
        "per id = several raters) and one column per criterion (scale value or label).",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
]
JudgedArg = Annotated[
    Path,
    typer.Argument(
        help="Verdicts written by `jurybox judge` (a JSONL file, or a directory of its shards), "
        "joined with the labels on id.",
        exists=True,
        show_default=False,
    ),
]
RubricOpt = Annotated[
    str | None,
    typer.Option(
        "--rubric",
        "-r",
        help="Rubric name or YAML file giving each criterion's scale. Default: the rubric named in "
        "the verdicts.",
    ),
]
ValueOpt = Annotated[
    ValueChoice,
    typer.Option(
        help="Judge value to use: each vote's `score` (the answer on the scale) or its logprob-"
        "`expected` score (continuous; finer-grained when judges give few distinct scores)."
    ),
]
CriterionOpt = Annotated[
    list[str],
    typer.Option(
        "--criterion",
        "-c",
        help="Only this criterion (repeatable). Default: every judged "
        "criterion the labels file has.",
    ),
]
ProvenanceOpt = Annotated[
    str | None,
    typer.Option(
        help="Use only the verdicts with this provenance hash (for a file holding several "
        "rubric/jury configurations)."
    ),
]
SeedOpt = Annotated[int, typer.Option(help="Random seed (bootstrap resamples, CV folds).")]


# --------------------------------------------------------------------------- agree


def agree(
    human: HumanArg,
    judged: JudgedArg,
    rubric: RubricOpt = None,
    value: ValueOpt = "score",
    level: Annotated[
        Level,
        typer.Option(
            help="Krippendorff alpha's level of measurement for every alpha in the report. `auto`: "
            "nominal for labelled scales (yes/no), interval for numeric ones."
        ),
    ] = "auto",
    criterion: CriterionOpt = [],
    json_out: Annotated[
        bool,
        typer.Option("--json", help="Print the results as JSON (stdout) instead of the table."),
    ] = False,
    html: Annotated[
        Path | None,
        typer.Option(
            help="Also write a self-contained HTML report with plots (alpha forest plot, confusion "
            "matrices, reliability diagrams) to this file.",
            dir_okay=False,
        ),
    ] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples per CI.", min=1)] = 1000,
    confidence: Annotated[float, typer.Option(help="CI level.", min=0.5, max=0.999)] = 0.95,
    provenance: ProvenanceOpt = None,
    seed: SeedOpt = 0,
    ppi: Annotated[
        bool,
        typer.Option(
            "--ppi",
            help="Instead of agreement: each criterion's benchmark mean (the mean human "
            "label over every judged item) by PPI++, the jury's scores on all items "
            "corrected by the labelled ones, with its CI: the normal (Student) "
            "interval once 5 labelled items are another level than the jury's "
            "score, before that the betting interval at that count (valid for any "
            "jury; a sure jury's rare errors may not be among the labels yet); "
            "labels chosen actively (jurybox label --goal benchmark-mean) weighted by "
            "their inclusion probabilities, others taken as a simple random "
            "sample.",
        ),
    ] = False,
    length_control: Annotated[
        Path | None,
        typer.Option(
            "--length-control",
            help="The predictions file that was judged: also report each "
            "criterion's length-controlled jury score (the judges' length bias, fitted on the "
            "human labels, removed; controlled to the reference answers' median length) and "
            "whether it raises agreement with the humans under 5-fold cross-validation.",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Agreement between judges and human labels, with bootstrap CIs over items.

    Per criterion: human-human alpha (the ceiling a judge can reach); each judge and the jury's
    aggregated score against the human consensus (alpha, quadratic-weighted kappa, Spearman,
    exact and adjacent agreement, MAE; kappa and Gwet's AC1 for labelled scales); every pair
    of judges, and alpha across all judges. A statistic the data cannot define (one rater, a
    constant column) is shown as undefined with the reason. Ids that do not join are counted
    and listed.
    """
    from jurybox.calibration import agreement_report

    if ppi:
        _ppi(human, judged, rubric, provenance, criterion, confidence, json_out)
        return
    with reported():
        output, rubric_def, notes = load_inputs(judged, rubric, provenance, pairwise=True)
        report = agreement_report(
            human,
            output,
            scales=rubric_def,
            value=value,
            criteria=criterion or None,
            level=level,
            n_resamples=resamples,
            confidence=confidence,
            seed=seed,
        )
        controls = (
            _length_control(length_control, output, report, rubric_def, resamples, confidence, seed)
            if length_control is not None
            else []
        )
    notes += report.joined.summary.warnings() if report.joined else []
    for crit in report.criteria.values():
        if crit.n_items < _FEW_ITEMS:
            items = "item" if crit.n_items == 1 else "items"
            notes.append(
                f"{crit.criterion}: only {crit.n_items} labelled {items} joined; the CIs are wide"
            )
            break
    for message in notes:
        warn(message)
    if html is not None:
        try:
            report.write_html(html)
        except OSError as exc:
            raise fail(f"cannot write {html}: {exc.strerror or exc}") from None
        note(f"wrote {html}")
    if json_out:
        payload = report.to_dict()
        payload.update(
            rubric=rubric_def.name if rubric_def else None,
            provenance=output.provenance,
            level=level,
            warnings=notes,
        )
        if length_control is not None:
            payload["length_control"] = [c.to_dict() for c in controls]
        typer.echo(dumps(payload))
    else:
        typer.echo(report.to_text())
        if controls:
            typer.echo("\nLength control (the jury's score, length in words):")
            for c in controls:
                typer.echo(("  + " if c.raises_agreement else "    ") + c.words())


def _length_control(
    predictions: Path,
    output: Any,
    report: Any,
    rubric_def: Any,
    resamples: int,
    confidence: float,
    seed: int,
) -> list[Any]:
    """``agree --length-control``: per criterion the length-controlled jury score.

    It is fitted on the human labels the report joined.
    """
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


def _ppi(
    human: Path,
    judged: Path,
    rubric: str | None,
    provenance: str | None,
    criteria: list[str],
    confidence: float,
    json_out: bool,
) -> None:
    """``agree --ppi``: the benchmark mean per criterion (jurybox.calibration.estimates.active)."""
    from jurybox.calibration.data.labels import label_rows
    from jurybox.calibration.estimates.active import (
        MeanEstimate,
        design_of,
        mean_estimates,
        pool_model,
        pool_probabilities,
    )

    with reported():
        output, _, notes, scales = _scaled_inputs(judged, rubric, provenance, criteria)
        lines = [row for row in label_rows(human) if row.get("id") is not None]
        pool = {r.id: r.scores for r in output.records}
        strays = sum(str(row["id"]) not in pool for row in lines)
        if strays:
            notes.append(f"{strays} label row(s) name items without a verdict: left out")
        active = design_of(lines) == "active"
        result = mean_estimates(
            lines,
            pool,
            scales,
            confidence=confidence,
            criteria=criteria or None,
            model=pool_model(output.records, scales),
            probabilities=pool_probabilities(output.records, scales) if active else None,
        )
    for message in notes:
        warn(message)
    if json_out:
        typer.echo(
            dumps(
                {
                    "design": design_of(lines),
                    "pool": len(pool),
                    "confidence": confidence,
                    "warnings": notes,
                    "criteria": {
                        c: e.to_dict()
                        if isinstance(e, MeanEstimate)
                        else {"estimate": None, "reason": e}
                        for c, e in result.items()
                    },
                }
            )
        )
        return
    for c, e in result.items():
        typer.echo(str(e) if isinstance(e, MeanEstimate) else f"{c}: undefined ({e})")
        for message in e.notes if isinstance(e, MeanEstimate) else ():
            typer.echo(f"  note: {message}")


# --------------------------------------------------------------------------- calibrate


def _calibrate_conformal(
    human: Path,
    judged: Path,
    out: Path,
    rubric: str | None,
    provenance: str | None,
    alpha: float,
    group: str | None,
    criteria: list[str],
    folds: int,
    seed: int,
    json_out: bool,
    cover: str = "every-rater",
) -> None:
    """``calibrate --conformal``: a conformal map (jurybox.calibration.maps.conformal).

    Labels chosen actively for the benchmark mean are refused (naming the row).
    """
    from jurybox.calibration.data.labels import label_groups, label_rows
    from jurybox.calibration.maps.conformal import fit_conformal

    with reported():
        output, rubric_def, notes, scales = _scaled_inputs(judged, rubric, provenance, criteria)
        if criteria:
            scales = {c: scales[c] for c in criteria}
        groups = label_groups(human, group) if group else None
        cmap = fit_conformal(
            label_rows(human, active=False),
            output.records,
            scales,
            alpha=alpha,
            groups=groups,
            group_column=group,
            provenance=output.provenance,
            rubric=rubric_def.name,
            folds=folds,
            seed=seed,
            cover=cover,
        )
        cmap.save(out)
    for name, row in cmap.report.items():
        if "note" in row:
            notes.append(f"{name}: {row['note']}")
        for g, got in (row.get("cv_coverage_by_group") or {}).items():
            if got["labelled"] < math.ceil(1 / alpha) - 1:
                notes.append(
                    f"{name}, group {g}: {got['labelled']} labelled items, too few to "
                    f"check its {1 - alpha:.0%} coverage (its interval is the whole "
                    "scale)"
                )
    for message in notes:
        warn(message)
    if json_out:
        typer.echo(dumps({**cmap.to_dict(), "out": str(out), "warnings": notes}))
        return
    whose = (
        "every rater's label" if cover == "every-rater" else "the label of a rater chosen at random"
    )
    typer.echo(
        f"conformal map for {rubric_def.name}, alpha {alpha:g} (an item's interval holds "
        f"{whose} with probability >= {1 - alpha:.0%}, over items: not among the narrow "
        f"ones alone), written to {out}"
    )
    for name, row in cmap.report.items():
        _conformal_row(name, row)


def _conformal_row(name: str, row: dict[str, Any]) -> None:
    """One criterion of ``calibrate --conformal``'s report in words."""
    width = "-" if row["mean_width"] is None else f"{row['mean_width']:.2f}"
    single = "-" if row["single_level_share"] is None else f"{row['single_level_share']:.0%}"
    typer.echo(
        f"  {name}: {row['labelled']} labelled items; {row['cv_folds']}-fold "
        f"cross-validated coverage {row['cv_coverage']:.1%}; mean interval width "
        f"{width} over the judged items, a single level on {single}"
    )
    for g, got in (row.get("cv_coverage_by_group") or {}).items():
        typer.echo(f"    group {g}: {got['labelled']} labelled, coverage {got['coverage']:.1%}")
    other = row.get("other_cover")
    if other is not None:
        typer.echo(
            f"    {row['raters_per_item']:.1f} raters per item; --cover {other['covers']} "
            "would give a mean width of "
            + ("-" if other["mean_width"] is None else f"{other['mean_width']:.2f}")
        )
    kept = "; ".join(
        f"W={r['route_width']:g}: {r['kept']:.0%} kept, covered "
        + ("-" if r["coverage"] is None else f"{r['coverage']:.1%}")
        for r in row["cv_by_route_width"]
    )
    typer.echo(f"    cross-validated, the items --route-width W keeps: {kept}")


def calibrate(
    human: HumanArg,
    judged: JudgedArg,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Where to write the map: .yaml/.yml for YAML, JSON otherwise. Apply "
            "it with `jurybox judge ... --calibration MAP`.",
            dir_okay=False,
            show_default=False,
        ),
    ],
    rubric: RubricOpt = None,
    method: Annotated[
        Literal["isotonic", "ordinal"],
        typer.Option(
            help="Per-judge map onto the human scale: `isotonic` (monotone step function) or "
            "`ordinal` (cumulative-logit model; smoother with few labels)."
        ),
    ] = "isotonic",
    value: ValueOpt = "score",
    output_kind: Annotated[
        Literal["clip", "round"],
        typer.Option(
            "--output",
            help="Calibrated value: `clip` keeps the continuous value within the "
            "scale, `round` snaps it to the nearest scale value.",
        ),
    ] = "clip",
    folds: Annotated[
        int, typer.Option(help="Cross-validation folds for the before/after report.", min=2)
    ] = 5,
    criterion: CriterionOpt = [],
    provenance: ProvenanceOpt = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the fit (provenance, criteria, cross-validation) as JSON."
        ),
    ] = False,
    seed: SeedOpt = 0,
    cascade: Annotated[
        bool,
        typer.Option(
            "--cascade",
            help="Fit the thresholds of a cascaded jury (--jury, with stages) instead "
            "of a map: JUDGED holds that jury's verdicts on the labelled items, "
            "every judge on every item (its stages without thresholds); --out "
            "gets the jury with its thresholds.",
        ),
    ] = False,
    jury: Annotated[
        str | None,
        typer.Option(
            "--jury",
            "-j",
            help="With --cascade: the jury (name or YAML file) whose stages to fit.",
            show_default=False,
        ),
    ] = None,
    target_agreement: Annotated[
        float | None,
        typer.Option(
            help="With --cascade: the agreement with the human consensus the cascade must reach "
            "(share of items within the jury's confidence.tolerance on every criterion).",
            min=0.0,
            max=1.0,
            show_default=False,
        ),
    ] = None,
    risk: Annotated[
        float,
        typer.Option(
            help="With --cascade: the allowed probability that the cascade's true agreement is "
            "below the target.",
            min=0.0,
            max=1.0,
        ),
    ] = 0.1,
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            help="With --cascade: a column of HUMAN naming each item's group (a task, a "
            "scenario, a domain): report each group's agreement at the fitted "
            "threshold and warn where one is shown to fall below the target (the "
            "guarantee is over all items, not per group). With --conformal: one "
            "threshold per group of that column, so that the coverage holds within "
            "each group.",
            show_default=False,
        ),
    ] = None,
    by_group: Annotated[
        str | None,
        typer.Option(
            "--by-group",
            help="With --cascade: fit one threshold per group of this column of HUMAN, "
            "each on its group's items at --risk split equally among the groups, "
            "so every group's guarantee holds at once; writes OUT.<group>.yaml "
            "per group.",
            show_default=False,
        ),
    ] = None,
    conformal: Annotated[
        bool,
        typer.Option(
            "--conformal",
            help="Fit a conformal map instead: per criterion, the threshold that "
            "gives each judged item an interval of levels holding a human's "
            "label with probability at least 1 - alpha (apply it with `jurybox "
            "judge --conformal OUT`). With --group COL, one threshold per group "
            "of that column of HUMAN.",
        ),
    ] = False,
    alpha: Annotated[
        float,
        typer.Option(
            help="With --conformal: the allowed probability that a human's label falls outside "
            "an item's interval.",
            min=0.001,
            max=0.5,
        ),
    ] = 0.1,
    cover: Annotated[
        Literal["every-rater", "one-rater"],
        typer.Option(
            help="With --conformal, where items have several raters: an interval holds every "
            "rater's label (`every-rater`), or the label of a rater chosen at random "
            "(`one-rater`: narrower where raters disagree), with probability >= 1 - alpha."
        ),
    ] = "every-rater",
) -> None:
    """Fit a calibration map from human labels and judge verdicts, and show whether it helps.

    Per criterion, each judge's value is mapped onto the human scale and the calibrated jury
    value weights judges by their out-of-fold error (labelled scales: a Dawid-Skene model).
    The k-fold cross-validated before/after comparison with the human consensus (MAE, bias,
    alpha, with a bootstrap CI of the improvement) says whether applying the map is worth it.
    The map records the provenance hash of the verdicts, and `jurybox judge --calibration`
    refuses it for any other rubric/jury configuration.

    With --cascade, fits the confidence threshold of a cascaded jury (cheap stages first, the
    rest escalated) so that with probability at least 1 - risk its agreement with the humans is
    at least --target-agreement, over items like the labelled ones as a whole (not per group;
    --group COL shows each group, --by-group COL fits each on its own), reports in-sample the
    share each stage decides and the judge calls saved, and writes the jury with its
    thresholds; a target no threshold can be shown to reach is refused.

    With --conformal, fits per-item intervals of levels (split conformal) and reports their
    cross-validated coverage: overall, per --group, and among the items each `jurybox judge
    --route-width W` would keep (the guarantee is over all items, so the kept narrow ones can
    be covered less). Labels chosen actively for the benchmark mean are refused.
    """
    from jurybox.serving.runs.calibrate import fit_map

    if conformal:
        if cascade or by_group or target_agreement is not None or jury is not None:
            raise fail("--conformal fits intervals, --cascade a cascaded jury: give one")
        return _calibrate_conformal(
            human,
            judged,
            out,
            rubric,
            provenance,
            alpha,
            group,
            criterion,
            folds,
            seed,
            json_out,
            cover,
        )
    if cover != "every-rater":
        raise fail("--cover is for --conformal (what its intervals hold)")
    if cascade:
        if target_agreement is None or jury is None:
            raise fail(
                "--cascade needs --jury (the jury with stages) and --target-agreement (e.g. 0.9)"
            )
        if group is not None and by_group is not None:
            raise fail(
                "--group reports the groups of one fit and --by-group fits one per group: "
                "give one of them"
            )
        if by_group is not None:
            return _calibrate_cascade_by_group(
                human, judged, out, rubric, jury, target_agreement, risk, json_out, by_group
            )
        return _calibrate_cascade(
            human, judged, out, rubric, jury, target_agreement, risk, json_out, group
        )
    if target_agreement is not None or jury is not None or group or by_group:
        raise fail(
            "--target-agreement, --jury, --group and --by-group are for --cascade "
            "(fitting a cascaded jury)"
        )
    with reported():
        fitted = fit_map(
            human,
            judged,
            rubric=rubric,
            method=method,
            value=value,
            output=output_kind,
            folds=folds,
            criteria=criterion,
            provenance=provenance,
            seed=seed,
        )
    _show_map(fitted, out, rubric, json_out)


def _show_map(fitted: FittedMap, out: Path, rubric: str | None, json_out: bool) -> None:
    """Save a fitted map at ``out``, then say what it is and whether to apply it."""
    try:
        fitted.map.save(out)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}") from None
    for message in fitted.notes:
        warn(message)
    if json_out:
        typer.echo(dumps(fitted.to_dict(out)))
    else:
        typer.echo(fitted.map.describe())
        if fitted.aggregations:
            typer.echo(
                "jury aggregation (the raw scores, no map): the plain mean, weights from "
                "the judges' error covariance, Dawid-Skene"
            )
            for a in fitted.aggregations:
                typer.echo(("  + " if a.better else "    ") + a.words())
            if any(a.better for a in fitted.aggregations):
                typer.echo(
                    "  (+: use the weights as each judge's `weight` with aggregation "
                    "method `weighted` in the jury file)"
                )
    note(fitted.advice(out, rubric))


def _cascade_inputs(
    judged: Path, rubric: str | None, jury_ref: str
) -> tuple[Any, Any, Any, list[str]]:
    from jurybox.judges import load_jury_spec
    from jurybox.rubrics.errors import InputError

    output, rubric_def, notes = load_inputs(judged, rubric, None)
    if rubric_def is None:
        raise InputError(
            "--cascade needs the rubric the verdicts were judged with (--rubric NAME_OR_FILE)"
        )
    return output, rubric_def, load_jury_spec(jury_ref), notes


def _calibrate_cascade(
    human: Path,
    judged: Path,
    out: Path,
    rubric: str | None,
    jury_ref: str,
    target: float,
    risk: float,
    json_out: bool,
    group: str | None,
) -> None:
    from jurybox.calibration import label_groups
    from jurybox.serving.runs.cascade_fit import describe, fit_cascade, group_results

    with reported():
        output, rubric_def, jury, notes = _cascade_inputs(judged, rubric, jury_ref)
        groups = label_groups(human, group) if group is not None else None
        fit, data, fitted = fit_cascade(
            human, output, rubric_def, jury, groups=groups, target_agreement=target, risk=risk
        )
    for message in notes:
        warn(message)
    by_group = group_results(fit, data)
    for g in by_group:
        if g.below_target:
            warn(
                f"group {g.group}: the cascade agrees with the humans on {g.agreement:.3f} of "
                f"its {g.n} labelled items (at most {g.upper_bound:.3f} with probability "
                f"{1 - risk:g}), below the target {target:g}: the guarantee is over all items, "
                f"not this group; --by-group {group} fits each group on its own"
            )
    if json_out:
        typer.echo(
            dumps(
                {
                    "jury": jury.name,
                    "rubric": rubric_def.name,
                    **fit.to_dict(),
                    "stage_judges": data.stage_judges,
                    "criteria": data.criteria,
                    "excluded": data.excluded,
                    "unmeasured": data.unmeasured,
                    "groups": [g.to_dict() for g in by_group],
                    "out": str(out) if fitted else None,
                }
            )
        )
    else:
        typer.echo(describe(fit, data))
    if fitted is None:
        note(
            "no threshold lets an earlier stage decide while keeping the guarantee and saving "
            f"judge calls: the whole jury on every item is what meets it; {out} was not written"
        )
        return
    _write_fitted(
        fitted,
        jury,
        out,
        f"on {fit.n} labelled items ({human.name}): "
        f"{fit.certified}; judge calls saved on them {fit.calls_saved:.1%}",
    )
    note(
        f"wrote {out}; judge with it: jurybox judge PREDICTIONS --rubric "
        f"{rubric or rubric_def.name} --jury {out}"
    )


def _calibrate_cascade_by_group(
    human: Path,
    judged: Path,
    out: Path,
    rubric: str | None,
    jury_ref: str,
    target: float,
    risk: float,
    json_out: bool,
    column: str,
) -> None:
    import re

    from jurybox.calibration import label_groups
    from jurybox.serving.runs.cascade_fit import describe, fit_by_group

    with reported():
        output, rubric_def, jury, notes = _cascade_inputs(judged, rubric, jury_ref)
        fits = fit_by_group(
            human,
            output,
            rubric_def,
            jury,
            label_groups(human, column),
            target_agreement=target,
            risk=risk,
        )
    for message in notes:
        warn(message)
    share = risk / len(fits)
    report: dict[str, Any] = {}
    texts = [
        f"{len(fits)} groups of {column}, each fitted on its own items at risk "
        f"{risk:g} / {len(fits)} = {share:.4g}: with probability >= {1 - risk:g} every "
        "group's cascade meets the target at once"
    ]
    written = []
    for name, (fit, data, fitted, refused) in fits.items():
        path = out.with_name(f"{out.stem}.{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}{out.suffix}")
        if fit is None:
            texts.append(f"group {name} ({len(data.ids)} labelled items): refused: {refused}")
            report[name] = {"refused": refused, "n": len(data.ids), "out": None}
            continue
        texts.append(
            describe(
                fit,
                data,
                title=f"group {name}: cascade of "
                f"{len(data.stage_judges)} stages on {fit.n} "
                "labelled items",
                population=f"over the items of group {name}",
            )
        )
        report[name] = {**fit.to_dict(), "out": str(path) if fitted else None}
        if fitted is not None:
            _write_fitted(
                fitted,
                jury,
                path,
                f"for group {name} of {column}, on {fit.n} "
                f"labelled items ({human.name}): {fit.certified} (risk {risk:g} "
                f"split among {len(fits)} groups); judge calls saved on them "
                f"{fit.calls_saved:.1%}",
            )
            written.append(str(path))
    if json_out:
        typer.echo(
            dumps(
                {
                    "jury": jury.name,
                    "rubric": rubric_def.name,
                    "group_column": column,
                    "risk": risk,
                    "risk_per_group": share,
                    "groups": report,
                }
            )
        )
    else:
        typer.echo("\n".join(texts))
    if all(fit is None for fit, *_ in fits.values()):
        raise fail(
            "no group's target can be certified with its labels (see above); nothing was written"
        )
    note(
        f"wrote {', '.join(written) if written else 'nothing'} (a group without an early exit "
        "that keeps its guarantee and saves calls is judged by the whole jury); judge each "
        "group's items with its own jury file"
    )


def _write_fitted(fitted: Any, jury: Any, out: Path, what: str) -> None:
    import yaml

    summary = f"thresholds fitted by `jurybox calibrate --cascade` {what}"
    fitted = fitted.model_copy(
        update={
            "description": (
                f"{jury.description.strip()}\n{summary}" if jury.description.strip() else summary
            )
        }
    )
    text = yaml.safe_dump(
        fitted.model_dump(mode="json", exclude_defaults=True), sort_keys=False, width=100
    )
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------- shared


def _scaled_inputs(
    judged: Path, rubric: str | None, provenance: str | None, criteria: list[str]
) -> tuple[JudgeOutput, Rubric, list[str], dict[str, Any]]:
    """`load_inputs`, with the rubric required and its scales.

    ``criteria`` are checked against the scales.
    """
    from jurybox.calibration.data.labels import scales_from
    from jurybox.rubrics.errors import InputError

    output, rubric_def, notes = load_inputs(judged, rubric, provenance)
    if rubric_def is None:
        raise InputError("the verdicts name no rubric jurybox knows: give --rubric")
    scales = scales_from(rubric_def)
    unknown = [c for c in criteria if c not in scales]
    if unknown:
        raise InputError(
            f"--criterion {unknown[0]}: not a criterion of {rubric_def.name} ({list(scales)})",
            field="criterion",
        )
    return output, rubric_def, notes, scales
