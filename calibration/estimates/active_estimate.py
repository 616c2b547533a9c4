"""The weighted PPI++ estimate of a benchmark's mean over actively chosen labels (`mean_estimates`).

See `jurybox.calibration.estimates.active`, which re-exports every name here and describes the
design and the estimate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..data.labels import labels_by_item
from ..errors import InputDataError
from .active_design import (
    OVERSTATED_Z,
    Design,
    MeanEstimate,
    design_of,
    is_active,
    overstatement,
    t_of,
    weighted_mean,
)
from .rectified import (
    NORMAL_DEPARTURES,
    SURE_SD,
    Terms,
    betting_bounds,
    departures,
    no_spread,
    rectifier_range,
    skew_allowance,
    step_of,
    sure_allowance,
    wilson_bounds,
)


def mean_estimates(
    lines: Sequence[Mapping[str, Any]],
    pool: Mapping[str, Mapping[str, Any]],
    scales: Mapping[str, Any],
    *,
    confidence: float = 0.95,
    criteria: Sequence[str] | None = None,
    model: Mapping[str, Mapping[str, tuple[float, float] | None]] | None = None,
    probabilities: Mapping[str, float] | None = None,
) -> dict[str, MeanEstimate | str]:
    """Per criterion, the mean label over ``pool`` from label ``lines``, or why there is none.

    ``pool`` is item id -> the jury's score per criterion; ``lines`` the latest line per item and
    rater, labels only. The labels are weighted by the recorded inclusion probabilities when the
    items were chosen actively, else a simple random sample. ``model`` (`pool_model`) and,
    for an active design, every item's inclusion probability (`pool_probabilities`) give the
    variance its floor (module text). A criterion that cannot be estimated gets the reason
    instead.
    """
    active = design_of(lines) == "active"
    if active and any(
        not is_active(line) and (line.get("selection") or {}).get("strategy") != "overlap"
        for line in lines
    ):
        raise InputDataError(
            "the labels mix items chosen for the benchmark mean (goal benchmark-mean) with items "
            "chosen another way; the weighted estimate needs one design: label each goal into "
            "its own file"
        )
    positions, probability, sessions, seeds = (
        _active_choices(lines) if active else ({}, {}, set(), set())
    )
    stray = sorted(sessions - {len(pool)})
    order = (
        _visiting_order(pool, positions, probabilities, seeds)
        if active and positions and not stray
        else None
    )
    out: dict[str, MeanEstimate | str] = {}
    for criterion in criteria or list(scales):
        notes: list[str] = []
        if stray:
            notes.append(
                f"the labelling session offered {stray[0]} items, the verdicts hold "
                f"{len(pool)}: the estimate is exact only for the session's items"
            )
        human = labels_by_item(lines, criterion, scales.get(criterion), pool)
        scored = {i: s[criterion] for i, s in pool.items() if s.get(criterion) is not None}
        unscored = len(pool) - len(scored)
        if unscored:
            notes.append(
                f"{unscored} item(s) the jury left unscored are not in the pool: the "
                f"estimate is the mean label over the {len(scored)} items it scored"
            )
        ids = [i for i in human if i in scored]
        if len(human) > len(ids):
            notes.append(
                f"{len(human) - len(ids)} labelled item(s) left out: the jury left them unscored"
            )
        if len(ids) < 2:
            out[criterion] = f"{len(ids)} labelled item(s) with a jury score; need 2"
            continue
        f = np.array([scored[i] for i in ids])
        y = np.array([np.mean(human[i]) for i in ids])
        if active:
            pi = np.array([probability[i] for i in ids])
            # M counts the visited items of the pool: the scored ones (an unscored item visited
            # is not in it; counting it biases the estimate towards the jury's mean).
            reach = max(positions.values()) + 1
            if order is not None:
                visited = sum(i in scored for i in order[:reach])
            else:
                visited = round(reach * len(scored) / len(pool))
                if unscored:
                    notes.append(
                        "the visiting order could not be rebuilt from the labels' seed "
                        "and these verdicts: the scored items among the visited are "
                        "counted as their share of the pool"
                    )
            visited = min(max(visited, len(ids)), len(scored))
        else:
            pi, visited = np.ones(len(ids)), len(ids)
        if visited >= len(scored) and not active:
            notes.append("every item is labelled: the mean is exact")
        floor = None
        if model is not None and (probabilities is not None or not active):
            jury = [model.get(i, {}).get(criterion) or (scored[i], 0.0) for i in scored]
            floor = (
                [m for m, _ in jury],
                [v for _, v in jury],
                [probabilities.get(i, 1.0) if active and probabilities else 1.0 for i in scored],
            )
            scale = scales.get(criterion)
            own = [model.get(i, {}).get(criterion) or (scored[i], 0.0) for i in ids]
            if (
                scale is not None
                and overstatement(
                    y, [m for m, _ in own], [v for _, v in own], float(scale.low), float(scale.high)
                )[-1]
                < -OVERSTATED_Z
            ):
                floor = None
                notes.append(
                    "the labels show the jury's distributions overstate its errors: "
                    "the variance is the labels' own, without the floor from those "
                    "distributions"
                )
        estimate, se, lam, s2, coins = weighted_mean(
            list(scored.values()), f, y, pi, visited, model=floor
        )
        q = t_of(confidence, len(ids) - 1)
        visits = np.zeros(visited)  # the visited items' terms (the unlabelled ones 0)
        visits[: len(ids)] = (y - lam * f) / pi
        down, up = skew_allowance(visits, q)
        ci, kind = (estimate - (q + down) * se, estimate + (q + up) * se), "normal"
        scale = scales.get(criterion)
        departed = departures(y, f, scale) if scale is not None else len(ids)
        if departed < NORMAL_DEPARTURES and scale is not None:
            terms = _session_terms(
                scored,
                dict(zip(ids, y)),
                scale,
                dict(zip(ids, pi)) if active else None,
                probabilities,
                order,
                positions,
                visited,
            )
            lo, hi = betting_bounds(terms, 1.0 - confidence, terms.d.size)
            ci, kind = (min(lo, estimate), max(hi, estimate)), "betting"
            notes.append(
                f"{departed} of the {len(ids)} labelled items depart from the "
                f"jury's score (another level): fewer than {NORMAL_DEPARTURES}, so the "
                "labels cannot show the jury's rare errors yet and the interval is the "
                "betting interval at this count (valid for any jury, wide while the "
                "labels are few), not the normal one"
            )
        elif scale is not None:
            pi_pool = _pi_pool(scored, probabilities, active)
            ci = _guarded(ci, visits, lam, scored, pi_pool, q, scale, notes)
            if model is not None:
                down, up = _sure_allowance(
                    model, criterion, scale, scored, ids, y, 1.0 - confidence
                )
                if down or up:
                    ci = (ci[0] - down, ci[1] + up)
                    notes.append(
                        f"the jury is sure of some items and fewer than {NORMAL_DEPARTURES} "
                        "labels on them depart from it: the interval keeps an allowance for "
                        f"errors on them the labels have not seen (-{down:.3f}, +{up:.3f})"
                    )
        hw = (ci[1] - ci[0]) / 2
        out[criterion] = MeanEstimate(
            criterion,
            estimate,
            ci,
            hw,
            lam,
            len(ids),
            visited,
            len(scored),
            float(np.mean(list(scored.values()))),
            "active (weighted by inclusion probabilities)" if active else "simple random sample",
            confidence,
            tuple(notes),
            s2,
            coins,
            kind,
            departed,
        )
    return out


def _guarded(
    ci: tuple[float, float],
    visits: np.ndarray,
    lam: float,
    scored: Mapping[str, float],
    pi_pool: np.ndarray,
    q: float,
    scale: Any,
    notes: list[str],
) -> tuple[float, float]:
    """The normal interval ``ci``, widened to the bounded score interval if ``visits`` are alike.

    ``visits``: the terms over the visited items, all one value or not; their range is what
    the design allows with ``lam`` (`jurybox.calibration.estimates.rectified.wilson_bounds`);
    a note in ``notes`` says so.
    """
    if not no_spread(visits):
        return ci
    f_pool = np.array(list(scored.values()), dtype=float)
    t_low, t_high = rectifier_range(lam * f_pool, pi_pool, float(scale.low), float(scale.high))
    lo, hi = wilson_bounds(float(visits.mean()), visits.size, t_low, t_high, q)
    shift = lam * float(f_pool.mean())
    notes.append(
        "the labelled terms take one value (their variance estimates nothing): the "
        "interval is at least the bounded score interval of that many labels"
    )
    return min(ci[0], float(lo) + shift), max(ci[1], float(hi) + shift)


def _sure_allowance(
    model: Mapping[str, Mapping[str, tuple[float, float] | None]],
    criterion: str,
    scale: Any,
    scored: Mapping[str, float],
    labelled: Sequence[str],
    y: Any,
    alpha: float,
) -> tuple[float, float]:
    """The rare-error allowance for the items the jury is sure of, after the labels ``y``.

    `jurybox.calibration.estimates.rectified.sure_allowance`, from the jury's predictive
    variances (``model``; an item without one counts as sure, as the variance floor takes it).
    """
    step = step_of(scale)
    var = {i: (model.get(i, {}).get(criterion) or (scored[i], 0.0))[1] for i in scored}
    sure = [var[i] <= (SURE_SD * step) ** 2 + 1e-15 for i in labelled]
    away = np.abs(np.asarray(y, dtype=float) - [scored[i] for i in labelled]) >= step / 2 - 1e-12
    down, up = sure_allowance(
        list(scored.values()),
        list(var.values()),
        int(np.sum(sure)),
        int(np.sum(away & np.array(sure, dtype=bool))),
        (float(scale.low), float(scale.high)),
        step,
        alpha,
    )
    return float(down), float(up)


def _pi_pool(
    scored: Mapping[str, float], probabilities: Mapping[str, float] | None, active: bool
) -> np.ndarray:
    """The inclusion probability of every scored item (1 in a uniform design)."""
    if not active or probabilities is None:
        return np.ones(len(scored))
    return np.array([probabilities.get(i, 1.0) for i in scored], dtype=float)


def _session_terms(
    scored: Mapping[str, float],
    y: Mapping[str, float],
    scale: Any,
    recorded: Mapping[str, float] | None,
    probabilities: Mapping[str, float] | None,
    order: Sequence[str] | None,
    positions: Mapping[str, int],
    visited: int,
) -> Terms:
    """The rectifier terms of a session (`jurybox.calibration.estimates.rectified.Terms`).

    ``scored`` the pool's jury scores, ``y`` the labelled items' labels. A uniform design
    (``recorded`` None): the labelled items in the order they were labelled. An active one
    (``recorded``: each labelled item's inclusion probability): the visited items of the
    session's ``order`` (rebuilt from its seed) or, where it cannot be rebuilt, the labelled
    items at their recorded ``positions`` with the visits between them as 0, over ``visited``
    visits of the pool's scored items.
    """
    f_pool = np.array(list(scored.values()), dtype=float)
    if recorded is None:
        d = np.array([y[i] - scored[i] for i in y])
        return Terms(d, f_pool, np.ones(f_pool.size), float(scale.low), float(scale.high))
    pi_pool = np.array([recorded.get(i, (probabilities or {}).get(i, 1.0)) for i in scored])
    if order is not None:
        reach = max(positions.values()) + 1
        seen = [i for i in order[:reach] if i in scored]
        d = np.array([(y[i] - scored[i]) / recorded[i] if i in y else 0.0 for i in seen])
    else:  # the labelled items in their visiting order, spread evenly over the visits
        d = np.zeros(max(visited, len(y)))
        ranked = sorted(y, key=lambda i: positions[i])
        spots = np.linspace(0, d.size - 1, len(ranked)).round().astype(int)
        d[spots] = [(y[i] - scored[i]) / recorded[i] for i in ranked]
    return Terms(d, f_pool, pi_pool, float(scale.low), float(scale.high))


def _active_choices(
    lines: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, int], dict[str, float], set[int], set[Any]]:
    """Each item's position and inclusion probability, the session sizes and seeds recorded.

    From the actively chosen label lines: each item's position in the visiting order and its
    inclusion probability, the session sizes and the seeds they record.
    """
    positions: dict[str, int] = {}
    probability: dict[str, float] = {}
    sessions: set[int] = set()
    seeds: set[Any] = set()
    for line in lines:
        if is_active(line):
            sel = line["selection"]
            try:
                positions[str(line["id"])] = int(sel["position"])
                probability[str(line["id"])] = float(sel["probability"])
                if isinstance(sel.get("pool"), int):
                    sessions.add(sel["pool"])
                seeds.add(sel.get("seed"))
            except (KeyError, TypeError, ValueError):
                raise InputDataError(
                    f"label line for item {line.get('id')!r}: its selection "
                    f"{sel!r} lacks the position or probability of an active "
                    "choice",
                    field="selection",
                ) from None
    return positions, probability, sessions, seeds


def _visiting_order(
    pool: Mapping[str, Any],
    positions: Mapping[str, int],
    probabilities: Mapping[str, float] | None,
    seeds: set[Any],
) -> list[str] | None:
    """The session's visiting order over ``pool``, rebuilt as the labelling page drew it.

    ``pool`` holds the items in the verdicts' order; the order is drawn from the recorded seed and
    the items' inclusion probabilities. None unless one seed is recorded and every labelled item
    sits at its recorded position.
    """
    if probabilities is None or len(seeds) != 1 or not isinstance(next(iter(seeds)), int):
        return None
    ids = list(pool)
    if any(i not in probabilities for i in ids):
        return None
    design = Design.draw(
        np.array([probabilities[i] for i in ids]), np.random.default_rng(next(iter(seeds)))
    )
    order = [ids[k] for k in design.order]
    ok = all(0 <= k < len(order) and order[k] == i for i, k in positions.items())
    return order if ok else None
