"""Length-controlled scores (#23): on simulated juries of known length bias the correction
raises agreement with the humans under cross-validation, and on an unbiased jury it is not
said to; the slope equals numpy's least-squares fit; `jurybox agree --length-control`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jurybox.calibration.audits.length_control import length_control

REPS = 100


def _jury(rng, n, bias):
    words = rng.gamma(3.0, 80.0, n) + 5
    human = np.clip(2 + rng.normal(0, 0.8, n), 0, 4)  # quality does not depend on length
    x = np.log1p(words)
    return words, human, human + bias * (x - x.mean()) + rng.normal(0, 0.3, n)


@pytest.mark.parametrize("bias", [0.6, 0.0])
def test_the_correction_raises_agreement_only_where_the_jury_likes_length(bias):
    rng = np.random.default_rng(4)
    raised = 0
    for rep in range(REPS):
        words, human, score = _jury(rng, 150, bias)
        result = length_control("accuracy", score, words, human, n_resamples=300, seed=rep)
        raised += bool(result.raises_agreement)
    if bias:
        assert raised / REPS >= 0.9, raised / REPS
    else:
        assert raised / REPS <= 0.1, raised / REPS


def test_the_slope_is_least_squares_on_the_error_and_the_centre_is_the_reference_length():
    rng = np.random.default_rng(8)
    words, human, score = _jury(rng, 400, 0.5)
    result = length_control("accuracy", score, words, human, centre_length=100.0, n_resamples=50)
    slope = np.polyfit(np.log1p(words), score - human, 1)[0]
    assert result.slope_per_log_length == pytest.approx(slope)
    want = np.mean(score - slope * (np.log1p(words) - np.log1p(100.0)))
    assert result.controlled_mean == pytest.approx(want)
    assert result.raw_mean == pytest.approx(score.mean()) and result.raises_agreement
    # Without human labels: the scores' own slope, said to assume quality ignores length.
    bare = length_control("accuracy", score, words)
    assert bare.raises_agreement is None and "assumes quality" in bare.fitted_on
    assert bare.slope_per_log_length == pytest.approx(np.polyfit(np.log1p(words), score, 1)[0])


def test_with_labels_on_some_items_the_means_are_the_runs_and_the_labelled_ones_are_named():
    """#42 item 3: 60 of 1,000 judged items labelled; the slope is fitted on the 60, the raw
    and controlled means are over the 1,000 (they were over the 60), and the 60's own means
    are reported beside them, named as such."""
    rng = np.random.default_rng(9)
    words, human, score = _jury(rng, 1000, 0.5)
    labels = np.full(1000, np.nan)
    labelled = rng.choice(1000, 60, replace=False)
    labels[labelled] = human[labelled]
    result = length_control("accuracy", score, words, labels, n_resamples=50)
    x = np.log1p(words)
    slope = np.polyfit(x[labelled], score[labelled] - human[labelled], 1)[0]
    assert result.slope_per_log_length == pytest.approx(slope)
    assert (result.n, result.labelled) == (1000, 60)
    assert result.raw_mean == pytest.approx(score.mean())
    assert result.controlled_mean == pytest.approx(np.mean(score - slope * (x - x.mean())))
    assert result.labelled_raw_mean == pytest.approx(score[labelled].mean())
    assert result.labelled_controlled_mean == pytest.approx(
        np.mean(score[labelled] - slope * (x[labelled] - x.mean()))
    )
    assert "over the 1000 items" in result.words()
    assert "over the 60 labelled items alone" in result.words()


def test_jurybox_agree_length_control(tmp_path):
    from typer.testing import CliRunner

    from jurybox.serving.cli import app

    rng = np.random.default_rng(3)
    words, human, score = _jury(rng, 150, 1.0)
    preds, verdicts, humans = [], [], []
    for k in range(150):
        s = float(np.clip(round(score[k]), 0, 4))  # a judge answers a point of the scale
        preds.append(
            {
                "id": f"q{k}",
                "question": "Q?",
                "reference": "an answer of six words here",
                "response": " ".join(["word"] * int(words[k])),
            }
        )
        votes = [
            {"judge": "j", "criterion": c, "score": s}
            for c in ("accuracy", "relevance", "completeness", "parsimony")
        ]
        verdicts.append(
            {
                "id": f"q{k}",
                "status": "scored",
                "rubric": "mirage-mg",
                "jury": "sim",
                "provenance": "sim",
                "votes": votes,
                "scores": dict.fromkeys(("accuracy", "relevance", "completeness", "parsimony"), s),
            }
        )
        humans.append({"id": f"q{k}", "rater": "h", "accuracy": float(round(human[k]))})
    for name, rows in (("p.jsonl", preds), ("v.jsonl", verdicts), ("h.jsonl", humans)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [
        "agree",
        str(tmp_path / "h.jsonl"),
        str(tmp_path / "v.jsonl"),
        "--resamples",
        "200",
        "--length-control",
        str(tmp_path / "p.jsonl"),
    ]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    (control,) = json.loads(result.stdout)["length_control"]
    assert control["criterion"] == "accuracy" and control["raises_agreement"]
    assert control["centre_length"] == 6  # the reference answers' median length, in words
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0 and "the correction raises agreement" in text.stdout
