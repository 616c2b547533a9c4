"""The verdict cache and ``--estimate`` with the tiny judges' recorded answers (the replay jury:
their real tokenizers and prompts, no model's time): the estimate's counts equal
what the run then does (prompt tokens counted again through the loaded judges' own prompts and
tokenizers), and a rerun whose items are all cached loads no model and writes identical
records."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from jurybox.judges import Jury
from jurybox.judges.cache import VerdictCache
from jurybox.judges.judging import render_requests
from jurybox.rubrics import load_rubric
from jurybox.serving.cli import app
from jurybox.serving.runs.estimate import estimate
from jurybox.serving.runs.local import judge_file
from jurybox.serving.runs.predictions import read_predictions

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PREDICTIONS = EXAMPLES / "mirage_mg.jsonl"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_estimate_then_run_then_a_cached_rerun(replay_tiny, replay_jury, tmp_path, monkeypatch):
    jury = replay_tiny
    monkeypatch.setenv("JURYBOX_VERDICT_CACHE", str(tmp_path / "verdicts.sqlite"))
    rubric = load_rubric("mirage-mg")
    first = tmp_path / "first.jsonl"
    cache = VerdictCache()
    est = estimate(PREDICTIONS, rubric, jury.spec, first, cache=cache)
    assert (est.items, est.to_judge, est.cached, est.already_done) == (6, 6, 0, 0)

    # The prompts the loaded judges build, tokenized by their own tokenizers.
    requests = render_requests(rubric, read_predictions(PREDICTIONS, rubric).items)
    for judge in est.judges:
        backend = jury._backends[judge.name]
        texts = [backend.prompt_text(r.messages) for r in requests.requests]
        tokens = sum(
            len(backend.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts
        )
        assert judge.prompt_tokens == tokens and judge.tokens_by.startswith("tokenizer of")
        assert judge.calls == len(requests.requests)

    report = judge_file(PREDICTIONS, rubric, Jury(jury.spec, jury._backends, cache=cache), first)
    records = lines(first)
    assert report.judged == est.to_judge
    n_criteria = len(rubric.criteria)
    for judge in est.judges:  # one vote per criterion of every call made
        votes = sum(1 for r in records for v in r["votes"] if v["judge"] == judge.name)
        assert votes == judge.calls * n_criteria // len(rubric.calls())

    again = estimate(PREDICTIONS, rubric, jury.spec, tmp_path / "second.jsonl", cache=cache)
    assert (again.cached, again.to_judge) == (6, 0) and again.judges[0].calls == 0
    cache.close()

    # A rerun into another file: every item cached, so no model may load.
    def no_model(spec):
        raise AssertionError(f"a model was loaded for {spec.name}")

    monkeypatch.setattr("jurybox.judges.jury.make_backend", no_model)
    second = tmp_path / "second.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "judge",
            str(PREDICTIONS),
            "-r",
            "mirage-mg",
            "-j",
            str(replay_jury),
            "-o",
            str(second),
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "verdict cache: 6 of 6 item(s)" in result.output
    assert lines(second) == records  # identical records, latencies included
    # --no-cache judges for real (and here cannot: no model may load).
    result = CliRunner().invoke(
        app,
        [
            "judge",
            str(PREDICTIONS),
            "-r",
            "mirage-mg",
            "-j",
            str(replay_jury),
            "-o",
            str(tmp_path / "third.jsonl"),
            "-q",
            "--no-cache",
        ],
    )
    assert result.exit_code != 0 and "a model was loaded" in str(result.exception or result.output)
