"""Systems compared by pairwise verdicts: what ``jurybox compare`` calls (`compare_systems`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jurybox.serving.options import argument, command_line, option

if TYPE_CHECKING:
    from jurybox.calibration.audits.preference import Ratings, WinRate


@dataclass
class Comparison:
    """Win rates and Bradley-Terry ratings of the systems a set of pairwise verdicts compares.

    Attributes:
        win_rates: Each pair of systems' win rate (ties half) with a 95% CI.
        ratings: The Bradley-Terry ratings on the Elo scale, or why there are none.
        comparisons: How many verdicts with a winner were compared.
        notes: What was left out (verdicts without a winner), one line per file.
    """

    win_rates: list[WinRate]
    ratings: Ratings
    comparisons: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The comparison as ``jurybox compare --json`` prints it."""
        return {
            "win_rates": [r.to_dict() for r in self.win_rates],
            "bradley_terry": self.ratings.to_dict(),
            "comparisons": self.comparisons,
            "warnings": self.notes,
        }


@command_line(
    judged=argument(
        type=list[Path],
        help="Pairwise verdict files from `jurybox judge --rubric pairwise ...` (one per pair "
        "of systems compared, or several pairs in one file).",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
    predictions=option(
        "--predictions",
        type=list[Path],
        default=[],
        help="The pairs file each verdict file was judged from (repeat, in "
        "the same order), whose model_a/model_b columns name the two systems of each row. "
        "Default: the file the verdicts' manifest names (what --pairs wrote).",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
    resamples=option(help="Bootstrap resamples of the ratings' CIs.", min=0),
    seed=option(help="Random seed of the bootstrap."),
)
def compare_systems(
    judged: Sequence[str | Path],
    *,
    predictions: Sequence[str | Path] = (),
    resamples: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Compare systems by pairwise verdicts: win rates and ratings.

    Each pair's win rate (ties half) with a 95% CI, and Bradley-Terry ratings on the Elo scale
    (1000 on average) with percentile bootstrap CIs over the comparisons. Verdicts without a
    winner (unscored) are left out and counted in the notes.

    Args:
        judged: Pairwise verdict files from ``jurybox judge --rubric pairwise`` (one per pair
            of systems, or several pairs in one file).
        predictions: The pairs file each verdict file was judged from, in the same order, whose
            ``model_a``/``model_b`` columns name the two systems of each row. Default: the file
            each verdict file's manifest names.
        resamples: Bootstrap resamples of the ratings' CIs.
        seed: The bootstrap's random seed.

    Returns:
        The win rates, the ratings and the notes.

    Raises:
        InputError: Not one pairs file per verdict file, verdicts that are not pairwise, an
            item missing from its pairs file, or a pairs file without the systems' names.
    """
    from jurybox.calibration import load_judge_output
    from jurybox.calibration.audits.preference import bradley_terry, win_rates
    from jurybox.rubrics.errors import InputError

    a: list[str] = []
    b: list[str] = []
    share: list[float] = []
    notes: list[str] = []
    if predictions and len(predictions) != len(judged):
        raise InputError(
            f"{len(predictions)} --predictions for {len(judged)} verdict "
            "files: give one per file, in the same order",
            field="predictions",
        )
    for k, path in enumerate(map(Path, judged)):
        output = load_judge_output(path)
        if not output.records or "winner" not in output.records[0].model_fields_set:
            raise InputError(
                f"{path}: not pairwise verdicts (no winner): judge with a "
                "pairwise rubric, e.g. jurybox judge --pairs A B --rubric "
                "pairwise"
            )
        names = _names(path, Path(predictions[k]) if predictions else None)
        left = 0
        for rec in output.records:
            if rec.id not in names:
                raise InputError(
                    f"{path}: item {rec.id!r} is not in its pairs file (model_a/model_b unknown)",
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
    return Comparison(
        win_rates=win_rates(a, b, share),
        ratings=bradley_terry(a, b, share, n_resamples=resamples, seed=seed),
        comparisons=len(share),
        notes=notes,
    )


def _share(rec: Any) -> float | None:
    """A's share in the verdict's overall score (the rubric's formula or its one criterion)."""
    if rec.winner is None:
        return None
    values = [v for v in rec.scores.values() if v is not None]
    return float(values[-1]) if values else None


def _names(judged: Path, predictions: Path | None) -> dict[str, tuple[str, str]]:
    """Each item's two systems (model_a, model_b) from the pairs file it was judged from."""
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
