"""jurybox.benchmarks: benchmark packs, the paper's table from a model's predictions.

A benchmark's own files and a model's predictions in, the paper's table out, with jurybox's judging
and statistics.

```python
from jurybox.benchmarks import run_benchmark

report = run_benchmark("microvqa", data="microvqa.json", predictions="preds.jsonl")
report.metrics["accuracy"].value, report.to_dict()["accuracy_by_task"]
```

Packs (`PACKS`): ``mirage-mmst``, ``mirage-mmmt``, ``microvqa``, ``mir``, ``mrmr``. Each pack's
module documents its input fields, its metrics and how it differs from the benchmark's public
evaluator: `.mirage`, `.microvqa`, `.mir`, `.mrmr`. The shared pieces: `.extraction` (which option a
response chose), `.report` (metrics with CIs, tables, ``--json`` and Markdown), `.judging` (how a
pack asks a jury), `.data` (strict reading of data and predictions).

Judged packs take a ``judge`` (`.judging.Judge`); ``jury=`` a loaded `jurybox.judges.Jury` judges in
memory (`jury_judge`), and ``jurybox bench`` judges through the resumable bulk runner.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from jurybox._lazy import lazy
from jurybox.rubrics.errors import InputError

if TYPE_CHECKING:  # static tools see real imports; at run time names resolve on first use
    from .extraction import Choice, extract_choice, letter_labels, number_labels
    from .judging import Judge, Judged, jury_judge
    from .report import BenchReport, Metric, Table

# Resolved lazily, so the command line can list the packs without importing numpy.
_EXPORTS = {
    "Choice": "extraction",
    "extract_choice": "extraction",
    "letter_labels": "extraction",
    "number_labels": "extraction",
    "Judge": "judging",
    "Judged": "judging",
    "jury_judge": "judging",
    "BenchReport": "report",
    "Metric": "report",
    "Table": "report",
}


__getattr__, __dir__ = lazy(__name__, {name: f".{module}" for name, module in _EXPORTS.items()})


@dataclass(frozen=True)
class Pack:
    """A benchmark pack: its name, what it needs, and the function that evaluates it.

    Attributes:
        name: The pack's name (``jurybox bench NAME``).
        summary: What it reports, in a line.
        jury: Whether the pack needs a jury (``"required"``) or can use one (``"optional"``).
        options: Keyword options beyond data, predictions, judge and limit.
        target: The evaluate function, as ``"module:function"``, imported on first use.
    """

    name: str
    summary: str
    jury: Literal["required", "optional"]
    options: tuple[str, ...]  # keyword options beyond data, predictions, judge and limit
    target: str  # "module:function", imported on first use

    @property
    def evaluate(self) -> Callable[..., BenchReport]:
        """The pack's evaluate function, imported from ``target`` on first use."""
        module, function = self.target.split(":")
        return getattr(importlib.import_module(f".{module}", __name__), function)


PACKS: dict[str, Pack] = {
    p.name: p
    for p in (
        Pack(
            "mirage-mmst",
            "MIRAGE single-turn (Standard or Contextual): ID accuracy, reasoning, "
            "MG means and weighted sum, judged",
            "required",
            ("subset", "unscored"),
            "mirage:evaluate_mmst",
        ),
        Pack(
            "mirage-mmmt",
            "MIRAGE multi-turn clarify-or-respond: decision accuracy, goal scores, "
            "spurious and perfect shares, judged",
            "required",
            ("unscored", "checklist"),
            "mirage:evaluate_mmmt",
        ),
        Pack(
            "microvqa",
            "MicroVQA multiple choice: accuracy overall and per task, unparseable "
            "share; a jury reads unparseable answers",
            "optional",
            (),
            "microvqa:evaluate",
        ),
        Pack(
            "mir",
            "MIR multi-image multiple choice: accuracy overall and per group; a jury judges "
            "the reasoning steps",
            "optional",
            ("unscored", "groups", "checklist"),
            "mir:evaluate",
        ),
        Pack(
            "mrmr",
            "MRMR retrieval: nDCG@10 and Hit@1 of a run; a jury grades relevance against the qrels",
            "optional",
            ("queries", "corpus", "depth"),
            "mrmr:evaluate",
        ),
    )
}


def get_pack(name: str) -> Pack:
    """The pack named ``name``.

    Args:
        name: A pack's name, one of `PACKS`.

    Returns:
        The pack.

    Raises:
        InputError: An unknown name (the message lists the packs).
    """
    try:
        return PACKS[name]
    except KeyError:
        raise InputError(
            f"unknown benchmark {name!r}; one of {', '.join(PACKS)}", field="name"
        ) from None


def run_benchmark(
    name: str,
    data: str | Path,
    predictions: str | Path,
    *,
    judge: Judge | None = None,
    jury: Any = None,
    limit: int | None = None,
    **options: Any,
) -> BenchReport:
    """Evaluate ``predictions`` on benchmark ``name``'s ``data``.

    ``judge`` or ``jury`` is required by the MIRAGE packs and optional for the others.

    Args:
        name: The pack's name (`PACKS`).
        data: The benchmark's own data file.
        predictions: The model's predictions (a JSONL file of ids and responses).
        judge: A `Judge`, e.g. `jury_judge` of a loaded jury.
        jury: A loaded `jurybox.judges.Jury`, judged in memory (instead of ``judge``).
        limit: Evaluate only the first ``limit`` items.
        **options: The pack's own options (``subset``, ``unscored``, ``queries``, ``corpus``,
            ``depth``, ``groups``, ``checklist``).

    Returns:
        The report: metrics with CIs, tables, counts and notes.

    Raises:
        InputError: An unknown pack or option, a judged pack without a jury, or data or predictions
            the pack cannot read (naming the file and row).
        ExecutionError: A judge could not judge.
    """
    pack = get_pack(name)
    unknown = sorted(set(options) - set(pack.options))
    if unknown:
        takes = ", ".join(pack.options) or "none"
        raise InputError(
            f"{name} takes no option {', '.join(unknown)} (its options: {takes})", field=unknown[0]
        )
    if judge is None and jury is not None:
        from .judging import jury_judge

        judge = jury_judge(jury)
    if judge is None and pack.jury == "required":
        raise InputError(
            f"{name} is judged by a jury: pass one (--jury NAME, or judge=/jury=)", field="jury"
        )
    return pack.evaluate(
        data,
        predictions,
        judge=judge,
        limit=limit,
        **{k: v for k, v in options.items() if v is not None},
    )


__all__ = [
    "PACKS",
    "BenchReport",
    "Choice",
    "Judge",
    "Judged",
    "Metric",
    "Pack",
    "Table",
    "extract_choice",
    "get_pack",
    "jury_judge",
    "letter_labels",
    "number_labels",
    "run_benchmark",
]
