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

from jurybox.serving.options import (
    CASCADE_JURY,
    CRITERIA,
    FOLDS,
    GROUP,
    HUMAN,
    JUDGED,
    PROVENANCE,
    RISK,
    RUBRIC,
    SEED,
    TARGET_AGREEMENT,
    VALUE,
    command_line,
    option,
)
from jurybox.serving.runs.agree import refuse_points
from jurybox.serving.runs.inputs import load_inputs

if TYPE_CHECKING:
    from jurybox.calibration import CalibrationMap
    from jurybox.rubrics import Rubric

#: Where a conformal interval holds several raters' labels (``jurybox calibrate --cover``).
Cover = Literal["every-rater", "one-rater"]


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


@command_line(
    human=HUMAN,
    judged=JUDGED,
    rubric=RUBRIC,
    method=option(
        help="Per-judge map onto the human scale: `isotonic` (monotone step function) or "
        "`ordinal` (cumulative-logit model; smoother with few labels)."
    ),
    value=VALUE,
    output=option(
        "--output",
        help="Calibrated value: `clip` keeps the continuous value within the "
        "scale, `round` snaps it to the nearest scale value.",
    ),
    folds=FOLDS,
    criteria=CRITERIA,
    provenance=PROVENANCE,
    seed=SEED,
)
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
    from jurybox.calibration.data.points import point_judged

    human, judged = Path(human), Path(judged)
    verdicts, rubric_def, notes = load_inputs(judged, rubric, provenance, pairwise=True)
    cmap = CalibrationMap(method=method, output=output, value=value, cv_folds=folds, seed=seed)
    labels: Any = human
    scales: Any = rubric_def
    if point_judged(verdicts):
        labels, verdicts, scales = _pooled_points(human, verdicts, criteria, notes)
        criteria = None
    cmap.fit(labels, verdicts, scales=scales, criteria=criteria or None)
    aggregations = _aggregations(labels, verdicts, scales, cmap.criteria, value, folds, seed, notes)
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


def _pooled_points(
    human: Path, verdicts: Any, criteria: list[str] | None, notes: list[str]
) -> tuple[Any, Any, dict[str, Any]]:
    """Checklist verdicts judged point by point: the labels and verdicts pooled per point.

    The map is fitted on ``met`` over every labelled point of every item
    (`jurybox.calibration.data.points`); the item score is HealthBench's rule on the points,
    not a criterion of its own.
    """
    from jurybox.calibration.data.points import (
        MET,
        MET_SCALE,
        load_point_labels,
        pooled_output,
    )
    from jurybox.rubrics.errors import InputError

    if criteria and list(criteria) != [MET]:
        raise InputError(
            f"checklist verdicts are calibrated on {MET} (every point pooled); "
            f"--criterion {criteria[0]} is not one",
            field="criterion",
        )
    labels = load_point_labels(human, verdicts)
    notes += labels.notes
    notes.append(
        f"{MET}: fitted over {len(labels.met.ids)} point labels pooled across items "
        "(a point is its item's, never joined by key across items)"
    )
    return labels.met, pooled_output(verdicts), {MET: MET_SCALE}


