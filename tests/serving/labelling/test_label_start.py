"""`judged_items` and `start_session`: the session ``jurybox label`` serves, made from Python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jurybox.rubrics.errors import InputError
from jurybox.serving.labelling.start import start_session
from jurybox.serving.runs.inputs import judged_items

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _verdicts(tmp_path: Path) -> tuple[Path, Path]:
    """Two example items with verdicts of the general rubric, one item without."""
    preds = tmp_path / "p.jsonl"
    rows = [
        {"id": "a", "question": "Q?", "response": "An answer.", "reference": "R."},
        {"id": "b", "question": "Q2?", "response": "Another.", "reference": "R2."},
        {"id": "c", "question": "Q3?", "response": "Unjudged.", "reference": "R3."},
    ]
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    verdicts = tmp_path / "v.jsonl"
    records = [
        {
            "id": i,
            "status": "scored",
            "rubric": "mirage-mg",
            "jury": "sim",
            "provenance": "sim",
            "scores": {"accuracy": 3.0},
            "votes": [{"judge": "j", "criterion": "accuracy", "score": 3.0}],
        }
        for i in ("a", "b")
    ]
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in records))
    return preds, verdicts


def test_a_session_over_the_judged_items_offers_them_and_appends_labels(tmp_path):
    preds, verdicts = _verdicts(tmp_path)
    judged = judged_items(preds, verdicts)
    assert list(judged.items) == ["a", "b"] and judged.rubric.name == "mirage-mg"
    assert any("1 item(s)" in w and "have no verdict" in w for w in judged.warnings)
    session = start_session(judged.items, judged.verdicts, judged.rubric, tmp_path / "h.jsonl")
    try:
        offered = session.next("ann")
        assert offered is not None and offered["id"] in {"a", "b"}
    finally:
        session.store.close()


def test_options_the_goal_does_not_take_are_refused_and_the_file_closed(tmp_path):
    preds, verdicts = _verdicts(tmp_path)
    judged = judged_items(preds, verdicts)
    with pytest.raises(InputError, match="--design is for goal benchmark-mean"):
        start_session(
            judged.items, judged.verdicts, judged.rubric, tmp_path / "h.jsonl", design="uniform"
        )
    with pytest.raises(InputError, match="no item of"):
        judged_items(EXAMPLES / "mirage_mg.jsonl", verdicts)
