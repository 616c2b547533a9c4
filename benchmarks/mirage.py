r"""MIRAGE (agricultural expert consultation), judged by a jury with the shipped MIRAGE rubrics.

The single-turn MMST sets and the multi-turn MMMT clarify-or-respond set.

MMST data: the benchmark's JSON list (``MMST_Standard``, ``MMST_Contextual``; any row format works),
one object per consultation: ``id`` ("#874336"), ``question``, ``answer`` (the expert's answer: the
reference), ``category``, ``images`` (paths, optional), and for identification items ``entity_name``
with ``entity_scientific_name``, ``entity_common_names`` and ``entity_type`` (optional; often
empty). ``meta_data_state`` / ``meta_data_county`` / ``meta_data_asked_time`` are shown to the MG
judges. The Contextual set adds ``location_related`` / ``time_related``.

* Routing by ``category``: a category naming identification (plant / insect and pest / plant disease
  identification) goes to the ``mirage-id`` rubric (identification 0/1, judged against the entity's
  name, scientific name and common names; reasoning 0-4); a category naming management or guidance
  (plant care and gardening guidance, disease / pest / weed management) to ``mirage-mg`` (accuracy,
  relevance, completeness, parsimony 0-4, against the expert's answer; weighted sum = (2*accuracy +
  relevance + completeness + parsimony) / 20). Any other category is an error naming it.
* Standard vs Contextual: ``subset="auto"`` takes a file with ``location_related`` /
  ``time_related`` fields for the Contextual set, which is scored on MG only (every item goes to
  ``mirage-mg``, as in the paper).
* Reported, for the jury and for each judge, with 95% CIs: ID accuracy (share of correct
  identifications), reasoning (mean 0-4), the four MG means and the weighted sum (0..1).

MMMT data: ``direct_test.json`` or ``decomp_test.json``: ``id``, ``dialog_context`` ("user:
...\nexpert: ..."), ``decision`` (``<Clarify>`` / ``<Respond>``), ``utterance`` (the expert's next
turn: the reference), ``images``; the decomp file adds ``known_goal`` and ``missing_goal`` (lists of
facts). Predictions: ``id``, ``response`` (the model's next utterance) and, optionally,
``decision``.

* Decision accuracy: read from the prediction without a judge when it says so plainly (a
  ``decision`` field, or exactly one of the tags ``<Clarify>`` / ``<Respond>`` in the response; "ask
  for clarification" counts as Clarify); otherwise the jury's ``decision_accuracy``.
* The jury scores (rubric ``mirage-mmmt``) known_accuracy, missing_coverage and
  utterance_goal_relevance (0-4) and spurious (yes/no), with the gold goals read from ``known_goal``
  / ``missing_goal``. Reported: decision accuracy, the three goal-score means, spurious share,
  perfect share (known, missing and relevance all 4 and not spurious). The direct file has no goals,
  so known_accuracy, missing_coverage and perfect are reported as undefined with that reason rather
  than as numbers from empty goals.

An added view, ``checklist=True`` (``jurybox bench mirage-mmmt --checklist``; the decomp file):
each answered item is also judged on its goal facts as a checklist (rubric ``checklist``, each
point met or not): a point per missing fact ("asks the grower for, or otherwise accounts for,
this missing information", 5 points) and per known fact ("stays consistent with this fact
already known", 3 points). Reported in a second table, not the paper's: ``missing_points``, the
share of an item's missing facts the turn asks for (the paper's ``missing_coverage`` is one 0-4
judgment of the same thing, and stays as the paper computes it; items without missing facts
are not in it), ``known_points``, the share of its known facts kept, and ``checklist_score``,
HealthBench's rule over both.

Counting, for every metric: an unanswered item (no prediction or an empty response) counts as 0
(wrong), except in the spurious share, which it cannot enter (it asserted nothing); an item the jury
could not score (below quorum, a failed judge call) is left out of that metric's mean, or, with
``unscored="zero"``, counted as 0; either way the table says how many.

Differences from the public evaluator and why: it scores one judge at a time and never combines them
(jurybox reports the jury's aggregate, by the jury's stated rule, and each judge); MMMT's judge
prompt reads the gold goals from a field the data does not have, so the judge sees empty goals
(jurybox reads ``known_goal`` / ``missing_goal``); its JSON template is invalid (jurybox constrains
the judges' output to the rubric's schema); failed judge calls silently become all-zero scores, and
items that fail after retries get -1 and are dropped, shrinking the denominator without notice
(jurybox counts unscored items and says how they entered); score ranges are never checked (jurybox
accepts only values on the scale); its sampling temperatures differ by accident (jurybox takes them
from the jury file, recorded in the provenance).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from jurybox.rubrics import Item, load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.points import read_points

from .data import (
    EXAMPLES,
    image_paths,
    limited,
    read_model_answers,
    read_records,
    require,
    text_id,
    unique_ids,
)
from .judging import Judge, Judged, item_values, unscored_reasons
from .report import (
    NOT_APPLICABLE,
    UNANSWERED,
    UNSCORED,
    BenchReport,
    Metric,
    Metrics,
    Missing,
    Table,
    UnscoredPolicy,
    mean_metric,
    undefined,
)

MG = ("accuracy", "relevance", "completeness", "parsimony")
Subset = Literal["auto", "standard", "contextual"]


# ---------------------------------------------------------------------------------- MMST


def route(category: str) -> str | None:
    """``id`` for identification categories, ``mg`` for management / guidance ones."""
    text = category.lower()
    if "identification" in text or "identify" in text:
        return "id"
    if "management" in text or "guidance" in text or "care" in text:
        return "mg"
    return None


def _mmst_items(path: str | Path, subset: Subset) -> tuple[list[tuple[str, Item, int]], str]:
    rows = read_records(path, "MIRAGE MMST data")
    contextual = subset == "contextual" or (
        subset == "auto" and any("location_related" in r or "time_related" in r for _, r in rows)
    )
    out: list[tuple[str, Item, int]] = []
    unknown: dict[str, int] = {}
    for n, r in rows:
        require(path, n, r, ("id", "question", "answer", "category"), "MIRAGE MMST data")
        item_id = text_id(path, n, r["id"])
        kind = route(str(r["category"]))
        if kind is None:
            unknown.setdefault(str(r["category"]), n)
            continue
        if contextual:
            kind = "mg"
        images = image_paths(path, r.get("images"))
        if kind == "id":
            if not str(r.get("entity_name") or "").strip():
                raise InputError(
                    f"{path} row {n}: identification item {item_id!r} has no "
                    "entity_name (the ID judges grade against it)",
                    field="entity_name",
                )
            extra = {
                k: r.get(k)
                for k in (
                    "entity_name",
                    "entity_scientific_name",
                    "entity_common_names",
                    "entity_type",
                )
            }
        else:
            extra = {
                k: r.get(k) for k in ("meta_data_state", "meta_data_county", "meta_data_asked_time")
            }
        item = Item(
            id=item_id,
            question=str(r["question"]),
            reference=str(r["answer"]),
            images=images,
            extra={k: v for k, v in extra.items() if v not in (None, "", [])},
        )
        out.append((kind, item, n))
    if unknown:
        shown = ", ".join(f"{c!r} (row {n})" for c, n in list(unknown.items())[:EXAMPLES])
        raise InputError(
            f"{path}: categories that are neither identification nor management/guidance: {shown}",
            field="category",
        )
    unique_ids(path, [(n, it.id) for _, it, n in out])
    return out, "contextual" if contextual else "standard"


def evaluate_mmst(
    data: str | Path,
    predictions: str | Path,
    *,
    judge: Judge,
    subset: Subset = "auto",
    limit: int | None = None,
    unscored: UnscoredPolicy = "exclude",
) -> BenchReport:
    """MIRAGE-MMST (Standard or Contextual), for the jury and each judge.

    ID accuracy and reasoning, MG means and weighted sum, for the jury and each judge.
    """
    if subset not in ("auto", "standard", "contextual"):
        raise InputError(
            f"subset must be auto, standard or contextual, got {subset!r}", field="subset"
        )
    routed, which = _mmst_items(data, subset)
    preds = read_model_answers(predictions, [it.id for _, it, _ in routed], data_path=data)
    n_all = len(routed)
    routed = limited(routed, limit)
    sets: dict[str, list[Item]] = {"id": [], "mg": []}
    for kind, item, _ in routed:
        sets[kind].append(item)
    rubrics = {"id": load_rubric("mirage-id"), "mg": load_rubric("mirage-mg")}
    judged: dict[str, Judged] = {}
    unanswered: dict[str, set[str]] = {}
    for kind, items in sets.items():
        answered = [
            it.model_copy(update={"response": preds.get(it.id).response})  # type: ignore[union-attr]
            for it in items
            if preds.get(it.id) is not None
        ]
        unanswered[kind] = {it.id for it in items} - {it.id for it in answered}
        task = f"mirage-{kind}"
        judged[kind] = judge(task, rubrics[kind], answered) if answered else Judged({})

    def metrics_for(judge_name: str | None) -> dict[str, Metric]:
        out: dict[str, Metric] = {}
        ids = [it.id for it in sets["id"]]
        if which == "contextual":
            out["id_accuracy"] = undefined("the Contextual set is scored on MG only", "share")
            out["reasoning"] = undefined("the Contextual set is scored on MG only")
        elif not ids:
            out["id_accuracy"] = undefined("no identification items", "share")
            out["reasoning"] = undefined("no identification items")
        else:

            def values(c: str) -> list[float | Missing]:
                return item_values(
                    ids, unanswered["id"], judged["id"], c, judge=judge_name, rubric=rubrics["id"]
                )

            out["id_accuracy"] = mean_metric(
                values("identification_accuracy"), kind="share", unscored=unscored, wrong="wrong"
            )
            out["reasoning"] = mean_metric(values("reasoning_accuracy"), unscored=unscored)
        ids = [it.id for it in sets["mg"]]
        for c in (*MG, "weighted_sum"):
            key = "weighted_sum" if c == "weighted_sum" else f"mg_{c}"
            if not ids:
                out[key] = undefined("no management/guidance items")
                continue
            out[key] = mean_metric(
                item_values(
                    ids, unanswered["mg"], judged["mg"], c, judge=judge_name, rubric=rubrics["mg"]
                ),
                unscored=unscored,
                digits=4 if c == "weighted_sum" else 2,
            )
        return out

    metrics = metrics_for(None)
    judge_names = list(dict.fromkeys([*judged["id"].judges(), *judged["mg"].judges()]))
    judges = {j: metrics_for(j) for j in judge_names}
    columns = {
        "id_accuracy": "ID accuracy (%)",
        "reasoning": "Reasoning (0-4)",
        "mg_accuracy": "Accuracy",
        "mg_relevance": "Relevance",
        "mg_completeness": "Completeness",
        "mg_parsimony": "Parsimony",
        "weighted_sum": "Weighted sum",
    }
    if which == "contextual":
        columns = {k: v for k, v in columns.items() if k not in ("id_accuracy", "reasoning")}
    rows = [("jury", [metrics[k] for k in columns])]
    rows += [(j, [m[k] for k in columns]) for j, m in judges.items()]
    notes = [f"{which} set"]
    if limit is not None and limit < n_all:
        notes.append(f"trial run: the first {len(routed)} of {n_all} items")
    for kind in ("id", "mg"):
        reasons = unscored_reasons([it.id for it in sets[kind]], unanswered[kind], judged[kind])
        if reasons:
            notes.append(f"unscored {kind.upper()} verdicts, e.g. " + "; ".join(reasons))
    all_unanswered = sorted(unanswered["id"] | unanswered["mg"])
    unscored_ids = [
        it.id
        for kind in sets
        for it in sets[kind]
        if it.id not in unanswered[kind] and not _fully_scored(judged[kind], it.id)
    ]
    return BenchReport(
        benchmark="mirage-mmst",
        title=f"MIRAGE-MMST {which.capitalize()} ({len(routed)} items)",
        # Only read from here on, so these Metric-only dicts stand for Metrics (dict is invariant).
        metrics=cast(Metrics, metrics),
        counts={
            "items": len(routed),
            "id_items": len(sets["id"]),
            "mg_items": len(sets["mg"]),
            "unanswered": len(all_unanswered),
            "unscored": len(unscored_ids),
        },
        judges=cast("dict[str, Metrics]", judges),
        lists={"unanswered_ids": all_unanswered, "unscored_ids": unscored_ids},
        tables=[Table(f"MIRAGE-MMST {which.capitalize()}", list(columns.values()), rows)],
        notes=notes,
        artifacts={
            "items": [
                _item_row(kind, it.id, unanswered[kind], judged[kind])
                for kind in sets
                for it in sets[kind]
            ]
        },
    )


def _fully_scored(judged: Judged, item_id: str) -> bool:
    record = judged.records.get(item_id)
    return record is not None and record.status == "scored"


def _item_row(kind: str, item_id: str, unanswered: set[str], judged: Judged) -> dict[str, Any]:
    record = judged.records.get(item_id)
    status = (
        "unanswered"
        if item_id in unanswered
        else (record.status if record is not None else "unscored")
    )
    row: dict[str, Any] = {"id": item_id, "rubric": f"mirage-{kind}", "status": status}
    if record is not None:
        row["scores"] = record.scores
        if record.reasons:
            row["reasons"] = record.reasons
    elif item_id in judged.failed:
        row["reasons"] = [judged.failed[item_id]]
    return row


# ---------------------------------------------------------------------------------- MMMT


_DECISIONS = {
    "clarify": "Clarify",
    "respond": "Respond",
    "response": "Respond",
    "ask for clarification": "Clarify",
    "clarification": "Clarify",
}
_TAG = re.compile(r"<\s*(clarify|respond)\s*>", re.IGNORECASE)


def decision_of(text: Any) -> str | None:
    """``Clarify`` / ``Respond`` from a decision as written, else None.

    As written: "<Clarify>", "respond", "Ask for clarification".
    """
    if not isinstance(text, str):
        return None
    key = text.strip().strip("<>").strip().lower()
    return _DECISIONS.get(key)


def plain_decision(prediction_fields: Mapping[str, Any], response: str) -> str | None:
    """The decision a prediction states plainly; None when it does not say.

    Its ``decision`` field, or exactly one kind of ``<Clarify>`` / ``<Respond>`` tag in the
    response.
    """
    stated = decision_of(prediction_fields.get("decision"))
    if stated is not None:
        return stated
    tags = {m.lower() for m in _TAG.findall(response)}
    if len(tags) == 1:
        return _DECISIONS[tags.pop()]
    return None


# The MMMT goal facts as checklist points (``checklist=True``): each missing fact asked for,
# each known fact kept; their weights (the missing ones count more: they are the turn's task).
MISSING_POINT = "Asks the grower for, or otherwise accounts for, this missing information: {}"
KNOWN_POINT = "Stays consistent with this fact already known (never contradicts or re-asks it): {}"
MISSING_WEIGHT, KNOWN_WEIGHT = 5, 3
CHECKLIST_QUESTION = (
    "The conversation so far between a grower (user) and an agricultural expert:\n{}\n"
    "What should the expert say next: ask for what is missing, or respond?"
)


def goal_checklist(known: Sequence[str], missing: Sequence[str]) -> list[dict[str, Any]]:
    """An MMMT item's goal facts as checklist points: the missing ones first, then the known.

    Args:
        known: The facts already known from the dialogue (``known_goal``).
        missing: The information still missing (``missing_goal``).

    Returns:
        One point per fact (``criterion``, ``points``, ``tag``): p1..pM the missing facts
        (5 points, essential), then the known ones (3 points, important).
    """
    return [
        *({"criterion": MISSING_POINT.format(g), "points": MISSING_WEIGHT, "tag": "essential"}
          for g in missing),
        *({"criterion": KNOWN_POINT.format(g), "points": KNOWN_WEIGHT, "tag": "important"}
          for g in known),
    ]  # fmt: skip


def evaluate_mmmt(
    data: str | Path,
    predictions: str | Path,
    *,
    judge: Judge,
    limit: int | None = None,
    unscored: UnscoredPolicy = "exclude",
    checklist: bool = False,
) -> BenchReport:
    """MIRAGE-MMMT: decision accuracy, goal scores, spurious and perfect shares.

    With ``checklist`` (the decomp file's goals), each answered item is also judged on its goal
    facts as a checklist (`goal_checklist`, rubric ``checklist``: each point met or not), an
    added view beside the paper's metrics: the share of the missing facts the turn asks for,
    the share of known facts it keeps, and the checklist's score (HealthBench's rule).
    """
    rows = read_records(data, "MIRAGE MMMT data")
    has_goals = ["known_goal" in r and "missing_goal" in r for _, r in rows]
    if any(has_goals) and not all(has_goals):
        n = rows[has_goals.index(False)][0]
        raise InputError(
            f"{data} row {n}: no known_goal/missing_goal, which other rows have "
            "(a mix of the direct and decomp files?)",
            field="known_goal",
        )
    goals = all(has_goals)
    if checklist and not goals:
        raise InputError(
            f"{data}: the checklist view needs the goal facts (known_goal / missing_goal): use "
            "the decomp file",
            field="checklist",
        )
    items: list[tuple[Item, str]] = []
    for n, r in rows:
        require(data, n, r, ("id", "dialog_context", "decision", "utterance"), "MIRAGE MMMT data")
        gold = decision_of(r["decision"])
        if gold is None:
            raise InputError(
                f"{data} row {n}: decision must be <Clarify> or <Respond>, got "
                f"{r['decision']!r:.40}",
                field="decision",
            )
        extra = {
            "decision": f"<{gold}>",
            "known_goal": _goal_list(data, n, r.get("known_goal"), "known_goal"),
            "missing_goal": _goal_list(data, n, r.get("missing_goal"), "missing_goal"),
        }
        items.append(
            (
                Item(
                    id=text_id(data, n, r["id"]),
                    context=str(r["dialog_context"]),
                    reference=str(r["utterance"]),
                    images=image_paths(data, r.get("images")),
                    extra=extra,
                ),
                gold,
            )
        )
    unique_ids(data, [(n, it.id) for (n, _), (it, _) in zip(rows, items)])
    preds = read_model_answers(predictions, [it.id for it, _ in items], data_path=data)
    n_all = len(items)
    items = limited(items, limit)
    rubric = load_rubric("mirage-mmmt")
    answered = [
        it.model_copy(update={"response": preds.get(it.id).response})  # type: ignore[union-attr]
        for it, _ in items
        if preds.get(it.id) is not None
    ]
    judged = judge("mirage-mmmt", rubric, answered) if answered else Judged({})
    ids = [it.id for it, _ in items]
    unanswered = set(ids) - {it.id for it in answered}
    plain = {
        it.id: plain_decision(preds.get(it.id).fields, preds.get(it.id).response or "")  # type: ignore[union-attr]
        for it, _ in items
        if it.id not in unanswered
    }
    gold_of = {it.id: g for it, g in items}

    def metrics_for(judge_name: str | None) -> dict[str, Metric]:
        def values(c: str) -> list[float | Missing]:
            return item_values(ids, unanswered, judged, c, judge=judge_name, rubric=rubric)

        judged_decision = values("decision_accuracy")
        decision = [
            float(plain[i] == gold_of[i]) if plain.get(i) is not None else v
            for i, v in zip(ids, judged_decision)
        ]
        out = {
            "decision_accuracy": mean_metric(
                decision, kind="share", unscored=unscored, wrong="wrong"
            )
        }
        no_goals = "the direct file has no known_goal/missing_goal; use decomp_test.json"
        known, missing, relevance = (
            values(c) for c in ("known_accuracy", "missing_coverage", "utterance_goal_relevance")
        )
        spurious = values("spurious")
        out["known_accuracy"] = (
            mean_metric(known, unscored=unscored) if goals else undefined(no_goals)
        )
        out["missing_coverage"] = (
            mean_metric(missing, unscored=unscored) if goals else undefined(no_goals)
        )
        out["utterance_goal_relevance"] = mean_metric(relevance, unscored=unscored)
        out["spurious"] = mean_metric(
            [NOT_APPLICABLE if v is UNANSWERED else v for v in spurious],
            kind="share",
            unscored=unscored,
        )
        if unanswered:
            out["spurious"] = _with_note(
                out["spurious"], f"{len(unanswered)} unanswered left out (nothing asserted)"
            )
        perfect = [_perfect(k, m, r, s) for k, m, r, s in zip(known, missing, relevance, spurious)]
        out["perfect"] = (
            mean_metric(perfect, kind="share", unscored=unscored, wrong="0")
            if goals
            else undefined(no_goals, "share")
        )
        return out

    points = _goal_points([it for it, _ in items], answered) if checklist else None
    metrics = metrics_for(None)
    judges = {j: metrics_for(j) for j in judged.judges()}
    tables: list[Table] = []
    if points is not None:
        point_items, kinds = points
        judged_points = (
            judge("mirage-mmmt-checklist", load_rubric("checklist"), point_items)
            if point_items
            else Judged({})
        )
        view = _checklist_view(ids, unanswered, judged_points, kinds, None, unscored)
        metrics.update(view)
        for j in judged_points.judges():
            if j in judges:
                judges[j].update(
                    _checklist_view(ids, unanswered, judged_points, kinds, j, unscored)
                )
        names = {
            "missing_points": "Missing asked (%)",
            "known_points": "Known kept (%)",
            "checklist_score": "Checklist score",
        }
        view_rows = [("jury", [view[k] for k in names])]
        view_rows += [
            (j, [m[k] for k in names]) for j, m in judges.items() if "checklist_score" in m
        ]
        tables.append(
            Table(
                "Goal facts as checklists (an added view, not the paper's)",
                list(names.values()),
                view_rows,
            )
        )
    columns = {
        "decision_accuracy": "Decision acc. (%)",
        "known_accuracy": "Known acc.",
        "missing_coverage": "Missing cov.",
        "utterance_goal_relevance": "Goal relevance",
        "spurious": "Spurious (%)",
        "perfect": "Perfect (%)",
    }
    rows_ = [("jury", [metrics[k] for k in columns])]
    rows_ += [(j, [m[k] for k in columns]) for j, m in judges.items()]
    notes = [
        "decomp file (goals read from known_goal / missing_goal)"
        if goals
        else "direct file: no gold goals, so known_accuracy, missing_coverage and perfect are "
        "not reported"
    ]
    if points is not None:
        notes.append(
            "checklist view (added, not the paper's metric): each missing fact a point "
            f"({MISSING_WEIGHT}: asked for) and each known fact a point ({KNOWN_WEIGHT}: kept), "
            "judged met or not with the checklist rubric; missing_points is the share of the "
            "missing facts asked for (the paper's missing_coverage is one 0-4 judgment of the "
            "same), known_points the share of known facts kept, checklist_score HealthBench's "
            "rule over both; items without missing facts are not in missing_points"
        )
    n_plain = sum(1 for v in plain.values() if v is not None)
    notes.append(
        f"decisions: {n_plain} read from the predictions, {len(plain) - n_plain} "
        "judged (decision_accuracy of the jury; a split jury gives a fraction)"
    )
    if limit is not None and limit < n_all:
        notes.append(f"trial run: the first {len(items)} of {n_all} items")
    reasons = unscored_reasons(ids, unanswered, judged)
    if reasons:
        notes.append("unscored verdicts, e.g. " + "; ".join(reasons))
    unscored_ids = [i for i in ids if i not in unanswered and not _fully_scored(judged, i)]
    return BenchReport(
        benchmark="mirage-mmmt",
        title=f"MIRAGE-MMMT ({len(items)} items, {'decomp' if goals else 'direct'})",
        # Only read from here on, so these Metric-only dicts stand for Metrics (dict is invariant).
        metrics=cast(Metrics, metrics),
        counts={
            "items": len(items),
            "answered": len(answered),
            "clarify": sum(1 for _, g in items if g == "Clarify"),
            "respond": sum(1 for _, g in items if g == "Respond"),
            "decisions_from_predictions": n_plain,
            "decisions_judged": len(plain) - n_plain,
            "unanswered": len(unanswered),
            "unscored": len(unscored_ids),
        },
        judges=cast("dict[str, Metrics]", judges),
        lists={"unanswered_ids": sorted(unanswered), "unscored_ids": unscored_ids},
        tables=[Table("MIRAGE-MMMT", list(columns.values()), rows_), *tables],
        notes=notes,
        artifacts={
            "items": [
                {
                    **_item_row("mmmt", i, unanswered, judged),
                    "gold": gold_of[i],
                    "decision": plain.get(i),
                }
                for i in ids
            ]
        },
    )


def _goal_points(
    items: Sequence[Item], answered: Sequence[Item]
) -> tuple[list[Item], dict[str, tuple[list[str], list[str]]]]:
    """The answered items with their goal facts as checklists, and every item's point keys.

    The keys are (missing points, known points); an item without any goal fact has no
    checklist and is not judged on one.
    """
    kinds: dict[str, tuple[list[str], list[str]]] = {}
    for it in items:
        known, missing = it.extra["known_goal"], it.extra["missing_goal"]
        if known or missing:
            keys = [f"p{k + 1}" for k in range(len(missing) + len(known))]
            kinds[it.id] = (keys[: len(missing)], keys[len(missing) :])
    out: list[Item] = []
    for it in answered:
        if it.id not in kinds:
            continue
        known, missing = it.extra["known_goal"], it.extra["missing_goal"]
        out.append(
            Item(
                id=it.id,
                question=CHECKLIST_QUESTION.format(it.context),
                response=it.response,
                reference=it.reference,
                images=it.images,
                checklist=read_points(goal_checklist(known, missing), it.id),
            )
        )
    return out, kinds


def _checklist_view(
    ids: Sequence[str],
    unanswered: set[str],
    judged: Judged,
    kinds: Mapping[str, tuple[list[str], list[str]]],
    judge_name: str | None,
    unscored: UnscoredPolicy,
) -> dict[str, Metric]:
    """The checklist view's metrics, for the jury (``judge_name`` None) or one judge."""
    missing: list[float | Missing] = []
    known: list[float | Missing] = []
    score: list[float | Missing] = []
    for i in ids:
        if i not in kinds:  # no goal facts: nothing to check
            missing.append(NOT_APPLICABLE)
            known.append(NOT_APPLICABLE)
            score.append(NOT_APPLICABLE)
            continue
        want_missing, want_known = kinds[i]
        if i in unanswered:  # counted as the paper's metrics count it (0), where it applies
            missing.append(UNANSWERED if want_missing else NOT_APPLICABLE)
            known.append(UNANSWERED if want_known else NOT_APPLICABLE)
            score.append(UNANSWERED)
            continue
        record = judged.records.get(i)
        met = _met(record, judge_name)
        missing.append(_share(met, want_missing))
        known.append(_share(met, want_known))
        if judge_name is None:
            value = None if record is None else record.scores.get("score")
            score.append(UNSCORED if value is None else float(value))
        else:
            score.append(_points_score(met, want_missing, want_known))
    return {
        "missing_points": mean_metric(missing, kind="share", unscored=unscored),
        "known_points": mean_metric(known, kind="share", unscored=unscored),
        "checklist_score": mean_metric(score, unscored=unscored, digits=4),
    }


