"""Alpha on continuous scores at scale: a million distinct values, in bounded memory.

How fast is measured in perf/agreement_scale.py (side by side with the ``krippendorff``
package, ratios in perf/RESULTS.md), never by a clock in a test.
"""

from __future__ import annotations

import tracemalloc

import krippendorff
import numpy as np
import pytest

from jurybox.calibration import krippendorff_alpha


def _continuous(n_units: int, raters: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=n_units)
    data = truth + rng.normal(scale=0.5, size=(raters, n_units))
    data[rng.random(data.shape) < 0.05] = np.nan
    return data


def test_interval_alpha_million_distinct_values_in_bounded_memory() -> None:
    data = _continuous(250_000)  # 1,000,000 cells, ~950,000 ratings, all distinct
    assert np.unique(data[~np.isnan(data)]).size > 900_000
    tracemalloc.start()
    result = krippendorff_alpha(data, "interval")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Signal variance 1, noise variance 0.25 per rater: alpha ~= 1/1.25 = 0.8.
    assert result.value == pytest.approx(0.8, abs=0.01)
    assert peak < 500 * 2**20  # the krippendorff package would need a V x V matrix (~7 TB)


@pytest.mark.parametrize("level", ["ordinal", "ratio", "nominal"])
def test_other_levels_million_ratings_defined(level: str) -> None:
    data = _continuous(250_000)
    if level == "ratio":
        data = np.exp(data)
    result = krippendorff_alpha(data, level)
    assert result.defined


def test_interval_alpha_agrees_with_package_where_it_can_run() -> None:
    data = _continuous(100, seed=2)  # ~380 distinct values: the package still fits in memory
    theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    assert krippendorff_alpha(data, "interval").value == pytest.approx(theirs, rel=1e-10)


def test_ratio_alpha_exact_over_wide_value_ranges() -> None:
    # Values spanning 12 orders of magnitude: compare with a brute-force O(n^2) pair sum.
    rng = np.random.default_rng(5)
    data = np.exp(rng.uniform(-14, 14, size=(3, 60)))
    data[rng.random(data.shape) < 0.1] = np.nan
    data[0, :4] = 0.0
    assert krippendorff_alpha(data, "ratio").value == pytest.approx(
        _ratio_alpha_bruteforce(data), rel=1e-10
    )


def _ratio_alpha_bruteforce(data: np.ndarray) -> float:
    """Krippendorff's alpha with the ratio metric straight from the pair-sum definition."""

    def delta(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        s = a + b
        return np.divide(a - b, s, out=np.zeros_like(s), where=s != 0) ** 2

    units = [col[~np.isnan(col)] for col in data.T]
    units = [u for u in units if u.size >= 2]
    values = np.concatenate(units)
    n = values.size
    within = sum(delta(u[:, None], u[None, :]).sum() / (u.size - 1) for u in units)
    expected = delta(values[:, None], values[None, :]).sum()
    return 1.0 - (n - 1) * within / expected
