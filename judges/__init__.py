"""jurybox.judges: how one judge is asked and how a jury decides.

Jury files (judges, models, sampling, reasoning, aggregation + quorum), backends that turn
prompts into raw outputs and logprobs, answer parsing with score distributions, and the Jury
that fans items out to its judges and aggregates their votes into verdicts.
"""

from .cascade import StagePlan, Steps, confidence
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
from .jury import Jury, JuryLike
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
    "Confidence",
    "JudgeFailed",
    "JudgeSpec",
    "Jury",
    "JuryLike",
    "JurySpec",
    "MissingInputs",
    "ModelNotAvailable",
    "Reasoning",
    "Requests",
    "Sampling",
    "Stage",
    "StagePlan",
    "Steps",
    "ajudge_votes",
    "confidence",
    "decide",
    "decide_verdicts",
    "judge_votes",
    "list_juries",
    "load_jury_spec",
    "provenance",
    "render_requests",
    "votes_from_generation",
]
