"""``jurybox audit``: the judges' biases, per judge and criterion.

The statistics are in `jurybox.calibration.audits.audit`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from jurybox.serving.cli.calibration import JudgedArg, RubricOpt
from jurybox.serving.cli.console import dumps, reported, warn
from jurybox.serving.runs.inputs import load_inputs


def audit(
    judged: JudgedArg,
    predictions: Annotated[
        Path | None,
        typer.Option(
            help="The predictions file that was judged: its responses' lengths (in each judge's "
            "tokens where its tokenizer is on this machine, else words) for the length audit, "
            "and the column naming each answer's model for self-preference.",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    human: Annotated[
        Path | None,
        typer.Option(
            help="Human labels: the length audit then measures the judges' errors (score minus "
            "the human mean) too; the dependence audit needs them (the judges' errors "
            "against the humans).",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    rubric: RubricOpt = None,
    model_column: Annotated[
        str,
        typer.Option(
            help="The predictions' column naming the model that wrote each answer (self-preference "
            "audit; skipped when the column is absent)."
        ),
    ] = "model",
    family: Annotated[
        list[str],
        typer.Option(
            "--family",
            help="A judge's model family, JUDGE=FAMILY (repeatable): an answer is the "
            "judge's own family's when its model's family is FAMILY's: the leading letters of the "
            "name, any case (Qwen3-8B and qwen3 are qwen; openai/o3-mini is o, not gemma's). "
            "Default: the family of the judge's model in the run's manifest.",
            show_default=False,
        ),
    ] = [],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write a self-contained HTML report, a plot per finding.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples per CI.", min=1)] = 1000,
    seed: Annotated[int, typer.Option(help="Random seed of the bootstrap.")] = 0,
) -> None:
    """Audit the judges for bias, with bootstrap CIs over items, each finding in plain words.

    Length (needs --predictions): per judge and criterion, the Spearman correlation of the score
    with the response's length in the judge's tokens (words where its tokenizer is not on this
    machine) and the slope per 100; with --human, the same on
    the judge's error, which separates "longer answers are better" from "the judge likes
    length". Self-preference (needs --predictions with a model column): a judge's excess over
    the other judges on its own family's answers, minus the same on the others. Dependence: per
    criterion, the correlation of the judges' errors and the effective number of independent
    judges (n^2 / the sum of the error correlation matrix; needs --human, and items labelled
    by two or more raters: their disagreement measures the humans' noise, which is in every
    judge's error alike and is taken out). Position (pairwise
    verdicts): per judge and criterion, P(it chose the answer shown first), ties left out, with
    a Wilson CI (0.5 when unbiased), and the share of pairs whose two orders disagreed.
    """
    import numpy as np

    from jurybox.calibration.audits.audit import dependence, family_of, length_bias, self_preference
    from jurybox.calibration.data.joined import join
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.cli.console import parse_map
    from jurybox.serving.runs.predictions import read_predictions

    with reported():
        output, rubric_def, notes = load_inputs(judged, rubric, None, pairwise=True)
        if "winner" in output.records[0].model_fields_set:
            _audit_pairwise(output, json_out, html, predictions is not None or human is not None)
            return
        if predictions is None and len(output.judges) < 2:
            raise InputError(
                "nothing to audit: give --predictions (length) or a jury of at "
                "least two judges (dependence" + (", which --human is for)" if human else ")")
            )
        ids = output.ids
        lengths = None
        token_lengths: dict[str, Any] = {}
        writers: dict[str, str] = {}
        if predictions is not None:
            if rubric_def is None:
                raise InputError("the verdicts name no rubric jurybox knows: give --rubric")
            read = read_predictions(predictions, rubric_def, allow_empty=True)
            texts = {item.id: str(item.fields().get("response") or "") for item in read.items}
            words = {i: len(t.split()) for i, t in texts.items()}
            writers = {
                item.id: str(item.extra[model_column])
                for item in read.items
                if item.extra.get(model_column) is not None
            }
            missing = sum(i not in words for i in ids)
            if missing:
                notes.append(
                    f"{missing} judged item(s) are not in {predictions}: left out of "
                    "the length audit"
                )
            lengths = np.array([words.get(i, np.nan) for i in ids], dtype=float)
            token_lengths, units = _token_lengths(judged, output.judges, ids, texts)
            for judge, unit in units.items():
                if unit != "tokens":
                    notes.append(f"{judge}: lengths in words ({unit})")
        families = _families(judged, output.judges, parse_map(family, "--family"))
        humans: dict[str, np.ndarray] = {}
        if human is not None:
            joined = join(human, output, scales=rubric_def)
            notes += joined.summary.warnings()
            position = {i: k for k, i in enumerate(ids)}
            for criterion, data in joined.criteria.items():
                matrix = np.full((len(data.human_raters), len(ids)), np.nan)
                matrix[:, [position[item] for item in data.ids]] = data.human
                humans[criterion] = matrix  # raters x items
        length: list[Any] = []
        selfish: list[Any] = []
        dependent: list[Any] = []
        if writers and len(output.judges) >= 2:
            unknown = [j for j in output.judges if j not in families]
            if unknown:
                notes.append(
                    f"no model family known for {unknown} (no manifest beside "
                    f"{judged}): give --family JUDGE=FAMILY; self-preference skipped "
                    "for them"
                )
        elif predictions is not None and not writers:
            notes.append(
                f"{predictions} has no column {model_column!r}: self-preference not "
                "audited (--model-column names the column of each answer's model)"
            )
        for criterion in output.criteria:
            scores = output.judge_values(criterion)
            labels = humans.get(criterion)
            reference = None if labels is None else _mean_label(labels)
            if lengths is not None:
                for judge, values in scores.items():
                    own = token_lengths.get(judge)
                    length.append(
                        length_bias(
                            judge,
                            criterion,
                            values,
                            lengths if own is None else own,
                            reference,
                            unit="words" if own is None else "tokens",
                            n_resamples=resamples,
                            seed=seed,
                        )
                    )
            if writers and len(scores) >= 2:
                authored = {
                    j: np.array(
                        [i in writers and family_of(writers[i]) == family_of(f) for i in ids]
                    )
                    for j, f in families.items()
                }
                for judge in scores:
                    if judge in families:
                        selfish.append(
                            self_preference(
                                judge,
                                criterion,
                                scores,
                                authored,
                                families[judge],
                                n_resamples=resamples,
                                seed=seed,
                            )
                        )
            if len(scores) >= 2:
                dependent.append(
                    dependence(criterion, scores, labels, n_resamples=resamples, seed=seed)
                )
    for message in notes:
        warn(message)
    if html is not None:
        from jurybox.calibration.reports.audit_html import render_audit

        html.write_text(
            render_audit(
                judged.name,
                length=length,
                self_preference=selfish,
                dependence=dependent,
                position=[],
                notes=notes,
            ),
            encoding="utf-8",
        )
    if json_out:
        typer.echo(
            dumps(
                {
                    "length": [f.to_dict() for f in length],
                    "self_preference": [f.to_dict() for f in selfish],
                    "dependence": [d.to_dict() for d in dependent],
                    "length_unit": _unit(length),
                    "families": families,
                    "warnings": notes,
                }
            )
        )
        return
    if length:
        typer.echo(
            f"Length (the response's length in {_unit(length)}: tokens by each judge's "
            "own tokenizer where it is on this machine, else words):"
        )
        for finding in length:
            typer.echo(("  ! " if finding.flagged else "    ") + finding.words())
    if selfish:
        typer.echo("Self-preference (" + ", ".join(f"{j}: {f}" for j, f in families.items()) + "):")
        for finding in selfish:
            typer.echo(("  ! " if finding.flagged else "    ") + finding.words())
    if dependent:
        typer.echo("Dependence:")
        for d in dependent:
            typer.echo(("  ! " if d.flagged else "    ") + d.words())
    if html is not None:
        typer.echo(f"wrote {html}")


def _mean_label(labels: Any) -> Any:
    """Each item's mean human label (raters x items in; NaN where no rater labelled it)."""
    import warnings

    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an unlabelled item's mean: NaN
        return np.nanmean(labels, axis=0)


