"""Chance-corrected agreement on categories: Cohen's (weighted) kappa, Fleiss' kappa, Gwet's AC.

Weighted statistics follow two conventions, each matching its reference implementation:

* `cohen_kappa` weighs category *positions* 0..q-1 (Cohen 1968, Fleiss, Levin & Paik 2003,
  scikit-learn's ``cohen_kappa_score``): linear 1 - |k-l|/(q-1), quadratic 1 - ((k-l)/(q-1))^2,
  with positions in the order of ``labels`` (default: sorted values).
* `gwet_ac` weighs category *values* (Gwet 2014, ch. 3; irrCAC): linear
  1 - |v_k - v_l|/(v_max - v_min), quadratic 1 - ((v_k - v_l)/(v_max - v_min))^2.

For an evenly spaced scale such as 0..4 the two coincide; on an uneven one such as [0, 1, 2, 10]
they differ (10 is one position but eight units away from 2).

Undefined results are tested on the data, not by a float tolerance: kappa is undefined when
chance agreement is exactly 1, which happens only when every rating is the same category.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..errors import InputDataError
from ._arrays import as_float_matrix, as_float_vector
from .stat import Stat, defined, undefined

Weights = Literal["identity", "linear", "quadratic"]


def agreement_weights(
    q: int, weights: str | None, values: Sequence[float] | np.ndarray | None = None
) -> np.ndarray:
    """The q x q agreement weights (1 on the diagonal, 0 for the farthest categories).

    Distances are between positions 0..q-1 (Cohen, scikit-learn), or between ``values`` (one
    per category, as Gwet and irrCAC use) when given.

    Args:
        q: The number of categories.
        weights: ``None`` (or ``"identity"``) for the identity, ``"linear"`` or ``"quadratic"``.
        values: The categories' values, one per category, for distances between values rather
            than positions.

    Returns:
        The q x q weight matrix.

    Raises:
        InputDataError: ``values`` are not ``q`` distinct numbers, or ``weights`` is another
            name.
    """
    if weights in (None, "identity", "unweighted"):
        return np.eye(q)
    if q < 2:
        return np.ones((q, q))
    if values is None:
        pos = np.arange(q, dtype=float)
    else:
        pos = as_float_vector(values, "values")
        if pos.size != q or np.isnan(pos).any() or np.unique(pos).size != q:
            raise InputDataError(
                f"values must be {q} distinct numbers, one per category; got {pos.tolist()}"
            )
    dist = np.abs(pos[:, None] - pos[None, :]) / (pos.max() - pos.min())
    if weights == "linear":
        return 1.0 - dist
    if weights == "quadratic":
        return 1.0 - dist**2
    raise InputDataError(f"weights must be None, 'linear' or 'quadratic'; got {weights!r}")


def _codes(values: np.ndarray, categories: np.ndarray, what: str) -> np.ndarray:
    """Positions of values in ``categories``; values off the list are an error naming them."""
    idx = np.searchsorted(categories, values)
    idx_clipped = np.clip(idx, 0, categories.size - 1)
    ok = categories[idx_clipped] == values
    if not ok.all():
        bad = np.unique(values[~ok])
        n_bad = int((~ok).sum())
        raise InputDataError(
            f"{what} has {n_bad} {'value' if n_bad == 1 else 'values'} not among the labels "
            f"{categories.tolist()}: {bad[:10].tolist()}"
        )
    return idx_clipped


def _categories(labels: Sequence[float] | None, observed: np.ndarray) -> np.ndarray:
    if labels is None:
        return np.unique(observed)
    cats = as_float_vector(labels, "labels")
    if np.isnan(cats).any():
        raise InputDataError("labels must not contain NaN")
    if np.unique(cats).size != cats.size:
        raise InputDataError(f"labels must be distinct; got {cats.tolist()}")
    # Position order is the order given: a caller may list a scale that is not sorted by value.
    return cats


def cohen_kappa(
    a: Any, b: Any, weights: str | None = None, labels: Sequence[float] | None = None
) -> Stat:
    """Cohen's kappa between two raters; weighted by category position when ``weights`` is set.

    Weights use *positions*, as scikit-learn's ``cohen_kappa_score`` does (not values, unlike
    `gwet_ac`). Pairs with a missing (NaN) rating are left out and the number used is
    reported as ``n``. Undefined when both raters used one and the same category throughout.

    Args:
        a: The first rater's ratings, one per unit (NaN for missing).
        b: The second rater's ratings, aligned with ``a``.
        weights: ``None`` for unweighted kappa, ``"linear"`` or ``"quadratic"``.
        labels: The categories and their order (positions); otherwise the observed values sorted
            ascending.

    Returns:
        The kappa as a `Stat` (observed and expected agreement in its ``details``).

    Raises:
        InputDataError: ``a`` and ``b`` differ in length or hold non-numeric values, ``labels``
            are not distinct numbers, or a rating is not among ``labels``.
    """
    name = "cohen_kappa" if weights in (None, "identity") else f"cohen_kappa[{weights}]"
    x = as_float_vector(a, "a")
    y = as_float_vector(b, "b")
    if x.size != y.size:
        raise InputDataError(f"a and b differ in length ({x.size} vs {y.size})")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = int(x.size)
    if n == 0:
        return undefined(name, 0, "no unit rated by both raters")
    cats = _categories(labels, np.concatenate([x, y]))
    order = np.argsort(cats, kind="stable")
    sorted_cats = cats[order]
    # Map through the sorted copy for searchsorted, then back to the caller's positions.
    xi = order[_codes(x, sorted_cats, "a")]
    yi = order[_codes(y, sorted_cats, "b")]
    q = cats.size
    w = agreement_weights(q, weights)
    observed = np.bincount(xi * q + yi, minlength=q * q).reshape(q, q) / n
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    po = float(np.sum(w * observed))
    pe = float(np.sum(w * expected))
    # pe = 1 exactly when both raters used one and the same category (any off-diagonal weight
    # is below 1); test that, not closeness: 300,000 items with one rare label give pe within
    # 1e-5 of 1 and a well-defined kappa.
    if np.all(xi == xi[0]) and np.all(yi == xi[0]):
        return undefined(
            name,
            n,
            "chance agreement is 1 (both raters used a single category)",
            p_observed=po,
            p_expected=pe,
        )
    return defined(name, (po - pe) / (1.0 - pe), n, p_observed=po, p_expected=pe)


def fleiss_kappa(table: Any) -> Stat:
    """Fleiss' (1971) kappa from a subjects x categories table of rater counts.

    Every subject must have been rated by the same number of raters (Fleiss's design); for
    missing ratings use `krippendorff_alpha` or `gwet_ac` on raw ratings.

    Args:
        table: Subjects x categories: how many raters put each subject in each category.

    Returns:
        The kappa as a `Stat` whose ``n`` is the number of subjects; undefined with no
        subjects, fewer than 2 raters per subject, or every rating in one category.

    Raises:
        InputDataError: The table holds anything but non-negative integer counts, or its rows
            differ in their number of raters.
    """
    name = "fleiss_kappa"
    counts = as_float_matrix(table, "table")
    if np.isnan(counts).any() or (counts < 0).any() or not np.all(counts == np.round(counts)):
        raise InputDataError("table must hold non-negative integer counts (subjects x categories)")
    n_sub = counts.shape[0]
    per_subject = counts.sum(axis=1)
    if n_sub == 0:
        return undefined(name, 0, "no subjects")
    if not np.all(per_subject == per_subject[0]):
        raise InputDataError(
            "Fleiss' kappa needs the same number of raters for every subject; rows sum to "
            f"{np.unique(per_subject)[:10].tolist()} (use krippendorff_alpha for missing ratings)"
        )
    r = per_subject[0]
    if r < 2:
        return undefined(name, n_sub, f"needs at least 2 raters per subject; got {int(r)}")
    p_j = counts.sum(axis=0) / (n_sub * r)
    p_i = (np.sum(counts * counts, axis=1) - r) / (r * (r - 1))
    p_bar = float(p_i.mean())
    p_e = float(np.sum(p_j**2))
    if np.count_nonzero(p_j) <= 1:  # p_e = 1 exactly; a rare second category keeps it defined
        return undefined(name, n_sub, "all ratings fall in one category (chance agreement is 1)")
    return defined(name, (p_bar - p_e) / (1.0 - p_e), n_sub, p_observed=p_bar, p_expected=p_e)


def gwet_ac(
    reliability_data: Any, weights: Weights = "identity", categories: Sequence[float] | None = None
) -> Stat:
    """Gwet's AC1 (``identity`` weights) or AC2 (``linear``/``quadratic``) for raters x units.

    Follows Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed., ch. 2-3 (as in irrCAC's
    ``gwet.ac1.raw``): percent agreement over units rated at least twice; chance agreement
    T_w/(q(q-1)) * sum_k pi_k(1 - pi_k) with pi_k averaged over every unit rated at least once.
    AC2 weights use the category *values* (irrCAC's ``linear.weights``/``quadratic.weights``), so
    on [0, 1, 2, 10] a 2-vs-10 disagreement counts eight times a 1-vs-2 one (linear).

    Args:
        reliability_data: Raters x units ratings, NaN for missing.
        weights: ``"identity"`` for AC1, ``"linear"`` or ``"quadratic"`` for AC2.
        categories: All possible ratings (it matters: q enters chance agreement); otherwise the
            observed values.

    Returns:
        The coefficient as a `Stat` whose ``n`` is the number of units rated at least
        twice (observed and expected agreement in its ``details``).

    Raises:
        InputDataError: The data is not 2-D, holds non-numeric values or infinities, or a rating
            is not among ``categories``.
    """
    name = "gwet_ac1" if weights in ("identity", None) else f"gwet_ac2[{weights}]"
    data = as_float_matrix(reliability_data)
    if data.shape[0] < 2:
        return undefined(name, 0, f"needs at least 2 raters; got {data.shape[0]}")
    mask = ~np.isnan(data)
    rated = mask.sum(axis=0)
    data, mask, rated = data[:, rated > 0], mask[:, rated > 0], rated[rated > 0]
    if data.shape[1] == 0:
        return undefined(name, 0, "no ratings")
    cats = _categories(categories, data[mask])
    order = np.argsort(cats, kind="stable")
    q = cats.size
    if q < 2:
        return undefined(name, int((rated >= 2).sum()), "only one category")
    codes = np.full(data.shape, -1)
    codes[mask] = order[_codes(data[mask], cats[order], "reliability_data")]
    n_units = data.shape[1]
    # r_ik: raters putting unit i in category k, one bincount over (unit, category) codes.
    unit_idx = np.broadcast_to(np.arange(n_units), data.shape)[mask]
    r_ik = np.bincount(unit_idx * q + codes[mask], minlength=n_units * q).reshape(n_units, q)
    w = agreement_weights(q, weights, values=cats)
    r_star = r_ik @ w.T
    multi = rated >= 2
    if not multi.any():
        return undefined(name, 0, "no unit has two or more ratings")
    ri = rated[multi].astype(float)
    pa = float(np.mean(np.sum(r_ik[multi] * (r_star[multi] - 1.0), axis=1) / (ri * (ri - 1.0))))
    pi_k = np.mean(r_ik / rated[:, None], axis=0)
    pe = float(w.sum() / (q * (q - 1.0)) * np.sum(pi_k * (1.0 - pi_k)))
    # With q >= 2 categories pe <= (q^2 - 2)/q^2 < 1 (T_w <= q^2 - 2: the two extreme categories
    # weigh 0; sum pi(1 - pi) <= 1 - 1/q), so no tolerance is needed, only a guard for rounding.
    if not pe < 1.0:
        return undefined(name, int(multi.sum()), "chance agreement is 1")
    return defined(name, (pa - pe) / (1.0 - pe), int(multi.sum()), p_observed=pa, p_expected=pe)
