"""Confidence sequences: intervals that hold at every number of observations at once.

A labeller may look after every label and stop whenever the interval is narrow enough.

A fixed-sample interval (Clopper-Pearson, a t or normal interval) holds at the one sample size
chosen in advance; looked at after every label and stopped on the first narrow one, it covers
less than it says (optional stopping). A confidence sequence ``[l_t, u_t]`` holds with
probability ``1 - alpha`` simultaneously for every t, so the stopping rule cannot break it.

`betting_cs` is the betting confidence sequence for the mean of values in [0, 1]
(Waudby-Smith and Ramdas 2023, "Estimating means of bounded random variables by betting",
JRSS-B 86(1), arXiv 2010.09686): for each candidate mean ``m`` a gambler bets on the next value
being above or below it; ``m`` leaves the sequence once the wealth of the bets against it
exceeds ``1 / alpha`` (Ville's inequality bounds the chance of that ever happening for the true
mean by ``alpha``). The choices are those of the authors' package ``confseq`` by default
(``betting_cs``): the hedged capital process (half the wealth on each side), predictable
plug-in empirical-Bernstein bets (``lambda_predmix_eb``, each side at ``alpha / 2``) truncated
at half of ``1/m`` and ``1/(1-m)``, a grid of candidate means, and, with ``population`` (the
values sampled without replacement from a finite population of that size), the bets against
the mean of the values not yet seen and the logical bounds that the values seen imply. Its
width follows the values' own spread, never assumes a distribution, and needs no minimum
number of observations; with few values it is wide, as it should be.

The running intersection is taken, so the interval never widens as labels come in.

`asymptotic_cs` is the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha,
Kennedy and Ramdas ("Time-uniform central limit theory and asymptotic confidence sequences",
Annals of Statistics 52(6), 2024, Theorem 2.2, arXiv 2103.06476): the running mean plus or
minus the running standard deviation times Robbins' two-sided normal-mixture boundary,
``sqrt(2 (t rho^2 + 1) / (t^2 rho^2) * log(sqrt(t rho^2 + 1) / alpha))``, with ``rho^2`` chosen
to make it narrowest at a planned number of values (`best_rho2`). It is to the betting
sequence what the normal interval is to an exact one: it needs no bound on the values, only a
finite variance, and holds at every t at once *asymptotically* (as the number of values grows;
the paper's time-uniform central limit theorem), so early on, or for values whose rare large
deviations have not been seen yet, it can undercover. Its width at the planned count is about
1.55 times the normal interval's at 95% (the price of looking after every value), where the
betting sequence of values bounded in a range many times their spread pays far more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Candidate means in [0, 1]: the bounds are exact to 1 / GRID (rounded outwards).
GRID = 1000


def predictable_bets(x: np.ndarray, alpha: float, horizon: float | None = None) -> np.ndarray:
    """The bet sizes before each value (predictable: from the values before it only).

    They are the predictable plug-in empirical-Bernstein bets, ``sqrt(2 log(1/alpha) / (t
    log(1+t) sigma2_{t-1}))``, with the running variance regularised by one pseudo-observation of
    variance 1/4 around a prior mean of 1/2 (confseq's ``lambda_predmix_eb``). With a ``horizon``
    (the number of values by which the interval should be narrow; confseq's ``fixed_n``), ``t
    log(1+t)`` is that number instead: the sequence is tightest around it and valid at every t all
    the same.
    """
    t = np.arange(1, x.size + 1)
    mu_hat = np.minimum((0.5 + np.cumsum(x)) / (t + 1), 1.0)
    sigma2 = (0.25 + np.cumsum((x - mu_hat) ** 2)) / (t + 1)
    sigma2_before = np.concatenate(([0.25], sigma2[:-1]))
    scale = t * np.log1p(t) if horizon is None else np.full(x.size, float(horizon))
    return np.sqrt(2.0 * np.log(1.0 / alpha) / (scale * sigma2_before))


def log_wealth(
    x: np.ndarray,
    candidates: np.ndarray,
    alpha: float,
    population: int | None = None,
    horizon: float | None = None,
) -> np.ndarray:
    """The log wealth after each value (columns) of the bets against each candidate mean (rows).

    The bets are the hedged capital process (module text); +inf where a candidate is impossible
    (without replacement: the values seen leave the unseen ones a mean outside [0, 1]).
    """
    t = np.arange(1, x.size + 1)
    bets = predictable_bets(x, alpha / 2.0, horizon)
    m = np.asarray(candidates, dtype=float)[:, None]
    if population is not None:  # the mean of the values not seen yet
        seen_before = np.concatenate(([0.0], np.cumsum(x)[:-1]))
        mu = (population * m - seen_before) / (population - (t - 1))
    else:
        mu = np.broadcast_to(m, (m.shape[0], x.size))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        up = np.clip(bets, -0.5 / (1.0 - mu), 0.5 / mu)
        down = np.clip(bets, -0.5 / mu, 0.5 / (1.0 - mu))
        # Every factor is at least 1/2 (the truncation), so the logs stay finite.
        log_up = np.cumsum(np.log1p(up * (x - mu)), axis=1)
        log_down = np.cumsum(np.log1p(-down * (x - mu)), axis=1)
    out = np.log(0.5) + np.maximum(log_up, log_down)
    out[(mu < 0.0) | (mu > 1.0) | np.isnan(out)] = np.inf
    return out


def _checked(values: Sequence[float] | np.ndarray, population: int | None) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if np.any((x < 0) | (x > 1)) or not np.all(np.isfinite(x)):
        raise ValueError("a betting confidence sequence needs values in [0, 1]")
    if population is not None and population < x.size:
        raise ValueError(
            f"{x.size} values drawn without replacement from a population of {population}"
        )
    return x


def betting_cs(
    values: Sequence[float] | np.ndarray,
    alpha: float = 0.05,
    population: int | None = None,
    horizon: float | None = None,
    grid: int = GRID,
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds after each of ``values`` of a ``1 - alpha`` confidence sequence.

    Each value is in [0, 1]; the sequence is for their mean (with ``population``: the mean of the
    finite population of that size the values are drawn from without replacement), on a grid of
    candidate means (rounded outwards), with the running intersection. See the module's text.
    """
    x = _checked(values, population)
    if x.size == 0:
        return np.zeros(0), np.zeros(0)
    candidates = np.linspace(0.0, 1.0, grid + 1)
    inside = np.zeros((grid + 1, x.size), dtype=bool)
    block = max(1, 2_000_000 // x.size)  # candidate means at a time: bounded memory
    for start in range(0, grid + 1, block):
        wealth = log_wealth(x, candidates[start : start + block], alpha, population, horizon)
        inside[start : start + block] = wealth < np.log(1.0 / alpha)
    any_inside = inside.any(axis=0)
    first = np.argmax(inside, axis=0)
    last = grid - np.argmax(inside[::-1], axis=0)
    low = np.where(any_inside, np.maximum(0.0, (first - 1) / grid), 0.0)
    high = np.where(any_inside, np.minimum(1.0, (last + 1) / grid), 1.0)
    if population is not None:
        t = np.arange(1, x.size + 1)
        seen = np.cumsum(x)
        low = np.maximum(low, seen / population)
        high = np.minimum(high, 1.0 - (t - seen) / population)
    return np.maximum.accumulate(low), np.minimum.accumulate(high)


def betting_interval(
    values: Sequence[float] | np.ndarray,
    alpha: float = 0.05,
    population: int | None = None,
    horizon: float | None = None,
    grid: int = GRID,
) -> tuple[float, float]:
    """The sequence's interval after the last of ``values``: what a page shows after each label.

    Its bounds are found to about ``1 / grid**2`` (a grid, then a grid within each bound's cell),
    without the running intersection (each time's set is valid alone).
    """
    x = _checked(values, population)
    if x.size == 0:
        return 0.0, 1.0
    threshold = np.log(1.0 / alpha)

    def admitted(candidates: np.ndarray) -> np.ndarray:
        return log_wealth(x, candidates, alpha, population, horizon)[:, -1] < threshold

    coarse = np.linspace(0.0, 1.0, grid + 1)
    ok = np.flatnonzero(admitted(coarse))
    if ok.size == 0:
        return 0.0, 1.0
    step = 1.0 / grid
    fine = np.linspace(max(0.0, coarse[ok[0]] - step), coarse[ok[0]], grid + 1)
    low = float(fine[np.argmax(admitted(fine))])
    fine = np.linspace(coarse[ok[-1]], min(1.0, coarse[ok[-1]] + step), grid + 1)
    high = float(fine[len(fine) - 1 - np.argmax(admitted(fine)[::-1])])
    low, high = max(0.0, low - step / grid), min(1.0, high + step / grid)
    if population is not None:
        seen = float(x.sum())
        low, high = max(low, seen / population), min(high, 1.0 - (x.size - seen) / population)
    return low, high


def even_path(rate: float, n: int) -> np.ndarray:
    """``n`` values of 0 and 1 whose every prefix holds the share ``rate`` of ones.

    Every prefix holds that share as nearly as whole numbers allow: the typical path of an
    agreement rate, for planning.
    """
    k = np.floor(rate * np.arange(0, n + 1) + 0.5)
    return np.diff(k).clip(0.0, 1.0)


def labels_needed(
    rate: float,
    width: float,
    alpha: float = 0.05,
    population: int | None = None,
    horizon: float | None = None,
    cap: int = 20_000,
) -> int | None:
    """The first number of labels at which an agreement rate's sequence is ``width`` wide or less.

    That is, at which the confidence sequence of an agreement rate ``rate`` (on
    `even_path`) has half-width at most ``width``; None when ``cap`` labels (or the whole
    population) are not enough.
    """
    limit = cap if population is None else min(cap, population)
    n = min(256, limit)
    while True:  # the sequence's first n bounds depend on the first n values only
        low, high = betting_cs(even_path(rate, n), alpha, population, horizon)
        met = np.flatnonzero((high - low) / 2.0 <= width + 1e-12)
        if met.size:
            return int(met[0]) + 1
        if n >= limit:
            return None
        n = min(4 * n, limit)


def best_rho2(horizon: float, alpha: float = 0.05) -> float:
    """The ``rho^2`` that makes `asymptotic_margin` narrowest at ``t = horizon``.

    With ``u = t rho^2``, the width is least where ``u = log(1 + u) + 2 log(1/alpha)``, that is
    ``u = -W_{-1}(-alpha^2 / e) - 1`` (W the lower branch of Lambert's function).
    """
    from scipy.special import lambertw

    if horizon <= 0 or not 0 < alpha < 1:
        raise ValueError(
            f"the horizon must be positive and alpha in (0, 1); got {horizon}, {alpha}"
        )
    u = -float(lambertw(-(alpha**2) / math.e, k=-1).real) - 1.0
    return u / float(horizon)


def asymptotic_margin(t: np.ndarray | float, rho2: float, alpha: float = 0.05) -> np.ndarray:
    """Robbins' two-sided normal-mixture boundary for a sum of ``t`` unit-variance values.

    Divided by ``t``, it is the half-width of the asymptotic sequence per unit of standard
    deviation (the module's text).
    """
    tt = np.asarray(t, dtype=float)
    return np.sqrt(
        2.0 * (tt * rho2 + 1.0) / (tt**2 * rho2) * np.log(np.sqrt(tt * rho2 + 1.0) / alpha)
    )


def asymptotic_cs(
    values: Sequence[float] | np.ndarray,
    alpha: float = 0.05,
    horizon: float = 100.0,
    variance_floor: float = 0.0,
    bounds: tuple[float, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds after each of ``values`` of the ``1 - alpha`` asymptotic sequence.

    The asymptotic confidence sequence for their mean (module text), narrowest around ``horizon``
    values; the running variance (``ddof=1``) is at least ``variance_floor``. Unbounded (infinite)
    after the first value, where no variance is known. With ``bounds`` (the least and greatest
    value possible), where the values so far all take one value the sequence is at least the
    bounded score interval of that many values (`bounded_score_interval`, the margin in place
    of the normal quantile): values that show no spread estimate no variance.
    """
    x = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(x)):
        raise ValueError("an asymptotic confidence sequence needs finite values")
    if x.size == 0:
        return np.zeros(0), np.zeros(0)
    t = np.arange(1, x.size + 1, dtype=float)
    mean = np.cumsum(x) / t
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (np.cumsum(x**2) - t * mean**2) / (t - 1.0)
    var = np.maximum(np.nan_to_num(var, nan=np.inf), variance_floor)
    var[0] = np.inf
    margin = asymptotic_margin(t, best_rho2(horizon, alpha), alpha)
    half = np.sqrt(var) * margin
    lo, hi = mean - half, mean + half
    if bounds is not None and bounds[1] > bounds[0]:
        flat = np.maximum.accumulate(x) - np.minimum.accumulate(x) <= 1e-12 * max(
            1.0, float(np.abs(x).max())
        )
        flat[0] = False  # unbounded after one value all the same
        if flat.any():
            b_lo, b_hi = bounded_score_interval(mean, t, *bounds, margin * np.sqrt(t))
            lo, hi = (
                np.where(flat, np.minimum(lo, b_lo), lo),
                np.where(flat, np.maximum(hi, b_hi), hi),
            )
    return lo, hi


def bounded_score_interval(
    mean: np.ndarray | float,
    count: np.ndarray | float,
    low: float,
    high: float,
    q: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray]:
    """The score interval of the mean of ``count`` values in ``[low, high]``, their mean ``mean``.

    ``{mu : (mean - mu)^2 <= q^2 (mu - low) (high - mu) / count}``: the normal interval with the
    largest variance a variable on ``[low, high]`` with mean ``mu`` can have (Bhatia and Davis
    2000) in place of the sample's; on ``{0, 1}`` it is Wilson's interval (1927). What ``count``
    bounded values support whatever their spread: the floor of an interval whose values show
    none. ``q``: the interval's quantile (for a sequence: its margin times ``sqrt(count)``).
    """
    span = high - low
    p = (np.asarray(mean, dtype=float) - low) / span
    n, q2 = np.asarray(count, dtype=float), np.asarray(q, dtype=float) ** 2
    centre = (p + q2 / (2 * n)) / (1 + q2 / n)
    half = (
        np.sqrt(q2) / (1 + q2 / n) * np.sqrt(np.clip(p * (1 - p), 0, None) / n + q2 / (4 * n * n))
    )
    return low + span * np.clip(centre - half, 0, 1), low + span * np.clip(centre + half, 0, 1)
