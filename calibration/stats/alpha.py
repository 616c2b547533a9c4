"""Krippendorff's alpha from pairable-value sums, without a values x values coincidence matrix.

alpha = 1 - D_o / D_e with (Krippendorff 2011, "Computing Krippendorff's alpha-reliability")

    D_o = 1/n       * sum_u 1/(m_u - 1) * sum_{i != j in u} delta(v_i, v_j)
    D_e = 1/(n(n-1)) * sum_{i != j over all pairable values}   delta(v_i, v_j)

where a unit is pairable when it holds m_u >= 2 values and n counts pairable values. The
``krippendorff`` package tabulates a V x V coincidence matrix (V = distinct values), which is
fine for a 5-point scale and impossible for a million distinct logprob-expected scores. Here each
level reduces the pair sums to O(n) or O(n log n) work:

* interval: sum_{i != j in S} (a_i - a_j)^2 = 2 |S| * sum_{i in S} (a_i - mean_S)^2, so both sums
  are variance sums (per unit via ``bincount``, and over all pairable values).
* ordinal: Krippendorff's ordinal delta is (sum_{g=c..k} n_g - (n_c + n_k)/2)^2, which equals
  (M_k - M_c)^2 with M_v = sum_{g<v} n_g + n_v/2 the mid-rank of value v among pairable values.
  So ordinal alpha is interval alpha on mid-ranks: one sort.
* nominal: sum_{i != j} [a_i != a_j] = |S|^2 - sum_v n_v^2, so only value counts (overall and
  per unit) are needed: one sort of (unit, value) pairs.
* ratio: delta = ((a - b)/(a + b))^2. Write a = c + x with c the smallest value (so x >= 0)
  and use 1/(a + b)^2 = integral_0^inf t e^{-t(a + b)} dt:

      sum_{i,j} delta_ij = integral_0^inf t e^{-2ct} sum_{i,j} (x_i - x_j)^2 w_i w_j dt,
      w_i = e^{-t x_i},   sum_{i,j} (x_i - x_j)^2 w_i w_j = 2 W S,

  with W = sum_i w_i and S = sum_i w_i (x_i - mu)^2 about the weighted mean mu: at each node a
  weighted variance, computed in two passes. Every term is a sum of non-negative parts, so
  nothing cancels: scores sharing a large offset (1e9 + 1..4) keep full precision, which the
  form n(n-1) - sum 4ab/(a + b)^2 (a sum of terms near 1 subtracted from n(n-1)) lost. In
  s = log t every pair contributes a smooth bump of fixed shape, so the trapezoid rule on a
  uniform s grid converges spectrally (step 0.25 gives ~1e-14 relative error per pair); cost
  O(n * nodes) with ~100-300 nodes. Within-unit sums use direct rater pairs when there are few
  raters, else the same integral per unit (about each unit's own smallest value) with
  ``bincount``. Zeros need no special case (delta(0, b) = 1, delta(0, 0) = 0 as in the
  ``krippendorff`` package); negative values are not ratio data and are rejected.

Fewer than two pairable units leave alpha undefined: with one unit D_o = D_e by construction
(alpha would be 0 whatever the ratings), so that 0 says nothing about agreement.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..errors import InputDataError
from ._arrays import as_float_matrix
from .stat import Stat, defined, undefined

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval", "ratio")

# Rater count above which ratio within-unit sums switch from direct rater pairs (O(R^2 U)) to
# the quadrature identity (O(n * nodes)).
_RATIO_DIRECT_MAX_RATERS = 24
_RATIO_STEP = 0.25  # trapezoid step in log t; see module docstring for the error bound
_CHUNK_ELEMENTS = 1 << 22  # cap on temporaries (~32 MiB of float64) in chunked loops
_LOG_U_CAP = np.log(800.0)  # u = t x beyond 800 has e^{-u} = 0 in float64; cap before squaring


def krippendorff_alpha(reliability_data: Any, level: Level) -> Stat:
    """Krippendorff's alpha for raters x units data with NaN for missing ratings.

    ``level`` is required: the ``krippendorff`` package silently defaults to interval, a common
    source of wrong numbers. Nominal data may also be given as strings (``None``/NaN missing).

    Args:
        reliability_data: Raters x units ratings, NaN (or ``None``) for missing.
        level: The level of measurement: ``nominal``, ``ordinal``, ``interval`` or ``ratio``.

    Returns:
        The alpha as a `Stat` whose ``n`` is the number of pairable units (the level, the
        number of values and the observed and expected disagreement in its ``details``); an
        undefined `Stat` (with a reason) when fewer than two units have two ratings, or
        all pairable values are equal.

    Raises:
        InputDataError: ``level`` is not one of the four, the data is ragged, not 2-D, or mixes
            numbers with other values, or ratio data is negative.
    """
    if level not in LEVELS:
        raise InputDataError(f"level must be one of {LEVELS}; got {level!r}")
    name = f"krippendorff_alpha[{level}]"
    data = _coerce(reliability_data, level)
    n_raters = data.shape[0]
    if n_raters < 2:
        return undefined(
            name, 0, f"needs at least 2 raters; got {n_raters} (reliability_data is raters x units)"
        )

    mask = ~np.isnan(data)
    m_all = mask.sum(axis=0)
    pairable = m_all >= 2
    n_units = int(pairable.sum())
    if n_units == 0:
        return undefined(name, 0, "no unit has two or more ratings")
    if n_units == 1:
        # One unit's pairs are also all the pairs, so D_o = D_e and alpha = 0 for any ratings.
        return undefined(
            name,
            1,
            "only 1 unit has two or more ratings; alpha needs at least 2 "
            "(with one unit it is 0 whatever the ratings)",
            n_values=int(m_all[pairable].sum()),
        )
    sub = data[:, pairable]
    sub_mask = mask[:, pairable]
    m = m_all[pairable].astype(float)
    # Values in unit order: transpose so that row-major flattening walks unit by unit.
    values = sub.T[sub_mask.T]
    unit = np.repeat(np.arange(n_units), m_all[pairable])
    n = values.size
    if np.ptp(values) == 0:
        return undefined(
            name,
            n_units,
            "all pairable values are identical (no variation, so expected disagreement is 0)",
            n_values=n,
        )

    if level == "nominal":
        within, expected = _nominal_sums(values, unit, m, n_units)
    elif level == "ordinal":
        within, expected = _interval_sums(_midranks(values), unit, m, n_units)
    elif level == "interval":
        # Interval alpha does not change when every value is scaled alike; scaling by a power
        # of two (exact) to at most 1 keeps squares of tiny values (1e-158) from underflowing
        # to subnormals. (_ratio_sums scales in the same way.)
        shift = -int(np.frexp(np.max(np.abs(values)))[1])
        within, expected = _interval_sums(np.ldexp(values, shift), unit, m, n_units)
    else:
        within, expected = _ratio_sums(sub, sub_mask, values, unit, m, n_units)

    if expected <= 0:
        return undefined(name, n_units, "expected disagreement is 0", n_values=n)
    d_o = within / n
    d_e = expected / (n * (n - 1.0))
    return defined(
        name,
        1.0 - d_o / d_e,
        n_units,
        level=level,
        n_values=n,
        observed_disagreement=d_o,
        expected_disagreement=d_e,
    )


def _coerce(reliability_data: Any, level: str) -> np.ndarray:
    raw = reliability_data.to_numpy() if hasattr(reliability_data, "to_numpy") else reliability_data
    try:
        arr = np.asarray(raw)
    except ValueError as exc:
        raise InputDataError(f"reliability_data is ragged or not array-like: {exc}") from None
    if arr.dtype.kind in "US" and not isinstance(raw, np.ndarray):
        # numpy turns [1, "a"] into strings; re-read as objects to see the mix and reject it.
        arr = np.asarray(raw, dtype=object)
    if level == "nominal" and arr.dtype.kind in "OUS" and arr.ndim == 2:
        codes = _factorize_labels(arr)
        if codes is not None:
            return codes
    data = as_float_matrix(arr)
    if level == "ratio" and (data < 0).any():
        raise InputDataError(
            "ratio data must be non-negative (a ratio scale has a true zero); "
            "use level='interval' for signed scores"
        )
    return data


def _factorize_labels(arr: np.ndarray) -> np.ndarray | None:
    """Nominal string labels -> float codes (NaN missing); None if the cells are not all text."""
    flat = arr.ravel()
    missing = np.array(
        [v is None or (isinstance(v, float) and np.isnan(v)) or v == "" for v in flat]
    )
    present = flat[~missing]
    if not all(isinstance(v, str) for v in present):
        return None  # numbers (or a mix) go through the numeric path, which names bad cells
    _, codes = np.unique(present.astype(str), return_inverse=True)
    out = np.full(flat.shape, np.nan)
    out[~missing] = codes
    return out.reshape(arr.shape)


def _interval_sums(
    values: np.ndarray, unit: np.ndarray, m: np.ndarray, n_units: int
) -> tuple[float, float]:
    """(sum_u 1/(m_u-1) sum_{i!=j in u} d^2, sum_{i!=j} d^2) for d^2 = (a-b)^2."""
    # Two-pass (centre, then square) sums: the one-pass sum(x^2) - sum(x)^2/n form cancels
    # catastrophically when scores share a large offset.
    unit_mean = np.bincount(unit, weights=values, minlength=n_units) / m
    ss_unit = np.bincount(unit, weights=(values - unit_mean[unit]) ** 2, minlength=n_units)
    within = float(np.sum(2.0 * m * ss_unit / (m - 1.0)))
    n = values.size
    expected = 2.0 * n * float(np.sum((values - values.mean()) ** 2))
    return within, expected


def _midranks(values: np.ndarray) -> np.ndarray:
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    mid = np.cumsum(counts) - counts / 2.0
    return mid[inverse]


def _nominal_sums(
    values: np.ndarray, unit: np.ndarray, m: np.ndarray, n_units: int
) -> tuple[float, float]:
    _, code, counts = np.unique(values, return_inverse=True, return_counts=True)
    n = values.size
    expected = float(n) * n - float(np.sum(counts.astype(float) ** 2))
    # Count each (unit, value) pair once: encode the pair as one integer and sort.
    pair = unit.astype(np.int64) * (int(code.max()) + 1) + code
    pair_ids, pair_counts = np.unique(pair, return_counts=True)
    pair_unit = pair_ids // (int(code.max()) + 1)
    same = np.bincount(pair_unit, weights=pair_counts.astype(float) ** 2, minlength=n_units)
    within = float(np.sum((m * m - same) / (m - 1.0)))
    return within, expected


def _ratio_sums(
    sub: np.ndarray,
    sub_mask: np.ndarray,
    values: np.ndarray,
    unit: np.ndarray,
    m: np.ndarray,
    n_units: int,
) -> tuple[float, float]:
    # Ratio delta is scale-free; scaling by a power of two (exact) puts the values in [0, 1),
    # which keeps exp() in range without rounding any difference.
    shift = -int(np.frexp(values.max())[1])
    a = np.ldexp(values, shift)
    low = float(a.min())
    grid = _ratio_grid(a)
    # Offsets from the smallest value: exact for values within a factor 2 of it (Sterbenz), so
    # a shared offset costs no precision.
    expected = float(
        np.sum(
            _delta_sums(
                np.ldexp(values - values.min(), shift),
                np.zeros(values.size, dtype=np.int64),
                np.array([low]),
                grid,
            )
        )
    )
    if sub.shape[0] <= _RATIO_DIRECT_MAX_RATERS:
        within_pairs = _ratio_within_direct(np.ldexp(sub, shift), sub_mask)
    else:
        unit_low = np.full(n_units, np.inf)
        np.minimum.at(unit_low, unit, a)
        within_pairs = _delta_sums(a - unit_low[unit], unit, unit_low, grid)
    within = float(np.sum(within_pairs / (m - 1.0)))
    return within, expected


def _ratio_grid(a: np.ndarray) -> np.ndarray:
    """log-t nodes covering every pair bump (a_i + a_j)^2 t^2 exp(-t (a_i + a_j)).

    In s' = s + log(a_i + a_j) each bump is exp(2 s' - e^{s'}), negligible (< 1e-15 of its peak)
    outside s' in [-18, 4]. Pairs that disagree have a_i + a_j in [min positive a, 2 max a]
    (a zero pairs with a positive value).
    """
    lo = -np.log(2.0 * a.max()) - 18.0
    hi = -np.log(a[a > 0].min()) + 4.0
    return np.arange(lo, hi + _RATIO_STEP, _RATIO_STEP)


def _delta_sums(x: np.ndarray, group: np.ndarray, low: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Per group g: sum_{i != j in g} delta(low_g + x_i, low_g + x_j), by the log-t trapezoid rule.

    ``x`` >= 0 are offsets from the group's smallest value ``low[g]``. At node t the integrand
    is t^2 e^{-2 low t} * 2 W S (module docstring); with u = t x and w = e^{-u} that is
    e^{-2 low t} * 2 * sum w * sum w (u - mean_w u)^2. u is formed as exp(s + log x), and capped
    where w underflows to 0 anyway, so values spanning hundreds of orders of magnitude neither
    overflow nor turn into NaN.
    """
    n_groups = low.size
    positive = x > 0
    log_x, pos_group = np.log(x[positive]), group[positive]
    n_low = np.bincount(group[~positive], minlength=n_groups).astype(float)  # u = 0, w = 1
    log_low = np.log(low, out=np.full(n_groups, -np.inf), where=low > 0)
    total = np.zeros(n_groups)
    if n_groups == 1:  # one group: vectorise over a block of nodes at a time
        step = max(1, _CHUNK_ELEMENTS // max(log_x.size, 1))
        for start in range(0, grid.size, step):  # loop over quadrature nodes, never over units
            s = grid[start : start + step]
            u = np.exp(np.minimum(s[:, None] + log_x[None, :], _LOG_U_CAP))
            w = np.exp(-u)
            weight = n_low[0] + w.sum(axis=1)
            mean = (w * u).sum(axis=1) / weight
            spread = n_low[0] * mean**2 + (w * (u - mean[:, None]) ** 2).sum(axis=1)
            total[0] += float(np.sum(np.exp(-2.0 * np.exp(s + log_low[0])) * weight * spread))
    else:
        for s in grid:  # loop over quadrature nodes, vectorised over values and groups
            u = np.exp(np.minimum(s + log_x, _LOG_U_CAP))
            w = np.exp(-u)
            weight = n_low + np.bincount(pos_group, weights=w, minlength=n_groups)
            mean = np.divide(
                np.bincount(pos_group, weights=w * u, minlength=n_groups),
                weight,
                out=np.zeros(n_groups),
                where=weight > 0,
            )
            spread = n_low * mean**2 + np.bincount(
                pos_group, weights=w * (u - mean[pos_group]) ** 2, minlength=n_groups
            )
            total += np.exp(-2.0 * np.exp(s + log_low)) * weight * spread
    return 2.0 * _RATIO_STEP * total


def _ratio_within_direct(sub: np.ndarray, sub_mask: np.ndarray) -> np.ndarray:
    """Per-unit sum_{i != j} delta^2 over rater pairs (r < s), vectorised over units."""
    n_raters, n_units = sub.shape
    out = np.zeros(n_units)
    x = np.where(sub_mask, sub, 0.0)
    for r in range(n_raters - 1):  # loop over raters (few), vectorised over units
        a = x[r][None, :]
        b = x[r + 1 :]
        both = sub_mask[r][None, :] & sub_mask[r + 1 :]
        total = a + b
        d = np.divide(a - b, total, out=np.zeros_like(b), where=total != 0)
        out += 2.0 * np.sum(np.where(both, d * d, 0.0), axis=0)
    return out
