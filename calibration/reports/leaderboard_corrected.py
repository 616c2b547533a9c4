"""The leaderboard's human-corrected means and differences (PPI over the systems' labels).

Used by `jurybox.calibration.reports.leaderboard`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..estimates.active import (
    MeanEstimate,
    design_of,
    mean_estimates,
    pool_model,
    pool_probabilities,
)
from ..estimates.ppi import ppi_mean
from ..estimates.rectified import step_of
from .leaderboard_rows import CommonGround, System


def _corrected_entries(
    rows: list[dict[str, Any]],
    systems: Sequence[System],
    crit_ids: Sequence[str],
    ground: CommonGround,
    criterion: str,
    scales: Mapping[str, Any],
    confidence: float,
) -> None:
    """Each system's human-corrected mean of ``criterion`` (into ``rows``), on common ground.

    The PPI++ mean over the common items (the pool restricted to them: the labels on other
    items only count towards an active design's visits), and where the ranking dropped items,
    the mean over the system's own items under ``own`` (shown, not ranked).
    """
    common = {i for i, keep in zip(crit_ids, ground.items) if keep}
    for row, s in zip(rows, systems):
        entry = row["criteria"][criterion]
        why = (
            "no human labels for this system"
            if not s.labels
            else "a formula: the human labels are per criterion"
            if criterion not in scales
            else "left out of the common ground"
            if s.name in ground.left_out
            else "no item was scored for every system"
            if not ground.size
            else None
        )
        entry["human_corrected"] = (
            {"mean": None, "reason": why}
            if why is not None
            else _corrected_entry(_ppi_mean(s, scales, confidence, criterion, common))
        )
        if s.labels and criterion in scales and (ground.dropped or s.name in ground.left_out):
            entry["own"]["human_corrected"] = _corrected_entry(
                _ppi_mean(s, scales, confidence, criterion)
            )


def _ppi_mean(
    system: System,
    scales: Mapping[str, Any],
    confidence: float,
    criterion: str,
    common: set[str] | None = None,
) -> MeanEstimate | str:
    """The system's PPI++ mean of ``criterion`` as ``jurybox agree --ppi`` gives it.

    Over its own items, or over the ``common`` ones: the other items' verdicts are left out of
    the pool as an unscored item's are (an active design's visiting order is rebuilt over all
    its items, and only the visited common items count).
    """
    lines = [line for line in system.labels or () if line.get("id") is not None]
    assert system.output is not None
    records = system.output.records
    pool = {r.id: r.scores if common is None or r.id in common else {} for r in records}
    active = design_of(lines) == "active"
    got = mean_estimates(
        lines,
        pool,
        scales,
        confidence=confidence,
        criteria=[criterion],
        model=pool_model(records, scales),
        probabilities=pool_probabilities(records, scales) if active else None,
    )[criterion]
    if common is None or not isinstance(got, MeanEstimate):
        return got
    # The estimator's notes on unscored items are about the items left out here.
    notes = [
        n for n in got.notes if "are not in the pool" not in n and "left them unscored" not in n
    ]
    notes.insert(0, f"on the {got.pool} items every system scored, as the ranking")
    return replace(got, notes=tuple(notes))


def _corrected_entry(got: MeanEstimate | str) -> dict[str, Any]:
    """A system's human-corrected entry: the estimate, or why there is none."""
    if not isinstance(got, MeanEstimate):
        return {"mean": None, "reason": got or "no labels on this criterion"}
    return {
        "mean": got.estimate,
        "ci": list(got.ci),
        "interval": got.interval,
        "labelled": got.labelled,
        "pool": got.pool,
        "design": got.design,
        "lambda": got.lam,
        "notes": list(got.notes),
    }


def _corrected_difference(
    a: System,
    b: System,
    xa: np.ndarray,
    xb: np.ndarray,
    ids: Sequence[str],
    human: Mapping[str, Mapping[str, Mapping[str, float]]],
    criterion: str,
    confidence: float,
    scale: Any = None,
) -> dict[str, Any]:
    """PPI++ on the per-item differences of two systems.

    Labelled where both systems have a label on the item (uniform designs: the intersection of two
    random samples is one), the jury's differences on every item both scored; with the criterion's
    ``scale``, the small-sample rule of `jurybox.calibration.estimates.ppi.ppi_mean` (a
    difference lies within plus or minus the scale's range).
    """
    for s in (a, b):
        if s.name not in human:
            return {"difference": None, "reason": f"{s.name} has no human labels"}
        if design_of(list(s.labels or ())) == "active":
            return {
                "difference": None,
                "reason": f"{s.name}'s labels were chosen actively for "
                "its own mean: a difference needs the same items labelled for both at random",
            }
    ha, hb = human[a.name].get(criterion, {}), human[b.name].get(criterion, {})
    if not ha or not hb:
        return {"difference": None, "reason": "no labels on this criterion for both systems"}
    both = ~np.isnan(xa) & ~np.isnan(xb)
    labelled = np.array([i in ha and i in hb for i in ids]) & both
    n = int(labelled.sum())
    if n < 2 or not (both & ~labelled).any():
        return {
            "difference": None,
            "reason": f"{n} item(s) labelled for both systems; need 2, "
            "and an unlabelled item both scored",
        }
    y = np.array([ha[i] - hb[i] for i, lab in zip(ids, labelled) if lab])
    d = xa - xb
    span = None if scale is None else float(scale.high - scale.low)
    est = ppi_mean(
        y,
        d[labelled],
        d[both & ~labelled],
        confidence=confidence,
        bounds=None if span is None else (-span, span),
        step=1.0 if scale is None else step_of(scale),
    )
    return {
        "difference": est.estimate,
        "ci": list(est.ci),
        "interval": est.interval,
        "labelled": n,
        "lambda": est.lam,
        "notes": list(est.notes),
    }