def _unit(findings: list[Any]) -> str:
    units = {f.unit for f in findings}
    return units.pop() if len(units) == 1 else "tokens and words"


def _token_lengths(
    judged: Path, judges: list[str], ids: list[str], texts: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Each judge's lengths of the responses, in its own tokenizer's tokens.

    Returns:
        Judge -> the responses' lengths in its own tokenizer's tokens (per id, NaN where the id
            has no response), for the judges whose tokenizer is on this machine (their models from
            the run's manifest); and judge -> "tokens" or why words are used.
    """
    import numpy as np

    from jurybox.judges.weights import local_tokenizer
    from jurybox.serving.runs.results import read_manifest

    specs = {
        s.get("name"): s
        for s in ((read_manifest(judged) or {}).get("jury") or {}).get("judges") or []
        if isinstance(s, dict)
    }
    lengths: dict[str, Any] = {}
    units: dict[str, str] = {}
    known = [i for i in ids if i in texts]
    for judge in judges:
        spec = specs.get(judge)
        if spec is None or not spec.get("model"):
            units[judge] = "its model is unknown: no manifest beside the verdicts"
            continue
        tokenizer, how = local_tokenizer(
            str(spec["model"]), spec.get("revision"), str(spec.get("backend", "transformers"))
        )
        if tokenizer is None:
            units[judge] = how
            continue
        counts = dict(
            zip(
                known,
                (
                    len(x)
                    for x in tokenizer([texts[i] for i in known], add_special_tokens=False)[
                        "input_ids"
                    ]
                ),
            )
        )
        lengths[judge] = np.array([counts.get(i, np.nan) for i in ids], dtype=float)
        units[judge] = "tokens"
    return lengths, units


def _families(judged: Path, judges: list[str], given: dict[str, str]) -> dict[str, str]:
    """Judge -> model family: --family, else from the judge's model in the run's manifest."""
    from jurybox.calibration.audits.audit import family_of
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.results import read_manifest

    unknown = sorted(set(given) - set(judges))
    if unknown:
        raise InputError(
            f"--family names judges the verdicts do not have: {unknown} (judges: {judges})",
            field="family",
        )
    out = dict(given)
    manifest = read_manifest(judged) or {}
    for spec in (manifest.get("jury") or {}).get("judges") or []:
        if isinstance(spec, dict) and spec.get("name") in judges and spec["name"] not in out:
            out[spec["name"]] = family_of(str(spec.get("model", "")))
    return out


def _audit_pairwise(output: Any, json_out: bool, html: Path | None, ignored: bool) -> None:
    """The position audit of pairwise verdicts (length and dependence are not built for them)."""
    from jurybox.calibration.audits.preference import position_bias
    from jurybox.rubrics.pairwise import side

    chose: dict[tuple[str, str], list[int]] = {}
    pair_of: dict[tuple[str, str], list[str]] = {}
    flipped: dict[tuple[str, str], list[bool]] = {}
    for rec in output.records:
        sides: dict[tuple[str, str], dict[str, int]] = {}
        for v in rec.votes:
            if v.score is None or v.order is None:
                continue
            key = (v.judge, v.criterion)
            shown_first = side(v.score if v.order == "ab" else 1.0 - v.score)
            chose.setdefault(key, []).append(-1 if shown_first == 0 else int(shown_first > 0))
            pair_of.setdefault(key, []).append(rec.id)
            sides.setdefault(key, {})[v.order] = side(v.score)
        for key, by_order in sides.items():
            if len(by_order) == 2:
                flipped.setdefault(key, []).append(by_order["ab"] != by_order["ba"])
    findings = [
        position_bias(
            judge,
            criterion,
            votes,
            flipped.get((judge, criterion), []),
            pair_of[(judge, criterion)],
        )
        for (judge, criterion), votes in chose.items()
    ]
    notes = (
        [
            "pairwise verdicts: only the position audit is built for them (--predictions "
            "and --human are not used)"
        ]
        if ignored
        else []
    )
    for message in notes:
        warn(message)
    if html is not None:
        from jurybox.calibration.reports.audit_html import render_audit

        html.write_text(
            render_audit(
                output.source,
                length=[],
                self_preference=[],
                dependence=[],
                position=findings,
                notes=notes,
            ),
            encoding="utf-8",
        )
    if json_out:
        typer.echo(dumps({"position": [f.to_dict() for f in findings], "warnings": notes}))
        return
    typer.echo("Position (P(the answer shown first is chosen), ties left out; 95% Wilson CI):")
    for f in findings:
        typer.echo(("  ! " if f.flagged else "    ") + f.words())
    if html is not None:
        typer.echo(f"wrote {html}")
