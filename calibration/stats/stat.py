"""The value type every statistic returns.

A statistic that cannot be computed for the data at hand (alpha on a constant column, a
correlation with one unit) returns ``Stat(value=None, reason=...)`` rather than ``nan``: NaN
prints as a number and silently poisons means, which the design forbids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import UndefinedStatisticError


@dataclass(frozen=True)
class Stat:
    """One statistic: its value (``None`` when undefined, with ``reason``) and its sample size.

    Attributes:
        name: What was computed (e.g. ``"pearson"``, ``"krippendorff_alpha[ordinal]"``).
        value: The value, or ``None`` when the statistic is undefined for the data.
        n: The sample size it was computed from (pairs, units or subjects, as the statistic
            counts them).
        reason: Why the value is undefined; ``None`` when it is defined.
        ci: The confidence interval ``(low, high)``, or ``None`` when none was computed.
        details: What else the statistic reports (observed and expected agreement, the
            bootstrap's settings, ...).
    """

    name: str
    value: float | None
    n: int = 0
    reason: str | None = None
    ci: tuple[float, float] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def defined(self) -> bool:
        """Whether the statistic has a value."""
        return self.value is not None

    def __float__(self) -> float:
        if self.value is None:
            raise UndefinedStatisticError(f"{self.name} is undefined: {self.reason}")
        return self.value

    def with_ci(self, ci: tuple[float, float] | None, **details: Any) -> Stat:
        """A copy with ``ci`` set and ``details`` added.

        Args:
            ci: The interval to set, or ``None`` for none.
            **details: Entries added to the copy's ``details``.

        Returns:
            A new `Stat`; this one is unchanged.
        """
        return Stat(self.name, self.value, self.n, self.reason, ci, {**self.details, **details})

    def to_dict(self) -> dict[str, Any]:
        """The statistic as plain data; ``reason``, ``ci`` and ``details`` only where set.

        Returns:
            A JSON-ready dict with ``name``, ``value``, ``defined`` and ``n``, and ``reason``,
            ``ci`` (a two-item list) and ``details`` where set.
        """
        out: dict[str, Any] = {
            "name": self.name,
            "value": self.value,
            "defined": self.defined,
            "n": self.n,
        }
        if self.reason is not None:
            out["reason"] = self.reason
        if self.ci is not None:
            out["ci"] = [self.ci[0], self.ci[1]]
        if self.details:
            out["details"] = jsonable(self.details)
        return out

    def format(self, digits: int = 3) -> str:
        """The value with ``digits`` decimals and its CI, or ``undefined (reason)``.

        Args:
            digits: Decimals shown for the value and the interval's bounds.

        Returns:
            The text, e.g. ``0.812 [0.750, 0.866]``.
        """
        if self.value is None:
            return f"undefined ({self.reason})"
        text = f"{self.value:.{digits}f}"
        if self.ci is not None:
            text += f" [{self.ci[0]:.{digits}f}, {self.ci[1]:.{digits}f}]"
        return text

    def __str__(self) -> str:
        return f"{self.name} = {self.format()} (n={self.n})"


def defined(name: str, value: float, n: int, **details: Any) -> Stat:
    """A defined statistic; a non-finite value here is a bug upstream, so it is caught loudly."""
    value = float(value)
    if not math.isfinite(value):
        return undefined(name, n, f"non-finite result {value!r}", **details)
    return Stat(name, value, n, None, None, details)


def undefined(name: str, n: int, reason: str, **details: Any) -> Stat:
    """A statistic with no value, ``reason`` saying why."""
    return Stat(name, None, n, reason, None, details)


def jsonable(obj: Any) -> Any:
    """The object in plain JSON types only, undefined numbers as null.

    Numpy scalars and arrays become Python numbers and lists, and an undefined number (NaN,
    infinity) becomes null, never a number. Every JSON jurybox prints or writes goes through this.
    """
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def mean_ci(values: Any, level: float = 0.95) -> tuple[float | None, tuple[float, float] | None]:
    """Mean with a Student-t confidence interval; no interval from fewer than two values."""
    import numpy as np
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None, None
    mean = float(x.mean())
    if x.size < 2:
        return mean, None
    sem = float(x.std(ddof=1)) / math.sqrt(x.size)
    if sem == 0.0:
        return mean, (mean, mean)
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1)) * sem
    return mean, (mean - half, mean + half)
