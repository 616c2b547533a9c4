"""Rubric-level formulas such as MIRAGE's ``(2*accuracy + relevance + completeness + parsimony) / 20``.

Expressions are parsed with :mod:`ast` and only arithmetic on criterion names and numbers is
allowed, so a rubric file can never run code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _check(node: ast.AST) -> None:
    if isinstance(node, ast.Expression):
        _check(node.body)
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left)
        _check(node.right)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        _check(node.operand)
    elif (isinstance(node, ast.Constant) and type(node.value) in (int, float)) or isinstance(node, ast.Name):
        pass
    else:
        raise ValueError(
            f"unsupported element {ast.dump(node)[:60]!r}: only + - * /, numbers, parentheses "
            "and criterion names are allowed"
        )


def _eval(node: ast.AST, values: Mapping[str, float]) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body, values)
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left, values), _eval(node.right, values))
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, values))
    if isinstance(node, ast.Constant):
        return float(cast(float, node.value))  # _check lets only int and float constants in
    assert isinstance(node, ast.Name)
    return float(values[node.id])


class Formula(BaseModel):
    """A named arithmetic expression over criterion scores, with an optional rounding."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    expression: str
    digits: int | None = None

    @field_validator("expression")
    @classmethod
    def _parse(cls, text: str) -> str:
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as exc:
            raise ValueError(f"cannot parse formula {text!r}: {exc.msg}") from None
        _check(tree)
        return text

    @cached_property
    def _tree(self) -> ast.Expression:
        return ast.parse(self.expression, mode="eval")

    @cached_property
    def names(self) -> list[str]:
        """The criterion names the expression uses, sorted."""
        return sorted({n.id for n in ast.walk(self._tree) if isinstance(n, ast.Name)})

    def evaluate(self, scores: Mapping[str, float | None]) -> float | None:
        """The formula's value, or None when any criterion it uses is unscored or it is
        undefined for these scores (a division by zero)."""
        return self.explain(scores)[0]

    def explain(self, scores: Mapping[str, float | None]) -> tuple[float | None, str | None]:
        """``(value, None)``, or ``(None, why there is no value)``."""
        unscored = [n for n in self.names if scores.get(n) is None]
        if unscored:
            return None, f"{', '.join(unscored)} unscored"
        try:
            # Every name the formula uses was checked above to have a score (not None).
            value = _eval(self._tree, cast(Mapping[str, float], scores))
        except ZeroDivisionError:
            return None, f"{self.expression} divides by zero for these scores"
        if not math.isfinite(value):
            return None, f"{self.expression} is not finite for these scores"
        return (round(value, self.digits) if self.digits is not None else value), None
