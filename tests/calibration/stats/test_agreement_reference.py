"""Agreement statistics against published reference values (source noted on each test)."""

from __future__ import annotations

import numpy as np
import pytest

from jurybox.calibration import cohen_kappa, fleiss_kappa, gwet_ac, krippendorff_alpha

nan = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section E: 4 observers x 12
# units with missing values. The same data is irrCAC's `cac.raw4raters` (Gwet 2014, p. 120).
KRIPPENDORFF_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)


@pytest.mark.parametrize(
    "level, expected",
    [
        ("nominal", 0.743),
        ("ordinal", 0.815),
        ("interval", 0.849),
        ("ratio", 0.797),
    ],
)
def test_krippendorff_2011_example(level: str, expected: float) -> None:
    # Published to 3 decimals in Krippendorff (2011); the `krippendorff` package reproduces them.
    result = krippendorff_alpha(KRIPPENDORFF_2011, level)
    assert result.defined
    assert result.value == pytest.approx(expected, abs=5e-4)
    assert result.n == 11  # unit 12 has a single value and is not pairable


def test_krippendorff_2011_nominal_exact_fraction() -> None:
    # Krippendorff (2011) derives nominal alpha = 1 - (n-1) * D_o/D_e with n = 40 pairable
    # values; irrCAC's krippen.alpha.raw(cac.raw4raters) prints 0.74342.
    assert krippendorff_alpha(KRIPPENDORFF_2011, "nominal").value == pytest.approx(
        0.74342, abs=1e-5
    )
    assert krippendorff_alpha(KRIPPENDORFF_2011, "nominal").details["n_values"] == 40


# Fleiss (1971), "Measuring nominal scale agreement among many raters", Table 1: 30 patients,
# 6 psychiatrists, 5 diagnoses (as raw ratings in R irr's `diagnoses`); Fleiss reports .430.
FLEISS_1971 = np.array(
    [
        [4, 4, 4, 4, 4, 4],
        [2, 2, 2, 5, 5, 5],
        [2, 3, 3, 3, 3, 5],
        [5, 5, 5, 5, 5, 5],
        [2, 2, 2, 4, 4, 4],
        [1, 1, 3, 3, 3, 3],
        [3, 3, 3, 3, 5, 5],
        [1, 1, 3, 3, 3, 4],
        [1, 1, 4, 4, 4, 4],
        [5, 5, 5, 5, 5, 5],
        [1, 4, 4, 4, 4, 4],
        [1, 2, 4, 4, 4, 4],
        [2, 2, 2, 3, 3, 3],
        [1, 4, 4, 4, 4, 4],
        [2, 2, 4, 4, 4, 5],
        [3, 3, 3, 3, 3, 5],
        [1, 1, 1, 4, 5, 5],
        [1, 1, 1, 1, 1, 2],
        [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 5, 5, 5],
        [5, 5, 5, 5, 5, 5],
        [2, 4, 4, 4, 4, 4],
        [2, 2, 4, 5, 5, 5],
        [1, 1, 4, 4, 4, 4],
        [1, 4, 4, 4, 4, 5],
        [2, 2, 2, 2, 2, 4],
        [1, 1, 1, 1, 5, 5],
        [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 3, 3, 3],
        [5, 5, 5, 5, 5, 5],
    ]
)


def _counts(raw: np.ndarray, categories: list[int]) -> np.ndarray:
    return np.stack([(raw == c).sum(axis=1) for c in categories], axis=1)


def test_fleiss_1971_table() -> None:
    table = _counts(FLEISS_1971, [1, 2, 3, 4, 5])
    assert fleiss_kappa(table).value == pytest.approx(0.430, abs=5e-4)


