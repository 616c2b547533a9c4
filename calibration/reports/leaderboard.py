"""A leaderboard of systems judged on the same items (``jurybox leaderboard``).

Per system and criterion (the rubric's criteria and its formulas): the mean over the items the
jury scored with its Student-t interval, the counts scored / unscored / missing (an item another
system has and this one lacks), and the rank with its bootstrap interval over items
(:func:`jurybox.calibration.stats.paired.rank_intervals`). Per pair of systems: the mean
difference on the items both scored, with its paired interval and p-value, Holm-adjusted over
the pairs of the criterion; the systems the data cannot separate share a letter. Nothing is
zero-filled: an item one system lacks is out of that system's mean and out of its pairs.

With human labels (on some items of some systems): each labelled system's mean by PPI++, the
estimator ``jurybox agree --ppi`` uses (:func:`jurybox.calibration.estimates.active.mean_estimates`,
uniform or actively chosen labels), beside the jury's; a pair's difference corrected the same
way (PPI++ on the per-item differences) where both systems have labels on the same items from
uniform designs. With answer lengths: each system's length-controlled mean (the correction of
``jurybox judge --length-control``, :mod:`jurybox.calibration.audits.length_control`) beside the
raw one, and whether the order changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from ..audits.length_control import length_control
from ..data.verdicts import JudgeOutput
from ..errors import InputDataError
from ..estimates.active import (
    MeanEstimate,
    design_of,
    labels_by_item,
    mean_estimates,
    pool_model,
    pool_probabilities,
)
from ..estimates.ppi import ppi_mean
from ..stats.paired import (
    holm,
    letter_groups,
    paired_difference,
    rank_intervals,
    ranks_of,
    wilson_ci,
)
from ..stats.stat import jsonable, mean_ci


@dataclass
class System:
    """One system: its verdicts (``output``), or per-item values of other metrics (``values``:
    criterion -> item id -> value, None where the item has none, e.g. a benchmark pack's
    per-item results); with its human label lines (``label_rows``) and answer lengths (item id
    -> length in words) where given (verdicts only)."""

    name: str
    output: JudgeOutput | None = None
    labels: Sequence[Mapping[str, Any]] | None = None
    lengths: Mapping[str, float] | None = None
    values: Mapping[str, Mapping[str, float | None]] | None = None
    source: str | None = None

    def scores(self, criterion: str) -> dict[str, float | None]:
        """Item id -> this system's value on ``criterion`` (None: unscored), for every item
        the criterion applies to here."""
        if self.values is not None:
            return dict(self.values.get(criterion, {}))
        assert self.output is not None
        return {r.id: r.scores.get(criterion) for r in self.output.records}

    def ids(self) -> list[str]:
        """Every item of this system."""
        if self.values is not None:
            return list(dict.fromkeys(i for by_item in self.values.values() for i in by_item))
        assert self.output is not None
        return self.output.ids


@dataclass
class Leaderboard:
    """The table as plain data (:meth:`to_dict` is ``jurybox leaderboard --json``)."""

    criteria: list[str]
    rank_by: str
    confidence: float
    items: int
    systems: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    length_control: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return jsonable({"criteria": self.criteria, "rank_by": self.rank_by,
                         "confidence": self.confidence, "items": self.items,
                         "systems": self.systems, "pairs": self.pairs,
                         "length_control": self.length_control, "notes": self.notes})

    def system(self, name: str) -> dict[str, Any]:
        return next(s for s in self.systems if s["name"] == name)


def leaderboard(systems: Sequence[System], criteria: Sequence[str], scales: Mapping[str, Any],
                *, rank_by: str | None = None, confidence: float = 0.95,
                resamples: int = 2000, seed: int = 0,
                centre_length: float | None = None) -> Leaderboard:
    """The leaderboard of ``systems`` on ``criteria`` (score names of their verdicts: criteria
    with a scale in ``scales``, formulas without). ``rank_by`` orders the table (default: the
    last of ``criteria``, the rubric's formula where it has one). Length control runs where every
    system has lengths, controlled to ``centre_length`` (the reference answers' median length;
    None: each system's own mean length)."""
    if len(systems) < 2:
        raise InputDataError(f"a leaderboard compares at least 2 systems; got {len(systems)}")
    names = [s.name for s in systems]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputDataError(f"two systems are named {twice[0]!r}: give each its own --name")
    if not criteria:
        raise InputDataError("no criterion to rank on")
    rank_by = rank_by or criteria[-1]
    if rank_by not in criteria:
        raise InputDataError(f"--criterion {rank_by}: not a score of these verdicts "
                             f"({list(criteria)})", field="criterion")
    if any(s.output is None and (s.labels or s.lengths) for s in systems):
        raise InputDataError("human labels and length control need a system's verdicts")
    ids = list(dict.fromkeys(i for s in systems for i in s.ids()))
    position = {i: k for k, i in enumerate(ids)}
    present = np.zeros((len(systems), len(ids)), dtype=bool)
    for k, s in enumerate(systems):
        present[k, [position[i] for i in s.ids()]] = True
    notes: list[str] = []
    shared = int(present.all(axis=0).sum())
    if shared < len(ids):
        notes.append(f"{len(ids) - shared} of {len(ids)} items are missing from some system: "
                     "each pair is compared on the items both scored")
    alpha = 1.0 - confidence
    human = {s.name: _human_values(s, scales) for s in systems if s.labels}
    estimates = {s.name: _ppi_means(s, scales, confidence) for s in systems if s.labels}
    with_lengths = all(s.lengths is not None for s in systems)
    rows: list[dict[str, Any]] = [
        {"name": s.name, "source": s.source or (s.output.source if s.output else None),
         "criteria": {}} for s in systems]
    pairs: list[dict[str, Any]] = []
    lc: dict[str, Any] | None = {} if with_lengths else None
    for c_index, criterion in enumerate(criteria):
        by_system = [s.scores(criterion) for s in systems]
        # The items the criterion applies to (in any system), in the systems' order.
        crit_ids = [i for i in ids if any(i in got for got in by_system)]
        x = np.array([[np.nan if (v := got.get(i)) is None else float(v) for i in crit_ids]
                      for got in by_system]).reshape(len(systems), len(crit_ids))
        here = np.array([[i in got for i in crit_ids] for got in by_system],
                        dtype=bool).reshape(len(systems), len(crit_ids))
        ranks, rank_ci = rank_intervals(x, confidence=confidence, resamples=resamples,
                                        seed=seed + c_index)
        # A share (every value 0 or 1: accuracies, yes/no criteria) gets Wilson's interval,
        # which stays inside [0, 1] with few items; other means Student's t.
        share = bool(np.isin(x[~np.isnan(x)], (0.0, 1.0)).all())
        for row, s in enumerate(systems):
            scored = x[row][~np.isnan(x[row])]
            mean, ci = wilson_ci(scored, confidence) if share else mean_ci(scored, confidence)
            entry: dict[str, Any] = {
                "mean": mean, "ci": list(ci) if ci else None, "scored": int(scored.size),
                "unscored": int(here[row].sum() - scored.size),
                "missing": int((~here[row]).sum()),
                "rank": None if np.isnan(ranks[row]) else int(ranks[row]),
                "rank_ci": None if np.isnan(rank_ci[row]).any() else
                [int(rank_ci[row, 0]), int(rank_ci[row, 1])]}
            if human:
                entry["human_corrected"] = _corrected_entry(estimates.get(s.name), criterion,
                                                            scales)
            rows[row]["criteria"][criterion] = entry
        order = sorted(range(len(systems)),
                       key=lambda k: (np.inf if np.isnan(ranks[k]) else -_mean(rows[k], criterion)))
        found = []
        for a, b in combinations(order, 2):
            diff = paired_difference(x[a], x[b], confidence)
            pair: dict[str, Any] = {
                "a": names[a], "b": names[b], "criterion": criterion,
                "difference": diff.difference, "ci": list(diff.ci) if diff.ci else None,
                "shared": diff.shared, "only_a": diff.only_a, "only_b": diff.only_b,
                "p": diff.p}
            if human:
                pair["human_corrected"] = _corrected_difference(
                    systems[a], systems[b], x[a], x[b], crit_ids, human, criterion, confidence)
            found.append(pair)
        adjusted = holm([p["p"] for p in found])
        different = np.zeros((len(systems), len(systems)), dtype=bool)
        for pair, p_holm in zip(found, adjusted):
            pair["p_holm"] = p_holm
            pair["significant"] = p_holm is not None and p_holm < alpha
            if pair["significant"]:
                a, b = names.index(pair["a"]), names.index(pair["b"])
                different[a, b] = different[b, a] = True
        pairs.extend(found)
        groups = letter_groups([_mean(r, criterion) for r in rows], different)
        for table_row, letters in zip(rows, groups):
            table_row["criteria"][criterion]["group"] = letters
        if lc is not None:
            lengths = np.array([[float(s.lengths.get(i, math.nan)) if s.lengths else math.nan
                                 for i in crit_ids] for s in systems])
            lc[criterion] = _length_controlled(systems, x, lengths, crit_ids, human, criterion,
                                               centre_length, resamples, confidence, seed,
                                               rows)
    for table_row in rows:
        main = table_row["criteria"][rank_by]
        table_row.update(rank=main["rank"], rank_ci=main["rank_ci"], group=main["group"])
    rows.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0, r["name"]))
    for s in systems:
        if human and s.name not in human:
            notes.append(f"{s.name}: no human labels, so no human-corrected mean")
    return Leaderboard(list(criteria), rank_by, confidence, len(ids), rows, pairs, lc, notes)


