"""jurybox.rubrics: the contract every other part speaks.

Rubrics (criteria, scales, prompt template, formula), the items they judge, and the votes and
verdicts judging produces; YAML loading with errors that name the file and field.
"""

from .formula import Formula
from .item import PAIR_FIELDS, Item, Order, Winner, input_hash
from .loading import DefinitionError, list_rubrics, load_rubric
from .prompts import output_schema, render_messages
from .rubric import Criterion, Level, Rubric, Scale
from .verdict import CriterionResult, Disagreement, StageDecision, Verdict, VerdictRecord, Vote

__all__ = [
    "PAIR_FIELDS",
    "Criterion",
    "CriterionResult",
    "DefinitionError",
    "Disagreement",
    "Formula",
    "Item",
    "Level",
    "Order",
    "Rubric",
    "Scale",
    "StageDecision",
    "Verdict",
    "VerdictRecord",
    "Vote",
    "Winner",
    "input_hash",
    "list_rubrics",
    "load_rubric",
    "output_schema",
    "render_messages",
]
