"""`compare_systems`: ``jurybox compare``'s win rates and ratings, called from Python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jurybox.rubrics.errors import InputError
from jurybox.serving.cli import app
from jurybox.serving.runs.compare import compare_systems


def _verdicts(tmp_path: Path) -> tuple[Path, Path]:
    """Pairwise verdicts of long against short (long wins 6, ties 2, loses 1; one unscored)."""
    winners = ["a"] * 6 + ["tie"] * 2 + ["b", None]
    verdicts, pairs = [], []
    for k, winner in enumerate(winners):
        share = {"a": 1.0, "b": 0.0, "tie": 0.5, None: None}[winner]
        verdicts.append(
            {
                "id": f"p{k}",
                "status": "scored" if winner else "unscored",
                "rubric": "pairwise",
                "jury": "sim",
                "provenance": "sim",
                "votes": [],
                "scores": {"better": share},
                "winner": winner,
                "p_a": None,
            }
        )
        pairs.append({"id": f"p{k}", "model_a": "long", "model_b": "short"})
    judged, predictions = tmp_path / "pw.jsonl", tmp_path / "pairs.jsonl"
    judged.write_text("".join(json.dumps(r) + "\n" for r in verdicts))
    predictions.write_text("".join(json.dumps(r) + "\n" for r in pairs))
    return judged, predictions


def test_compare_systems_gives_what_the_command_prints(tmp_path):
    judged, predictions = _verdicts(tmp_path)
    found = compare_systems([judged], predictions=[predictions], resamples=50)
    (rate,) = found.win_rates
    assert (rate.a, rate.b, rate.n) == ("long", "short", 9)
    assert rate.rate == pytest.approx(7 / 9)
    assert found.comparisons == 9 and found.ratings.systems == ["long", "short"]
    assert found.notes == [f"{judged}: 1 unscored verdict(s) without a winner left out"]
    result = CliRunner().invoke(
        app, ["compare", str(judged), "--predictions", str(predictions), "--json"]
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["comparisons"] == 9 and printed["warnings"] == found.notes
    assert printed["win_rates"] == [r.to_dict() for r in found.win_rates]


def test_one_pairs_file_per_verdict_file_and_a_manifest_otherwise(tmp_path):
    judged, predictions = _verdicts(tmp_path)
    with pytest.raises(InputError, match="2 --predictions for 1 verdict files"):
        compare_systems([judged], predictions=[predictions, predictions])
    with pytest.raises(InputError, match="no manifest names the pairs"):
        compare_systems([judged])
