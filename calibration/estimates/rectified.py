"""The rectifier terms of a labelling design, and intervals for a benchmark's mean (#52).

The intervals do not lean on the normal approximation when the labels cannot support it.

A benchmark's mean label is the jury's mean over the pool (known) plus the mean *rectifier*
``Y - f`` (the human's label minus the jury's score). Over the items visited in a session's
order, each term ``D = xi / pi * (Y - f)`` (``xi`` 1 when the item was labelled, ``pi`` its
inclusion probability; 0 for an item visited but not chosen) has the pool's mean rectifier as
its mean (`Terms`).

**When the normal interval is shown.** The normal (PPI++) interval estimates the rectifier's
variance from the labels. A jury that is sure of itself and right on most items has rectifiers
that are 0 on most items and large on a few; until the labels have seen some of those few, the
estimated variance is near 0 and the interval covers far less than it says (a jury 0.999 sure
and wrong on 3% of items: 61% at 30 labels, 91% at 100; #52). So the rule: the normal interval
is shown once at least `NORMAL_DEPARTURES` labelled items *depart* from the jury's score
(by half a step of the scale or more: the human's label is another level than the jury's);
before, the interval is the betting interval at the labels' count (`betting_bounds`,
`jurybox.calibration.stats.sequences.betting_interval` with its bets tuned for that
count): valid in finite samples for labels on a bounded scale whatever the jury, and wide when
few labels cannot exclude rare errors, as it must be. The threshold was chosen by simulation
(perf/fixed_sample.py: calibrated, underconfident and overconfident juries wrong on 1-10% of
items, 30 to 200 labels, uniform and active designs; coverage at least 94% in every cell).

**Rare sure errors behind ordinary noise (#60).** The departures the rule counts may all be
the jury's ordinary one-level noise: a jury calibrated within a level on most items but 0.999
sure of the top level where the label is 0 on 2-5% of them opens the normal interval at about
20 labels, long before one of its sure errors is labelled, and the truth then lies below the
interval (time-uniform coverage of the asymptotic sequence 0.76-0.94, the fixed-sample
interval 0.80-0.95). So where the jury's distributions are known, the interval keeps an
allowance for what the items the jury is *sure* of (predictive standard deviation at most
`SURE_SD` steps) could hide (`sure_allowance`): their share of the pool times the one-sided
Clopper-Pearson bound on their error rate from the labels on them, times the mean distance
from the jury's score to each end of the scale, until `NORMAL_DEPARTURES` labels on them
depart (then the labels show those errors, as they show an overconfident jury's). A jury
sure of no item (calibrated, underconfident) pays nothing, nor one sure of every item (its
departures are all on sure items); simulated, 0.97-0.99 in every cell at 1.02-1.37 times
the half-width (perf/fixed_sample.py, perf/sequences.py).

**Labels of one value (#60).** Where the labelled terms all take one value (every label the
same: PPI++'s lam is 0, the variance 0) the normal interval would be a point; it is at least
the bounded score interval of that many terms on their range (`wilson_bounds`: Wilson's on
``{0, 1}``), what n bounded labels support whatever their spread (`no_spread`).

**Skewness.** Where the normal interval is shown, it is widened on its skewed side (never
narrowed) by the Cornish-Fisher term of the studentized mean, ``g (2 z^2 + 1) / (6 sqrt(M))``
standard errors (``g`` the terms' sample skewness over the ``M`` visits; Hall 1992, "On the
removal of skewness by transformation", JRSS-B 54): a jury wrong on 10% of items, sure of
itself, has rectifiers skewed enough (``g`` about -3) that the symmetric interval covered 93% at
200 labels; the allowance brings it to 95-96% for 1-8% more width, 1-5% for a calibrated jury
(`skew_allowance`).

**Anytime-valid sequences.** `betting_bounds` over every visit is the page's betting
sequence (finite-sample; its bets are truncated by the widest term the design allows, so
importance weights up to ``1 / pi_min`` widen it many times over the terms' spread).
`asymptotic_bounds` is the asymptotic sequence (Waudby-Smith et al. 2024; width from the
terms' own variance, so weights cost only what they add to it), shown under the same rule: the
betting sequence until the labels hold `NORMAL_DEPARTURES` departures, then the
asymptotic one, its variance floored by what the jury's own distributions predict unless the
labels show they overstate it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The labelled items that must depart from the jury's score before the normal interval (or the
#: asymptotic sequence) is shown (module text).
NORMAL_DEPARTURES = 5


#: A jury is *sure* of an item when its predictive standard deviation is at most this share of
#: the scale's step (module text: the rare-error allowance).
SURE_SD = 0.1


def step_of(scale: Any) -> float:
    """The smallest distance between two levels of ``scale``."""
    values = np.asarray(sorted(scale.values), dtype=float)
    return float(np.diff(values).min()) if values.size > 1 else 1.0


def departures(y: Any, f: Any, scale: Any) -> int:
    """How many labels ``y`` depart from the jury's scores ``f`` by half a step or more.

    Half a step of ``scale`` or more: the human's level is another than the jury's.
    """
    gap = np.abs(np.asarray(y, dtype=float) - np.asarray(f, dtype=float))
    return int(np.sum(gap >= step_of(scale) / 2 - 1e-12))


def skew_allowance(terms: Any, z: float) -> tuple[float, float]:
    """The standard errors to add below and above a normal interval of the mean of ``terms``.

    That is (module text) the Cornish-Fisher term ``g (2 z^2 + 1) / (6 sqrt(M))`` on the side the
    terms are skewed to, 0 on the other and where they have no spread.
    """
    x = np.asarray(terms, dtype=float)
    centred = x - x.mean()
    m2 = float(np.mean(centred**2))
    if x.size < 3 or m2 <= 0:
        return 0.0, 0.0
    g = float(np.mean(centred**3)) / m2**1.5
    c = g * (2 * z * z + 1) / (6 * np.sqrt(x.size))
    return max(0.0, -c), max(0.0, c)


def rectifier_range(f: np.ndarray, pi: np.ndarray, low: float, high: float) -> tuple[float, float]:
    """The least and greatest ``xi / pi * (Y - f)`` a design allows over a pool.

    The pool's jury scores are ``f``, its inclusion probabilities ``pi``, labels in ``[low,
    high]``; 0 is among them: an item visited but not chosen.
    """
    return (min(0.0, float(((low - f) / pi).min())), max(0.0, float(((high - f) / pi).max())))


@dataclass(frozen=True)
class Terms:
    """A session's rectifier terms ``d`` over its visited items, in the visiting order.

    With them, the pool's jury scores and inclusion probabilities and the scale's ends.
    ``uniform``: every item is labelled with probability 1 (the terms are the pool's rectifiers
    drawn without replacement; otherwise they are treated as drawn with replacement).
    """

    d: np.ndarray
    f_pool: np.ndarray
    pi_pool: np.ndarray
    low: float
    high: float

    @property
    def uniform(self) -> bool:
        """Whether every item is labelled with probability 1 (drawn without replacement)."""
        return bool(np.all(self.pi_pool == 1.0))

    @property
    def known(self) -> float:
        """The jury's mean over the pool."""
        return float(self.f_pool.mean())

    def bounded(self, lo: float, hi: float) -> tuple[float, float]:
        """``[known + lo, known + hi]`` within the scale."""
        return max(self.low, self.known + lo), min(self.high, self.known + hi)


