"""``jurybox audit``: the judges' biases, per judge and criterion.

The audit is `jurybox.serving.runs.audit.audit_verdicts`; the statistics are in
`jurybox.calibration.audits`.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import dumps, options_of, parse_map, reported, warn
from jurybox.serving.runs.audit import Audit, audit_verdicts


@options_of(audit_verdicts, place={"json_out": "resamples", "html": "resamples"})
def audit(
    options: dict[str, Any],
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

    How much a jury over-rewards exploit responses (master keys, self-assessments, instructions
    to the judge), and a gate before training: `jurybox exploits`.
    """
    options["families"] = parse_map(options["families"], "--family")
    with reported():
        found = audit_verdicts(**options)
    # (a pairwise audit's report was written inside the reported errors, a scored one's not)
    with reported() if found.pairwise else nullcontext():
        _show(found, json_out, html)


def _show(found: Audit, json_out: bool, html: Path | None) -> None:
    """Warn of the audit's notes, write its HTML report, print its findings."""
    for message in found.notes:
        warn(message)
    if html is not None:
        html.write_text(found.html(), encoding="utf-8")
    if json_out:
        typer.echo(dumps(found.to_dict()))
        return
    families = ", ".join(f"{j}: {f}" for j, f in found.families.items())
    for title, findings in (
        (
            "Position (P(the answer shown first is chosen), ties left out; 95% Wilson CI):",
            found.position,
        ),
        (
            f"Length (the response's length in {found.length_unit}: tokens by each judge's "
            "own tokenizer where it is on this machine, else words):",
            found.length,
        ),
        (f"Self-preference ({families}):", found.self_preference),
        ("Dependence:", found.dependence),
    ):
        if findings or (found.pairwise and findings is found.position):
            typer.echo(title)
        for finding in findings:
            typer.echo(("  ! " if finding.flagged else "    ") + finding.words())
    if html is not None:
        typer.echo(f"wrote {html}")
