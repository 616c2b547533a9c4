"""``jurybox compare``: systems compared by pairwise verdicts (win rates, Bradley-Terry)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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
    from jurybox.calibration import load_judge_output
    from jurybox.calibration.audits.preference import bradley_terry, win_rates
    from jurybox.rubrics.errors import InputError

    a: list[str] = []
    b: list[str] = []
    share: list[float] = []
    notes: list[str] = []
    with reported():
        if predictions and len(predictions) != len(judged):
            raise InputError(
                f"{len(predictions)} --predictions for {len(judged)} verdict "
                "files: give one per file, in the same order",
                field="predictions",
            )
        for k, path in enumerate(judged):
            output = load_judge_output(path)
            if not output.records or "winner" not in output.records[0].model_fields_set:
                raise InputError(
                    f"{path}: not pairwise verdicts (no winner): judge with a "
                    "pairwise rubric, e.g. jurybox judge --pairs A B --rubric "
                    "pairwise"
                )
            names = _names(path, predictions[k] if predictions else None)
            left = 0
            for rec in output.records:
                if rec.id not in names:
                    raise InputError(
                        f"{path}: item {rec.id!r} is not in its pairs file "
                        "(model_a/model_b unknown)",
                        field="id",
                    )
                value = _share(rec)
                if value is None:
                    left += 1
                    continue
                a.append(names[rec.id][0])
                b.append(names[rec.id][1])
                share.append(value)
            if left:
                notes.append(f"{path}: {left} unscored verdict(s) without a winner left out")
        rates = win_rates(a, b, share)
        ratings = bradley_terry(a, b, share, n_resamples=resamples, seed=seed)
    for message in notes:
        warn(message)
    if json_out:
        typer.echo(
            dumps(
                {
                    "win_rates": [r.to_dict() for r in rates],
                    "bradley_terry": ratings.to_dict(),
                    "comparisons": len(share),
                    "warnings": notes,
                }
            )
        )
        return
    typer.echo(f"{len(share)} comparisons of {len(ratings.systems)} systems")
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


def _share(rec: Any) -> float | None:
    """A's share in the verdict's overall score (the rubric's formula or its one criterion)."""
    if rec.winner is None:
        return None
    values = [v for v in rec.scores.values() if v is not None]
    return float(values[-1]) if values else None


def _names(judged: Path, predictions: Path | None) -> dict[str, tuple[str, str]]:
    from jurybox.rubrics.errors import InputError
    from jurybox.rubrics.rows import RowError, read_rows_from
    from jurybox.serving.runs.results import read_manifest

    if predictions is None:
        manifest = read_manifest(judged)
        if manifest is None or not manifest.get("predictions"):
            raise InputError(
                f"{judged}: no manifest names the pairs it was judged from: give "
                "--predictions PAIRS",
                field="predictions",
            )
        predictions = Path(manifest["predictions"])
    out = {}
    for _, n, row in read_rows_from(predictions):
        if isinstance(row, RowError):
            continue
        ma, mb = row.get("model_a"), row.get("model_b")
        if ma is None or mb is None:
            raise InputError(
                f"{predictions}: row {n} has no model_a/model_b (the names of the "
                "two systems compared; --pairs writes them)",
                field="model_a",
            )
        out[str(row.get("id")).strip()] = (str(ma), str(mb))
    return out
