"""Exceptions raised by jurybox.calibration.

Each is a ``ValueError`` subclass where the cause is bad input, so callers that already catch
``ValueError`` (the CLI, the HTTP layer) turn them into a clear message rather than a traceback.
"""

from __future__ import annotations


class CalibrationError(Exception):
    """Base class for every error raised by jurybox.calibration."""


class InputDataError(CalibrationError, ValueError):
    """Input data is malformed: wrong shape, values off the scale, mixed types, unreadable file."""


class UndefinedStatisticError(CalibrationError, ValueError):
    """A statistic has no value for this data (e.g. alpha when every rating is identical).

    Raised only when a caller forces an undefined :class:`~jurybox.calibration.Stat` into a
    float; the statistics themselves return ``Stat(value=None, reason=...)`` instead.
    """


class JoinError(InputDataError):
    """Human labels and judge output do not join on ``id`` (nothing in common, duplicates)."""


class ProvenanceMismatchError(CalibrationError, ValueError):
    """A calibration map was applied to verdicts from a different jury/rubric configuration."""

    def __init__(self, expected: str, found: str | None) -> None:
        self.expected = expected
        self.found = found
        super().__init__(
            f"calibration map was fitted for provenance {expected!r} but the record has "
            f"{found!r}; refit the map for this jury+rubric, or pass force=True to apply it anyway"
        )


class NotFittedError(CalibrationError, ValueError):
    """A calibrator or map was used before ``fit``."""
