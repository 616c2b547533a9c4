"""Bad input: clear errors, or an undefined result with a reason. Never a silent NaN."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jurybox.calibration import (
    InputDataError,
    Stat,
    UndefinedStatisticError,
    adjacent_agreement,
    cohen_kappa,
    exact_agreement,
    fleiss_kappa,
    gwet_ac,
    kendall,
    krippendorff_alpha,
    pearson,
    spearman,
)

nan = np.nan


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_constant_ratings_alpha_is_undefined_with_reason(level: str) -> None:
    result = krippendorff_alpha(np.full((3, 5), 2.0), level)
    assert not result.defined
    assert result.value is None
    assert "identical" in result.reason
    assert "nan" not in str(result).lower()
    assert "undefined" in result.format()
    with pytest.raises(UndefinedStatisticError, match="identical"):
        float(result)
    json.dumps(result.to_dict())  # serialisable, with value null


def test_single_rater_is_undefined() -> None:
    result = krippendorff_alpha(np.array([[1.0, 2.0, 3.0]]), "interval")
    assert not result.defined
    assert "2 raters" in result.reason


def test_no_pairable_units() -> None:
    data = np.array([[1.0, nan, 3.0], [nan, 2.0, nan]])
    result = krippendorff_alpha(data, "nominal")
    assert not result.defined and "two or more" in result.reason


def test_alpha_requires_explicit_known_level() -> None:
    with pytest.raises(TypeError):
        krippendorff_alpha(np.ones((2, 2)))  # type: ignore[call-arg]
    with pytest.raises(InputDataError, match="level"):
        krippendorff_alpha(np.ones((2, 2)), "cardinal")  # type: ignore[arg-type]


def test_mixed_types_are_rejected_with_the_cells() -> None:
    with pytest.raises(InputDataError, match="mixes numbers"):
        krippendorff_alpha([[1, "yes"], [2, 3]], "interval")
    with pytest.raises(InputDataError, match="mixes numbers"):
        krippendorff_alpha([[1, "a"], ["b", 2]], "nominal")


def test_nominal_accepts_all_string_labels() -> None:
    data = [["yes", "no", "yes", None], ["yes", "no", "no", "no"]]
    numeric = [[1, 0, 1, nan], [1, 0, 0, 0]]
    assert krippendorff_alpha(data, "nominal").value == pytest.approx(
        krippendorff_alpha(numeric, "nominal").value
    )


def test_wrong_shapes_and_infinities() -> None:
    with pytest.raises(InputDataError, match="2-D"):
        krippendorff_alpha(np.arange(5.0), "interval")
    with pytest.raises(InputDataError, match="infinite"):
        krippendorff_alpha(np.array([[1.0, np.inf], [2.0, 3.0]]), "interval")
    with pytest.raises(InputDataError, match="ragged"):
        krippendorff_alpha([[1, 2, 3], [1, 2]], "interval")


def test_negative_ratio_values_rejected() -> None:
    with pytest.raises(InputDataError, match="non-negative"):
        krippendorff_alpha(np.array([[-1.0, 2.0], [1.0, 2.0]]), "ratio")


def test_cohen_labels_outside_scale_named() -> None:
    with pytest.raises(InputDataError, match=r"not among the labels.*\[7\.0\]"):
        cohen_kappa([0, 1, 7], [0, 1, 1], labels=[0, 1, 2])


def test_cohen_all_one_category_is_undefined() -> None:
    result = cohen_kappa([1, 1, 1], [1, 1, 1])
    assert not result.defined and "chance agreement is 1" in result.reason


def test_cohen_missing_pairs_are_counted_not_hidden() -> None:
    result = cohen_kappa([0, 1, nan, 2], [0, 1, 1, nan])
    assert result.n == 2


def test_fleiss_unequal_raters_is_an_error() -> None:
    with pytest.raises(InputDataError, match="same number of raters"):
        fleiss_kappa([[2, 1], [1, 1]])
    with pytest.raises(InputDataError, match="integer counts"):
        fleiss_kappa([[1.5, 1.5], [1, 2]])


def test_gwet_single_rater_and_single_category() -> None:
    assert not gwet_ac(np.array([[1.0, 2.0]])).defined
    assert not gwet_ac(np.array([[1.0, 1.0], [1.0, 1.0]])).defined


@pytest.mark.parametrize("fn", [pearson, spearman, kendall])
def test_correlation_constant_input_undefined(fn) -> None:
    result = fn([1, 1, 1, 1], [1, 2, 3, 4])
    assert isinstance(result, Stat) and not result.defined
    assert "constant" in result.reason
    too_few = fn([1, 2], [2, 1])
    assert not too_few.defined and "at least 3" in too_few.reason


def test_length_mismatch() -> None:
    with pytest.raises(InputDataError, match="differ in length"):
        exact_agreement([1, 2], [1, 2, 3])


def test_exact_and_adjacent() -> None:
    a = [0, 1, 2, 3, 4]
    b = [0, 2, 2, 1, nan]
    assert exact_agreement(a, b).value == pytest.approx(2 / 4)
    assert adjacent_agreement(a, b).value == pytest.approx(3 / 4)
    assert adjacent_agreement(a, b).n == 4
