"""A leaderboard of systems judged on the same items (``jurybox leaderboard``).

Systems are ranked on **common ground**: per criterion, the items every ranked system scored
(`CommonGround`; a system with no scored item is not ranked). An item one system lacks
(missing, or left unscored by the jury) is dropped from every system's ranked mean, and the
board says how many were dropped and which system lacks them: ranking each system on its own
items would rank systems on different items (one that lacks the hardest items looks better
than it is). Per system and criterion (the rubric's criteria and its formulas): the mean over
the common items with its Student-t interval (Wilson's for a share), its rank with the
bootstrap interval over those items (`jurybox.calibration.stats.paired.rank_intervals`),
the counts scored / unscored / missing (an item another system has and this one lacks), and
the mean over its own scored items (``own``: shown, never ranked). Per pair of systems: the
mean difference on the common items, with its paired interval and p-value, Holm-adjusted over
the pairs of the criterion, and where the pair shares more items than the common ground, its
difference on every item both scored too (``both_scored``: shown, not used for the groups);
the systems the data cannot separate share a letter. Nothing is zero-filled.

With human labels (on some items of some systems): each labelled system's mean by PPI++, the
estimator ``jurybox agree --ppi`` uses
(`jurybox.calibration.estimates.active.mean_estimates`, uniform or actively chosen
labels), beside the jury's and on the same common items (the pool restricted to them: a
uniform sample of a system's items is one of the common items too, and an active design's
visits of them are counted), so a system lacking the hardest items does not look better by
it either; its PPI++ mean over its own items is shown apart (``own``), where items were
dropped. A pair's difference corrected the same way (PPI++ on the per-item differences, on the
common items) where both systems have labels on the same items from uniform designs. With answer
lengths: each system's length-controlled mean (the correction of ``jurybox judge
--length-control``, `jurybox.calibration.audits.length_control`) beside the raw one, and
whether the order changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import numpy as np

from ..audits.length_control import length_control
from ..errors import InputDataError
from ..estimates.active import (
    labels_by_item,
)
from ..stats.paired import (
    holm,
    letter_groups,
    paired_difference,
    rank_intervals,
    ranks_of,
    wilson_ci,
)
from ..stats.stat import mean_ci
from .leaderboard_corrected import _corrected_difference, _corrected_entries
from .leaderboard_rows import CommonGround, Leaderboard, System

__all__ = ["CommonGround", "Leaderboard", "System", "leaderboard"]


def leaderboard(
    systems: Sequence[System],
    criteria: Sequence[str],
    scales: Mapping[str, Any],
    *,
    rank_by: str | None = None,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    centre_length: float | None = None,
    exclude: Sequence[str] = (),
    min_items: int = 0,
) -> Leaderboard:
    """The leaderboard of ``systems`` on ``criteria``, ranked on common ground (module text).

    ``criteria`` are score names of their verdicts: criteria with a scale in ``scales``, formulas
    without. ``rank_by`` orders the table (default: the last of ``criteria``, the rubric's formula
    where it has one). Length control runs where every system has lengths, controlled to
    ``centre_length`` (the reference answers' median length; None: each system's own mean
    length), on the common items. The systems named in ``exclude``, and per criterion those with
    fewer than ``min_items`` scored items, are left out of the common ground: listed apart (their
    own mean), not ranked. A criterion's means and intervals stay on its scale.
    """
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
        raise InputDataError(
            f"--criterion {rank_by}: not a score of these verdicts ({list(criteria)})",
            field="criterion",
        )
    unknown = [n for n in exclude if n not in names]
    if unknown:
        raise InputDataError(
            f"--exclude {unknown[0]}: no such system (the systems: {names})", field="exclude"
        )
    if any(s.output is None and (s.labels or s.lengths) for s in systems):
        raise InputDataError("human labels and length control need a system's verdicts")
    ids = list(dict.fromkeys(i for s in systems for i in s.ids()))
    notes: list[str] = []
    human = {s.name: _human_values(s, scales) for s in systems if s.labels}
    with_lengths = all(s.lengths is not None for s in systems)
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "source": s.source or (s.output.source if s.output else None),
            "criteria": {},
        }
        for s in systems
    ]
    pairs: list[dict[str, Any]] = []
    ranked_on: dict[str, dict[str, Any]] = {}
    lc: dict[str, Any] | None = {} if with_lengths else None
    for c_index, criterion in enumerate(criteria):
        by_system = [s.scores(criterion) for s in systems]
        # The items the criterion applies to (in any system), in the systems' order.
        crit_ids = [i for i in ids if any(i in got for got in by_system)]
        x = np.array(
            [
                [np.nan if (v := got.get(i)) is None else float(v) for i in crit_ids]
                for got in by_system
            ]
        ).reshape(len(systems), len(crit_ids))
        here = np.array([[i in got for i in crit_ids] for got in by_system], dtype=bool).reshape(
            len(systems), len(crit_ids)
        )
        ground = CommonGround.of(x, names, _left_out(x, names, exclude, min_items))
        ranked_on[criterion] = ground.to_dict()
        if ground.dropped or (ground.size == 0 and ground.ranked.sum() > 1):
            notes.append(ground.words(criterion))
        notes.extend(ground.sparse_words(criterion))
        common = np.where(ground.items[None, :] & ground.ranked[:, None], x, np.nan)
        _criterion_entries(
            rows,
            x,
            common,
            here,
            ground,
            criterion,
            confidence,
            resamples,
            seed + c_index,
            _bounds(scales.get(criterion)),
        )
        if human:
            _corrected_entries(rows, systems, crit_ids, ground, criterion, scales, confidence)
        found = _pairs(systems, x, common, crit_ids, human, criterion, confidence, rows, scales)
        adjusted = holm([p["p"] for p in found])
        different = np.zeros((len(systems), len(systems)), dtype=bool)
        for pair, p_holm in zip(found, adjusted):
            pair["p_holm"] = p_holm
            pair["significant"] = p_holm is not None and p_holm < 1.0 - confidence
            if pair["significant"]:
                a, b = names.index(pair["a"]), names.index(pair["b"])
                different[a, b] = different[b, a] = True
        pairs.extend(found)
        groups = letter_groups([_mean(r, criterion) for r in rows], different)
        for table_row, letters in zip(rows, groups):
            table_row["criteria"][criterion]["group"] = letters
        if lc is not None:
            lengths = np.array(
                [
                    [float(s.lengths.get(i, math.nan)) if s.lengths else math.nan for i in crit_ids]
                    for s in systems
                ]
            )
            lc[criterion] = _length_controlled(
                systems,
                common,
                lengths,
                crit_ids,
                human,
                criterion,
                centre_length,
                resamples,
                confidence,
                seed,
                rows,
            )
    for table_row in rows:
        main = table_row["criteria"][rank_by]
        table_row.update(rank=main["rank"], rank_ci=main["rank_ci"], group=main["group"])
    rows.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0, r["name"]))
    for s in systems:
        if human and s.name not in human:
            notes.append(f"{s.name}: no human labels, so no human-corrected mean")
    return Leaderboard(
        list(criteria), rank_by, confidence, len(ids), rows, pairs, lc, notes, ranked_on
    )


def _criterion_entries(
    rows: list[dict[str, Any]],
    x: np.ndarray,
    common: np.ndarray,
    here: np.ndarray,
    ground: CommonGround,
    criterion: str,
    confidence: float,
    resamples: int,
    seed: int,
    bounds: tuple[float, float] | None = None,
) -> None:
    """Each system's entry for ``criterion`` (into ``rows``): ranked mean and rank, own mean.

    The ranked mean and rank are on the common items (``common``: ``x`` with every other item,
    and every system left out of the ground, NaN), its own mean beside it; intervals within
    ``bounds`` (the criterion's scale: a Student interval on few items can run past its ends).
    """
    ranks = np.full(x.shape[0], np.nan)
    rank_ci = np.full((x.shape[0], 2), np.nan)
    if ground.size:
        ranks, rank_ci = rank_intervals(
            common[:, ground.items], confidence=confidence, resamples=resamples, seed=seed
        )
    # A share (every value 0 or 1: accuracies, yes/no criteria) gets Wilson's interval, which
    # stays inside [0, 1] with few items; other means Student's t.
    share = bool(np.isin(x[~np.isnan(x)], (0.0, 1.0)).all())
    interval = wilson_ci if share else mean_ci
    for k, row in enumerate(rows):
        scored = x[k][~np.isnan(x[k])]
        on_common = common[k][~np.isnan(common[k])]
        mean, ci = _within(interval(on_common, confidence), bounds)
        own_mean, own_ci = _within(interval(scored, confidence), bounds)
        row["criteria"][criterion] = {
            "mean": mean,
            "ci": list(ci) if ci else None,
            "on": int(on_common.size),
            "scored": int(scored.size),
            "unscored": int(here[k].sum() - scored.size),
            "missing": int((~here[k]).sum()),
            "rank": None if np.isnan(ranks[k]) else int(ranks[k]),
            "rank_ci": None
            if np.isnan(rank_ci[k]).any()
            else [int(rank_ci[k, 0]), int(rank_ci[k, 1])],
            "own": {
                "mean": own_mean,
                "ci": list(own_ci) if own_ci else None,
                "scored": int(scored.size),
            },
        }
        if row["name"] in ground.left_out:
            row["criteria"][criterion]["left_out"] = ground.left_out[row["name"]]


def _left_out(
    x: np.ndarray, names: Sequence[str], exclude: Sequence[str], min_items: int
) -> dict[str, str]:
    """System -> why it is left out of the common ground (``--exclude``, ``--min-items``)."""
    scored = (~np.isnan(x)).sum(axis=1)
    out = dict.fromkeys(exclude, "--exclude")
    for n, count in zip(names, scored):
        if n not in out and 0 < count < min_items:
            out[n] = f"{count} scored item(s), fewer than --min-items {min_items}"
    return out


def _bounds(scale: Any) -> tuple[float, float] | None:
    """The ends of a criterion's scale (None: a formula or a metric without one)."""
    return None if scale is None else (float(scale.low), float(scale.high))


def _within(
    got: tuple[float | None, tuple[float, float] | None], bounds: tuple[float, float] | None
) -> tuple[float | None, tuple[float, float] | None]:
    """A mean and its interval, the interval clipped to ``bounds`` (the mean lies within)."""
    mean, ci = got
    if ci is None or bounds is None:
        return mean, ci
    return mean, (max(ci[0], bounds[0]), min(ci[1], bounds[1]))


def _pairs(
    systems: Sequence[System],
    x: np.ndarray,
    common: np.ndarray,
    crit_ids: Sequence[str],
    human: Mapping[str, Mapping[str, Mapping[str, float]]],
    criterion: str,
    confidence: float,
    rows: Sequence[Mapping[str, Any]],
    scales: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Every pair of systems, better first (by rank, then mean), with their paired differences.

    The paired difference on the common items, and on every item both scored where that is more
    (``both_scored``).
    """
    names = [s.name for s in systems]
    order = sorted(
        range(len(systems)),
        key=lambda k: (
            rows[k]["criteria"][criterion]["rank"] is None,
            -np.nan_to_num(_mean(rows[k], criterion), nan=-np.inf),
        ),
    )
    found = []
    low_high = _bounds(scales.get(criterion))
    span = None if low_high is None else (low_high[0] - low_high[1], low_high[1] - low_high[0])
    for a, b in combinations(order, 2):
        diff = paired_difference(common[a], common[b], confidence)
        both = paired_difference(x[a], x[b], confidence)
        ci = _within((diff.difference, diff.ci), span)[1]
        pair: dict[str, Any] = {
            "a": names[a],
            "b": names[b],
            "criterion": criterion,
            "difference": diff.difference,
            "ci": list(ci) if ci else None,
            "shared": diff.shared,
            "only_a": both.only_a,
            "only_b": both.only_b,
            "p": diff.p,
        }
        if both.shared > diff.shared:
            both_ci = _within((both.difference, both.ci), span)[1]
            pair["both_scored"] = {
                "difference": both.difference,
                "ci": list(both_ci) if both_ci else None,
                "shared": both.shared,
                "p": both.p,
            }
        if human:
            pair["human_corrected"] = _corrected_difference(
                systems[a],
                systems[b],
                common[a],
                common[b],
                crit_ids,
                human,
                criterion,
                confidence,
                scales.get(criterion),
            )
        found.append(pair)
    return found


def _mean(row: Mapping[str, Any], criterion: str) -> float:
    mean = row["criteria"][criterion]["mean"]
    return math.nan if mean is None else float(mean)


def _human_values(system: System, scales: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Criterion -> item id -> the mean of the raters' labels (items of this system only)."""
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


def _length_controlled(
    systems: Sequence[System],
    x: np.ndarray,
    lengths: np.ndarray,
    ids: Sequence[str],
    human: Mapping[str, Mapping[str, Mapping[str, float]]],
    criterion: str,
    centre_length: float | None,
    resamples: int,
    confidence: float,
    seed: int,
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """Each system's length-controlled mean on ``criterion``, and whether the order changes.

    Each mean goes into the system's row.
    """
    controlled = np.full(len(systems), np.nan)
    for k, s in enumerate(systems):
        labels = human.get(s.name, {}).get(criterion)
        h = None if not labels else np.array([labels.get(i, math.nan) for i in ids])
        entry = rows[k]["criteria"][criterion]
        try:
            got = length_control(
                criterion,
                x[k],
                lengths[k],
                h,
                centre_length=centre_length,
                n_resamples=min(resamples, 1000),
                confidence=confidence,
                seed=seed,
            )
        except InputDataError as exc:
            entry["length_controlled"] = {"mean": None, "reason": str(exc)}
            continue
        controlled[k] = got.controlled_mean
        entry["length_controlled"] = {
            "mean": got.controlled_mean,
            "slope_per_log_length": got.slope_per_log_length,
            "fitted_on": got.fitted_on,
        }
    raw = np.array([_mean(r, criterion) for r in rows])
    complete = not np.isnan(controlled).any()
    return {
        "order_changes": bool(complete and not np.array_equal(ranks_of(raw), ranks_of(controlled))),
        "centre_length": centre_length,
        "complete": complete,
    }
