"""Input coercion shared by the statistics: turn user data into float arrays or say why not."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputDataError


def as_float_matrix(data: Any, what: str = "reliability_data") -> np.ndarray:
    """A 2-D float array with NaN for missing; clear errors for strings, ragged rows, infinities."""
    arr = _as_array(data, what)
    if arr.ndim != 2:
        raise InputDataError(
            f"{what} must be 2-D (raters x units, NaN for missing); got shape {arr.shape}"
        )
    return _to_float(arr, what)


def as_float_vector(data: Any, what: str) -> np.ndarray:
    """A 1-D float array with NaN for missing.

    Raises InputDataError for another shape, non-numeric values or infinities.
    """
    arr = _as_array(data, what)
    if arr.ndim != 1:
        raise InputDataError(f"{what} must be 1-D; got shape {arr.shape}")
    return _to_float(arr, what)


def _as_array(data: Any, what: str) -> np.ndarray:
    if hasattr(data, "to_numpy"):  # pandas objects: take the values, not the index
        data = data.to_numpy()
    try:
        return np.asarray(data)
    except ValueError as exc:  # ragged nested lists
        raise InputDataError(f"{what} is ragged or not array-like: {exc}") from None


def _to_float(arr: np.ndarray, what: str) -> np.ndarray:
    if arr.dtype.kind in "fiub":
        out = arr.astype(float, copy=False)
    else:
        # Object/str arrays: accept numbers and missing markers only; anything else is a mixed
        # type the caller must map to the scale first (e.g. "yes" -> 1).
        flat = arr.ravel()
        out_flat = np.empty(flat.shape, dtype=float)
        bad: list[tuple[int, Any]] = []
        for i, v in enumerate(flat):  # one pass to find *which* cells are bad, for the message
            if v is None or (isinstance(v, float) and np.isnan(v)) or v == "":
                out_flat[i] = np.nan
                continue
            if isinstance(v, (bool, np.bool_)):
                bad.append((i, v))
                continue
            try:
                out_flat[i] = float(v)
            except (TypeError, ValueError):
                bad.append((i, v))
        if bad:
            cells = ", ".join(f"{np.unravel_index(i, arr.shape)}={v!r}" for i, v in bad[:5])
            raise InputDataError(
                f"{what} mixes numbers with non-numeric values ({len(bad)} cells, e.g. {cells}); "
                "map labels to their numeric scale values first"
            )
        out = out_flat.reshape(arr.shape)
    if np.isinf(out).any():
        raise InputDataError(f"{what} contains infinite values; use NaN for missing ratings")
    return out
