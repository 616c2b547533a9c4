"""``jurybox agree-groups``: a jury's group rewards against human rankings of the same groups."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import dumps, options_of, reported
from jurybox.serving.runs.agree_groups import group_agreement_with_humans


@options_of(group_agreement_with_humans, place={"json_out": "confidence"})
def agree_groups(
    options: dict[str, Any],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
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
    with reported():
        report = group_agreement_with_humans(**options)
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
