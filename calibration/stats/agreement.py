"""Two-rater agreement on numeric scores: correlations, exact/adjacent agreement, error.

Pairs where either score is missing (NaN) are left out; ``n`` on the result says how many
pairs were used, so a shrinking denominator is always visible.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputDataError
from ._arrays import as_float_vector
from .stat import Stat, defined, undefined


def paired(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both vectors as floats, restricted to the pairs where both are present."""
    x = as_float_vector(a, "a")
    y = as_float_vector(b, "b")
    if x.size != y.size:
        raise InputDataError(f"a and b differ in length ({x.size} vs {y.size})")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def _correlation_precheck(name: str, x: np.ndarray, y: np.ndarray) -> Stat | None:
    n = int(x.size)
    if n < 3:
        return undefined(name, n, f"needs at least 3 paired ratings; got {n}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return undefined(name, n, "one rater gave the same score to every unit (constant input)")
    return None


def _pearson_r(x: np.ndarray, y: np.ndarray) -> float:
    xc = x - x.mean()
    yc = y - y.mean()
    r = float(np.dot(xc, yc) / np.sqrt(np.dot(xc, xc) * np.dot(yc, yc)))
    return max(-1.0, min(1.0, r))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties sharing their average rank (as scipy.stats.rankdata)."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    return (upper - (counts - 1) / 2.0)[inverse]


def pearson(a: Any, b: Any) -> Stat:
    """Pearson's r on the paired scores; undefined below 3 pairs or when one rater is constant.

    Args:
        a: The first rater's scores, one per unit (NaN for missing).
        b: The second rater's scores, aligned with ``a``.

    Returns:
        The correlation as a `Stat` whose ``n`` is the number of pairs used.

    Raises:
        InputDataError: ``a`` and ``b`` differ in length, are not 1-D, or hold non-numeric values
            or infinities.
    """
    x, y = paired(a, b)
    return _correlation_precheck("pearson", x, y) or defined("pearson", _pearson_r(x, y), x.size)


def spearman(a: Any, b: Any) -> Stat:
    """Spearman's rho: Pearson correlation of average ranks (ties handled as scipy does).

    Undefined below 3 pairs or when one rater is constant.

    Args:
        a: The first rater's scores, one per unit (NaN for missing).
        b: The second rater's scores, aligned with ``a``.

    Returns:
        The correlation as a `Stat` whose ``n`` is the number of pairs used.

    Raises:
        InputDataError: ``a`` and ``b`` differ in length, are not 1-D, or hold non-numeric values
            or infinities.
    """
    x, y = paired(a, b)
    return _correlation_precheck("spearman", x, y) or defined(
        "spearman", _pearson_r(_average_ranks(x), _average_ranks(y)), x.size
    )


def kendall(a: Any, b: Any) -> Stat:
    """Kendall's tau-b (scipy.stats.kendalltau, O(n log n)).

    Undefined below 3 pairs or when one rater is constant.

    Args:
        a: The first rater's scores, one per unit (NaN for missing).
        b: The second rater's scores, aligned with ``a``.

    Returns:
        The correlation as a `Stat` whose ``n`` is the number of pairs used.

    Raises:
        InputDataError: ``a`` and ``b`` differ in length, are not 1-D, or hold non-numeric values
            or infinities.
    """
    x, y = paired(a, b)
    pre = _correlation_precheck("kendall", x, y)
    if pre is not None:
        return pre
    from scipy.stats import kendalltau  # lazy: scipy.stats costs ~0.3 s to import

    return defined("kendall", float(kendalltau(x, y).statistic), x.size)


def exact_agreement(a: Any, b: Any) -> Stat:
    """Share of units where both raters gave the same score.

    Args:
        a: The first rater's scores, one per unit (NaN for missing).
        b: The second rater's scores, aligned with ``a``.

    Returns:
        The share as a `Stat` whose ``n`` is the number of pairs used; undefined with no
        pairs.

    Raises:
        InputDataError: ``a`` and ``b`` differ in length, are not 1-D, or hold non-numeric values
            or infinities.
    """
    x, y = paired(a, b)
    if x.size == 0:
        return undefined("exact_agreement", 0, "no paired ratings")
    return defined("exact_agreement", float(np.mean(x == y)), x.size)


def adjacent_agreement(a: Any, b: Any, tolerance: float = 1.0) -> Stat:
    """Share of units where the scores differ by at most ``tolerance`` (one scale step).

    Args:
        a: The first rater's scores, one per unit (NaN for missing).
        b: The second rater's scores, aligned with ``a``.
        tolerance: The largest difference that still counts as agreeing (default: one step).

    Returns:
        The share as a `Stat` whose ``n`` is the number of pairs used (``tolerance`` in
        its ``details``); undefined with no pairs.

    Raises:
        InputDataError: ``a`` and ``b`` differ in length, are not 1-D, or hold non-numeric values
            or infinities.
    """
    x, y = paired(a, b)
    if x.size == 0:
        return undefined("adjacent_agreement", 0, "no paired ratings")
    # A hair of slack so 0.1 + 0.2 style float noise does not turn "adjacent" into "apart".
    close = np.abs(x - y) <= tolerance * (1 + 1e-9)
    return defined("adjacent_agreement", float(np.mean(close)), x.size, tolerance=tolerance)


def mean_absolute_error(a: Any, b: Any) -> Stat:
    """Mean absolute difference between the paired scores (``mae``); undefined with no pairs.

    Args:
        a: The first rater's scores, one per unit (NaN for missing).
        b: The second rater's scores, aligned with ``a``.

    Returns:
        The error as a `Stat` named ``mae`` whose ``n`` is the number of pairs used.

    Raises:
        InputDataError: ``a`` and ``b`` differ in length, are not 1-D, or hold non-numeric values
            or infinities.
    """
    x, y = paired(a, b)
    if x.size == 0:
        return undefined("mae", 0, "no paired ratings")
    return defined("mae", float(np.mean(np.abs(x - y))), x.size)


def mean_difference(a: Any, b: Any) -> Stat:
    """Mean of a - b: the bias of rater a against rater b.

    Args:
        a: The first rater's scores, one per unit (NaN for missing).
        b: The second rater's scores, aligned with ``a``.

    Returns:
        The mean difference as a `Stat` named ``bias`` whose ``n`` is the number of pairs
        used; undefined with no pairs.

    Raises:
        InputDataError: ``a`` and ``b`` differ in length, are not 1-D, or hold non-numeric values
            or infinities.
    """
    x, y = paired(a, b)
    if x.size == 0:
        return undefined("bias", 0, "no paired ratings")
    return defined("bias", float(np.mean(x - y)), x.size)