def betting_bounds(
    terms: Terms, alpha: float, horizon: float | None = None, grid: int | None = None
) -> tuple[float, float]:
    """The mean's ``1 - alpha`` betting bounds after the last of ``terms``.

    They are the rectifiers' betting interval shifted by the jury's pool mean, its bets tuned for
    ``horizon`` visits (None: for every count, the page's sequence; the count itself: a
    fixed-sample interval); ``grid``: candidate means per pass (None: the sequences' default;
    fewer round outwards).
    """
    from ..stats.sequences import GRID, betting_interval

    low, high = rectifier_range(terms.f_pool, terms.pi_pool, terms.low, terms.high)
    width = high - low
    lo, hi = betting_interval(
        (terms.d - low) / width,
        alpha,
        terms.f_pool.size if terms.uniform else None,
        horizon,
        grid or GRID,
    )
    return terms.bounded(low + lo * width, low + hi * width)


def asymptotic_bounds(
    terms: Terms, alpha: float, horizon: float, variance_floor: float = 0.0
) -> tuple[float, float]:
    """The mean's ``1 - alpha`` asymptotic-sequence bounds after the last of ``terms``.

    The sequence is `jurybox.calibration.stats.sequences.asymptotic_cs`, tuned for
    ``horizon`` visits, the terms' variance at least ``variance_floor``, and at least the
    bounded score interval where the terms take one value (on the range `rectifier_range`
    allows).
    """
    from ..stats.sequences import asymptotic_cs

    bounds = rectifier_range(terms.f_pool, terms.pi_pool, terms.low, terms.high)
    lo, hi = asymptotic_cs(terms.d, alpha, horizon, variance_floor, bounds)
    if not np.isfinite(lo[-1]):
        return terms.low, terms.high
    return terms.bounded(float(lo[-1]), float(hi[-1]))


