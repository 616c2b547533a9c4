"""Length-controlled jury scores for a judged file, from the answers' lengths.

Used by ``jurybox judge --length-control`` (in the run's summary) and ``jurybox agree
--length-control``: the answers' lengths are read from the predictions that were judged, the
correction itself is in `jurybox.calibration.audits.length_control`.

Lengths are in words (every judge's tokenizer would give a different length per judge, and the
correction is the jury's). The answers are controlled to the reference answers' median length
when the items have references, so systems judged on the same items are controlled alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from jurybox.calibration import HumanLabels, JudgeOutput
from jurybox.calibration.audits.length_control import LengthControl, length_control
from jurybox.calibration.data.joined import Joined, join
from jurybox.rubrics import Rubric
from jurybox.rubrics.errors import InputError
from jurybox.serving.runs.predictions import read_predictions


def answer_lengths(
    predictions: str | Path, rubric: Rubric, mapping: Mapping[str, str] | None = None
) -> tuple[dict[str, float], float | None]:
    """Each answer's length in words in ``predictions``, and the length to control to.

    Returns:
        Item id -> length, and the length to control to: the reference answers' median (None
            when the items have no reference).
    """
    items = read_predictions(predictions, rubric, mapping, allow_empty=True).items
    lengths = {it.id: float(len(str(it.response or "").split())) for it in items}
    references = [len(str(it.reference).split()) for it in items if it.reference]
    return lengths, (float(np.median(references)) if references else None)


def length_controls(
    predictions: str | Path,
    output: JudgeOutput,
    rubric: Rubric,
    *,
    human: HumanLabels | Joined | str | Path | None = None,
    mapping: Mapping[str, str] | None = None,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[LengthControl]:
    """Per criterion, the length-controlled jury score of ``output``.

    ``output`` holds the verdicts of the items in ``predictions``. Where labels are given, the
    control is fitted on the judges' errors against ``human`` labels (a file, or labels already
    joined with ``output``), with whether it raises agreement under cross-validation; else on
    the scores themselves (which assumes quality does not grow with length, as each result
    says).

    Raises:
        InputError: The rubric is pairwise.
    """
    if rubric.pairwise:
        raise InputError(
            "length control is for scored answers, not pairwise verdicts (a "
            "pairwise judge's length preference is in `jurybox audit`)"
        )
    lengths, centre = answer_lengths(predictions, rubric, mapping)
    ids = output.ids
    length = np.array([lengths.get(i, np.nan) for i in ids], dtype=float)
    common: dict[str, Any] = {
        "centre_length": centre,
        "n_resamples": resamples,
        "confidence": confidence,
        "seed": seed,
    }
    if human is None:
        return [
            length_control(name, output.jury_values(name), length, **common)
            for name in output.criteria
        ]
    joined = human if isinstance(human, Joined) else join(human, output, scales=rubric)
    position = {i: k for k, i in enumerate(ids)}
    out = []
    for name, data in joined.criteria.items():
        labels = np.full(len(ids), np.nan)
        for item, value in zip(data.ids, data.human_mean):
            labels[position[item]] = value
        out.append(length_control(name, output.jury_values(name), length, labels, **common))
    return out
