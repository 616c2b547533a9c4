"""What a benchmark pack reports: metrics with CIs, paper-style tables, ``--json`` and Markdown.

Metrics with CIs and how every item was counted, the paper-style tables, and the ``--json`` /
Markdown forms.

A `Metric` is one number (a share in 0..1 or a mean score) with its 95% CI, its denominator, and a
sentence saying how unanswered and unscored items entered it. Items never leave a denominator
silently: `mean_metric` counts unanswered items as 0 (a model that said nothing earns nothing) and
unscored ones (the jury gave no verdict) as the caller's policy says, and the metric says which.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Final, Literal, TypedDict

import numpy as np

from jurybox.calibration.stats.stat import jsonable

Kind = Literal["share", "score"]
UnscoredPolicy = Literal["exclude", "zero"]
CONFIDENCE = 0.95
RESAMPLES = 1000


class Missing(Enum):
    """Why an item has no value for a metric."""

    UNANSWERED = "unanswered"  # no prediction, or an empty response
    UNSCORED = "unscored"  # the jury gave no verdict (below quorum, judge failure)
    NOT_APPLICABLE = "not applicable"  # the metric does not apply to this item


UNANSWERED: Final = Missing.UNANSWERED
UNSCORED: Final = Missing.UNSCORED
NOT_APPLICABLE: Final = Missing.NOT_APPLICABLE


@dataclass(frozen=True)
class Metric:
    """One reported number. ``value`` is None when undefined, and ``reason`` says why.

    Attributes:
        value: The number: a share in 0..1 or a mean score; None when undefined.
        ci: Its 95% percentile-bootstrap CI over items, when there are two items or more.
        n: Its denominator: the items with a value.
        kind: ``"share"`` (shown in %) or ``"score"``.
        digits: The digits a score is shown with.
        counted: How unanswered and unscored items entered it, in a sentence.
        reason: Why the value is undefined.
    """

    value: float | None
    ci: tuple[float, float] | None = None
    n: int = 0
    kind: Kind = "score"
    digits: int = 2
    counted: str = ""
    reason: str | None = None

    def cell(self, with_ci: bool = True) -> str:
        """The value as a table shows it: shares in %, scores with their digits."""
        if self.value is None:
            return "n/a"
        scale, digits = (100.0, 1) if self.kind == "share" else (1.0, self.digits)
        text = f"{self.value * scale:.{digits}f}"
        if with_ci and self.ci is not None:
            text += f" [{self.ci[0] * scale:.{digits}f}, {self.ci[1] * scale:.{digits}f}]"
        return text


# A report's metrics by key: one Metric, or one per group (``accuracy_by_task``).
Metrics = dict[str, Metric | dict[str, Metric]]


class MetricOptions(TypedDict, total=False):
    """The keyword arguments of `mean_metric`, for a set of them passed as ``**options``."""

    kind: Kind
    digits: int
    unanswered: float | None
    unscored: UnscoredPolicy
    wrong: str


def undefined(reason: str, kind: Kind = "score", digits: int = 2) -> Metric:
    """A metric with no value, ``reason`` saying why."""
    return Metric(None, kind=kind, digits=digits, reason=reason)


def mean_metric(
    values: Sequence[float | Missing],
    *,
    kind: Kind = "score",
    digits: int = 2,
    unanswered: float | None = 0.0,
    unscored: UnscoredPolicy = "exclude",
    wrong: str = "0",
) -> Metric:
    """The mean of per-item values with a percentile-bootstrap CI over items.

    ``unanswered`` is the value an unanswered item counts as (None: left out, and said so);
    ``unscored`` says whether items without a verdict are left out or count as 0; ``wrong`` is
    how the counting sentence names a 0 ("wrong" for accuracies).
    """
    numbers: list[float] = []
    n_unanswered = n_unscored = 0
    for v in values:
        if v is UNANSWERED:
            n_unanswered += 1
            if unanswered is not None:
                numbers.append(unanswered)
        elif v is UNSCORED:
            n_unscored += 1
            if unscored == "zero":
                numbers.append(0.0)
        elif v is NOT_APPLICABLE:
            continue
        else:
            numbers.append(float(v))
    parts = []
    if n_unanswered:
        how = f"counted as {wrong}" if unanswered is not None else "left out"
        parts.append(f"{n_unanswered} unanswered {how}")
    if n_unscored:
        how = f"counted as {wrong}" if unscored == "zero" else "left out of the mean"
        parts.append(f"{n_unscored} unscored {how}")
    counted = "; ".join(parts)
    if not numbers:
        return Metric(None, kind=kind, digits=digits, counted=counted, reason="no item has a value")
    return Metric(float(np.mean(numbers)), _ci(numbers), len(numbers), kind, digits, counted)


def _ci(numbers: Sequence[float]) -> tuple[float, float] | None:
    if len(numbers) < 2:
        return None
    from jurybox.calibration import bootstrap_ci

    stat = bootstrap_ci(
        _mean,
        np.asarray(numbers, dtype=float),
        n_resamples=RESAMPLES,
        confidence=CONFIDENCE,
        seed=0,
    )
    return stat.ci


def _mean(x: np.ndarray) -> float:
    return float(x.mean())


def by_group(
    values: Sequence[float | Missing],
    groups: Sequence[str],
    order: Sequence[str] = (),
    **kwargs: Any,
) -> dict[str, Metric]:
    """`mean_metric` per group, groups in ``order`` first, then as they appear."""
    names = [g for g in order if g in set(groups)] + [
        g for g in dict.fromkeys(groups) if g not in order
    ]
    return {g: mean_metric([v for v, k in zip(values, groups) if k == g], **kwargs) for g in names}


@dataclass
class Table:
    """A table in the paper's layout: one row per system (the jury, each judge, a model).

    Attributes:
        title: The table's title.
        columns: The column headings.
        rows: Each row's label and its cells, one per column (None: empty).
    """

    title: str
    columns: list[str]
    rows: Sequence[tuple[str, Sequence[Metric | None]]]

    def markdown(self, with_ci: bool = True) -> str:
        """The table in Markdown, its title in bold.

        Cells show their CIs unless ``with_ci`` is False.
        """
        head = ["", *self.columns]
        lines = [
            f"**{self.title}**",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join(["---"] + ["---:"] * len(self.columns)) + "|",
        ]
        for label, cells in self.rows:
            shown = [c.cell(with_ci) if c is not None else "" for c in cells]
            lines.append("| " + " | ".join([label, *shown]) + " |")
        return "\n".join(lines)


@dataclass
class BenchReport:
    """A benchmark run: metrics, per-judge metrics, tables, ids behind the counts, notes, artifacts.

    Attributes:
        benchmark: The pack's name.
        title: The report's title.
        metrics: The metrics by key (one key each in ``--json``): one `Metric`, or one per group.
        counts: Item counts, by name (the Markdown's line under the title).
        judges: Each judge's metrics, by judge name.
        lists: The ids behind the counts, by list name.
        tables: The paper-style tables.
        notes: Notes for the reader.
        extra: Other ``--json`` keys.
        artifacts: Per-item rows kept with ``--out``, by file name.
    """

    benchmark: str
    title: str
    metrics: Metrics
    counts: dict[str, int] = field(default_factory=dict)
    judges: dict[str, Metrics] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The report as ``--json`` data.

        One key per metric (shares as fractions in 0..1), then their CIs, denominators and counting
        sentences, the counts, the listed ids, per-judge metrics and notes.
        """
        out: dict[str, Any] = {"benchmark": self.benchmark, **self.counts}
        out.update({k: _values(m) for k, m in self.metrics.items()})
        out.update(self.lists)
        out.update(self.extra)
        out["ci"] = {k: _field(m, "ci") for k, m in self.metrics.items()}
        out["n"] = {k: _field(m, "n") for k, m in self.metrics.items()}
        out["counted"] = _nonempty({k: _field(m, "counted") for k, m in self.metrics.items()})
        out["undefined"] = _nonempty({k: _field(m, "reason") for k, m in self.metrics.items()})
        if self.judges:
            out["judges"] = {
                j: {k: _values(m) for k, m in ms.items()} for j, ms in self.judges.items()
            }
        out["notes"] = list(self.notes)
        return jsonable(out)

    def to_markdown(self) -> str:
        """The report in Markdown.

        Title, counts, tables, then how items were counted, the metrics not reported and the notes.
        """
        counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.counts.items())
        parts = [f"## {self.title}", "", counts, ""]
        for table in self.tables:
            parts += [table.markdown(), ""]
        parts.append(
            f"Values with {int(CONFIDENCE * 100)}% percentile-bootstrap CIs over items; "
            "shares in %."
        )
        counted = _flatten({k: _field(m, "counted") for k, m in self.metrics.items()})
        if counted:
            parts += ["", "How items were counted:"]
            parts += [f"- {k}: {v}" for k, v in counted.items() if v]
        reasons = _flatten({k: _field(m, "reason") for k, m in self.metrics.items()})
        if reasons:
            parts += ["", "Not reported:"]
            parts += [f"- {k}: {v}" for k, v in reasons.items() if v]
        if self.notes:
            parts += ["", "Notes:"] + [f"- {n}" for n in self.notes]
        return "\n".join(parts).rstrip() + "\n"

    def save(self, directory: str | Path) -> list[Path]:
        """Write ``report.md``, ``report.json`` and each artifact as ``NAME.jsonl``.

        Args:
            directory: The folder to write to (made if missing).

        Returns:
            The files written.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        written = [directory / "report.md", directory / "report.json"]
        written[0].write_text(self.to_markdown(), encoding="utf-8")
        written[1].write_text(
            json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8"
        )
        for name, rows in self.artifacts.items():
            path = directory / f"{name}.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(jsonable(row), ensure_ascii=False, allow_nan=False) + "\n")
            written.append(path)
        return written


def _values(m: Metric | Mapping[str, Metric]) -> Any:
    if isinstance(m, Metric):
        return m.value
    return {k: _values(v) for k, v in m.items()}


def _field(m: Metric | Mapping[str, Metric], name: str) -> Any:
    if isinstance(m, Metric):
        value = getattr(m, name)
        return list(value) if isinstance(value, tuple) else value
    return {k: _field(v, name) for k, v in m.items()}


def _nonempty(data: Mapping[str, Any]) -> dict[str, Any]:
    """Only the entries with something to say (nested mappings kept where any entry has)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, Mapping):
            v = _nonempty(v)
        if v:
            out[k] = v
    return out


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}[{k}]" if prefix else k
        if isinstance(v, Mapping):
            out.update(_flatten(v, key))
        elif v:
            out[key] = v
    return out


