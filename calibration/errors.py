"""Exceptions raised by jurybox.calibration.

Each belongs to jurybox's one error family (`jurybox.rubrics.errors`): bad input is an
``InputError`` (a ``ValueError``), so the CLI and the HTTP layer turn it into a clear message
(exit code 2, HTTP 4xx) rather than a traceback.
"""

from __future__ import annotations

from jurybox.rubrics.errors import InputError, JuryboxError


class CalibrationError(JuryboxError):
    """Base class for every error raised by jurybox.calibration."""


class InputDataError(CalibrationError, InputError):
    """Input data is malformed: wrong shape, values off the scale, mixed types, unreadable file."""


class UndefinedStatisticError(CalibrationError, InputError):
    """A statistic has no value for this data (e.g. alpha when every rating is identical).

    Raised only when a caller forces an undefined `Stat` into a
    float; the statistics themselves return ``Stat(value=None, reason=...)`` instead.
    """


class JoinError(InputDataError):
    """Human labels and judge output do not join on ``id`` (nothing in common, duplicates)."""


class ProvenanceMismatchError(CalibrationError, InputError):
    """A calibration map was applied to verdicts from a different jury/rubric configuration.

    Args:
        expected: The provenance the map was fitted for.
        found: The record's provenance (``None`` when it has none).
    """

    def __init__(self, expected: str, found: str | None) -> None:
        self.expected = expected
        self.found = found
        super().__init__(
            f"calibration map was fitted for provenance {expected!r} but the record has "
            f"{found!r}; refit the map for this jury+rubric, or pass force=True to apply it anyway"
        )


class NotFittedError(CalibrationError, InputError):
    """A calibrator or map was used before ``fit``."""
