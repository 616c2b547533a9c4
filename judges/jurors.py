"""Jurors that fail loudly: a judge whose votes collapse, who refuses, or who leaves the jury.

(Interface committed first for #62.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class JurorCheck:
    """What counts as a failing juror in a batch, and whether the verdicts leave it out."""

    min_items: int = 8
    refusal_share: float = 0.5
    alpha: float = 0.01
    history: int = 64
    leave_out: bool = False


@dataclass(frozen=True)
class JurorFlag:
    """One juror flagged in a batch, on one criterion (or all), and why."""

    judge: str
    criterion: str | None
    kind: Literal["collapsed", "refused", "departed"]
    detail: str


class AgreementHistory:
    """Each judge's running rate of agreement with the rest of the jury (a window)."""

    def __init__(self, window: int = 64) -> None:
        self.window = window


def flag_jurors(
    rubric: Any,
    jury: Any,
    verdicts: Sequence[Any],
    check: JurorCheck | None = None,
    history: AgreementHistory | None = None,
) -> list[JurorFlag]:
    """The jurors failing in this batch of verdicts."""
    raise NotImplementedError


def decide_without(
    rubric: Any, jury: Any, verdicts: Sequence[Any], flags: Sequence[JurorFlag]
) -> list[Any]:
    """The verdicts decided again without the flagged jurors, each saying who was left out."""
    raise NotImplementedError
