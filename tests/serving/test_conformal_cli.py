"""Conformal intervals through the command line (#41, item 1): `jurybox calibrate --conformal`
fits a map on human labels and judged verdicts (here synthetic verdicts with score
distributions, 300 items, and then the replay jury's real recorded verdicts of the examples),
`jurybox judge --conformal MAP --route-width W` gives every verdict its intervals and routes the
wide ones to a human, counted in the summary. The statistics themselves are tested by
simulation in tests/calibration/maps/test_conformal.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from jurybox.serving.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CRITERIA = ("accuracy", "relevance", "completeness", "parsimony")


def synthetic(tmp_path: Path, n: int = 300) -> tuple[Path, Path]:
    """Verdicts whose judges' distributions are right about their own uncertainty (the human
    label is drawn from them), half of the items of task "a" and half of "b"; labels on all."""
    rng = np.random.default_rng(3)
    verdicts, labels = [], []
    for k in range(n):
        votes, scores, human = [], {}, {"id": f"q{k}", "rater": "h", "task": "ab"[k % 2]}
        for c in CRITERIA:
            centre, spread = rng.uniform(0, 4), rng.uniform(0.3, 1.5)
            w = np.exp(-0.5 * ((np.arange(5) - centre) / spread) ** 2)
            w /= w.sum()
            for judge in ("j1", "j2"):
                votes.append({"judge": judge, "criterion": c, "score": float(np.argmax(w)),
                              "distribution": {str(v): float(p) for v, p in enumerate(w)}})
            scores[c] = float(np.argmax(w))
            human[c] = int(rng.choice(5, p=w))
        scores["weighted_sum"] = None
        verdicts.append({"id": f"q{k}", "status": "scored", "rubric": "mirage-mg", "jury": "sim",
                         "provenance": "sim", "votes": votes, "scores": scores})
        labels.append(human)
    v, h = tmp_path / "v.jsonl", tmp_path / "h.jsonl"
    v.write_text("".join(json.dumps(r) + "\n" for r in verdicts))
    h.write_text("".join(json.dumps(r) + "\n" for r in labels))
    return v, h


def test_calibrate_conformal_reports_cross_validated_coverage_per_criterion_and_group(tmp_path):
    verdicts, human = synthetic(tmp_path)
    out = tmp_path / "conformal.yaml"
    got = CliRunner().invoke(app, ["calibrate", str(human), str(verdicts), "--conformal",
                                   "--alpha", "0.1", "--group", "task", "--out", str(out),
                                   "--json"])
    assert got.exit_code == 0, got.output
    fitted = json.loads(got.stdout)
    assert fitted["kind"] == "conformal" and fitted["provenance"] == "sim"
    for c in CRITERIA:
        row = fitted["report"][c]
        assert row["labelled"] == 300 and 0.85 <= row["cv_coverage"] <= 0.97, row
        assert set(row["cv_coverage_by_group"]) == {"a", "b"}
        assert set(fitted["criteria"][c]["groups"]) == {"a", "b"}
        assert 0 < row["mean_width"] < 4  # informative: not the whole scale
    text = CliRunner().invoke(app, ["calibrate", str(human), str(verdicts), "--conformal",
                                    "--out", str(tmp_path / "c.json")])
    assert text.exit_code == 0 and "cross-validated coverage" in text.stdout
    mixed = CliRunner().invoke(app, ["calibrate", str(human), str(verdicts), "--conformal",
                                     "--cascade", "--out", str(out)])
    assert mixed.exit_code == 2 and "give one" in mixed.output


def test_judge_with_a_conformal_map_gives_intervals_and_routes_the_wide_ones(replay_jury,
                                                                          tmp_path):
    runner = CliRunner()
    judged = tmp_path / "judged.jsonl"
    first = runner.invoke(app, ["judge", str(EXAMPLES / "mirage_mg.jsonl"), "--rubric",
                                "mirage-mg", "--jury", str(replay_jury), "--out", str(judged),
                                "--quiet", "--no-cache"])
    assert first.exit_code == 0, first.output
    conformal = tmp_path / "conformal.yaml"
    # Six labelled items: at alpha 0.5 the 4th smallest nonconformity is the threshold.
    fit = runner.invoke(app, ["calibrate", str(EXAMPLES / "mirage_mg.human.jsonl"), str(judged),
                              "--conformal", "--alpha", "0.5", "--out", str(conformal)])
    assert fit.exit_code == 0, fit.output
    routed = tmp_path / "routed.jsonl"
    run = runner.invoke(app, ["judge", str(EXAMPLES / "mirage_mg.jsonl"), "--rubric",
                              "mirage-mg", "--jury", str(replay_jury), "--out", str(routed),
                              "--no-cache", "--quiet", "--conformal", str(conformal),
                              "--route-width", "0"])
    assert run.exit_code == 0, run.output
    records = [json.loads(line) for line in routed.read_text().splitlines()]
    assert len(records) == 6
    n_routed = 0
    for r in records:
        assert set(r["interval"]) == set(CRITERIA)
        wide = [c for c, iv in r["interval"].items() if iv is None or iv[1] > iv[0]]
        if wide:
            n_routed += 1
            assert r["route"]["to"] == "human" and len(r["route"]["reasons"]) == len(wide)
        else:
            assert "route" not in r
        assert r["calibration"].startswith("conformal conformal.yaml:")
    assert f"routed to a human: {n_routed}" in run.output
    # Without --conformal, --route-width has nothing to route by; another jury's map is refused.
    lone = runner.invoke(app, ["judge", str(EXAMPLES / "mirage_mg.jsonl"), "--rubric",
                               "mirage-mg", "--jury", str(replay_jury), "--route-width", "1"])
    assert lone.exit_code == 2 and "add --conformal" in lone.output
    other = runner.invoke(app, ["judge", str(EXAMPLES / "mirage_mg.jsonl"), "--rubric",
                                "general", "--jury", str(replay_jury), "--out",
                                str(tmp_path / "g.jsonl"), "--conformal", str(conformal)])
    assert other.exit_code == 2 and "was fitted for provenance" in other.output