def _mean(row: Mapping[str, Any], criterion: str) -> float:
    mean = row["criteria"][criterion]["mean"]
    return math.nan if mean is None else float(mean)


def _human_values(system: System, scales: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """criterion -> item id -> the mean of the raters' labels (items of this system only)."""
    known = set(system.ids())
    out: dict[str, dict[str, float]] = {}
    for criterion, scale in scales.items():
        try:
            by_item = labels_by_item(system.labels or (), criterion, scale, known)
        except InputDataError as exc:
            raise InputDataError(f"{system.name}: {exc}", field=criterion) from None
        if by_item:
            out[criterion] = {i: float(np.mean(v)) for i, v in by_item.items()}
    return out


def _ppi_means(system: System, scales: Mapping[str, Any], confidence: float
               ) -> dict[str, MeanEstimate | str]:
    """Per criterion, the system's PPI++ mean as ``jurybox agree --ppi`` gives it."""
    lines = [line for line in system.labels or () if line.get("id") is not None]
    assert system.output is not None
    records = system.output.records
    pool = {r.id: r.scores for r in records}
    active = design_of(lines) == "active"
    return mean_estimates(lines, pool, scales, confidence=confidence,
                          model=pool_model(records, scales),
                          probabilities=pool_probabilities(records, scales) if active else None)


def _corrected_entry(estimates: Mapping[str, MeanEstimate | str] | None, criterion: str,
                     scales: Mapping[str, Any]) -> dict[str, Any]:
    if estimates is None:
        return {"mean": None, "reason": "no human labels for this system"}
    if criterion not in scales:
        return {"mean": None, "reason": "a formula: the human labels are per criterion"}
    got = estimates.get(criterion)
    if not isinstance(got, MeanEstimate):
        return {"mean": None, "reason": got or "no labels on this criterion"}
    return {"mean": got.estimate, "ci": list(got.ci), "labelled": got.labelled,
            "design": got.design, "lambda": got.lam, "notes": list(got.notes)}


def _corrected_difference(a: System, b: System, xa: np.ndarray, xb: np.ndarray,
                          ids: Sequence[str], human: Mapping[str, Mapping[str, Mapping[str, float]]],
                          criterion: str, confidence: float) -> dict[str, Any]:
    """PPI++ on the per-item differences: labelled where both systems have a label on the item
    (uniform designs: the intersection of two random samples is one), the jury's differences on
    every item both scored."""
    for s in (a, b):
        if s.name not in human:
            return {"difference": None, "reason": f"{s.name} has no human labels"}
        if design_of(list(s.labels or ())) == "active":
            return {"difference": None, "reason": f"{s.name}'s labels were chosen actively for "
                    "its own mean: a difference needs the same items labelled for both at random"}
    ha, hb = human[a.name].get(criterion, {}), human[b.name].get(criterion, {})
    if not ha or not hb:
        return {"difference": None, "reason": "no labels on this criterion for both systems"}
    both = ~np.isnan(xa) & ~np.isnan(xb)
    labelled = np.array([i in ha and i in hb for i in ids]) & both
    n = int(labelled.sum())
    if n < 2 or not (both & ~labelled).any():
        return {"difference": None, "reason": f"{n} item(s) labelled for both systems; need 2, "
                "and an unlabelled item both scored"}
    y = np.array([ha[i] - hb[i] for i, lab in zip(ids, labelled) if lab])
    d = xa - xb
    est = ppi_mean(y, d[labelled], d[both & ~labelled], confidence=confidence)
    return {"difference": est.estimate, "ci": list(est.ci), "labelled": n,
            "lambda": est.lam, "notes": list(est.notes)}


def _length_controlled(systems: Sequence[System], x: np.ndarray, lengths: np.ndarray,
                       ids: Sequence[str], human: Mapping[str, Mapping[str, Mapping[str, float]]],
                       criterion: str, centre_length: float | None, resamples: int,
                       confidence: float, seed: int, rows: list[dict[str, Any]]
                       ) -> dict[str, Any]:
    """Each system's length-controlled mean on ``criterion`` (into its row) and whether the
    order changes."""
    controlled = np.full(len(systems), np.nan)
    for k, s in enumerate(systems):
        labels = human.get(s.name, {}).get(criterion)
        h = None if not labels else np.array([labels.get(i, math.nan) for i in ids])
        entry = rows[k]["criteria"][criterion]
        try:
            got = length_control(criterion, x[k], lengths[k], h, centre_length=centre_length,
                                 n_resamples=min(resamples, 1000), confidence=confidence,
                                 seed=seed)
        except InputDataError as exc:
            entry["length_controlled"] = {"mean": None, "reason": str(exc)}
            continue
        controlled[k] = got.controlled_mean
        entry["length_controlled"] = {"mean": got.controlled_mean,
                                      "slope_per_log_length": got.slope_per_log_length,
                                      "fitted_on": got.fitted_on}
    raw = np.array([_mean(r, criterion) for r in rows])
    complete = not np.isnan(controlled).any()
    return {"order_changes": bool(complete and not np.array_equal(ranks_of(raw),
                                                                  ranks_of(controlled))),
            "centre_length": centre_length, "complete": complete}