#: The metric a leaderboard of a pack's runs ranks on by default.
PRIMARY = {
    "microvqa": "accuracy",
    "mir": "accuracy",
    "mrmr": "ndcg@10",
    "mirage-mmst": "weighted_sum",
    "mirage-mmmt": "decision_accuracy",
}


@dataclass
class ItemResults:
    """A pack's per-item results read back from ``jurybox bench --out DIR``.

    Metric -> item id -> value (None: unscored, left out of means and counted), as the pack counts
    items (an unanswered item is a wrong answer or a 0, as in its own means).
    """

    benchmark: str
    values: dict[str, dict[str, float | None]]
    source: str

    @property
    def primary(self) -> str:
        """The metric to rank on: the pack's headline metric where this run has it."""
        main = PRIMARY.get(self.benchmark)
        return main if main in self.values else next(iter(self.values))


def read_item_results(directory: str | Path) -> ItemResults:
    """The per-item results in a ``jurybox bench --out`` directory.

    From report.json and the items' or queries' file: accuracy per item for MicroVQA and MIR (and
    with the jury's fallback where it ran), nDCG@10 and Hit@1 per query for MRMR, and each jury
    score per item for the MIRAGE packs (an unanswered item 0 on its rubric's criteria, an unscored
    one None).
    """
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.errors import InputError

    directory = Path(directory)
    try:
        report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
        benchmark = str(report["benchmark"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(
            f"{directory}: not the output of `jurybox bench --out` (its report.json: {exc})"
        ) from None
    name = "queries.jsonl" if benchmark == "mrmr" else "items.jsonl"
    path = directory / name
    if not path.is_file():
        raise InputError(
            f"{directory}: no per-item results ({name}); rerun jurybox bench "
            f"{benchmark} with --out {directory}"
        )
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    values: dict[str, dict[str, float | None]] = {}

    def put(metric: str, item: str, value: float | None) -> None:
        values.setdefault(metric, {})[item] = value

    for row in rows:
        if benchmark == "mrmr":
            for metric in ("ndcg@10", "hit@1"):
                put(metric, str(row["query_id"]), float(row[metric]))
        elif "correct" in row:
            put("accuracy", str(row["id"]), float(row["correct"]))
            if "correct_with_fallback" in row:
                put("accuracy_with_fallback", str(row["id"]), float(row["correct_with_fallback"]))
        else:
            rubric = load_rubric(row["rubric"])
            names = [c.name for c in rubric.criteria] + (
                [rubric.formula.name] if rubric.formula is not None else []
            )
            scores = row.get("scores") or {}
            for metric in names:
                if row.get("status") == "unanswered":
                    put(metric, str(row["id"]), 0.0)
                else:
                    got = scores.get(metric)
                    put(metric, str(row["id"]), None if got is None else float(got))
    if not values:
        raise InputError(f"{path}: no item results")
    return ItemResults(benchmark, values, str(directory))
