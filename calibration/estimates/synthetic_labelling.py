"""Simulated labelling sessions over a pool with known truth: active labels and their estimates.

A `LabellingPool` is a benchmark's judged items with their human truth; the functions here run
the label goals' designs over it (`simulate_mean_labelling`, the sequences' sessions) for tests
and perf/. Re-exported by `jurybox.calibration.estimates.synthetic`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class LabellingPool:
    """A benchmark's judged items with known human truth, for simulating a labelling session.

    On a 0-4 scale: ``dist`` each item's predictive distribution (the jury's, calibrated: the
    human label is drawn from it), ``score`` the jury's score (its mean), ``uncertainty`` what
    `jurybox.calibration.estimates.active.item_uncertainty` gives (its variance over the
    squared range), ``human`` the labels.
    """

    dist: np.ndarray
    score: np.ndarray
    uncertainty: np.ndarray
    human: np.ndarray

    VALUES = np.arange(5.0)

    @classmethod
    def draw(
        cls,
        rng: np.random.Generator,
        n_items: int = 1000,
        *,
        uncertain_share: float = 0.3,
        sure: float = 0.25,
        unsure: float = 1.2,
        stated: float = 1.0,
    ) -> LabellingPool:
        """Items around a uniformly drawn mode, most sharply peaked, ``uncertain_share`` broadly.

        ``sure`` is the spread of the distribution's exponential fall-off of the sharp ones,
        ``unsure`` that of the broad ones. ``stated``: the jury's stated variance over its
        distribution's (1: calibrated; above 1 an underconfident jury, its means as accurate).
        """
        mode = rng.integers(0, 5, n_items)
        spread = np.where(rng.random(n_items) < uncertain_share, unsure, sure)
        w = np.exp(-np.abs(cls.VALUES[None, :] - mode[:, None]) / spread[:, None])
        dist = w / w.sum(axis=1, keepdims=True)
        mean = dist @ cls.VALUES
        var = dist @ cls.VALUES**2 - mean**2
        cdf = np.cumsum(dist, axis=1)
        human = (rng.random(n_items)[:, None] > cdf).sum(axis=1).astype(float)
        return cls(dist, mean, stated * var / 16.0, np.minimum(human, 4.0))


def weighted_mean_path(
    f_pool: Any, f: Any, y: Any, pi: Any, visited: Any, *, model: tuple[Any, Any, Any] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """`jurybox.calibration.estimates.active.weighted_mean` after each label of a session.

    All at once: the estimate and standard error with the first ``n`` labelled items for n = 1,
    2, ... (NaN at n = 1). ``f``, ``y``, ``pi``: the labelled items' score, label and inclusion
    probability in labelling order; ``visited[n - 1]``: the items visited by the n-th label. The
    same formulas written as running sums (each of weighted_mean's sums over the visited items is
    a running sum over the labelled ones: the others' terms are 0), so a simulated session costs
    one pass instead of one estimate per label; tests check it against weighted_mean at every n.
    """
    fp, f_, y_, p = (np.asarray(a, dtype=float) for a in (f_pool, f, y, pi))
    m = np.asarray(visited, dtype=float)
    big_n = fp.size
    a, b, c = y_ / p, f_ / p, (1.0 - p) / p**2
    sa, sb, saa, sbb, sab, cyy, cyf, cff = np.cumsum(
        [a, b, a * a, b * b, a * b, c * y_ * y_, c * y_ * f_, c * f_ * f_], axis=1
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        var_b = (sbb - sb**2 / m) / (m - 1)
        cov = (sab - sa * sb / m) / (m - 1)
        lam = np.where(var_b > 0, np.clip(cov / var_b, 0.0, 1.0), 0.0)
        total = sa - lam * sb
        estimate = lam * fp.mean() + total / m
        s2 = (saa - 2 * lam * sab + lam**2 * sbb - total**2 / m) / (m - 1)
        coins = (cyy - 2 * lam * cyf + lam**2 * cff) / m
        if model is not None:
            mean, var, pi_pool = (np.asarray(v, dtype=float) for v in model)

            def avg(v: np.ndarray) -> float:
                return float(np.mean(v))

            # bias = mean - lam * fp; second = var + bias^2: their means are quadratics in lam
            w, u = 1.0 / pi_pool, (1.0 - pi_pool) / pi_pool
            floor_s2 = (
                avg(w * (var + mean**2))
                - 2 * lam * avg(w * mean * fp)
                + lam**2 * avg(w * fp**2)
                - (avg(mean) - lam * avg(fp)) ** 2
            )
            floor_coins = (
                avg(u * (var + mean**2)) - 2 * lam * avg(u * mean * fp) + lam**2 * avg(u * fp**2)
            )
            s2, coins = np.maximum(s2, floor_s2), np.maximum(coins, floor_coins)
        variance = (1.0 - m / big_n) * s2 / m + coins / big_n
        se = np.sqrt(np.maximum(variance, 0.0))
    se[0] = estimate[0] = np.nan
    return estimate, se


def simulate_mean_labelling(
    pool: LabellingPool,
    width: float,
    rng: np.random.Generator,
    *,
    active: bool = True,
    min_labels: int = 30,
    step: int = 1,
    stop_after: int | None = None,
    floor: bool = True,
) -> dict[str, Any]:
    """One labelling session for the benchmark mean, as the labelling page runs it.

    As ``jurybox label --goal benchmark-mean`` runs it with ``active``; otherwise every item of the
    uniform order is labelled: labels in the session's order until the 95% half-width is at most
    ``width`` (checked every ``step`` labels from ``min_labels`` on, as the page's progress does) or
    ``stop_after`` labels; ``floor``: the variance floored by the jury's own distributions, as
    jurybox estimates it. Returns the labels used, the estimate, its half-width and whether the CI
    covers the pool's true mean. The estimates are `weighted_mean_path`'s (weighted_mean's,
    after each label).
    """
    from .active import OVERSTATED_Z, Design, inclusion_probabilities, overstatement, z_of

    pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
    model = (pool.score, pool.uncertainty * 16.0, pi) if floor else None
    design = Design.draw(pi, rng)
    at = np.flatnonzero(design.chosen)
    items = design.order[at]
    z = z_of(0.95)
    last = len(at) if stop_after is None else min(len(at), stop_after)
    got = items[:last]
    path = (pool.score, pool.score[got], pool.human[got], design.pi[at[:last]], at[:last] + 1)
    estimates, ses = weighted_mean_path(*path, model=model)
    if model is not None:  # as mean_estimates: no floor once the labels show it overstated
        _, bare = weighted_mean_path(*path)
        over = overstatement(
            pool.human[got], pool.score[got], pool.uncertainty[got] * 16.0, 0.0, 4.0
        )
        ses = np.where(over < -OVERSTATED_Z, bare, ses)
    checks = np.arange(min(min_labels, last), last + 1, step)
    n = int(checks[-1]) if checks.size else 0
    if stop_after is None and checks.size:
        met = np.flatnonzero(z * ses[checks - 1] <= width)
        n = int(checks[met[0]]) if met.size else n
    estimate, se = (
        (float(estimates[n - 1]), float(ses[n - 1])) if n else (float("nan"), float("inf"))
    )
    truth = float(pool.human.mean())
    return {
        "labels": n,
        "estimate": estimate,
        "half_width": z * se,
        "covered": abs(estimate - truth) <= z * se,
        "truth": truth,
    }


def overconfident_pool(
    rng: np.random.Generator, n_items: int = 2000, *, wrong: float = 0.03, sure: float = 0.999
) -> LabellingPool:
    """A jury as LLM log-probabilities often make it (#41): sure, right on most, confidently wrong.

    It is ``sure`` of its own score on every item, right on most, confidently wrong on a ``wrong``
    share of them, and wrong the lenient way, as LLM judges tend to be: its scores are 2 to 4, and
    where it is wrong the human's label is two levels lower, so its mean is ``2 * wrong`` too
    high.
    """
    values = LabellingPool.VALUES
    score = rng.integers(2, 5, n_items)
    dist = np.full((n_items, 5), (1.0 - sure) / 4.0)
    dist[np.arange(n_items), score] = sure
    human = score.astype(float)
    off = np.flatnonzero(rng.random(n_items) < wrong)
    human[off] = score[off] - 2
    mean = dist @ values
    var = dist @ values**2 - mean**2
    return LabellingPool(dist, mean, var / 16.0, human)


def sure_errors_pool(
    rng: np.random.Generator, n_items: int = 2000, *, wrong: float = 0.02, sure: float = 0.999
) -> LabellingPool:
    """A jury calibrated on most items and ``sure`` of the top level where the label is 0 (#60).

    The calibrated part is `LabellingPool.draw`'s (within a level on most items, 30% of them
    uncertain); on a ``wrong`` share of the items the jury gives the top level probability
    ``sure`` (the rest spread evenly) and the human's label is the bottom one: rare sure errors
    behind the ordinary one-level noise.
    """
    pool = LabellingPool.draw(rng, n_items)
    values = LabellingPool.VALUES
    dist, human = pool.dist.copy(), pool.human.copy()
    off = np.flatnonzero(rng.random(n_items) < wrong)
    dist[off] = (1.0 - sure) / 4.0
    dist[off, -1] = sure
    human[off] = values[0]
    mean = dist @ values
    var = dist @ values**2 - mean**2
    return LabellingPool(dist, mean, var / 16.0, human)


def sequence_session(
    pool: LabellingPool,
    rng: np.random.Generator,
    *,
    active: bool = True,
    alpha: float = 0.05,
    width: float | None = None,
    grid: int = 400,
    horizon: float | None = None,
    method: str = "betting",
    allowance: bool = True,
) -> dict[str, Any]:
    """One labelling session for the benchmark mean with the page's confidence sequence.

    The sequence is `jurybox.calibration.estimates.active.mean_sequences`: the sequence of
    the terms ``f + xi / pi (Y - f)`` over the visiting order. ``covered``: the pool's true mean
    stays inside the sequence over the whole visiting order (time-uniform, so covered at whatever
    label a labeller stops). With ``width``, also the labels at which the sequence first has
    half-width at most ``width`` (None when it never does; the betting sequence on a grid of
    ``grid`` candidate means). ``method``: ``betting`` (the truth's wealth never reaches
    1/alpha), or ``asymptotic`` (the betting sequence until NORMAL_DEPARTURES labels depart from
    the jury's score, then the asymptotic sequence tuned for ``horizon`` visits, its variance
    floored by the jury's distributions unless the labels show them overstated, and with the
    rare-error allowance for the items the jury is sure of, as mean_sequences shows it;
    ``allowance`` False: without it, as before #60).
    """
    from ..stats.sequences import asymptotic_cs, betting_cs, log_wealth
    from .active import OVERSTATED_Z, Design, inclusion_probabilities, overstatement
    from .rectified import NORMAL_DEPARTURES, rectifier_range, term_variance

    pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
    design = Design.draw(pi, rng)
    f, y = pool.score[design.order], pool.human[design.order]
    d = np.where(design.chosen, (y - f) / design.pi, 0.0)
    low, high = rectifier_range(pool.score, pi, 0.0, 4.0)
    x = (d - low) / (high - low)
    uniform = bool(np.all(pi == 1.0))
    population = pool.score.size if uniform else None
    truth = float(np.mean(pool.human - pool.score))  # the mean rectifier
    bet_horizon = horizon if method == "betting" else None
    wealth = log_wealth(
        x, np.array([(truth - low) / (high - low)]), alpha, population, bet_horizon
    )[0]
    inside = wealth < np.log(1.0 / alpha)
    gate = d.size  # the visit from which the asymptotic sequence is shown
    if method == "asymptotic":
        departed = np.cumsum(design.chosen & (np.abs(y - f) >= 0.5 - 1e-12))
        gate = (
            int(np.argmax(departed >= NORMAL_DEPARTURES))
            if departed[-1] >= NORMAL_DEPARTURES
            else d.size
        )
        labelled = np.flatnonzero(design.chosen)
        over = overstatement(
            y[labelled], f[labelled], pool.uncertainty[design.order][labelled] * 16.0, 0.0, 4.0
        )
        so_far = np.cumsum(design.chosen)  # the floor as the labels so far decide it
        dropped = np.where(so_far > 0, (over < -OVERSTATED_Z)[np.maximum(so_far - 1, 0)], False)
        floor = term_variance(pool.score, pool.uncertainty * 16.0, pool.score, pi)
        a_lo, a_hi = _asymptotic_path(
            d, alpha, horizon or max(30.0, d.size / 10), floor, dropped, asymptotic_cs
        )
        if allowance:
            down, up = sure_path(pool, design.order, design.chosen, alpha)
            a_lo, a_hi = a_lo - down, a_hi + up
        inside[gate:] = (a_lo[gate:] <= truth) & (truth <= a_hi[gate:])
    out: dict[str, Any] = {"covered": bool(np.all(inside)), "truth": float(pool.human.mean())}
    if width is not None:
        labelled = np.flatnonzero(design.chosen)  # the page looks after each label
        lo, hi = betting_cs(x, alpha, population, bet_horizon, grid=grid)
        half = (hi - lo) * (high - low) / 2.0
        if gate < d.size:
            half[gate:] = (a_hi[gate:] - a_lo[gate:]) / 2.0
        met = np.flatnonzero(half[labelled] <= width)
        out["labels"] = int(met[0]) + 1 if met.size else None
    return out


def sure_path(
    pool: LabellingPool, order: np.ndarray, chosen: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The rare-error allowance (`jurybox.calibration.estimates.rectified.sure_allowance`).

    After each visit of ``order`` (the items labelled where ``chosen``), on the pool's 0-4
    scale.
    """
    from .rectified import SURE_SD, sure_allowance

    var = pool.uncertainty * 16.0
    sure = (var <= SURE_SD**2 + 1e-15)[order] & chosen
    away = np.abs(pool.human[order] - pool.score[order]) >= 0.5 - 1e-12
    return sure_allowance(
        pool.score, var, np.cumsum(sure), np.cumsum(sure & away), (0.0, 4.0), 1.0, alpha
    )


def _asymptotic_path(
    d: np.ndarray,
    alpha: float,
    horizon: float,
    floor: float,
    dropped: np.ndarray,
    asymptotic_cs: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """The asymptotic sequence's bounds on the mean rectifier after each visit.

    Its variance is floored at ``floor`` where the floor is not ``dropped``.
    """
    lo, hi = asymptotic_cs(d, alpha, horizon, floor)
    if dropped.any():
        bare_lo, bare_hi = asymptotic_cs(d, alpha, horizon, 0.0)
        lo, hi = np.where(dropped, bare_lo, lo), np.where(dropped, bare_hi, hi)
    return lo, hi


def fixed_sample_session(
    pool: LabellingPool,
    rng: np.random.Generator,
    counts: Any,
    *,
    active: bool = True,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """One labelling session for the benchmark mean, looked at once after each of ``counts`` labels.

    Each count is fixed in advance. The interval ``jurybox agree --ppi`` shows there
    (`jurybox.calibration.estimates.active.mean_estimates`: the normal interval, with
    Student's quantile and widened on its skewed side, once ``NORMAL_DEPARTURES`` labels depart
    from the jury's score, else the betting interval at that count;
    `jurybox.calibration.estimates.rectified`) beside the normal interval alone (what it
    showed before #52: the normal quantile, symmetric), and the interval of #52 without #60's
    rare-error allowance for the items the jury is sure of. Per count: ``covered`` and
    ``half_width`` of each (``normal_*`` the one before #52, ``today_*`` before #60) and
    ``interval`` (which was shown). The
    estimate is `weighted_mean`'s with the floor and the overstatement test as
    mean_estimates takes them; tests check the whole against mean_estimates on the same labels.
    """
    from .active import (
        OVERSTATED_Z,
        Design,
        inclusion_probabilities,
        overstatement,
        t_of,
        weighted_mean,
        z_of,
    )
    from .rectified import NORMAL_DEPARTURES, Terms, betting_bounds, skew_allowance

    pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
    design = Design.draw(pi, rng)
    at = np.flatnonzero(design.chosen)
    truth = float(pool.human.mean())
    out = []
    for n in (int(c) for c in counts if int(c) <= at.size):
        items, visits = design.order[at[:n]], int(at[n - 1]) + 1
        f, y, p = pool.score[items], pool.human[items], design.pi[at[:n]]
        over = overstatement(y, f, pool.uncertainty[items] * 16.0, 0.0, 4.0)[-1]
        model = None if over < -OVERSTATED_Z else (pool.score, pool.uncertainty * 16.0, pi)
        estimate, se, lam, *_ = weighted_mean(pool.score, f, y, p, visits, model=model)
        q = t_of(confidence, n - 1)
        terms = np.zeros(visits)
        terms[:n] = (y - lam * f) / p
        down, up = skew_allowance(terms, q)
        lo, hi = estimate - (q + down) * se, estimate + (q + up) * se
        before = z_of(confidence) * se
        row = {
            "labels": n,
            "normal_covered": abs(estimate - truth) <= before,
            "normal_half_width": before,
            "interval": "normal",
            "today_covered": lo <= truth <= hi,
            "today_half_width": (hi - lo) / 2,
        }
        sure_down, sure_up = sure_path(pool, design.order[at[:n]], np.ones(n, bool), 1 - confidence)
        lo, hi = lo - float(sure_down[-1]), hi + float(sure_up[-1])
        if np.sum(np.abs(y - f) >= 0.5 - 1e-12) < NORMAL_DEPARTURES:
            order = design.order[:visits]
            d = np.where(
                design.chosen[:visits],
                (pool.human[order] - pool.score[order]) / design.pi[:visits],
                0.0,
            )
            lo, hi = betting_bounds(Terms(d, pool.score, pi, 0.0, 4.0), 1.0 - confidence, visits)
            lo, hi = min(lo, estimate), max(hi, estimate)
            row.update(interval="betting", today_covered=lo <= truth <= hi)
            row["today_half_width"] = (hi - lo) / 2
        row.update(covered=lo <= truth <= hi, half_width=(hi - lo) / 2)
        out.append(row)
    return out
