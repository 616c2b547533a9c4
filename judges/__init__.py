"""jurybox.judges: how one judge is asked and how a jury decides.

Jury files (judges, models, sampling, reasoning, aggregation + quorum), backends that turn
prompts into raw outputs and logprobs, answer parsing with score distributions, and the Jury
that fans items out to its judges and aggregates their votes into verdicts.
"""

from .judging import (
    JudgeFailed,
    MissingInputs,
    Requests,
    ajudge_votes,
    decide,
    decide_verdicts,
    judge_votes,
    render_requests,
    votes_from_generation,
)
from .cascade import Steps, confidence
from .jury import Jury
from .weights import ModelNotAvailable
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

__all__ = [
    "Aggregation",
    "Confidence",
    "Stage",
    "Steps",
    "confidence",
    "JudgeSpec",
    "JudgeFailed",
    "Jury",
    "JurySpec",
    "MissingInputs",
    "ModelNotAvailable",
    "Reasoning",
    "Sampling",
    "Requests",
    "ajudge_votes",
    "decide",
    "decide_verdicts",
    "judge_votes",
    "render_requests",
    "list_juries",
    "load_jury_spec",
    "provenance",
    "votes_from_generation",
]
