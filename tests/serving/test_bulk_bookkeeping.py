"""The local engine's bookkeeping across runs on one --out: what a run counts as its items, and
which records its summary covers. A scripted backend stands in for the judge (it scores an
item by a digit in its response, so a summary over the wrong items has the wrong mean); the
engine with real judges is tested in ``test_cli.py``."""

from __future__ import annotations

import json
import re

from judging_helpers import ACCURACY_PREFIX, one_criterion_rubric

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.base import Generation, TokenStep
from jurybox.serving.runs.local import judge_file

RUBRIC = one_criterion_rubric()
SPEC = JurySpec.model_validate({"name": "j", "judges": [{"name": "a", "model": "org/not-a-model"}]})


class ByDigit:
    """Scores each item with the digit its response ends with."""

    def generate(self, requests):
        out = []
        for request in requests:
            prompt = " ".join(str(m["content"]) for m in request.messages)
            digit = re.search(r"\bs(\d)\b", prompt).group(1)
            steps = [TokenStep(0, ACCURACY_PREFIX, {ACCURACY_PREFIX: 0.0}),
                     TokenStep(len(ACCURACY_PREFIX), digit, {digit: 0.0}),
                     TokenStep(len(ACCURACY_PREFIX) + 1, "}", {"}": 0.0})]
            out.append(Generation(text=ACCURACY_PREFIX + digit + "}", steps=steps))
        return out

    def close(self) -> None:
        pass


def write(path, scores):
    path.write_text("".join(json.dumps({"id": f"i{k}", "question": "q", "response": f"s{s}"}) + "\n"
                            for k, s in scores.items()))


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
