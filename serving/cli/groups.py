"""``jurybox agree-groups``: a jury's group rewards against human rankings of the same groups."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jurybox.serving.cli.console import dumps, reported


def agree_groups(
    human: Annotated[
        Path,
        typer.Argument(
            help="Human labels of the groups (JSONL, one object a line with the group's id): "
            '"ranking" (the completions\' positions, best first), "ranks" (each '
            "completion's rank, 1 the best, equal ranks tied, null unranked), or one "
            'preference a line: "a", "b" (positions) and "winner" (a, b or tie).',
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ],
    judged: Annotated[
        Path,
        typer.Argument(
            help="The jury's group results (JSONL, one group a line: what POST /v1/groups answers "
            "per group, or at least its id and rewards, null when unscored).",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    confidence: Annotated[float, typer.Option(help="Interval level.", min=0.5, max=0.999)] = 0.95,
) -> None:
    """How well the jury's group rewards rank each group as humans did.

    Per group, Kendall's tau-b between the rewards and the human ranking (ties corrected for),
    averaged over the groups that have one; and the share of human pairwise preferences (every
    pair a ranking orders, and the preferences given one by one) that the rewards order the
    same way, a jury tie counting half, human ties left out. A group whose rewards all tie
    has no tau-b: such groups are counted, and the mean tau over every ranked group with
    theirs at 0 is printed beside it. Each with a Student t interval over groups (none below 20
    groups: too few to hold). Groups in one file only, and unscored rewards, are left out and
    counted.
    """
    from jurybox.calibration.reports.group_agreement import agreement_of

    with reported():
        report = agreement_of(human, judged, confidence)
    if json_out:
        typer.echo(dumps(report.to_dict()))
        return
    for line in report.words():
        typer.echo(line)
    if report.only_jury or report.only_human:
        typer.echo(
            f"left out: {report.only_jury} groups only the jury's, "
            f"{report.only_human} only the humans'"
        )
