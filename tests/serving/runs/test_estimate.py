"""``jurybox judge --estimate`` without models: counts, what is already done or cached, the
approximation when a judge has no local tokenizer, and a cascade's expected calls. The counts
against a real run of the tiny judges are in ``test_cache_estimate.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jurybox.judges import JurySpec
from jurybox.judges.cache import VerdictCache
from jurybox.rubrics import input_hash, load_rubric
from jurybox.serving.cli import app
from jurybox.serving.runs.estimate import estimate

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def jury(**extra) -> JurySpec:
    return JurySpec.model_validate(
        {
            "name": "remote",
            "judges": [
                {
                    "name": "api",
                    "model": "some-model",
                    "backend": "openai",
                    "sampling": {"max_tokens": 100},
                },
                {
                    "name": "thinker",
                    "model": "org/not-here",
                    "sampling": {"max_tokens": 50},
                    "reasoning": {"mode": "think", "budget_tokens": 1000},
                },
            ],
            **extra,
        }
    )


def test_counts_calls_tokens_and_budget_without_a_model():
    rubric = load_rubric("mirage-mg")
    est = estimate(EXAMPLES / "mirage_mg.jsonl", rubric, jury(), None)
    assert (est.items, est.to_judge, est.already_done, est.cached) == (6, 6, 0, 0)
    api, thinker = est.judges
    assert api.calls == thinker.calls == 6 * len(rubric.calls())
    assert api.output_budget == api.calls * 100
    assert thinker.output_budget == thinker.calls * 1050  # answer plus thinking budget
    assert "server tokenizes" in api.tokens_by and "no local tokenizer" in thinker.tokens_by
    assert api.prompt_tokens > 6 * 200  # the mirage-mg prompt is several hundred tokens


def test_items_done_cached_and_rejected_are_left_out(tmp_path, monkeypatch):
    rubric = load_rubric("mirage-mg")
    rows = [json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "bad"}\n')
    spec = jury()
    from jurybox.judges import provenance

    prov = provenance(rubric, spec)
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": rows[0]["id"], "provenance": prov}) + "\n")
    cache = VerdictCache(tmp_path / "c.sqlite")
    from jurybox.serving.runs.predictions import read_predictions

    items = read_predictions(preds, rubric).items
    from jurybox.rubrics import Verdict  # a stored verdict by hand: no judging here

    verdict = Verdict(
        id=items[1].id,
        status="unscored",
        rubric=rubric.name,
        jury=spec.name,
        provenance=prov,
        scores={},
        criteria={},
        votes=[],
        reasons=["x"],
    )
    cache.put(prov, [(input_hash(items[1]), verdict)])
    est = estimate(preds, rubric, spec, out, cache=cache)
    assert (est.items, est.rejected_rows, est.already_done, est.cached, est.to_judge) == (
        6,
        1,
        1,
        1,
        4,
    )
    assert est.judges[0].calls == 4 * len(rubric.calls())
    cache.close()


def test_a_cascade_gives_expected_calls_per_stage():
    rubric = load_rubric("mirage-mg")
    spec = jury(
        stages=[
            {"judges": ["api"], "threshold": 0.9, "expected_reach": 1.0},
            {"judges": ["thinker"], "expected_reach": 0.25},
        ]
    )
    api, thinker = estimate(EXAMPLES / "mirage_mg.jsonl", rubric, spec, None).judges
    assert (api.stage, thinker.stage) == (1, 2)
    assert api.expected_calls is None and thinker.expected_calls == pytest.approx(
        thinker.calls * 0.25
    )


def test_the_cli_prints_the_estimate_and_writes_nothing(tmp_path):
    jury_file = tmp_path / "remote.yaml"
    import yaml

    jury_file.write_text(yaml.safe_dump(jury().model_dump(mode="json")))
    out = tmp_path / "never.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "judge",
            str(EXAMPLES / "mirage_mg.jsonl"),
            "-r",
            "mirage-mg",
            "-j",
            str(jury_file),
            "-o",
            str(out),
            "--estimate",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "6 to judge" in result.output and "nothing was judged or written" in result.output
    assert "api" in result.output and "thinker" in result.output
    assert not out.exists() and not Path(f"{out}.manifest.json").exists()
