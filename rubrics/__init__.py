"""jurybox.rubrics: the contract every other part speaks.

Rubrics (criteria, scales, prompt template, formula), the items they judge, and the votes and
verdicts judging produces; YAML loading with errors that name the file and field.
"""

from .formula import Formula
from .item import PAIR_FIELDS, Item, Order, Winner, input_hash
from .loading import DefinitionError, list_rubrics, load_rubric
from .points import ChecklistRule, Point, read_points
from .prompts import output_schema, render_messages
from .rubric import Criterion, Level, Rubric, Scale
from .verdict import (
    CriterionResult,
    Disagreement,
    PointResult,
    StageDecision,
    Verdict,
    VerdictRecord,
    Vote,
)

__all__ = [
    "PAIR_FIELDS",
    "ChecklistRule",
    "Criterion",
    "CriterionResult",
    "DefinitionError",
    "Disagreement",
    "Formula",
    "Item",
    "Level",
    "Order",
    "Point",
    "PointResult",
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
    "read_points",
    "render_messages",
]