def test_fleiss_wikipedia_example() -> None:
    # Wikipedia "Fleiss' kappa" worked example (10 subjects, 14 raters): kappa = 0.210.
    table = np.array(
        [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
    )
    result = fleiss_kappa(table)
    assert result.value == pytest.approx(0.210, abs=5e-4)
    assert result.details["p_observed"] == pytest.approx(0.378, abs=5e-4)
    assert result.details["p_expected"] == pytest.approx(0.213, abs=5e-4)


# irrCAC `distrib.6raters` (Gwet 2014): 15 psychiatric patients, 6 raters, 5 categories.
DISTRIB_6RATERS = np.array(
    [
        [0, 0, 0, 6, 0],
        [0, 3, 0, 0, 3],
        [0, 1, 4, 0, 1],
        [0, 0, 0, 0, 6],
        [0, 3, 0, 3, 0],
        [2, 0, 4, 0, 0],
        [0, 0, 4, 0, 2],
        [2, 0, 3, 1, 0],
        [2, 0, 0, 4, 0],
        [0, 0, 0, 0, 6],
        [1, 0, 0, 5, 0],
        [1, 1, 0, 4, 0],
        [0, 3, 3, 0, 0],
        [1, 0, 0, 5, 0],
        [0, 2, 0, 3, 1],
    ]
)


def _raw_from_counts(table: np.ndarray) -> np.ndarray:
    """raters x units raw ratings (category index) from a units x categories count table."""
    return np.stack([np.repeat(np.arange(table.shape[1]), row) for row in table], axis=1)


def test_fleiss_and_gwet_on_irrcac_distrib_6raters() -> None:
    # irrCAC README: fleiss.kappa.dist -> 0.4139265; gwet.ac1.dist -> 0.4448007 (pa 0.5511111,
    # pe 0.1914815).
    assert fleiss_kappa(DISTRIB_6RATERS).value == pytest.approx(0.4139265, abs=1e-6)
    ac1 = gwet_ac(_raw_from_counts(DISTRIB_6RATERS), "identity", categories=[0, 1, 2, 3, 4])
    assert ac1.value == pytest.approx(0.4448007, abs=1e-6)
    assert ac1.details["p_observed"] == pytest.approx(0.5511111, abs=1e-6)
    assert ac1.details["p_expected"] == pytest.approx(0.1914815, abs=1e-6)


def test_gwet_raw4raters_with_missing() -> None:
    # irrCAC README / weighting vignette on cac.raw4raters (= Krippendorff 2011 data):
    # AC1 0.77544 (pa 0.8181818, pe 0.1903212); quadratic AC2 0.914 (pa 0.9753788, pe 0.7137044).
    ac1 = gwet_ac(KRIPPENDORFF_2011, "identity")
    assert ac1.value == pytest.approx(0.77544, abs=1e-5)
    assert ac1.details["p_observed"] == pytest.approx(0.8181818, abs=1e-6)
    assert ac1.details["p_expected"] == pytest.approx(0.1903212, abs=1e-6)
    ac2 = gwet_ac(KRIPPENDORFF_2011, "quadratic")
    assert ac2.value == pytest.approx(0.914, abs=5e-4)
    assert ac2.details["p_observed"] == pytest.approx(0.9753788, abs=1e-6)
    assert ac2.details["p_expected"] == pytest.approx(0.7137044, abs=1e-6)


# irrCAC `cont3x3abstractors`: two abstractors, 100 subjects, 3 categories (contingency table).
ABSTRACTORS = np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]])


def _pairs_from_table(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = np.nonzero(table)
    counts = table[rows, cols]
    return np.repeat(rows, counts).astype(float), np.repeat(cols, counts).astype(float)


def test_irrcac_abstractors_kappa_and_ac() -> None:
    # irrCAC README and weighting vignette: Cohen 0.7964094, quadratic-weighted Cohen 0.8921569,
    # AC1 0.8493305, quadratic AC2 0.9402369.
    a, b = _pairs_from_table(ABSTRACTORS)
    assert cohen_kappa(a, b).value == pytest.approx(0.7964094, abs=1e-6)
    assert cohen_kappa(a, b, weights="quadratic").value == pytest.approx(0.8921569, abs=1e-6)
    assert gwet_ac(np.vstack([a, b]), "identity").value == pytest.approx(0.8493305, abs=1e-6)
    assert gwet_ac(np.vstack([a, b]), "quadratic").value == pytest.approx(0.9402369, abs=1e-6)


def test_cohen_kappa_sas_textbook_example() -> None:
    # SAS PROC FREQ AGREE example (reproduced in statsmodels' tests): table [[0,4,1],[0,8,0],
    # [0,1,5]]: simple kappa 0.4842, weighted kappa (Cicchetti-Allison = linear) 0.4701.
    a, b = _pairs_from_table(np.array([[0, 4, 1], [0, 8, 0], [0, 1, 5]]))
    assert cohen_kappa(a, b).value == pytest.approx(0.4842, abs=5e-5)
    assert cohen_kappa(a, b, weights="linear").value == pytest.approx(0.4701, abs=5e-5)


def test_cohen_weights_follow_label_positions() -> None:
    # Fleiss, Levin & Paik (2003) define weights on category positions; with labels given in a
    # non-value order the positions (not the values) must drive the weights.
    a = np.array([10, 20, 30, 30, 20])
    b = np.array([10, 30, 30, 20, 20])
    by_value = cohen_kappa(a, b, weights="linear", labels=[10, 20, 30])
    reordered = cohen_kappa(a, b, weights="linear", labels=[20, 10, 30])
    assert by_value.value != pytest.approx(reordered.value)
    # Relabelling values consistently with positions must not change kappa.
    relabelled = cohen_kappa(a / 10, b / 10, weights="linear", labels=[1, 2, 3])
    assert relabelled.value == pytest.approx(by_value.value)