def _aggregations(
    human: Any,
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


# --------------------------------------------------------------------------- conformal


@dataclass
class FittedConformal:
    """A conformal map fitted by `fit_conformal_map`, and what to say about it.

    Attributes:
        map: The fitted map (``save`` it; apply it with ``jurybox judge --conformal``).
        rubric: The rubric whose scales the intervals are on.
        notes: What the caller should warn its user of (criteria and groups with few labels).
    """

    map: Any
    rubric: Rubric
    notes: list[str] = field(default_factory=list)


@command_line(
    human=HUMAN,
    judged=JUDGED,
    alpha=option(
        help="With --conformal: the allowed probability that a human's label falls outside "
        "an item's interval.",
        min=0.001,
        max=0.5,
    ),
    rubric=RUBRIC,
    provenance=PROVENANCE,
    group=GROUP,
    criteria=CRITERIA,
    folds=FOLDS,
    seed=SEED,
    cover=option(
        help="With --conformal, where items have several raters: an interval holds every "
        "rater's label (`every-rater`), or the label of a rater chosen at random "
        "(`one-rater`: narrower where raters disagree), with probability >= 1 - alpha."
    ),
)
def fit_conformal_map(
    human: str | Path,
    judged: str | Path,
    *,
    alpha: float = 0.1,
    rubric: str | None = None,
    provenance: str | None = None,
    group: str | None = None,
    criteria: list[str] | None = None,
    folds: int = 5,
    seed: int = 0,
    cover: Cover = "every-rater",
) -> FittedConformal:
    """Fit a conformal map (``jurybox calibrate --conformal``).

    Per criterion, the threshold that gives each judged item an interval of levels holding a
    human's label with probability at least 1 - ``alpha``
    (`jurybox.calibration.maps.conformal`).

    Args:
        human: The human labels; labels chosen actively for the benchmark mean are refused.
        judged: The verdicts ``jurybox judge`` wrote.
        alpha: The allowed probability that a human's label falls outside an interval.
        rubric: A rubric name or YAML file (default: the verdicts').
        provenance: Only the verdicts of this provenance hash.
        group: A column of the labels: one threshold per group of it.
        criteria: Only these criteria (default: every one of the rubric).
        folds: Cross-validation folds of the coverage report.
        seed: The random seed of the folds.
        cover: ``every-rater`` or ``one-rater`` (where items have several raters).

    Returns:
        The fitted map (not yet saved) and the notes.

    Raises:
        InputError: The labels or verdicts cannot be used (naming the row).
    """
    import math

    from jurybox.calibration.data.labels import label_groups, label_rows
    from jurybox.calibration.maps.conformal import fit_conformal
    from jurybox.serving.runs.inputs import scaled_inputs

    criteria = list(criteria or [])
    output, rubric_def, notes, scales = scaled_inputs(Path(judged), rubric, provenance, criteria)
    refuse_points(output, "--conformal")
    if criteria:
        scales = {c: scales[c] for c in criteria}
    groups = label_groups(human, group) if group else None
    cmap = fit_conformal(
        label_rows(human, active=False),
        output.records,
        scales,
        alpha=alpha,
        groups=groups,
        group_column=group,
        provenance=output.provenance,
        rubric=rubric_def.name,
        folds=folds,
        seed=seed,
        cover=cover,
    )
    for name, row in cmap.report.items():
        if "note" in row:
            notes.append(f"{name}: {row['note']}")
        for g, got in (row.get("cv_coverage_by_group") or {}).items():
            if got["labelled"] < math.ceil(1 / alpha) - 1:
                notes.append(
                    f"{name}, group {g}: {got['labelled']} labelled items, too few to "
                    f"check its {1 - alpha:.0%} coverage (its interval is the whole "
                    "scale)"
                )
    return FittedConformal(cmap, rubric_def, notes)


# --------------------------------------------------------------------------- cascade


@dataclass
class FittedCascade:
    """A cascaded jury's threshold fitted by `fit_cascade_jury`.

    Attributes:
        fit: The fit (threshold, what it certifies, the calls saved).
        data: The labelled items' data it was fitted on.
        fitted: The jury with its threshold (None: no threshold keeps the guarantee and saves
            judge calls; the whole jury on every item is what meets it).
        jury: The jury as given (its stages without thresholds).
        rubric: The rubric the verdicts were judged with.
        groups: Each group's agreement at the threshold (with ``group``).
        human: The labels' file.
        notes: What the caller should warn its user of (groups below the target last).
    """

    fit: Any
    data: Any
    fitted: Any
    jury: Any
    rubric: Rubric
    groups: list[Any]
    human: Path
    notes: list[str] = field(default_factory=list)

    def to_dict(self, out: str | Path) -> dict[str, Any]:
        """The fit as plain data (``--json``), the jury written at ``out`` if it was fitted."""
        return {
            "jury": self.jury.name,
            "rubric": self.rubric.name,
            **self.fit.to_dict(),
            "stage_judges": self.data.stage_judges,
            "criteria": self.data.criteria,
            "excluded": self.data.excluded,
            "unmeasured": self.data.unmeasured,
            "groups": [g.to_dict() for g in self.groups],
            "out": str(out) if self.fitted else None,
        }

    def describe(self) -> str:
        """The fit in words."""
        from jurybox.serving.runs.cascade_fit import describe

        return describe(self.fit, self.data)

    def save(self, out: str | Path) -> None:
        """Write the jury with its threshold (a YAML jury file) to ``out``."""
        fit = self.fit
        write_cascade_jury(
            self.fitted,
            self.jury,
            Path(out),
            f"on {fit.n} labelled items ({self.human.name}): "
            f"{fit.certified}; judge calls saved on them {fit.calls_saved:.1%}",
        )


@command_line(
    human=HUMAN,
    judged=JUDGED,
    jury=CASCADE_JURY,
    target_agreement=TARGET_AGREEMENT,
    risk=RISK,
    rubric=RUBRIC,
    group=GROUP,
)
def fit_cascade_jury(
    human: str | Path,
    judged: str | Path,
    *,
    jury: str,
    target_agreement: float,
    risk: float = 0.1,
    rubric: str | None = None,
    group: str | None = None,
) -> FittedCascade:
    """Fit a cascaded jury's confidence threshold (``jurybox calibrate --cascade``).

    With probability at least 1 - ``risk`` the cascade's agreement with the humans is at
    least ``target_agreement``, over items like the labelled ones as a whole
    (`jurybox.serving.runs.cascade_fit.fit_cascade`).

    Args:
        human: The human labels.
        judged: The jury's verdicts on the labelled items, every judge on every item.
        jury: The jury (name or YAML file) whose stages to fit.
        target_agreement: The agreement the cascade must reach.
        risk: The allowed probability that its true agreement is below the target.
        rubric: A rubric name or YAML file (default: the verdicts').
        group: A column of the labels: each group's agreement at the threshold, with a
            note where one is shown to fall below the target.

    Returns:
        The fit, and the fitted jury (not yet written).

    Raises:
        InputError: The labels, verdicts or jury cannot be used, or no threshold can be
            shown to reach the target.
    """
    from jurybox.calibration import label_groups
    from jurybox.serving.runs.cascade_fit import fit_cascade, group_results

    human = Path(human)
    output, rubric_def, spec, notes = _cascade_inputs(Path(judged), rubric, jury)
    groups = label_groups(human, group) if group is not None else None
    fit, data, fitted = fit_cascade(
        human,
        output,
        rubric_def,
        spec,
        groups=groups,
        target_agreement=target_agreement,
        risk=risk,
    )
    by_group = group_results(fit, data)
    for g in by_group:
        if g.below_target:
            notes.append(
                f"group {g.group}: the cascade agrees with the humans on {g.agreement:.3f} of "
                f"its {g.n} labelled items (at most {g.upper_bound:.3f} with probability "
                f"{1 - risk:g}), below the target {target_agreement:g}: the guarantee is over "
                f"all items, not this group; --by-group {group} fits each group on its own"
            )
    return FittedCascade(fit, data, fitted, spec, rubric_def, by_group, human, notes)


@dataclass
class FittedGroups:
    """One cascade threshold per group, fitted by `fit_cascade_jury_by_group`.

    Attributes:
        fits: Group -> (fit or None where refused, data, fitted jury or None, why refused).
        column: The labels' column naming the groups.
        risk: The risk of all groups together (split equally among them).
        jury: The jury as given.
        rubric: The rubric the verdicts were judged with.
        human: The labels' file.
        notes: What the caller should warn its user of.
    """

    fits: dict[str, tuple[Any, Any, Any, str | None]]
    column: str
    risk: float
    jury: Any
    rubric: Rubric
    human: Path
    notes: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        """Whether no group's target could be certified with its labels."""
        return all(fit is None for fit, *_ in self.fits.values())

    @staticmethod
    def path(out: str | Path, name: str) -> Path:
        """Where group ``name``'s jury goes: ``OUT.<group>.yaml`` beside ``out``."""
        import re

        out = Path(out)
        return out.with_name(f"{out.stem}.{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}{out.suffix}")

    def texts(self) -> list[str]:
        """The fits in words: what the split risk certifies, then each group."""
        from jurybox.serving.runs.cascade_fit import describe

        n, risk = len(self.fits), self.risk
        texts = [
            f"{n} groups of {self.column}, each fitted on its own items at risk "
            f"{risk:g} / {n} = {risk / n:.4g}: with probability >= {1 - risk:g} every "
            "group's cascade meets the target at once"
        ]
        for name, (fit, data, _, refused) in self.fits.items():
            if fit is None:
                texts.append(f"group {name} ({len(data.ids)} labelled items): refused: {refused}")
                continue
            texts.append(
                describe(
                    fit,
                    data,
                    title=f"group {name}: cascade of "
                    f"{len(data.stage_judges)} stages on {fit.n} "
                    "labelled items",
                    population=f"over the items of group {name}",
                )
            )
        return texts

    def to_dict(self, out: str | Path) -> dict[str, Any]:
        """The fits as plain data (``--json``), each group's jury written beside ``out``."""
        groups: dict[str, Any] = {}
        for name, (fit, data, fitted, refused) in self.fits.items():
            if fit is None:
                groups[name] = {"refused": refused, "n": len(data.ids), "out": None}
            else:
                path = self.path(out, name)
                groups[name] = {**fit.to_dict(), "out": str(path) if fitted else None}
        return {
            "jury": self.jury.name,
            "rubric": self.rubric.name,
            "group_column": self.column,
            "risk": self.risk,
            "risk_per_group": self.risk / len(self.fits),
            "groups": groups,
        }

    def save(self, out: str | Path) -> list[str]:
        """Write each fitted group's jury (``OUT.<group>.yaml``); the paths written."""
        written = []
        for name, (fit, _, fitted, _) in self.fits.items():
            if fit is None or fitted is None:
                continue
            path = self.path(out, name)
            write_cascade_jury(
                fitted,
                self.jury,
                path,
                f"for group {name} of {self.column}, on {fit.n} "
                f"labelled items ({self.human.name}): {fit.certified} (risk {self.risk:g} "
                f"split among {len(self.fits)} groups); judge calls saved on them "
                f"{fit.calls_saved:.1%}",
            )
            written.append(str(path))
        return written


@command_line(
    human=HUMAN,
    judged=JUDGED,
    jury=CASCADE_JURY,
    column=option(
        "--by-group",
        type=str | None,
        default=None,
        help="With --cascade: fit one threshold per group of this column of HUMAN, "
        "each on its group's items at --risk split equally among the groups, "
        "so every group's guarantee holds at once; writes OUT.<group>.yaml "
        "per group.",
        show_default=False,
    ),
    target_agreement=TARGET_AGREEMENT,
    risk=RISK,
    rubric=RUBRIC,
)
def fit_cascade_jury_by_group(
    human: str | Path,
    judged: str | Path,
    *,
    jury: str,
    column: str,
    target_agreement: float,
    risk: float = 0.1,
    rubric: str | None = None,
) -> FittedGroups:
    """One cascade threshold per group (``jurybox calibrate --cascade --by-group``).

    Each group is fitted on its own labelled items at ``risk`` split equally among the
    groups, so every group's guarantee holds at once
    (`jurybox.serving.runs.cascade_fit.fit_by_group`).

    Args:
        human: The human labels.
        judged: The jury's verdicts on the labelled items, every judge on every item.
        jury: The jury (name or YAML file) whose stages to fit.
        column: The labels' column naming each item's group.
        target_agreement: The agreement every group's cascade must reach.
        risk: The allowed probability that some group's true agreement is below the target.
        rubric: A rubric name or YAML file (default: the verdicts').

    Returns:
        The fits (not yet written).

    Raises:
        InputError: The labels, verdicts or jury cannot be used.
    """
    from jurybox.calibration import label_groups
    from jurybox.serving.runs.cascade_fit import fit_by_group

    human = Path(human)
    output, rubric_def, spec, notes = _cascade_inputs(Path(judged), rubric, jury)
    fits = fit_by_group(
        human,
        output,
        rubric_def,
        spec,
        label_groups(human, column),
        target_agreement=target_agreement,
        risk=risk,
    )
    return FittedGroups(fits, column, risk, spec, rubric_def, human, notes)


def _cascade_inputs(
    judged: Path, rubric: str | None, jury_ref: str
) -> tuple[Any, Any, Any, list[str]]:
    from jurybox.judges import load_jury_spec
    from jurybox.rubrics.errors import InputError

    output, rubric_def, notes = load_inputs(judged, rubric, None)
    refuse_points(output, "--cascade")
    if rubric_def is None:
        raise InputError(
            "--cascade needs the rubric the verdicts were judged with (--rubric NAME_OR_FILE)"
        )
    return output, rubric_def, load_jury_spec(jury_ref), notes


def write_cascade_jury(fitted: Any, jury: Any, out: Path, what: str) -> None:
    """Write a jury with its fitted thresholds (YAML), ``what`` was fitted in its description.

    Raises:
        OSError: ``out`` cannot be written.
    """
    import yaml

    summary = f"thresholds fitted by `jurybox calibrate --cascade` {what}"
    fitted = fitted.model_copy(
        update={
            "description": (
                f"{jury.description.strip()}\n{summary}" if jury.description.strip() else summary
            )
        }
    )
    text = yaml.safe_dump(
        fitted.model_dump(mode="json", exclude_defaults=True), sort_keys=False, width=100
    )
    out.write_text(text, encoding="utf-8")
