"""jurybox.judges: how one judge is asked and how a jury decides.

Jury files (judges, models, sampling, reasoning, aggregation + quorum) and the `Jury`
that fans items out to its judges and aggregates their votes into verdicts; the
`Backend` protocol a judge's engine follows (the shipped backends, and your own through
`jurybox.judges.backends.registry`). The judging path's pieces, which every way of running
calls, are `jurybox.judges.judging` and `jurybox.judges.cascade`.
"""

from .backends.protocol import AsyncBackend, Backend
from .judging import JudgeFailed, MissingInputs
from .jury import Jury
from .spec import (
    Aggregation,
    Confidence,
    JudgeSpec,
    JurySpec,
    Reasoning,
    Sampling,
    Stage,
    list_juries,
    load_jury_spec,
    provenance,
)
from .weights import ModelNotAvailable

__all__ = [
    "Aggregation",
    "AsyncBackend",
    "Backend",
    "Confidence",
    "JudgeFailed",
    "JudgeSpec",
    "Jury",
    "JurySpec",
    "MissingInputs",
    "ModelNotAvailable",
    "Reasoning",
    "Sampling",
    "Stage",
    "list_juries",
    "load_jury_spec",
    "provenance",
]