def _met(record: Any, judge_name: str | None) -> dict[str, float | None]:
    """Each point's met value: the jury's (its scores) or one judge's vote."""
    if record is None:
        return {}
    if judge_name is None:
        return {k: v for k, v in record.scores.items() if k != "score"}
    return {v.criterion: v.score for v in record.votes if v.judge == judge_name}


def _share(met: Mapping[str, float | None], keys: Sequence[str]) -> float | Missing:
    """The mean met value over ``keys``: NOT_APPLICABLE without keys, UNSCORED if one has none."""
    if not keys:
        return NOT_APPLICABLE
    values = [met.get(k) for k in keys]
    if any(v is None for v in values):
        return UNSCORED
    return sum(float(v) for v in values if v is not None) / len(keys)


def _points_score(
    met: Mapping[str, float | None], missing: Sequence[str], known: Sequence[str]
) -> float | Missing:
    """HealthBench's rule on one judge's votes (every point positive here)."""
    weights = {**dict.fromkeys(missing, MISSING_WEIGHT), **dict.fromkeys(known, KNOWN_WEIGHT)}
    values = {k: met.get(k) for k in weights}
    if any(v is None for v in values.values()):
        return UNSCORED
    earned = sum(weights[k] * float(v) for k, v in values.items() if v is not None)
    return min(max(earned / sum(weights.values()), 0.0), 1.0)


def _goal_list(path: str | Path, n: int, value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, Mapping):
        return [f"{k}: {v}" for k, v in value.items()]
    raise InputError(
        f"{path} row {n}: {name} must be a list of facts, got {value!r:.40}", field=name
    )


def _perfect(*values: float | Missing) -> float | Missing:
    known, missing, relevance, spurious = values
    if known is UNANSWERED:
        return UNANSWERED
    if any(v is UNSCORED for v in values):
        return UNSCORED
    return float(known == 4 and missing == 4 and relevance == 4 and spurious == 0)


def _with_note(metric: Metric, note: str) -> Metric:
    counted = "; ".join(p for p in (metric.counted, note) if p)
    return dataclasses.replace(metric, counted=counted)