def term_variance(
    mean: Sequence[float] | np.ndarray,
    var: Sequence[float] | np.ndarray,
    f: np.ndarray,
    pi: np.ndarray,
) -> float:
    """The variance of a term ``D`` were the labels drawn from the jury's own distributions.

    The distributions' ``mean`` and ``var`` are per item of the pool: ``E D^2 - (E D)^2`` with
    ``E D^2 = mean((var + (mean - f)^2) / pi)``: the floor on the asymptotic sequence's.
    """
    m, v = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
    bias = m - f
    return float(np.mean((v + bias**2) / pi) - np.mean(bias) ** 2)


def sure_allowance(
    f_pool: Any,
    var_pool: Any,
    labelled: Any,
    departed: Any,
    bounds: tuple[float, float],
    step: float,
    alpha: float,
) -> tuple[np.ndarray, np.ndarray]:
    """How far below and above the mean errors on the items the jury is sure of could lie unseen.

    ``f_pool`` and ``var_pool``: the jury's score and predictive variance on every item of the
    pool; the items it is sure of have a standard deviation at most ``SURE_SD`` steps.
    ``labelled`` and ``departed`` (numbers or arrays of them, one per count): the labelled sure
    items and those whose label departs from the jury's score. While fewer than
    ``NORMAL_DEPARTURES`` of them depart, their error rate may be up to ``U``, the one-sided
    ``1 - alpha / 2`` Clopper-Pearson bound (1 with none labelled), each error as far as the
    scale allows: the allowance is ``share * U * mean(f - low)`` below and ``share * U *
    mean(high - f)`` above (``share``: the pool's share of sure items; the means over them);
    0 once ``NORMAL_DEPARTURES`` have departed (the labels then show the errors).
    """
    from scipy.special import betaincinv

    f, v = np.asarray(f_pool, dtype=float), np.asarray(var_pool, dtype=float)
    n, k = np.asarray(labelled, dtype=float), np.asarray(departed, dtype=float)
    sure = v <= (SURE_SD * step) ** 2 + 1e-15
    if not sure.any():
        return np.zeros(np.shape(n)), np.zeros(np.shape(n))
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(k >= n, 1.0, betaincinv(k + 1.0, np.maximum(n - k, 1.0), 1.0 - alpha / 2))
    u = np.where(k >= NORMAL_DEPARTURES, 0.0, u) * sure.mean()
    low, high = bounds
    return u * float(np.mean(f[sure] - low)), u * float(np.mean(high - f[sure]))


def wilson_bounds(
    mean: Any, count: Any, low: float, high: float, q: Any
) -> tuple[np.ndarray, np.ndarray]:
    """The bounded score interval (Wilson's on ``{0, 1}``) of the mean of ``count`` values.

    `jurybox.calibration.stats.sequences.bounded_score_interval`: what ``count`` values in
    ``[low, high]`` support whatever their spread, the floor of an interval whose terms show
    none (`no_spread`).
    """
    from ..stats.sequences import bounded_score_interval

    return bounded_score_interval(mean, count, low, high, q)


def no_spread(terms: Any) -> bool:
    """Whether ``terms`` all take one value (their variance, 0, estimates nothing)."""
    x = np.asarray(terms, dtype=float)
    return bool(x.size and np.ptp(x) <= 1e-12 * max(1.0, float(np.abs(x).max())))
