"""One bootstrap helper for every statistic: resample units, recompute, take percentiles."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputDataError
from .stat import Stat, defined

StatisticFn = Callable[..., "Stat | float | Mapping[str, Stat | float]"]
#: A statistic over a stack of resamples: each data array with a new leading axis (one row per
#: resample); the values per resample, NaN where undefined (one array, or a mapping like
#: ``statistic``'s).
BatchedFn = Callable[..., "np.ndarray | Mapping[str, np.ndarray]"]

#: Resampled values held at once by the batched path (elements of all arrays together).
_BATCH_ELEMENTS = 4_000_000


def bootstrap_ci(
    statistic: StatisticFn,
    *data: Any,
    unit_axis: int | Sequence[int] = -1,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
    min_defined: float = 0.5,
    batched: BatchedFn | None = None,
) -> Any:
    """Percentile bootstrap CI, resampling units (the same draw for every array in ``data``).

    ``statistic(*data)`` may return a `Stat`, a float, or a mapping of names to either;
    the result has the same shape with ``ci`` filled in. Resamples on which the statistic is
    undefined (e.g. a constant resample) are dropped and counted; if fewer than ``min_defined`` of
    them are defined the CI is left empty rather than reported from a biased remainder.

    Args:
        statistic: The statistic, called as ``statistic(*data)`` on the data and on each
            resample.
        *data: The arrays the statistic takes; every one is resampled with the same draw.
        unit_axis: Which axis of each array indexes units, one for all or one per array
            (default -1: vectors, and raters x units matrices).
        n_resamples: How many resamples to draw.
        confidence: The interval's coverage, in (0, 1).
        seed: The random generator's seed (``None``: a fresh one each call).
        min_defined: The least share of resamples that must be defined for an interval.
        batched: When given, the same statistic computed on many resamples at once (see
            `BatchedFn`); the resamples drawn are the same as without it, so it changes only
            the speed (tests check each batched statistic against its one-resample form).

    Returns:
        What ``statistic`` returns, as `Stat` values (a float becomes one) with ``ci``
        set (or ``None``) and the method, confidence and resample counts in their ``details``:
        one `Stat`, or a dict of them for a mapping.

    Raises:
        InputDataError: No data, ``confidence`` outside (0, 1), ``n_resamples`` below 1, a
            ``unit_axis`` list of the wrong length, or arrays that disagree on the number of
            units.
    """
    if not data:
        raise InputDataError("bootstrap_ci needs at least one data array")
    if not 0 < confidence < 1:
        raise InputDataError(f"confidence must be in (0, 1); got {confidence}")
    if n_resamples < 1:
        raise InputDataError(f"n_resamples must be positive; got {n_resamples}")
    arrays = [np.asarray(d) for d in data]
    axes = [unit_axis] * len(arrays) if isinstance(unit_axis, int) else list(unit_axis)
    if len(axes) != len(arrays):
        raise InputDataError("unit_axis needs one axis per data array")
    sizes = {a.shape[ax] for a, ax in zip(arrays, axes)}
    if len(sizes) != 1:
        raise InputDataError(f"data arrays disagree on the number of units: {sorted(sizes)}")
    n_units = sizes.pop()

    point = _as_stats(statistic(*arrays))
    rng = np.random.default_rng(seed)
    draws: dict[str, list[float]] = {k: [] for k in point}
    if n_units > 0 and batched is not None:
        per_resample = max(1, sum(a.size for a in arrays))
        chunk = max(1, min(n_resamples, _BATCH_ELEMENTS // per_resample))
        for start in range(0, n_resamples, chunk):
            idx = resample_indices(rng, n_units, min(chunk, n_resamples - start))
            sample = [
                np.moveaxis(np.take(a, idx, axis=ax), ax % a.ndim, 0) for a, ax in zip(arrays, axes)
            ]
            got = batched(*sample)
            columns = got if isinstance(got, Mapping) else {"": got}
            for key, column in columns.items():
                if key in draws:
                    kept = np.asarray(column, dtype=float)
                    draws[key].extend(kept[~np.isnan(kept)].tolist())
    elif n_units > 0:
        for _ in range(n_resamples):  # loop over resamples; each statistic is vectorised
            idx = rng.integers(0, n_units, size=n_units)
            sample = [np.take(a, idx, axis=ax) for a, ax in zip(arrays, axes)]
            for key, stat in _as_stats(statistic(*sample)).items():
                if key in draws and stat.value is not None:
                    draws[key].append(stat.value)

    tail = (1.0 - confidence) / 2.0
    out: dict[str, Stat] = {}
    for key, stat in point.items():
        values = np.asarray(draws[key])
        info = {
            "ci_method": "percentile bootstrap over units",
            "confidence": confidence,
            "n_resamples": n_resamples,
            "n_resamples_undefined": n_resamples - values.size,
        }
        if stat.value is None or values.size < max(1, min_defined * n_resamples):
            out[key] = stat.with_ci(None, **info)
        else:
            lo, hi = np.quantile(values, [tail, 1.0 - tail])
            out[key] = stat.with_ci((float(lo), float(hi)), **info)
    return _unwrap(out, point)


def resample_indices(rng: np.random.Generator, n_units: int, count: int) -> np.ndarray:
    """``count`` bootstrap resamples of ``n_units`` units (count x n_units indices).

    They are drawn one resample at a time, so that a batched bootstrap draws what the one-resample
    loop does.
    """
    return np.stack([rng.integers(0, n_units, size=n_units) for _ in range(count)])


def _as_stats(result: Any) -> dict[str, Stat]:
    if isinstance(result, Stat):
        return {"": result}
    if isinstance(result, Mapping):
        return {k: v if isinstance(v, Stat) else defined(k, float(v), 0) for k, v in result.items()}
    return {"": defined("statistic", float(result), 0)}


def _unwrap(out: dict[str, Stat], point: dict[str, Stat]) -> Any:
    if list(point) == [""]:
        return out[""]
    return out
