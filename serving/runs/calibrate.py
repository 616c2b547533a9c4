"""Calibration fits as ``jurybox calibrate`` makes them, for any caller.

A calibration map from human labels and judged verdicts (`fit_map`), with the comparison of
jury aggregations beside it. The statistics are in `jurybox.calibration.maps`.

```python
from jurybox.serving.runs.calibrate import fit_map

fitted = fit_map("labels.jsonl", "out.judged.jsonl")
fitted.map.save("map.yaml")
print(fitted.map.describe(), fitted.notes)
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from jurybox.serving.runs.inputs import load_inputs

if TYPE_CHECKING:
    from jurybox.calibration import CalibrationMap
    from jurybox.rubrics import Rubric


@dataclass
class FittedMap:
    """A calibration map fitted by `fit_map`, and what to say about it.

    Attributes:
        map: The fitted map (``save`` it; apply it with ``jurybox judge --calibration``).
        rubric: The rubric whose scales the labels were read on (None: the verdicts name none
            jurybox knows).
        jury: The jury the verdicts name.
        aggregations: Per criterion with two judges or more, the comparison of jury
            aggregations on the raw scores (mean, error-covariance weights, Dawid-Skene).
        notes: What the caller should warn its user of (partial joins, weak fits, ...).
    """

    map: CalibrationMap
    rubric: Rubric | None
    jury: str | None
    aggregations: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def hurting(self) -> list[str]:
        """The criteria on which the map makes the jury worse (cross-validated)."""
        return self.map.hurting()

    def to_dict(self, out: str | Path) -> dict[str, Any]:
        """The fit as plain data (``jurybox calibrate --json``), the map saved at ``out``."""
        cmap = self.map
        return {
            "map": str(out),
            "provenance": cmap.provenance_,
            "rubric": self.rubric.name if self.rubric else None,
            "jury": self.jury,
            "params": cmap.to_dict()["params"],
            "criteria": cmap.criteria,
            "cross_validation": cmap.cv_,
            "aggregation": [a.to_dict() for a in self.aggregations],
            "warnings": self.notes,
        }

    def advice(self, out: str | Path, rubric: str | None = None) -> str:
        """Where the map was written and whether (and how) to apply it, in one sentence.

        Args:
            out: Where the map was saved.
            rubric: The rubric as the user named it (default: the fitted rubric's name).
        """
        cmap, hurts = self.map, self.hurting
        rubric_arg = rubric or (self.rubric.name if self.rubric else "RUBRIC")
        apply = (
            f"jurybox judge PREDICTIONS --rubric {rubric_arg} "
            f"--jury {self.jury or 'JURY'} --calibration {out}"
        )
        wrote = f"wrote {out} (provenance {cmap.provenance_})"
        others = [c for c in cmap.criteria if c not in hurts]
        if not hurts:
            advice = f"apply it with: {apply}"
        elif not others:
            advice = (
                f"applying it is not recommended: calibration hurts on "
                f"{'every criterion' if len(hurts) > 1 else hurts[0]}"
            )
        else:
            keep = " ".join(f"-c {c}" for c in others)
            advice = (
                f"calibration hurts on {', '.join(hurts)}, so refit with only the others "
                f"({keep}) before applying it with: {apply}"
            )
        return f"{wrote}; {advice}"


def fit_map(
    human: str | Path,
    judged: str | Path,
    *,
    rubric: str | None = None,
    method: Literal["isotonic", "ordinal"] = "isotonic",
    value: Literal["score", "expected"] = "score",
    output: Literal["clip", "round"] = "clip",
    folds: int = 5,
    criteria: list[str] | None = None,
    provenance: str | None = None,
    seed: int = 0,
) -> FittedMap:
    """Fit a calibration map from human labels and judged verdicts (``jurybox calibrate``).

    Args:
        human: The human labels (JSONL or CSV: id, optional rater, a column per criterion).
        judged: The verdicts ``jurybox judge`` wrote (a JSONL file or a directory of shards).
        rubric: A rubric name or YAML file (default: the verdicts').
        method: The per-judge map: ``isotonic`` or ``ordinal``.
        value: The judge value mapped: each vote's ``score`` or its ``expected`` score.
        output: The calibrated value: ``clip`` (continuous) or ``round`` (a scale value).
        folds: Cross-validation folds of the before/after report.
        criteria: Only these criteria (default: every judged one the labels have).
        provenance: Only the verdicts of this provenance hash.
        seed: The random seed (CV folds, bootstrap).

    Returns:
        The fitted map (not yet saved), the aggregations compared, the notes.

    Raises:
        InputError: The labels or verdicts cannot be used.
    """
    from jurybox.calibration import CalibrationMap, join_warnings

    human, judged = Path(human), Path(judged)
    verdicts, rubric_def, notes = load_inputs(judged, rubric, provenance, pairwise=True)
    cmap = CalibrationMap(method=method, output=output, value=value, cv_folds=folds, seed=seed)
    cmap.fit(human, verdicts, scales=rubric_def, criteria=criteria or None)
    aggregations = _aggregations(
        human, verdicts, rubric_def, cmap.criteria, value, folds, seed, notes
    )
    # (CalibrationMap leaves fitted_on_ unannotated, so mypy infers its values from fit()'s)
    fitted_on: dict[str, Any] = cmap.fitted_on_
    fitted_on.update(
        human_labels=str(human),
        judge_output=str(judged),
        rubric=rubric_def.name if rubric_def else None,
    )
    notes += join_warnings(fitted_on.get("join", {}))
    notes += cmap.warnings()
    jury = verdicts.records[0].jury if verdicts.records else None
    return FittedMap(cmap, rubric_def, jury, aggregations, notes)


def _aggregations(
    human: Path,
    output: Any,
    rubric_def: Any,
    criteria: list[str],
    value: Any,
    folds: int,
    seed: int,
    notes: list[str],
) -> list[Any]:
    """``calibrate``'s comparison of jury aggregations, per criterion with two judges or more.

    The comparison is jurybox.calibration.maps.aggregation's; a criterion with too few items is
    noted, not fatal.
    """
    from jurybox.calibration.data.joined import join
    from jurybox.calibration.maps.aggregation import compare_aggregations
    from jurybox.rubrics.errors import InputError

    if len(output.judges) < 2:
        return []
    joined = join(human, output, scales=rubric_def, criteria=criteria, value=value)
    out = []
    for name, data in joined.criteria.items():
        try:
            out.append(
                compare_aggregations(
                    name, data.judges, data.human_mean, data.scale.values, folds=folds, seed=seed
                )
            )
        except InputError as exc:
            notes.append(f"jury aggregation not compared: {exc}")
    return out
