r"""MicroVQA (biological microscopy VQA, 1,042 multiple-choice items).

Accuracy overall and per task, with the unparseable share.

Data: the items as a JSON list or JSONL (any format the row reader takes), one object per item:

* ``key_question``: the item id (predictions refer to it as ``id``);
* ``question`` (text), ``choices`` (a list of option texts, shown to the model numbered from 1);
* ``correct_index``: the correct option, **0-based** (option ``correct_index + 1`` in the prompt);
* ``task``: 1 = expert image understanding, 2 = hypothesis generation, 3 = experiment proposal;
  ``task_str`` (optional) names it;
* ``images_list``: the item's microscopy images (paths relative to the data file's folder): a judge
  that sees images is shown them when it reads an answer;
* other fields (``key_image``, ``correct_answer`` ...) are ignored.

Predictions: rows with ``id`` (= ``key_question``) and ``response`` (the model's full answer).

Scoring: the option a response commits to is read by `.extraction` (the last explicit answer;
"Answer: 3", "**(3)**", two-digit options, the option's text). A response with no explicit answer,
or one naming no option, is unparseable: wrong, and in the denominator, as is an item without a
prediction. With a jury, the ``mcq-extract`` rubric reads the unparseable responses; those numbers
are reported separately (``accuracy_with_fallback``).

Differences from the public evaluator (``microvqa/eval/eval.py``) and why:

* it takes the *first* match of ``answer is \*?\*?\(?([0-9])\)?``: a response that corrects itself
  is scored on its first answer; jurybox takes the last explicit answer;
* one digit, so "answer is (10)" reads as option 1; jurybox reads one- and two-digit labels;
* case-sensitive "answer is" and no colon: "Answer is (2)", "Answer: 3", "The answer is: 3",
  "**Final answer:** (3)" are all missed (counted wrong); jurybox reads them;
* its unparseable share counts predictions outside ``range(5)``, which is wrong for items with more
  than five options; jurybox counts responses whose answer names no option of the item.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jurybox.rubrics.errors import InputError

from . import mcq
from .data import (
    image_paths,
    limited,
    read_model_answers,
    read_records,
    require,
    text_id,
    unique_ids,
)
from .extraction import number_labels
from .judging import Judge
from .report import BenchReport

NAME = "microvqa"
TASKS = {
    "1": "expert image understanding",
    "2": "hypothesis generation",
    "3": "experiment proposal",
}


def read_items(path: str | Path) -> list[mcq.McqItem]:
    """The MicroVQA items of ``path``, options numbered from 1.

    An InputError naming the row for a missing field, bad choices, a ``correct_index`` out of range,
    a task not 1-3 or a repeated id.
    """
    items: list[mcq.McqItem] = []
    for n, r in read_records(path, "MicroVQA data"):
        require(
            path,
            n,
            r,
            ("key_question", "question", "choices", "correct_index", "task"),
            "MicroVQA data",
        )
        choices = r["choices"]
        if isinstance(choices, str) and choices.strip().startswith("["):
            try:
                choices = json.loads(choices)  # a list kept as JSON text (CSV)
            except ValueError:
                pass
        if (
            not isinstance(choices, list)
            or len(choices) < 2
            or not all(
                isinstance(c, (str, int, float)) and not isinstance(c, bool) for c in choices
            )
        ):
            raise InputError(
                f"{path} row {n}: choices must be a list of at least two option "
                f"texts, got {choices!r:.60}",
                field="choices",
            )
        gold = r["correct_index"]
        if (isinstance(gold, str) and gold.strip().isdigit()) or (
            isinstance(gold, float) and gold.is_integer()
        ):
            gold = int(gold)
        if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(choices):
            raise InputError(
                f"{path} row {n}: correct_index must be a 0-based index into the "
                f"{len(choices)} choices (0..{len(choices) - 1}), got {gold!r}",
                field="correct_index",
            )
        task = str(r["task"]).strip()
        task = task.removesuffix(".0")
        if task not in TASKS:
            raise InputError(
                f"{path} row {n}: task must be 1, 2 or 3 (expert image "
                f"understanding, hypothesis generation, experiment proposal), got "
                f"{r['task']!r}",
                field="task",
            )
        items.append(
            mcq.McqItem(
                id=text_id(path, n, r["key_question"], "key_question"),
                question=str(r["question"]),
                labels=number_labels(len(choices)),
                options=[str(c) for c in choices],
                gold=gold,
                group=task,
                row=n,
                extra={"task_str": r.get("task_str")},
                images=image_paths(path, r.get("images_list")),
            )
        )
    unique_ids(path, [(it.row, it.id) for it in items], "key_question")
    return items


def evaluate(
    data: str | Path,
    predictions: str | Path,
    *,
    judge: Judge | None = None,
    limit: int | None = None,
) -> BenchReport:
    """MicroVQA accuracy overall and per task; ``judge`` adds the judge fallback."""
    all_items = read_items(data)
    preds = read_model_answers(predictions, [it.id for it in all_items], data_path=data)
    items = limited(all_items, limit)
    outcomes = mcq.extract_all(items, preds)
    if judge is not None:
        mcq.judge_fallback(outcomes, preds, judge, "microvqa-extract")
    judged = judge is not None
    metrics: dict[str, Any] = mcq.mcq_metrics(outcomes, list(TASKS), judged, by="task")
    names = dict(TASKS)
    for it in items:  # the data's own task names, where it has them
        if it.extra.get("task_str"):
            names[it.group] = str(it.extra["task_str"])
    notes = []
    if limit is not None and limit < len(all_items):
        notes.append(f"trial run: the first {len(items)} of {len(all_items)} items")
    if judged:
        notes.append(
            "accuracy_with_fallback: the jury (rubric mcq-extract) read the answers of "
            "unparseable responses; the headline accuracy uses the extraction rules only"
        )
    return BenchReport(
        benchmark=NAME,
        title=f"MicroVQA ({len(items)} items)",
        metrics=metrics,
        counts=mcq.counts(outcomes),
        lists={
            "unanswered_ids": mcq.unanswered_ids(outcomes),
            "unparseable_ids": mcq.unparseable_ids(outcomes),
        },
        tables=[mcq.mcq_table("MicroVQA accuracy by task", metrics, names, judged, by="task")],
        notes=notes,
        extra={"task_names": {k: names[k] for k in TASKS}},
        artifacts={"items": mcq.item_rows(outcomes, "task")},
    )
