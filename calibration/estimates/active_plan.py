"""How many labels a benchmark mean's goal needs: `plan_mean`, `mean_horizon`, the sequences'.

See `jurybox.calibration.estimates.active`, which re-exports every name here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputDataError
from .active_design import (
    Design,
    MeanEstimate,
    t_of,
    z_of,
)
from .active_estimate import mean_estimates
from .rectified import (
    NORMAL_DEPARTURES,
    SURE_SD,
    Terms,
    betting_bounds,
    rectifier_range,
    step_of,
    sure_allowance,
    term_variance,
)


def _visits_needed(s2: float, coins: float, pool: int, width: float, z: float) -> int | None:
    """The fewest visited items M with z * sqrt((1 - M/N) s2 / M + coins / N) <= width.

    None when even the whole pool is not enough.
    """
    room = (width / z) ** 2 - coins / pool + s2 / pool
    if room <= 0 or (width / z) ** 2 < coins / pool:
        return None
    return max(2, min(pool, math.ceil(s2 / room))) if s2 > 0 else 2


def _labels_needed(
    s2: float, coins: float, pool: int, width: float, confidence: float, rate: float
) -> int | None:
    """The labels among the visits `_visits_needed` finds (``rate``: labelled per visit).

    With Student's quantile at that count (as the interval has it; two refinements from the
    normal quantile's count settle it).
    """
    z, labels = z_of(confidence), None
    for _ in range(3):
        visits = _visits_needed(s2, coins, pool, width, z)
        if visits is None:
            return None
        labels = math.ceil(visits * rate)
        z = t_of(confidence, labels - 1)
    return labels


def plan_mean(
    lines: Sequence[Mapping[str, Any]],
    pool: Mapping[str, Mapping[str, Any]],
    model: Mapping[str, Mapping[str, tuple[float, float] | None]],
    scales: Mapping[str, Any],
    width: float,
    pi: Mapping[str, float] | None = None,
    *,
    confidence: float = 0.95,
    sequence: bool = False,
    method: str = "asymptotic",
    compare: bool = False,
) -> dict[str, dict[str, Any]]:
    """How many labels each criterion's mean needs for a CI half-width of at most ``width``.

    The width is in the scale's units, for the interval ``jurybox agree --ppi`` shows (``needed``:
    the normal interval once enough labels depart from the jury, else the betting interval at that
    count; `jurybox.calibration.estimates.rectified`, `_shown_count`). The normal
    interval's count (``normal``) comes from the labels so far (their variance, with the range
    over its 95% chi-square interval), or, before any label, from the verdicts alone (``model``:
    per item and criterion, the jury's predictive mean and variance, `pool_model`, the
    variance taken as the squared error of the jury's score: the count if the jury is calibrated,
    the range from a jury exactly right on every item to labels as spread as the scale allows,
    since only labels can show how calibrated it is); the labels' variance floored as the
    estimate floors it (module text). ``pi``: each item's inclusion probability (None: every
    visited item is labelled, a uniform order); labels are counted as the visited items times
    the mean ``pi``. With ``sequence``, beside it what the page's confidence sequence
    (``method``, `mean_sequences`) needs (`sequence_labels_needed`: simulated, about
    a second per criterion); with ``compare`` too, that for an active and a uniform order and
    which needs fewer (``designs``).
    """
    from scipy.stats import chi2

    if width <= 0:
        raise InputDataError(f"the target width must be positive; got {width}")
    now = (
        mean_estimates(lines, pool, scales, confidence=confidence, model=model, probabilities=pi)
        if lines
        else {}
    )
    out: dict[str, dict[str, Any]] = {}
    for criterion, scale in scales.items():
        scored = [i for i, s in pool.items() if s.get(criterion) is not None]
        big_n = len(scored)
        if not big_n:
            out[criterion] = {
                "labelled": 0,
                "visited": 0,
                "needed": None,
                "range": [None, None],
                "interval": None,
                "normal": None,
                "departure_rate": None,
                "further": None,
                "pool": 0,
                "basis": "no item the jury scored on this criterion",
            }
            continue
        p = np.array([1.0 if pi is None else pi[i] for i in scored])
        rate = float(p.mean())
        f = np.array([float(pool[i][criterion]) for i in scored])
        jury = [model.get(i, {}).get(criterion) or (pool[i][criterion], 0.0) for i in scored]
        mean, var = np.array([mv[0] for mv in jury]), np.array([mv[1] for mv in jury])
        e = now.get(criterion)
        if isinstance(e, MeanEstimate):
            n, m = e.labelled, e.visited
            low_q, high_q = chi2.ppf([0.025, 0.975], max(1, n - 1)) / max(1, n - 1)
            variances = [(e.s2 * k, e.coins * k) for k in (1.0, 1 / high_q, 1 / low_q)]
            basis = (
                f"{n} label(s) so far (mean {e.estimate:.3f}, half-width "
                f"{e.half_width:.3f}); the range over the 95% interval of their variance"
            )
            departing = [e.departures / max(1, e.labelled)] * len(variances)
        else:
            n, m = 0, 0
            widest = float(scale.high - scale.low) ** 2 / 4  # the most a label can vary
            variances = [
                (float(np.mean(var / p)), float(np.mean((1 - p) / p * var))),
                (0.0, 0.0),
                (widest * float(np.mean(1 / p)), widest * float(np.mean((1 - p) / p))),
                (0.0, 0.0),
            ]
            basis = (
                "the verdicts alone (no label yet): the count if the jury's distributions "
                "are calibrated, which only labels can show; the range runs from a jury "
                "better than it says, through labels as spread as the scale allows (a "
                "jury worse than it says), to labels that never depart from the jury's "
                "score (a jury sure and right, or sure and not yet seen wrong: then only "
                "the betting interval can be shown)"
            )
            # Labels that depart as the jury's distributions say (its count, and a jury better
            # than it says); every one (labels as spread as the scale allows); none.
            model_rate = _departure_rate(mean, var, f, p, scale)
            departing = [model_rate, model_rate, 1.0, 0.0]
        normal = [_labels_needed(a, b, big_n, width, confidence, rate) for a, b in variances]
        betting = functools.cache(
            lambda f=f, p=p, scale=scale: _betting_count(f, p, scale, width, confidence)
        )  # computed only where it is shown
        (needed, kind), *others = [
            _shown_count(c, share, betting) for c, share in zip(normal, departing)
        ]
        counts = sorted(
            [needed] + [c for c, _ in others], key=lambda c: math.inf if c is None else c
        )
        out[criterion] = {
            "labelled": n,
            "visited": m,
            "needed": needed,
            "range": [counts[0], counts[-1]],
            "interval": kind,
            "normal": normal[0],
            "departure_rate": departing[0],
            "further": None if needed is None else max(0, needed - n),
            "basis": basis,
            "pool": big_n,
        }
        if sequence:
            out[criterion]["sequence"] = {
                "needed": sequence_labels_needed(f, mean, var, p, scale, width, method=method),
                "method": method,
                "basis": SEQUENCE_PLAN_BASIS,
            }
            if compare and pi is not None:
                out[criterion]["designs"] = _compare_designs(
                    out[criterion]["sequence"]["needed"], f, mean, var, p, scale, width, method
                )
    return out


def _departure_rate(
    mean: np.ndarray,
    var: np.ndarray,
    f: np.ndarray,
    p: np.ndarray,
    scale: Any,
    draws: int = 20,
    seed: int = 0,
) -> float:
    """The share of labels another level than the jury's score, were they drawn from it.

    The labels drawn from the jury's own distributions (`_draw_labels`), items weighted by
    how likely each is to be labelled (``p``).
    """
    from .rectified import step_of

    rng = np.random.default_rng(seed)
    half = step_of(scale) / 2 - 1e-12
    away = np.mean(
        [
            np.abs(_draw_labels(rng, mean, var, float(scale.low), float(scale.high)) - f) >= half
            for _ in range(draws)
        ],
        axis=0,
    )
    return float(np.sum(p * away) / np.sum(p))


def _betting_count(
    f: np.ndarray, p: np.ndarray, scale: Any, width: float, confidence: float, seed: int = 0
) -> int | None:
    """The labels at which the fixed-count betting interval has half-width at most ``width``.

    That interval is what is shown while too few labels depart from the jury; every label is the
    level nearest the jury's score (the best case for it: labels that depart bring the normal
    interval sooner); found by doubling, then bisection, on one seeded session of the design, on a
    grid of 250 candidate means (rounded outwards: a little above the page's count). None when
    even every item labelled is not enough.
    """
    low, high = float(scale.low), float(scale.high)
    design = Design.draw(p, np.random.default_rng(seed))
    fo = f[design.order]
    agree = np.clip(np.asarray(scale.snap(fo), dtype=float), low, high)
    d = np.where(design.chosen, (agree - fo) / design.pi, 0.0)
    at = np.flatnonzero(design.chosen)

    def half(n: int) -> float:
        visits = int(at[n - 1]) + 1
        lo, hi = betting_bounds(
            Terms(d[:visits], f, p, low, high), 1.0 - confidence, visits, grid=250
        )
        return (hi - lo) / 2

    if at.size < 2:
        return None
    lo_n, hi_n = 2, 32  # doubling, then bisection: the cost follows the count found
    while half(min(hi_n, int(at.size))) > width:
        if hi_n >= at.size:
            return None
        lo_n, hi_n = hi_n + 1, 2 * hi_n
    hi_n = min(hi_n, int(at.size))
    while lo_n < hi_n:
        mid = (lo_n + hi_n) // 2
        lo_n, hi_n = (lo_n, mid) if half(mid) <= width else (mid + 1, hi_n)
    return lo_n


def _shown_count(
    normal: int | None, departing: float, betting: Callable[[], int | None]
) -> tuple[int | None, str]:
    """The labels at which the interval shown reaches the width, and which interval it is.

    The normal interval's count where ``NORMAL_DEPARTURES`` labels are expected to depart from the
    jury by then (at the share ``departing``); else the betting interval's count (``betting()``),
    or the count at which those departures are expected (the normal interval then), whichever is
    sooner.
    """
    expected = math.inf if departing <= 0 else math.ceil(NORMAL_DEPARTURES / departing)
    if normal is not None and normal >= expected:
        return normal, "normal"
    later = None if normal is None or math.isinf(expected) else max(normal, int(expected))
    options = [(c, k) for c, k in ((later, "normal"), (betting(), "betting")) if c is not None]
    return min(options) if options else (None, "betting")


def _compare_designs(
    active: int | None,
    f: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    p: np.ndarray,
    scale: Any,
    width: float,
    method: str,
) -> dict[str, Any]:
    """Labels the page's sequence needs with the active choice and with a uniform order, and which.

    The active choice's count (``active``) is already planned. Never the active choice where it
    costs more (under the betting sequence its weights ``1 / pi`` widen the range the bets must
    allow).
    """
    uniform = sequence_labels_needed(f, mean, var, np.ones(f.size), scale, width, method=method)
    cheaper_uniform = uniform is not None and (active is None or uniform < active)
    pick = "uniform" if cheaper_uniform else "active"

    def shown(n: int | None) -> str:
        return "more than the pool holds" if n is None else f"about {n}"

    why = (
        f"under the page's {method} sequence a uniform order needs {shown(uniform)} labels "
        f"and the active choice {shown(active)}: {pick} needs fewer"
        + (
            " (the active choice's weights 1/pi, up to "
            f"{1 / float(p.min()):.0f}, widen the range the betting sequence must allow)"
            if pick == "uniform" and method == "betting"
            else ""
        )
    )
    return {"active": active, "uniform": uniform, "pick": pick, "why": why}


#: What `sequence_labels_needed` assumes, as ``labels plan`` says it.
SEQUENCE_PLAN_BASIS = (
    "the page's confidence sequence, in sessions simulated with labels "
    "drawn from the jury's own distributions: the count if they are "
    "calibrated (an overconfident jury needs more)"
)


def mean_horizon(
    f: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    pi: np.ndarray,
    width: float,
    confidence: float = 0.95,
) -> float:
    """The visits the asymptotic sequence is tuned for, fixed before the first label.

    What a fixed-sample interval needs for half-width ``width`` were the labels drawn from the
    jury's own distributions (at least 30).
    """
    from .rectified import term_variance

    v = term_variance(mean, var, f, pi)
    return max(30.0, z_of(confidence) ** 2 * max(v, 0.0) / width**2)


def sequence_labels_needed(
    f: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    pi: np.ndarray,
    scale: Any,
    width: float,
    *,
    runs: int = 15,
    seed: int = 0,
    alpha: float = 0.05,
    method: str = "betting",
) -> int | None:
    """The median labels at which the page's sequence for the mean reaches half-width ``width``.

    The sequence is `mean_sequences`' (``method``), over ``runs`` simulated sessions of the
    design (a visiting order, coins with probabilities ``pi``), each item's label drawn with the
    jury's predictive ``mean`` and ``var`` (`_draw_labels`), the asymptotic sequence with the
    rare-error allowance for the items the jury is sure of; None when the median session
    does not get there within the pool.
    """
    from ..stats.sequences import asymptotic_cs, betting_cs

    low, high = float(scale.low), float(scale.high)
    d_low, d_high = rectifier_range(f, pi, low, high)
    uniform = bool(np.all(pi == 1.0))
    horizon = mean_horizon(f, mean, var, pi, width, 1.0 - alpha)
    floor = max(0.0, term_variance(mean, var, f, pi))
    rng = np.random.default_rng(seed)
    needs = []
    for _ in range(runs):
        order = rng.permutation(f.size)
        coins = rng.random(f.size) < pi[order]
        y = _draw_labels(rng, mean[order], var[order], low, high)
        d = np.where(coins, (y - f[order]) / pi[order], 0.0)
        lo, hi = betting_cs((d - d_low) / (d_high - d_low), alpha, f.size if uniform else None)
        half = (hi - lo) * (d_high - d_low) / 2
        if method == "asymptotic":
            away = np.cumsum(coins & (np.abs(y - f[order]) >= step_of(scale) / 2 - 1e-12))
            gate = (
                int(np.argmax(away >= NORMAL_DEPARTURES))
                if away[-1] >= NORMAL_DEPARTURES
                else f.size
            )
            a_lo, a_hi = asymptotic_cs(d, alpha, horizon, floor)
            step = step_of(scale)
            sure = (var[order] <= (SURE_SD * step) ** 2 + 1e-15) & coins
            away_sure = sure & (np.abs(y - f[order]) >= step / 2 - 1e-12)
            down, up = sure_allowance(
                f, var, np.cumsum(sure), np.cumsum(away_sure), (low, high), step, alpha
            )
            half[gate:] = (a_hi[gate:] - a_lo[gate:] + down[gate:] + up[gate:]) / 2
        met = np.flatnonzero(half[coins] <= width)
        needs.append(float(met[0] + 1) if met.size else math.inf)
    median = float(np.median(needs))
    return None if math.isinf(median) else int(median)


def _draw_labels(
    rng: np.random.Generator, mean: np.ndarray, var: np.ndarray, low: float, high: float
) -> np.ndarray:
    """Labels on a scale of whole levels with the given means and variances.

    On the level nearest the mean and its two neighbours where three points can hold them (a
    sharp jury's rare errors a whole level off, as real labels are), else a normal rounded to the
    levels.
    """
    k = np.clip(np.round(mean), low, high)
    dm = mean - k
    spread = np.maximum(var, 0.0) + dm**2
    below, above = (spread - dm) / 2, (spread + dm) / 2
    fits = (
        (below >= -1e-12)
        & (above >= -1e-12)
        & (below + above <= 1)
        & ((k - 1 >= low) | (below <= 1e-12))
        & ((k + 1 <= high) | (above <= 1e-12))
    )
    u = rng.random(mean.size)
    three = np.where(u < below, k - 1, np.where(u < below + above, k + 1, k))
    rounded = np.clip(np.round(rng.normal(mean, np.sqrt(np.maximum(var, 0.0)))), low, high)
    return np.where(fits, three, rounded)
