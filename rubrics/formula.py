"""Rubric-level formulas over the criteria's scores.

An example is MIRAGE's ``(2*accuracy + relevance + completeness + parsimony) / 20``.

Expressions are parsed with `ast` and only arithmetic on criterion names and numbers is
allowed, so a rubric file can never run code. A formula is bounded (characters, then depth and
size of its tree, checked without recursion) before anything walks it, since an inline rubric's
formula is a client's text, and compiled once: evaluating it is one call per verdict.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from functools import cached_property, lru_cache
from types import CodeType
from typing import cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_UNARY = (ast.USub, ast.UAdd)


# A formula is a weighted sum: MIRAGE's has 41 characters. These bounds leave room for a sum
# over any rubric's criteria (a sum of n terms is n operations deep) and keep a client's formula
# from costing more than microseconds per verdict, or a recursion anywhere.
MAX_FORMULA_CHARS = 2_000
MAX_FORMULA_DEPTH = 100
MAX_FORMULA_NODES = 1_000


def _bounded(text: str) -> ast.Expression:
    """The formula's tree, checked to be no longer, deeper or larger than a formula may be.

    It is checked before any recursive walk: the parser's own limits would be a RecursionError.

    Raises:
        ValueError: The formula is longer, deeper or larger than a formula may be.
    """
    if len(text) > MAX_FORMULA_CHARS:
        raise ValueError(
            f"the formula has {len(text)} characters; a formula may have at most "
            f"{MAX_FORMULA_CHARS}"
        )
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot parse formula {text[:80]!r}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ValueError(
            f"the formula is nested too deeply; a formula may be at most "
            f"{MAX_FORMULA_DEPTH} operations deep"
        ) from None
    nodes, stack = 0, [(cast(ast.AST, tree), 0)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_FORMULA_DEPTH or nodes > MAX_FORMULA_NODES:
            raise ValueError(
                f"the formula is too large: at most {MAX_FORMULA_DEPTH} operations "
                f"deep and {MAX_FORMULA_NODES} elements"
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


def _check(node: ast.AST) -> None:
    if isinstance(node, ast.Expression):
        _check(node.body)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, _BINARY):
        _check(node.left)
        _check(node.right)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, _UNARY):
        _check(node.operand)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        try:
            finite = math.isfinite(float(cast(float, node.value)))
        except OverflowError:  # an integer beyond any float
            finite = False
        if not finite:
            raise ValueError(f"the number {str(node.value)[:20]} in the formula is not finite")
    elif isinstance(node, ast.Name):
        pass
    else:
        raise ValueError(
            f"unsupported element {ast.dump(node)[:60]!r}: only + - * /, numbers, parentheses "
            "and criterion names are allowed"
        )


class _Floats(ast.NodeTransformer):
    """Every number of a checked formula as a float, so that it computes in floats only.

    An integer constant would make Python's exact integer arithmetic.
    """

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.copy_location(ast.Constant(float(cast(float, node.value))), node)


@lru_cache(maxsize=1024)
def _compiled(expression: str) -> CodeType:
    """A checked expression compiled once.

    It holds only arithmetic on names and float numbers (see `_check`), and is evaluated with
    the scores as its only names. Kept here rather than on the formula, which travels pickled (a
    code object cannot).
    """
    tree = ast.fix_missing_locations(_Floats().visit(_bounded(expression)))
    return compile(tree, "<formula>", "eval")


class Formula(BaseModel):
    """A named arithmetic expression over criterion scores, with an optional rounding.

    Attributes:
        name: The formula's name, a lowercase identifier (its score's key in a verdict).
        expression: Arithmetic (``+ - * /``) on criterion names and numbers.
        digits: The digits its value is rounded to, if any.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    expression: str
    digits: int | None = None

    @field_validator("expression")
    @classmethod
    def _parse(cls, text: str) -> str:
        _check(_bounded(text))
        return text

    @cached_property
    def _tree(self) -> ast.Expression:
        return _bounded(self.expression)

    @cached_property
    def names(self) -> list[str]:
        """The criterion names the expression uses, sorted."""
        return sorted({n.id for n in ast.walk(self._tree) if isinstance(n, ast.Name)})

    def evaluate(self, scores: Mapping[str, float | None]) -> float | None:
        """The formula's value for ``scores``.

        Args:
            scores: Each criterion's score (None: unscored).

        Returns:
            The value, or None when any criterion it uses is unscored or it is undefined for
            these scores (a division by zero, a value that is not finite).
        """
        return self.explain(scores)[0]

    def explain(self, scores: Mapping[str, float | None]) -> tuple[float | None, str | None]:
        """The formula's value for ``scores``, or why there is none.

        Args:
            scores: Each criterion's score (None: unscored).

        Returns:
            ``(value, None)``, or ``(None, why there is no value)``.
        """
        unscored = [n for n in self.names if scores.get(n) is None]
        if unscored:
            return None, f"{', '.join(unscored)} unscored"
        try:
            # Every name the formula uses was checked above to have a score (not None).
            value = float(
                eval(
                    _compiled(self.expression),
                    {"__builtins__": {}},
                    {n: float(cast(float, scores[n])) for n in self.names},
                )
            )
        except ZeroDivisionError:
            return None, f"{self.expression} divides by zero for these scores"
        if not math.isfinite(value):
            return None, f"{self.expression} is not finite for these scores"
        return (round(value, self.digits) if self.digits is not None else value), None
