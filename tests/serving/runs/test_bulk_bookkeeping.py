"""The local engine's bookkeeping across runs on one --out: what a run counts as its items, and
which records its summary covers. A scripted backend stands in for the judge (it scores an
item by a digit in its response, so a summary over the wrong items has the wrong mean); the
engine with real judges is tested in ``test_cli.py``."""

from __future__ import annotations

import json
import re

from judging_helpers import ACCURACY_PREFIX, one_criterion_rubric

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.protocol import Generation, TokenStep
from jurybox.serving.runs.local import judge_file

RUBRIC = one_criterion_rubric()
SPEC = JurySpec.model_validate({"name": "j", "judges": [{"name": "a", "model": "org/not-a-model"}]})


class ByDigit:
    """Scores each item with the digit its response ends with."""

    def generate(self, requests, cancelled=None):
        out = []
        for request in requests:
            prompt = " ".join(str(m["content"]) for m in request.messages)
            digit = re.search(r"\bs(\d)\b", prompt).group(1)
            steps = [
                TokenStep(0, ACCURACY_PREFIX, {ACCURACY_PREFIX: 0.0}),
                TokenStep(len(ACCURACY_PREFIX), digit, {digit: 0.0}),
                TokenStep(len(ACCURACY_PREFIX) + 1, "}", {"}": 0.0}),
            ]
            out.append(Generation(text=ACCURACY_PREFIX + digit + "}", steps=steps))
        return out

    def close(self) -> None:
        pass


def write(path, scores):
    path.write_text(
        "".join(
            json.dumps({"id": f"i{k}", "question": "q", "response": f"s{s}"}) + "\n"
            for k, s in scores.items()
        )
    )


def run(predictions, out, limit=None):
    return judge_file(predictions, RUBRIC, Jury(SPEC, {"a": ByDigit()}), out, limit=limit)


def test_the_summary_covers_this_run_s_items_only(tmp_path):
    preds, out = tmp_path / "p.jsonl", tmp_path / "o.jsonl"
    write(preds, {0: 1, 1: 1, 2: 5, 3: 5, 4: 5})
    first = run(preds, out)
    assert (first.judged, first.summary.items) == (5, 5)
    assert first.summary.criteria[0].mean == 3.4
    # A smaller --limit on the same output: the three later items stay written, out of the summary.
    limited = run(preds, out, limit=2)
    assert (limited.total_items, limited.already_done, limited.judged) == (2, 2, 0)
    assert limited.summary.items == 2 and limited.summary.criteria[0].mean == 1.0
    # Rows removed and one added: the summary is of the file as it is now.
    write(preds, {0: 1, 2: 5, 5: 3})
    changed = run(preds, out)
    assert (changed.total_items, changed.already_done, changed.judged) == (3, 2, 1)
    assert changed.summary.items == 3 and changed.summary.criteria[0].mean == 3.0
    assert len(out.read_text().splitlines()) == 6  # nothing rewritten, nothing lost


def test_length_controlled_scores_in_the_run_s_summary(tmp_path):
    """`judge --length-control` (the run's option): the summary's controlled score is the one
    length_control gives on the written scores and the responses' word counts, fitted on the
    human labels when given; too few items is a note, and the verdicts are written anyway."""
    import numpy as np
    import pytest

    from jurybox.calibration.audits.length_control import length_control

    rng = np.random.default_rng(2)
    digits = rng.integers(1, 6, 40)
    words = (digits * 6 + rng.integers(0, 20, 40)).astype(int)  # the longer, the higher scored
    preds, out = tmp_path / "p.jsonl", tmp_path / "o.jsonl"
    preds.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"i{k}",
                    "question": "q",
                    "response": " ".join([f"s{d}", *["word"] * (n - 1)]),
                }
            )
            + "\n"
            for k, (d, n) in enumerate(zip(digits, words))
        )
    )
    human = np.clip(digits - (words > 25), 1, 5)  # the humans like length less than the judge
    labels = tmp_path / "h.jsonl"
    labels.write_text(
        "".join(
            json.dumps({"id": f"i{k}", "rater": "r", "accuracy": int(h)}) + "\n"
            for k, h in enumerate(human)
        )
    )
    report = judge_file(
        preds, RUBRIC, Jury(SPEC, {"a": ByDigit()}), out, length_control=True, human=labels
    )
    (row,) = report.summary.length_control
    want = length_control("accuracy", digits, words, human)
    assert row["criterion"] == "accuracy" and row["n"] == 40
    assert row["slope_per_log_length"] == pytest.approx(want.slope_per_log_length)
    assert row["controlled_mean"] == pytest.approx(want.controlled_mean)
    assert row["raw_mean"] == pytest.approx(report.summary.criteria[0].mean)
    assert row["cv_gain_ci"] == pytest.approx(want.cv_gain_ci) and row["folds"] == 5
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["summary"]["length_control"] == report.summary.length_control
    # Without labels: the scores' own slope, said to assume quality ignores length.
    bare = judge_file(preds, RUBRIC, Jury(SPEC, {"a": ByDigit()}), out, length_control=True)
    (row,) = bare.summary.length_control
    assert row["raises_agreement"] is None and "assumes quality" in row["fitted_on"]
    assert row["slope_per_log_length"] == pytest.approx(np.polyfit(np.log1p(words), digits, 1)[0])
    # Too few items for a fit: the run ends as usual, saying why there is no control.
    few = judge_file(
        preds,
        RUBRIC,
        Jury(SPEC, {"a": ByDigit()}),
        tmp_path / "few.jsonl",
        length_control=True,
        limit=4,
    )
    assert few.summary.length_control is None and few.judged == 4
    assert any("no length-controlled scores" in n and "needs 10" in n for n in few.notes)
