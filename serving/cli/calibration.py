"""``jurybox agree`` and ``jurybox calibrate``: judges against human labels, from the shell.

Both read a human labels file (format in `jurybox.calibration.data.labels`) and the JSONL
written by ``jurybox judge``, join them on ``id`` and take each criterion's scale from the rubric
the verdicts name (``--rubric`` overrides it), so labels off the scale are rejected rather than
silently widening it. Bad input ends with exit code 2 and a message naming the file, row and
field; partial joins and undefined statistics are reported, never hidden or printed as nan.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jurybox.serving.cli.console import (
    as_typer,
    dumps,
    fail,
    given_to,
    note,
    options_of,
    reported,
    warn,
)
from jurybox.serving.options import CRITERIA, HUMAN, JUDGED, PROVENANCE, RUBRIC, SEED, VALUE
from jurybox.serving.runs.agree import ValueChoice, agreement_with_humans
from jurybox.serving.runs.calibrate import (
    fit_cascade_jury,
    fit_cascade_jury_by_group,
    fit_conformal_map,
    fit_map,
)

if TYPE_CHECKING:
    from jurybox.serving.runs.calibrate import FittedMap

HumanArg = Annotated[Path, as_typer(HUMAN)]
JudgedArg = Annotated[Path, as_typer(JUDGED)]
RubricOpt = Annotated[str | None, as_typer(RUBRIC)]
ValueOpt = Annotated[ValueChoice, as_typer(VALUE)]
CriterionOpt = Annotated[list[str], as_typer(CRITERIA)]
ProvenanceOpt = Annotated[str | None, as_typer(PROVENANCE)]
SeedOpt = Annotated[int, as_typer(SEED)]


# --------------------------------------------------------------------------- agree


@options_of(
    agreement_with_humans,
    place={"json_out": "resamples", "html": "resamples", "ppi": "length_control"},
)
def agree(
    options: dict[str, Any],
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
) -> None:
    """Agreement between judges and human labels, with bootstrap CIs over items.

    Per criterion: human-human alpha (the ceiling a judge can reach); each judge and the jury's
    aggregated score against the human consensus (alpha, quadratic-weighted kappa, Spearman,
    exact and adjacent agreement, MAE; kappa and Gwet's AC1 for labelled scales); every pair
    of judges, and alpha across all judges. A statistic the data cannot define (one rater, a
    constant column) is shown as undefined with the reason. Ids that do not join are counted
    and listed.
    """
    if ppi:
        _ppi(options, json_out)
        return
    with reported():
        found = agreement_with_humans(**options)
    for message in found.notes:
        warn(message)
    if html is not None:
        try:
            found.report.write_html(html)
        except OSError as exc:
            raise fail(f"cannot write {html}: {exc.strerror or exc}") from None
        note(f"wrote {html}")
    if json_out:
        typer.echo(dumps(found.to_dict()))
        return
    typer.echo(found.report.to_text())
    if found.length_control:
        typer.echo("\nLength control (the jury's score, length in words):")
        for c in found.length_control:
            typer.echo(("  + " if c.raises_agreement else "    ") + c.words())


def _ppi(options: dict[str, Any], json_out: bool) -> None:
    """``agree --ppi``: the benchmark mean per criterion (`runs.agree.benchmark_means`)."""
    from jurybox.calibration.estimates.active import MeanEstimate
    from jurybox.serving.runs.agree import benchmark_means

    with reported():
        found = benchmark_means(
            **{
                k: options[k]
                for k in ("human", "judged", "rubric", "provenance", "criteria", "confidence")
            }
        )
    for message in found.notes:
        warn(message)
    if json_out:
        typer.echo(dumps(found.to_dict()))
        return
    for c, e in found.estimates.items():
        typer.echo(str(e) if isinstance(e, MeanEstimate) else f"{c}: undefined ({e})")
        for message in e.notes if isinstance(e, MeanEstimate) else ():
            typer.echo(f"  note: {message}")


# --------------------------------------------------------------------------- calibrate


def _calibrate_conformal(out: Path, json_out: bool, options: dict[str, Any]) -> None:
    """``calibrate --conformal``: fit, save and show a conformal map (`fit_conformal_map`)."""
    with reported():
        fitted = fit_conformal_map(**options)
        fitted.map.save(out)
    for message in fitted.notes:
        warn(message)
    if json_out:
        typer.echo(dumps({**fitted.map.to_dict(), "out": str(out), "warnings": fitted.notes}))
        return
    alpha = options["alpha"]
    whose = (
        "every rater's label"
        if options["cover"] == "every-rater"
        else "the label of a rater chosen at random"
    )
    typer.echo(
        f"conformal map for {fitted.rubric.name}, alpha {alpha:g} (an item's interval holds "
        f"{whose} with probability >= {1 - alpha:.0%}, over items: not among the narrow "
        f"ones alone), written to {out}"
    )
    for name, row in fitted.map.report.items():
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


@options_of(
    fit_map,
    fit_cascade_jury,
    fit_cascade_jury_by_group,
    fit_conformal_map,
    place={"out": "rubric", "json_out": "seed", "cascade": "jury", "conformal": "alpha"},
)
def calibrate(
    options: dict[str, Any],
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
    json_out: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the fit (provenance, criteria, cross-validation) as JSON."
        ),
    ] = False,
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
    cascading = options["jury"] is not None or options["target_agreement"] is not None
    if conformal:
        if cascade or options["column"] or cascading:
            raise fail("--conformal fits intervals, --cascade a cascaded jury: give one")
        return _calibrate_conformal(out, json_out, given_to(fit_conformal_map, options))
    if options["cover"] != "every-rater":
        raise fail("--cover is for --conformal (what its intervals hold)")
    if cascade:
        if options["target_agreement"] is None or options["jury"] is None:
            raise fail(
                "--cascade needs --jury (the jury with stages) and --target-agreement (e.g. 0.9)"
            )
        if options["group"] is not None and options["column"] is not None:
            raise fail(
                "--group reports the groups of one fit and --by-group fits one per group: "
                "give one of them"
            )
        if options["column"] is not None:
            return _calibrate_cascade_by_group(
                out, json_out, given_to(fit_cascade_jury_by_group, options)
            )
        return _calibrate_cascade(out, json_out, given_to(fit_cascade_jury, options))
    if cascading or options["group"] or options["column"]:
        raise fail(
            "--target-agreement, --jury, --group and --by-group are for --cascade "
            "(fitting a cascaded jury)"
        )
    with reported():
        fitted = fit_map(**given_to(fit_map, options))
    _show_map(fitted, out, options["rubric"], json_out)


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


def _calibrate_cascade(out: Path, json_out: bool, options: dict[str, Any]) -> None:
    """``calibrate --cascade``: fit a cascaded jury's threshold and write the jury."""
    with reported():
        fitted = fit_cascade_jury(**options)
    for message in fitted.notes:
        warn(message)
    typer.echo(dumps(fitted.to_dict(out)) if json_out else fitted.describe())
    if fitted.fitted is None:
        note(
            "no threshold lets an earlier stage decide while keeping the guarantee and saving "
            f"judge calls: the whole jury on every item is what meets it; {out} was not written"
        )
        return
    try:
        fitted.save(out)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}") from None
    note(
        f"wrote {out}; judge with it: jurybox judge PREDICTIONS --rubric "
        f"{options['rubric'] or fitted.rubric.name} --jury {out}"
    )


def _calibrate_cascade_by_group(out: Path, json_out: bool, options: dict[str, Any]) -> None:
    """``calibrate --cascade --by-group``: one threshold per group, a jury file per group."""
    with reported():
        fitted = fit_cascade_jury_by_group(**options)
    for message in fitted.notes:
        warn(message)
    try:
        written = fitted.save(out)
    except OSError as exc:
        raise fail(f"cannot write {exc.filename}: {exc.strerror or exc}") from None
    typer.echo(dumps(fitted.to_dict(out)) if json_out else "\n".join(fitted.texts()))
    if fitted.refused:
        raise fail(
            "no group's target can be certified with its labels (see above); nothing was written"
        )
    note(
        f"wrote {', '.join(written) if written else 'nothing'} (a group without an early exit "
        "that keeps its guarantee and saves calls is judged by the whole jury); judge each "
        "group's items with its own jury file"
    )
