"""Agreement statistics at the edges: one pairable unit, large offsets, uneven category values,
chance agreement near (but not at) 1. Reference values name their source."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from jurybox.calibration import (
    agreement_weights,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac,
    krippendorff_alpha,
)

nan = np.nan

# --------------------------------------------------------------------------- alpha, one unit


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alpha_with_one_pairable_unit_is_undefined(level: str) -> None:
    # Only unit 0 has two ratings. With one unit D_o = D_e, so alpha is 0 for any ratings (the
    # krippendorff package returns 0.0): a number that says nothing about agreement.
    data = np.array([[1.0, 2.0, nan], [3.0, nan, 4.0]])
    result = krippendorff_alpha(data, level)
    assert not result.defined
    assert result.n == 1
    assert "only 1 unit has two or more ratings" in result.reason
    assert result.details["n_values"] == 2
    two_units = np.array([[1.0, 2.0, nan], [3.0, 2.0, 4.0]])
    assert krippendorff_alpha(two_units, level).defined


# --------------------------------------------------------------------------- ratio precision


def _exact_ratio_alpha(data: list[list[int]]) -> Fraction:
    """Ratio alpha in rational arithmetic, from the pair-sum definition (Krippendorff 2011)."""

    def delta(a: int, b: int) -> Fraction:
        return Fraction(a - b, a + b) ** 2 if a + b else Fraction(0)

    units = [list(u) for u in zip(*data, strict=True)]
    values = [v for u in units for v in u]
    n = len(values)
    within = sum(
        (sum(delta(a, b) for a, b in combinations(u, 2)) * 2 / (len(u) - 1) for u in units),
        Fraction(0),
    )
    expected = sum((delta(a, b) for a, b in combinations(values, 2)), Fraction(0)) * 2
    return 1 - (n - 1) * within / expected


@pytest.mark.parametrize("offset", [0, 10**3, 10**6, 10**9, 10**12])
def test_ratio_alpha_with_a_large_common_offset_is_exact(offset: int) -> None:
    # issue #7 item 16: at offset 1e9 this gave 0.99992 (exact: 0.926316, as the krippendorff
    # package also gives); at 1e6 it was off by ~1e-4.
    data = [
        [1 + offset, 2 + offset, 3 + offset, 4 + offset],
        [1 + offset, 2 + offset, 4 + offset, 4 + offset],
    ]
    exact = float(_exact_ratio_alpha(data))
    result = krippendorff_alpha(np.array(data, dtype=float), "ratio")
    assert result.value == pytest.approx(exact, rel=1e-10, abs=1e-12)
    if offset == 10**9:
        assert result.value == pytest.approx(0.926316, abs=1e-6)


def test_ratio_alpha_many_raters_with_offset_is_exact() -> None:
    # > 24 raters: the within-unit sums come from the per-unit quadrature.
    rng = np.random.default_rng(7)
    base = rng.integers(1, 6, size=(26, 5))
    base[0, 0] = 9  # one outlier, so expected disagreement is not tiny everywhere
    data = (base + 10**9).tolist()
    exact = float(_exact_ratio_alpha(data))
    assert krippendorff_alpha(np.array(data, dtype=float), "ratio").value == pytest.approx(
        exact, rel=1e-9
    )


# --------------------------------------------------------------------------- Gwet AC2 by value

# issue #7 item 17: categories [0, 1, 2, 10] (uneven), 3 raters x 8 units.
UNEVEN = np.array(
    [[0, 1, 2, 10, 10, 1, 0, 2], [0, 2, 2, 10, 2, 1, 1, 10], [1, 1, 2, 10, 10, nan, 0, 2]]
)


@pytest.mark.parametrize(
    "weights, coefficient, pa, pe",
    [
        # irrCAC (R: gwet.ac1.raw(..., weights=, categ.labels=c(0, 1, 2, 10)); Python irrCAC 0.4.4
        # CAC(...).gwet() prints the same to 5 decimals) and Gwet's handbook, ch. 3.
        ("identity", 0.447005, 0.58333, 0.24653),
        ("linear", 0.600175, 0.84167, 0.60399),
        ("quadratic", 0.662317, 0.89083, 0.67672),
    ],
)
def test_gwet_ac2_weights_category_values(
    weights: str, coefficient: float, pa: float, pe: float
) -> None:
    result = gwet_ac(UNEVEN, weights, categories=[0, 1, 2, 10])
    assert result.value == pytest.approx(coefficient, abs=1e-6)
    assert result.details["p_observed"] == pytest.approx(pa, abs=1e-5)
    assert result.details["p_expected"] == pytest.approx(pe, abs=1e-5)
    # The order categories are listed in does not matter: values carry the distances.
    shuffled = gwet_ac(UNEVEN, weights, categories=[10, 0, 2, 1])
    assert shuffled.value == pytest.approx(result.value, abs=1e-12)


def test_agreement_weights_by_position_or_value() -> None:
    assert agreement_weights(4, "linear")[2, 3] == pytest.approx(2 / 3)  # positions 2, 3
    by_value = agreement_weights(4, "linear", values=[0, 1, 2, 10])
    assert by_value[2, 3] == pytest.approx(1 - 8 / 10)
    assert by_value[0, 1] == pytest.approx(0.9) and by_value[0, 3] == 0.0
    quad = agreement_weights(4, "quadratic", values=[0, 1, 2, 10])
    assert quad[1, 2] == pytest.approx(1 - 0.1**2)
    assert np.array_equal(agreement_weights(4, None, values=[0, 1, 2, 10]), np.eye(4))


def test_cohen_kappa_still_weights_positions_like_sklearn() -> None:
    a = np.array([0, 1, 2, 10, 10, 1, 0, 2], dtype=float)
    b = np.array([0, 2, 2, 10, 2, 1, 1, 10], dtype=float)
    for weights in ("linear", "quadratic"):
        assert cohen_kappa(a, b, weights=weights).value == pytest.approx(
            cohen_kappa_score(a, b, weights=weights), abs=1e-12
        )


# --------------------------------------------------------------------------- chance agreement ~1


def test_kappas_with_one_rare_category_are_defined() -> None:
    # 300,000 items, one of them in a second category: chance agreement is within 1e-5 of 1,
    # and np.isclose called that "a single category". scikit-learn and statsmodels give 1.0.
    x = np.zeros(300_000)
    x[0] = 1.0
    for weights in (None, "linear", "quadratic"):
        result = cohen_kappa(x, x, weights=weights)
        assert result.defined, result.reason
        assert result.value == pytest.approx(cohen_kappa_score(x, x, weights=weights))
        assert result.value == pytest.approx(1.0)
    table = np.stack([(x == 0) * 2, (x == 1) * 2], axis=1)
    fleiss = fleiss_kappa(table)
    assert fleiss.defined, fleiss.reason
    assert fleiss.value == pytest.approx(sm_fleiss_kappa(table)) == pytest.approx(1.0)
    assert gwet_ac(np.vstack([x, x]), "identity").value == pytest.approx(1.0)


def test_a_single_category_is_still_undefined() -> None:
    x = np.zeros(50)
    result = cohen_kappa(x, x, weights="quadratic", labels=[0, 1, 2])
    assert not result.defined and "single category" in result.reason
    table = np.stack([np.full(50, 3), np.zeros(50)], axis=1)
    assert not fleiss_kappa(table).defined
    assert "one category" in fleiss_kappa(table).reason
    # Different single categories per rater: chance agreement 0, kappa 0 (as scikit-learn).
    assert cohen_kappa(np.zeros(5), np.ones(5)).value == pytest.approx(0.0)
