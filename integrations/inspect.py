"""A jury as an Inspect AI scorer.

```python
from inspect_ai import Task, task
from jurybox.integrations.inspect import jury_scorer

@task
def agronomy():
    return Task(dataset=..., solver=generate(),
                scorer=jury_scorer(rubric="mirage-mg", url="http://127.0.0.1:8000"))
```

Each sample's score holds every criterion of the rubric and its formula (a dict), each with
Inspect's mean and stderr, on [0, 1] by default as every jurybox reward (``scale="raw"``: the
rubric's own scales); its explanation says what the judges gave (each judge's scores) or why
there is no score (the judges' own errors first, e.g. a prompt over their token limit); its
metadata holds the verdict (votes, reasons, provenance). The question is the sample's input,
the response the model's completion, the reference the sample's target (when it has one). A
criterion the jury could not score is NaN, which Inspect counts as unscored and leaves out of
the metrics: never a 0.

With a checklist rubric (`jurybox.rubrics.checklist`), each sample's own checklist is its
``metadata["checklist"]`` (a list of points, or that list as a JSON string); the score holds the
item's score (HealthBench's, by default ``score``; a rubric with ``score: implicit`` its own
criteria) and the metadata, beside the verdict, each point's decision (``points``: its text,
points, tag and the jury's met value) and the points dropout left out (``dropped``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from jurybox.rubrics import Rubric
from jurybox.rubrics.reward import RewardSpec, Scale

from .checklists import checklist_from, score_names
from .core import JuryRewards, explain


@scorer(metrics={"*": [mean(), stderr()]}, name="jury")
def jury_scorer(
    rubric: str | Rubric,
    url: str | None = None,
    jury: Any = None,
    token: str | None = None,
    token_env: str = "JURYBOX_TOKEN",
    calibrated: bool = False,
    scale: Scale = "unit",
    cache: bool = True,
    fields: Mapping[str, str] | None = None,
    checklist_key: str = "checklist",
) -> Any:
    """An Inspect scorer judging each sample with the jury.

    Every score is on [0, 1] by default (``scale="unit"``, the default of every jurybox reward).

    Args:
        rubric: The rubric, by name or file, or one loaded.
        url: A running ``jurybox serve``'s URL (give this or ``jury``).
        jury: An in-process jury: a name, a jury file or a loaded Jury.
        token: The service's token.
        token_env: The environment variable the token is read from when ``token`` is not given.
        calibrated: Score with the calibrated values of a service or run with a calibration map.
        scale: ``"unit"`` (the default) or ``"raw"``, which keeps the rubric's scales.
        cache: An in-process jury loaded here keeps its verdict cache on unless ``cache=False``.
        fields: Maps item fields to sample metadata keys (e.g. ``{"context": "dialogue"}``).
        checklist_key: With a checklist rubric, the metadata key of each sample's checklist.

    Returns:
        The scorer: each sample's score holds every criterion's value (and the formula's), its
        explanation the verdict in a line, its metadata the verdict record.

    Raises:
        InputError: Both or neither of ``url`` and ``jury``, a rubric that cannot be loaded, or
            options that do not fit it. When scoring, a sample without the question or reference the
            rubric needs (naming the sample).
        ExecutionError: The service cannot be reached, or (when scoring) the jury could not judge a
            sample.
    """
    rewards = JuryRewards(
        rubric,
        url=url,
        jury=jury,
        token=token,
        token_env=token_env,
        cache=cache,
        reward=RewardSpec(
            calibrated=calibrated, scale=scale, unscored="none", score=_first_score(rubric)
        ),
        checklist_column=checklist_key,
    )
    names = score_names(rewards.rubric)
    per_key = {n: rewards.spec.model_copy(update={"score": n}).bind(rewards.rubric) for n in names}
    extra = dict(fields or {})

    async def score(state: TaskState, target: Target) -> Score:
        values: dict[str, Any] = {"question": state.input_text, "response": state.output.completion}
        if target.text:
            values["reference"] = target.text
        for item_field, key in extra.items():
            if key in (state.metadata or {}):
                values[item_field] = str(state.metadata[key])
        sample = f"Inspect sample {state.sample_id}"
        values["checklist"] = checklist_from(
            rewards.rubric,
            state.metadata or {},
            checklist_key,
            sample,
            f"the sample's metadata[{checklist_key!r}]",
        )
        item = rewards.make_item(
            str(state.sample_id),
            values,
            sample,
            {"question": "the sample's input", "reference": "the sample's target"},
        )
        (record,) = await asyncio.to_thread(rewards.records, [item], [sample])
        rewards.log_unscored([record], [sample], list(per_key.values()))
        value = {n: _nan_if_none(reward.values([record])[0]) for n, reward in per_key.items()}
        return Score(
            value=value,
            answer=state.output.completion,
            explanation=explain(record),
            metadata=_metadata(record),
        )

    return score


def _first_score(rubric: str | Rubric) -> str:
    """Any score of the rubric (the scorer binds one reward per score; this one is checked)."""
    from jurybox.rubrics import load_rubric

    loaded = load_rubric(rubric) if isinstance(rubric, str) else rubric
    return score_names(loaded)[-1]


def _metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    """A score's metadata: the verdict; a checklist's, each point's decision and those dropped."""
    out: dict[str, Any] = {"verdict": record}
    if record.get("points") is not None:
        out["points"] = record["points"]
        out["dropped"] = list(record.get("dropped") or [])
    return out


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value
