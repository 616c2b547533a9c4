"""``jurybox agree`` and ``jurybox calibrate``: judges against human labels, from the shell.

Both read a human labels file (format in :mod:`jurybox.calibration.data`) and the JSONL written
by ``jurybox judge``, join them on ``id`` and take each criterion's scale from the rubric the
verdicts name (``--rubric`` overrides it), so labels off the scale are rejected rather than
silently widening it. Bad input ends with exit code 2 and a message naming the file, row and
field; partial joins and undefined statistics are reported, never hidden or printed as nan.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from jurybox.calibration import AgreementReport, JudgeOutput
    from jurybox.rubrics import Rubric

err = Console(stderr=True, soft_wrap=True)

Level = Literal["auto", "nominal", "ordinal", "interval", "ratio"]
ValueChoice = Literal["score", "expected"]

_FEW_ITEMS = 10

HumanArg = Annotated[Path, typer.Argument(
    help="Human labels: JSONL or CSV with an id column, an optional rater column (several rows "
         "per id = several raters) and one column per criterion (scale value or label).",
    exists=True, dir_okay=False, show_default=False)]
JudgedArg = Annotated[Path, typer.Argument(
    help="Verdicts written by `jurybox judge` (JSONL), joined with the labels on id.",
    exists=True, dir_okay=False, show_default=False)]
RubricOpt = Annotated[Optional[str], typer.Option(
    "--rubric", "-r",
    help="Rubric name or YAML file giving each criterion's scale. Default: the rubric named in "
         "the verdicts.")]
ValueOpt = Annotated[ValueChoice, typer.Option(
    help="Judge value to use: each vote's `score` (the answer on the scale) or its logprob-"
         "`expected` score (continuous; finer-grained when judges give few distinct scores).")]
CriterionOpt = Annotated[list[str], typer.Option(
    "--criterion", "-c", help="Only this criterion (repeatable). Default: every judged "
                              "criterion the labels file has.")]
ProvenanceOpt = Annotated[Optional[str], typer.Option(
    help="Use only the verdicts with this provenance hash (for a file holding several "
         "rubric/jury configurations).")]
SeedOpt = Annotated[int, typer.Option(help="Random seed (bootstrap resamples, CV folds).")]


class InputProblem(Exception):
    """Bad input, already phrased for the user."""


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}", highlight=False)


# --------------------------------------------------------------------------- agree


def agree(
    human: HumanArg,
    judged: JudgedArg,
    rubric: RubricOpt = None,
    value: ValueOpt = "score",
    level: Annotated[Level, typer.Option(
        help="Krippendorff alpha's level of measurement for every alpha in the report. `auto`: "
             "nominal for labelled scales (yes/no), interval for numeric ones.")] = "auto",
    criterion: CriterionOpt = [],
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the results as JSON (stdout) instead of the table.")] = False,
    html: Annotated[Optional[Path], typer.Option(
        help="Also write a self-contained HTML report with plots (alpha forest plot, confusion "
             "matrices, reliability diagrams) to this file.", dir_okay=False)] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples per CI.", min=1)] = 1000,
    confidence: Annotated[float, typer.Option(help="CI level.", min=0.5, max=0.999)] = 0.95,
    provenance: ProvenanceOpt = None,
    seed: SeedOpt = 0,
) -> None:
    """Agreement between judges and human labels, with bootstrap CIs over items.

    Per criterion: human-human alpha (the ceiling a judge can reach); each judge and the jury's
    aggregated score against the human consensus (alpha, quadratic-weighted kappa, Spearman,
    exact and adjacent agreement, MAE; kappa and Gwet's AC1 for labelled scales); every pair
    of judges, and alpha across all judges. A statistic the data cannot define (one rater, a
    constant column) is shown as undefined with the reason. Ids that do not join are counted
    and listed.
    """
    from jurybox.calibration import InputDataError, agreement_report

    try:
        output, rubric_def, notes = load_inputs(judged, rubric, provenance)
        boot = {"n_resamples": resamples, "confidence": confidence, "seed": seed}
        report = agreement_report(human, output, scales=rubric_def, value=value,
                                  criteria=criterion or None, **boot)
        complete_report(report, level, boot)
    except InputProblem as exc:
        raise fail(str(exc)) from None
    except InputDataError as exc:
        raise fail(hint(str(exc))) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(unreadable(exc, human)) from None
    notes += join_notes(report.join_summary)
    for crit in report.criteria.values():
        if crit.n_items < _FEW_ITEMS:
            items = "item" if crit.n_items == 1 else "items"
            notes.append(f"{crit.criterion}: only {crit.n_items} labelled {items} joined; "
                         f"the CIs are wide")
            break
    for note in notes:
        warn(note)
    if html is not None:
        try:
            report.write_html(html)
        except OSError as exc:
            raise fail(f"cannot write {html}: {exc.strerror or exc}") from None
        err.print(f"wrote {html}", highlight=False, markup=False)
    if json_out:
        payload = report.to_dict()
        payload.update(rubric=rubric_def.name if rubric_def else None,
                       provenance=output.provenance, level=level, warnings=notes)
        typer.echo(dumps(payload))
    else:
        typer.echo(report.to_text())


# --------------------------------------------------------------------------- calibrate


def calibrate(
    human: HumanArg,
    judged: JudgedArg,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Where to write the map: .yaml/.yml for YAML, JSON otherwise. Apply "
                            "it with `jurybox judge ... --calibration MAP`.",
        dir_okay=False, show_default=False)],
    rubric: RubricOpt = None,
    method: Annotated[Literal["isotonic", "ordinal"], typer.Option(
        help="Per-judge map onto the human scale: `isotonic` (monotone step function) or "
             "`ordinal` (cumulative-logit model; smoother with few labels).")] = "isotonic",
    value: ValueOpt = "score",
    output_kind: Annotated[Literal["clip", "round"], typer.Option(
        "--output", help="Calibrated value: `clip` keeps the continuous value within the "
                         "scale, `round` snaps it to the nearest scale value.")] = "clip",
    folds: Annotated[int, typer.Option(
        help="Cross-validation folds for the before/after report.", min=2)] = 5,
    criterion: CriterionOpt = [],
    provenance: ProvenanceOpt = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Print the fit (provenance, criteria, cross-validation) as JSON.")] = False,
    seed: SeedOpt = 0,
) -> None:
    """Fit a calibration map from human labels and judge verdicts, and show whether it helps.

    Per criterion, each judge's value is mapped onto the human scale and the calibrated jury
    value weights judges by their out-of-fold error (labelled scales: a Dawid-Skene model).
    The k-fold cross-validated before/after comparison with the human consensus (MAE, bias,
    alpha, with a bootstrap CI of the improvement) says whether applying the map is worth it.
    The map records the provenance hash of the verdicts, and `jurybox judge --calibration`
    refuses it for any other rubric/jury configuration.
    """
    from jurybox.calibration import CalibrationMap, InputDataError
    from jurybox.calibration.calibration_map import cv_verdict

    try:
        output, rubric_def, notes = load_inputs(judged, rubric, provenance)
        cmap = CalibrationMap(method=method, output=output_kind, value=value, cv_folds=folds,
                              seed=seed)
        cmap.fit(human, output, scales=rubric_def, criteria=criterion or None)
    except InputProblem as exc:
        raise fail(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(unreadable(exc, human)) from None
    except InputDataError as exc:
        message = hint(str(exc))
        if value == "score" and "distinct scores" in message:
            message += ("; the judges give (nearly) constant scores, so try --value expected "
                        "(logprob-expected scores) if the verdicts have them")
        raise fail(message) from None
    cmap.fitted_on_.update(human_labels=str(human), judge_output=str(judged),
                           rubric=rubric_def.name if rubric_def else None)
    notes += join_notes(cmap.fitted_on_.get("join", {}))
    notes += list(cmap.notes_)
    hurts = []
    for name, cv in cmap.cv_.items():
        verdict = cv_verdict(cv)
        if verdict == "skipped":
            notes.append(f"{name}: no cross-validated check ({cv.get('skipped', 'no result')})")
        elif verdict == "hurts":
            hurts.append(name)
            gain = cv["improvement"]
            lo, hi = gain["ci"]
            notes.append(f"{name}: calibration hurts: the cross-validated {gain['metric']} is "
                         f"{gain['value']:+.3f} [{lo:+.3f}, {hi:+.3f}], below 0 (the jury's "
                         f"own scores are closer to the humans); do not apply the map to {name}")
        elif verdict == "unclear":
            notes.append(f"{name}: cross-validation shows no clear improvement; applying the "
                         f"map may not be worth it")
    try:
        cmap.save(out)
    except OSError as exc:
        raise fail(f"cannot write {out}: {exc.strerror or exc}") from None
    for note in notes:
        warn(note)
    jury = output.records[0].jury if output.records else None
    if json_out:
        typer.echo(dumps({
            "map": str(out), "provenance": cmap.provenance_,
            "rubric": rubric_def.name if rubric_def else None, "jury": jury,
            "params": cmap.to_dict()["params"], "criteria": cmap.criteria,
            "cross_validation": cmap.cv_, "warnings": notes,
        }))
    else:
        typer.echo(cmap.describe())
    rubric_arg = rubric or (rubric_def.name if rubric_def else "RUBRIC")
    apply = (f"jurybox judge PREDICTIONS --rubric {rubric_arg} "
             f"--jury {jury or 'JURY'} --calibration {out}")
    wrote = f"wrote {out} (provenance {cmap.provenance_})"
    others = [c for c in cmap.criteria if c not in hurts]
    if not hurts:
        advice = f"apply it with: {apply}"
    elif not others:
        advice = (f"applying it is not recommended: calibration hurts on "
                  f"{'every criterion' if len(hurts) > 1 else hurts[0]}")
    else:
        keep = " ".join(f"-c {c}" for c in others)
        advice = (f"calibration hurts on {', '.join(hurts)}, so refit with only the others "
                  f"({keep}) before applying it with: {apply}")
    err.print(f"{wrote}; {advice}", highlight=False, markup=False)


# --------------------------------------------------------------------------- shared


def load_inputs(judged: Path, rubric: str | None, provenance: str | None
                ) -> tuple[JudgeOutput, Rubric | None, list[str]]:
    """The verdicts, the rubric whose scales validate the labels, and warnings to show."""
    from jurybox.calibration import load_judge_output
    from jurybox.rubrics import DefinitionError, load_rubric

    try:
        output = load_judge_output(judged, provenance=provenance)
    except UnicodeDecodeError as exc:
        raise InputProblem(unreadable(exc, judged)) from None
    if not output.records:
        raise InputProblem(f"{judged}: no verdicts")
    notes: list[str] = []
    named = sorted({r.rubric for r in output.records})
    if rubric is not None:
        try:
            rubric_def = load_rubric(rubric)
        except DefinitionError as exc:
            raise InputProblem(str(exc)) from None
        if named and rubric_def.name not in named:
            notes.append(f"--rubric {rubric_def.name} differs from the rubric the verdicts name "
                         f"({', '.join(named)}); its scales are used")
    else:
        rubric_def = None
        reason = ("the verdicts name no rubric" if not named else
                  f"the verdicts name several rubrics ({', '.join(named)})" if len(named) > 1
                  else None)
        if reason is None:
            try:
                rubric_def = load_rubric(named[0])
            except DefinitionError:
                reason = f"rubric {named[0]!r} named in {judged} is neither shipped nor a file"
        if rubric_def is None:
            notes.append(f"{reason}: scales are inferred from the observed values, so labels "
                         f"off the scale go unnoticed; pass --rubric NAME_OR_FILE")
    if rubric_def is not None:
        unscaled = [c for c in output.criteria if c not in rubric_def.criterion_names]
        if unscaled:
            notes.append(f"criteria {unscaled} are not in rubric {rubric_def.name}; their scales "
                         f"are inferred from the observed values")
    return output, rubric_def, notes


def complete_report(report: AgreementReport, level: str, boot: dict[str, Any]) -> None:
    """Apply ``--level`` to every alpha, and state why human-human agreement is missing."""
    from jurybox.calibration import Stat

    for name, crit in report.criteria.items():
        data = report.joined.criteria[name] if report.joined else None
        if data is None:
            continue
        lvl = level if level != "auto" else ("nominal" if crit.categorical else "interval")
        if level != "auto":
            _relevel(crit, data, lvl, boot)
        if data.human.shape[0] < 2:
            who = f" ({', '.join(data.human_raters)})" if data.human_raters else ""
            crit.human_human[f"alpha[{lvl}]"] = Stat(
                f"krippendorff_alpha[{lvl}]", None, crit.n_items,
                f"needs at least 2 human raters; the labels have {len(data.human_raters)}{who} "
                f"for {name}")


def _relevel(crit: Any, data: Any, level: str, boot: dict[str, Any]) -> None:
    import numpy as np

    from jurybox.calibration import bootstrap_ci, krippendorff_alpha

    def alpha(m: Any) -> Any:
        return krippendorff_alpha(data.scale.snap(m) if level == "nominal" else m, level)

    if data.human.shape[0] >= 2:
        crit.human_human = {f"alpha[{level}]": bootstrap_ci(alpha, data.human, **boot)}
    labelled = ~np.isnan(data.human_mean)
    systems = dict(data.judges, jury=data.jury)
    for judge, stats in crit.judge_human.items():
        x = systems.get(judge)
        if x is None:
            continue
        keep = labelled & ~np.isnan(x)
        h = data.human_reference if level == "nominal" else data.human_mean
        stats["alpha"] = bootstrap_ci(lambda a, b: alpha(np.vstack([a, b])), x[keep], h[keep],
                                      **boot)
    for pair, stats in crit.judge_judge.items():
        a, b = (data.judges[j] for j in pair.split(" | "))
        keep = ~(np.isnan(a) | np.isnan(b))
        stats["alpha"] = bootstrap_ci(lambda u, v: alpha(np.vstack([u, v])), a[keep], b[keep],
                                      **boot)
    if crit.judges_alpha is not None:
        mat = np.vstack([data.judges[j] for j in sorted(data.judges)])
        crit.judges_alpha = bootstrap_ci(alpha, mat, **boot)


def join_notes(summary: dict[str, Any]) -> list[str]:
    """Warnings for ids that did not join and columns that were not used."""
    notes = []
    for key, one, many in (
            ("human_only", "labelled id has no verdict", "labelled ids have no verdict"),
            ("judge_only", "judged id has no human label", "judged ids have no human label")):
        part = summary.get(key) or {}
        if part.get("count"):
            more = ", ..." if part["count"] > len(part["first"]) else ""
            what = one if part["count"] == 1 else many
            notes.append(f"{part['count']} {what}: {', '.join(part['first'])}{more}")
    if summary.get("ignored_columns"):
        notes.append(f"ignored label columns (not judged criteria): "
                     f"{', '.join(summary['ignored_columns'])}")
    return notes


def unreadable(exc: OSError | UnicodeDecodeError, path: Path) -> str:
    """OSError names its file; a decoding error comes from ``path`` (the verdicts are read,
    and their decoding errors reported, in :func:`load_inputs`)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
    return f"cannot read {exc.filename or path}: {exc.strerror or exc}"


def hint(message: str) -> str:
    """Library messages name Python parameters; say the command-line option instead."""
    return message.replace("pass provenance=... to pick one",
                           "pass --provenance HASH to pick one")


def dumps(payload: Any) -> str:
    """JSON with undefined values as null: never NaN or Infinity."""
    return json.dumps(_finite(payload), indent=2, allow_nan=False, default=_plain)


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return _finite(obj.tolist())
    return obj


def _plain(obj: Any) -> Any:
    return str(obj)
