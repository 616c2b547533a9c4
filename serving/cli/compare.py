"""``jurybox compare``: systems compared by pairwise verdicts (win rates, Bradley-Terry)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jurybox.serving.cli.console import dumps, reported, warn


def compare(
    judged: Annotated[
        list[Path],
        typer.Argument(
            help="Pairwise verdict files from `jurybox judge --rubric pairwise ...` (one per pair "
            "of systems compared, or several pairs in one file).",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ],
    predictions: Annotated[
        list[Path],
        typer.Option(
            "--predictions",
            help="The pairs file each verdict file was judged from (repeat, in "
            "the same order), whose model_a/model_b columns name the two systems of each row. "
            "Default: the file the verdicts' manifest names (what --pairs wrote).",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    ] = [],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    resamples: Annotated[
        int, typer.Option(help="Bootstrap resamples of the ratings' CIs.", min=0)
    ] = 1000,
    seed: Annotated[int, typer.Option(help="Random seed of the bootstrap.")] = 0,
) -> None:
    """Compare systems by pairwise verdicts: win rates and ratings.

    Each pair's win rate (ties half) with a 95% CI, and with three or more systems (or any two)
    Bradley-Terry ratings on the Elo scale (1000 on average) with percentile bootstrap CIs over
    the comparisons. Verdicts without a winner (unscored) are left out and counted.
    """
    from jurybox.serving.runs.compare import compare_systems

    with reported():
        found = compare_systems(judged, predictions=predictions, resamples=resamples, seed=seed)
    for message in found.notes:
        warn(message)
    if json_out:
        typer.echo(dumps(found.to_dict()))
        return
    rates, ratings = found.win_rates, found.ratings
    typer.echo(f"{found.comparisons} comparisons of {len(ratings.systems)} systems")
    typer.echo("Win rates (95% CI):")
    for r in rates:
        typer.echo("  " + r.words())
    if ratings.rating is None:
        typer.echo(f"Bradley-Terry ratings: {ratings.reason}")
        return
    typer.echo(
        "Bradley-Terry ratings (Elo scale, mean 1000; "
        + (
            f"95% bootstrap CI over {ratings.resamples} resamples):"
            if ratings.ci_reason is None
            else f"no CI: {ratings.ci_reason}):"
        )
    )
    for name in sorted(ratings.rating, key=lambda s: -ratings.rating[s]):  # type: ignore[index]
        ci = ratings.ci.get(name)
        shown = f" [{ci[0]:.0f}, {ci[1]:.0f}]" if ci else ""
        typer.echo(f"  {name:<24} {ratings.rating[name]:7.1f}{shown}")
