"""``jurybox compare``: systems compared by pairwise verdicts (win rates, Bradley-Terry)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import dumps, options_of, reported, warn
from jurybox.serving.runs.compare import compare_systems


@options_of(compare_systems, place={"json_out": "resamples"})
def compare(
    options: dict[str, Any],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Compare systems by pairwise verdicts: win rates and ratings.

    Each pair's win rate (ties half) with a 95% CI, and with three or more systems (or any two)
    Bradley-Terry ratings on the Elo scale (1000 on average) with percentile bootstrap CIs over
    the comparisons. Verdicts without a winner (unscored) are left out and counted.
    """
    with reported():
        found = compare_systems(**options)
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
