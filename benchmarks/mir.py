"""MIR (interleaved multi-image reasoning, 22,257 multiple-choice questions in 12 sub-scenarios).

Accuracy overall and per group (spatial, sequential, analytical), and, with a jury, the model's
reasoning judged step by step against the five reference steps (rubric ``mir-steps``).

Data: a JSON list (``all_data_rel.json``) or JSONL, one object per question:

* ``question`` (with ``<image>`` placeholders), ``options``: a list (labelled A, B, C ... in order)
  or a dict from letter to text (``{"A": "...", "B": "..."}``);
* the five reference steps ``summary``, ``caption``, ``text2img``, ``img2img``, ``conclusion``
  (text, or lists/dicts of text, which are joined); only needed with a jury;
* the correct option: an ``answer`` field (a letter or an option's text) when present, else
  ``conclusion`` when it is a letter, else the option the conclusion's text commits to (read by the
  same extraction rules); an item whose correct option cannot be told is an error;
* ``id`` (optional): the item id; without one, items are numbered by their position in the file from
  0 ("0", "1", ...), and predictions must use those numbers;
* the group: a ``group`` field (spatial / sequential / analytical; "temporal" is read as sequential)
  when present; else a sub-scenario name (``sub_scenario``, ``scenario``, ``task`` or ``category``)
  mapped by keyword. MIR's descriptions name the groups and some sub-scenarios (perspective
  relations, forced perspective / scale ambiguity and multi-view 3-D geometry are spatial; motion
  detection and cooking processes are sequential; chart analysis is analytical) but publish no full
  table of the 12, so the keyword map is our assumption: a name it cannot place is grouped
  "unknown", reported as such with the names listed, and a ``group`` field (or ``groups=``) settles
  it.

Predictions: rows with ``id`` and ``response``.

Differences from the public evaluation and why: MIR has no official scorer; its suggested extraction
takes the first, case-sensitive letter after "Option", so "Option A is wrong; option C is correct"
reads as A and "the answer is (c)" as nothing. jurybox takes the last explicit answer,
case-insensitively, or the option's text (`.extraction`); unparseable and unanswered items count as
wrong and stay in the denominator; the judge fallback (``mcq-extract``) is reported separately. The
step-by-step judging is ours: the public evaluation scores only the final option.

An added view, ``checklist=True`` with a jury (``jurybox bench mir --jury J --checklist``): the
five reference steps as a checklist of five points of equal weight, each judged met or not
(rubric ``checklist``), reported as each step's share met and ``steps_met``, the share of the
five met (HealthBench's rule with equal weights). Like the 0-4 step scores, it is not MIR's
metric, which is the accuracy alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jurybox.rubrics import Item, load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.points import read_points

from . import mcq
from .data import (
    EXAMPLES,
    Predictions,
    limited,
    plural,
    read_model_answers,
    read_records,
    require,
    text_id,
    unique_ids,
)
from .extraction import extract_choice, letter_labels, parse_label
from .judging import Judge, Judged, item_values, unscored_reasons
from .report import (
    UNANSWERED,
    UNSCORED,
    BenchReport,
    Metric,
    Missing,
    Table,
    UnscoredPolicy,
    by_group,
    mean_metric,
)

NAME = "mir"
GROUPS = ("spatial", "sequential", "analytical")
STEPS = ("summary", "caption", "text2img", "img2img", "conclusion")
# The reference steps as checklist points (``checklist=True``): one point each, equal weights.
STEP_POINT = "The reasoning covers this reference step ({step}): {text}"
SCENARIO_FIELDS = ("sub_scenario", "scenario", "task", "category")
UNKNOWN = "unknown"

# Keywords of sub-scenario names per group (our assumption; see the module docstring).
_KEYWORDS = {
    "spatial": (
        "spatial",
        "perspective",
        "scale",
        "3d",
        "three dimensional",
        "geometry",
        "multi view",
        "multiview",
        "viewpoint",
        "projection",
        "position",
        "direction",
        "depth",
        "distance",
        "layout",
    ),
    "sequential": (
        "sequential",
        "temporal",
        "sequence",
        "order",
        "motion",
        "movement",
        "cooking",
        "process",
        "procedure",
        "video",
        "frame",
        "time",
    ),
    "analytical": (
        "analytical",
        "analysis",
        "analytic",
        "chart",
        "diagram",
        "table",
        "graph",
        "plot",
        "statistic",
        "infographic",
        "logic",
        "math",
        "puzzle",
    ),
}
_ALIASES = {"temporal": "sequential", "analysis": "analytical", "analytic": "analytical"}


def group_of(name: str) -> str | None:
    """The group a sub-scenario name belongs to, by keyword.

    None when no or several groups match.
    """
    words = " " + re.sub(r"[^a-z0-9]+", " ", name.lower().replace("-", " ")).strip() + " "
    hits = {
        g
        for g, keys in _KEYWORDS.items()
        for k in keys
        if f" {k} " in words or words.strip().startswith(k)
    }
    return hits.pop() if len(hits) == 1 else None


def read_items(
    path: str | Path, groups: Mapping[str, str] | None = None
) -> tuple[list[mcq.McqItem], list[str]]:
    """The questions, and notes on how groups were assigned."""
    items: list[mcq.McqItem] = []
    bad_gold: list[str] = []
    unplaced: dict[str, None] = {}
    groups = {k.lower(): v for k, v in (groups or {}).items()}
    records = read_records(path, "MIR data")
    for position, (n, r) in enumerate(records):
        require(path, n, r, ("question", "options"), "MIR data")
        labels, options = _options(path, n, r["options"])
        gold = _gold(r, labels, options)
        if gold is None:
            bad_gold.append(f"row {n}")
        item_id = text_id(path, n, r["id"]) if r.get("id") is not None else str(position)
        scenario = next((str(r[f]) for f in SCENARIO_FIELDS if r.get(f) not in (None, "")), None)
        group = _group(path, n, r, scenario, groups)
        if group == UNKNOWN and scenario:
            unplaced[scenario] = None
        steps = {s: _step_text(r.get(s)) for s in STEPS}
        items.append(
            mcq.McqItem(
                item_id,
                str(r["question"]),
                labels,
                options,
                gold or 0,
                group,
                n,
                {"scenario": scenario, "steps": steps},
            )
        )
    if bad_gold:
        raise InputError(
            f"{path}: {plural(len(bad_gold), 'item')} whose correct option cannot be told "
            f"({', '.join(bad_gold[:EXAMPLES])}): the conclusion names no option; add an "
            "'answer' field (an option letter)",
            field="answer",
        )
    unique_ids(path, [(it.row, it.id) for it in items])
    notes = []
    if unplaced:
        notes.append(
            f"sub-scenarios not placed in a group (reported as '{UNKNOWN}'): "
            f"{', '.join(list(unplaced)[:12])}; add a 'group' field to the data"
        )
    return items, notes


def _options(path: str | Path, n: int, raw: Any) -> tuple[list[str], list[str]]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            pass
    if isinstance(raw, Mapping):
        labels = [str(k).strip().strip("().").upper() for k in raw]
        if not all(len(lab) == 1 and lab.isalpha() for lab in labels) or len(set(labels)) != len(
            labels
        ):
            raise InputError(
                f"{path} row {n}: options given as a dict need single-letter keys "
                f"(A, B, ...), got {list(raw)[:8]}",
                field="options",
            )
        texts = [str(v) for v in raw.values()]
    elif isinstance(raw, list) and all(isinstance(v, (str, int, float)) for v in raw):
        labels, texts = letter_labels(len(raw)), [str(v) for v in raw]
        if len(raw) > 26:
            raise InputError(
                f"{path} row {n}: {len(raw)} options; at most 26 (A-Z)", field="options"
            )
    else:
        raise InputError(
            f"{path} row {n}: options must be a list of texts or a dict from "
            f"letter to text, got {raw!r:.60}",
            field="options",
        )
    if len(texts) < 2:
        raise InputError(f"{path} row {n}: fewer than two options", field="options")
    # "A. the red cube" -> "the red cube": the label is not part of the option's text
    texts = [
        re.sub(rf"^\s*\(?{lab}\s*[).:]\s+", "", t, flags=re.IGNORECASE)
        for lab, t in zip(labels, texts)
    ]
    return labels, texts


def _gold(r: Mapping[str, Any], labels: list[str], options: list[str]) -> int | None:
    if r.get("answer") not in (None, ""):
        return parse_label(str(r["answer"]), labels, options)
    conclusion = r.get("conclusion")
    if conclusion in (None, ""):
        return None
    text = _step_text(conclusion) or ""
    index = parse_label(text, labels, options)
    if index is not None:
        return index
    choice = extract_choice(text, labels, options)
    return choice.index if choice.parsed else None


def _group(
    path: str | Path, n: int, r: Mapping[str, Any], scenario: str | None, groups: Mapping[str, str]
) -> str:
    if r.get("group") not in (None, ""):
        g = str(r["group"]).strip().lower()
        g = _ALIASES.get(g, g)
        if g not in GROUPS:
            raise InputError(
                f"{path} row {n}: group must be one of {', '.join(GROUPS)}, got {r['group']!r}",
                field="group",
            )
        return g
    if scenario is None:
        return UNKNOWN
    if scenario.lower() in groups:
        return groups[scenario.lower()]
    return group_of(scenario) or UNKNOWN


def _step_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return "\n".join(f"{k}: {_step_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(str(_step_text(v)) for v in value)
    text = str(value).strip()
    return text or None


def evaluate(
    data: str | Path,
    predictions: str | Path,
    *,
    judge: Judge | None = None,
    limit: int | None = None,
    unscored: UnscoredPolicy = "exclude",
    groups: Mapping[str, str] | None = None,
    checklist: bool = False,
) -> BenchReport:
    """MIR accuracy overall and per group.

    With ``judge``, the judge fallback for unparseable answers and the step-by-step reasoning scores
    (``mir-steps``). With ``checklist`` too, the five reference steps are also judged as a
    checklist of five equal points, each met or not (rubric ``checklist``): an added view, as the
    step scores are (MIR's own metric is the accuracy).
    """
    if checklist and judge is None:
        raise InputError("the checklist view of MIR's steps is judged: pass a jury", field="jury")
    all_items, notes = read_items(data, groups)
    preds = read_model_answers(predictions, [it.id for it in all_items], data_path=data)
    items = limited(all_items, limit)
    if limit is not None and limit < len(all_items):
        notes.append(f"trial run: the first {len(items)} of {len(all_items)} items")
    outcomes = mcq.extract_all(items, preds)
    judged = judge is not None
    order = [*GROUPS, UNKNOWN]
    metrics: dict[str, Any] = {}
    judges: dict[str, dict[str, Any]] = {}
    tables: list[Table] = []
    if judge is not None:
        mcq.judge_fallback(outcomes, preds, judge, "mir-extract")
        step_metrics, judges, step_table, step_notes = _judge_steps(
            data, items, preds, judge, unscored
        )
        notes += step_notes
        if checklist:
            point_metrics, point_judges, point_table = _judge_step_points(
                items, preds, judge, unscored
            )
            step_metrics.update(point_metrics)
            for name, values in point_judges.items():
                judges.setdefault(name, {}).update(values)
            notes.append(
                "steps as a checklist (added, not MIR's metric): each reference step one point, "
                "met or not (rubric checklist); steps_met is the share of the five met, "
                "HealthBench's rule with equal weights"
            )
    metrics.update(mcq.mcq_metrics(outcomes, order, judged, by="group"))
    scenarios = [o.item.extra["scenario"] for o in outcomes]
    if any(scenarios):
        correct = [o.correct for o in outcomes]
        metrics["accuracy_by_scenario"] = by_group(
            correct, [s or UNKNOWN for s in scenarios], kind="share", wrong="wrong"
        )
    tables.append(mcq.mcq_table("MIR accuracy by group", metrics, {}, judged, by="group"))
    if judge is not None:
        metrics.update(step_metrics)
        tables.append(step_table)
        if checklist:
            tables.append(point_table)
        notes.append(
            "accuracy_with_fallback: the jury (rubric mcq-extract) read the answers of "
            "unparseable responses; the headline accuracy uses the extraction rules only"
        )
    return BenchReport(
        benchmark=NAME,
        title=f"MIR ({len(items)} items)",
        metrics=metrics,
        counts=mcq.counts(outcomes),
        judges=judges,
        lists={
            "unanswered_ids": mcq.unanswered_ids(outcomes),
            "unparseable_ids": mcq.unparseable_ids(outcomes),
        },
        tables=tables,
        notes=notes,
        artifacts={"items": mcq.item_rows(outcomes, "group")},
    )


def _judge_steps(
    data: str | Path,
    items: Sequence[mcq.McqItem],
    preds: Predictions,
    judge: Judge,
    unscored: UnscoredPolicy,
) -> tuple[dict[str, Metric], dict[str, dict[str, Metric]], Table, list[str]]:
    rubric = load_rubric("mir-steps")
    for it in items:
        lacking = [s for s in STEPS if not it.extra["steps"].get(s)]
        if lacking:
            raise InputError(
                f"{data} row {it.row}: no reference step {lacking[0]!r}; judging "
                f"the reasoning needs all five ({', '.join(STEPS)})",
                field=lacking[0],
            )
    answered = [it for it in items if preds.get(it.id) is not None]
    judge_items = [
        Item(
            id=it.id,
            question=it.question,
            response=preds.get(it.id).response,  # type: ignore[union-attr]
            extra={
                **it.extra["steps"],
                "options": "\n".join(f"{lab}. {opt}" for lab, opt in zip(it.labels, it.options)),
            },
        )
        for it in answered
    ]
    judged = judge("mir-steps", rubric, judge_items) if judge_items else Judged({})
    ids = [it.id for it in items]
    unanswered = {it.id for it in items} - {it.id for it in answered}
    names = [*STEPS, "step_mean"]

    def step_metrics(judge_name: str | None) -> dict[str, Metric]:
        return {
            f"step_{s}" if s != "step_mean" else s: mean_metric(
                item_values(ids, unanswered, judged, s, judge=judge_name, rubric=rubric),
                unscored=unscored,
                digits=2 if s != "step_mean" else 3,
            )
            for s in names
        }

    metrics = step_metrics(None)
    judges = {j: step_metrics(j) for j in judged.judges()}
    columns = [*STEPS, "mean"]
    rows = [("jury", list(metrics.values()))] + [(j, list(m.values())) for j, m in judges.items()]
    notes = []
    reasons = unscored_reasons(ids, unanswered, judged)
    if reasons:
        notes.append("unscored step verdicts, e.g. " + "; ".join(reasons))
    return (
        metrics,
        judges,
        Table("MIR reasoning steps (0-4, rubric mir-steps)", columns, rows),
        notes,
    )


def _judge_step_points(
    items: Sequence[mcq.McqItem], preds: Predictions, judge: Judge, unscored: UnscoredPolicy
) -> tuple[dict[str, Metric], dict[str, dict[str, Metric]], Table]:
    """The five reference steps judged as checklist points: each step's share met, and all."""
    answered = [it for it in items if preds.get(it.id) is not None]
    options = {
        it.id: "\n".join(f"{lab}. {opt}" for lab, opt in zip(it.labels, it.options))
        for it in answered
    }
    judge_items = [
        Item(
            id=it.id,
            question=f"{it.question}\nOptions:\n{options[it.id]}",
            response=preds.get(it.id).response,  # type: ignore[union-attr]
            checklist=read_points(
                [
                    {
                        "criterion": STEP_POINT.format(step=s, text=it.extra["steps"][s]),
                        "points": 1,
                        "tag": "essential",
                    }
                    for s in STEPS
                ],
                it.id,
            ),
        )
        for it in answered
    ]
    judged = (
        judge("mir-checklist", load_rubric("checklist"), judge_items) if judge_items else Judged({})
    )
    ids = [it.id for it in items]
    unanswered = {it.id for it in items} - {it.id for it in answered}
    keys = {s: f"p{k + 1}" for k, s in enumerate(STEPS)}

    def view(judge_name: str | None) -> dict[str, Metric]:
        per = {s: item_values(ids, unanswered, judged, keys[s], judge=judge_name) for s in STEPS}
        share: list[float | Missing] = []
        for n, i in enumerate(ids):
            numbers = [v for v in (per[s][n] for s in STEPS) if isinstance(v, float)]
            if i in unanswered:
                share.append(UNANSWERED)
            elif len(numbers) < len(STEPS):
                share.append(UNSCORED)
            else:
                share.append(sum(numbers) / len(numbers))
        out = {f"met_{s}": mean_metric(per[s], kind="share", unscored=unscored) for s in STEPS}
        out["steps_met"] = mean_metric(share, kind="share", unscored=unscored)
        return out

    metrics = view(None)
    judges = {j: view(j) for j in judged.judges()}
    rows = [("jury", list(metrics.values()))] + [(j, list(m.values())) for j, m in judges.items()]
    table = Table(
        "MIR steps as a checklist (% met; an added view, not MIR's metric)",
        [*STEPS, "all"],
        rows,
    )
    return metrics, judges, table
