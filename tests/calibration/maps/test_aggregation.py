"""The correlation-aware jury aggregation (#23): its weights equal the closed-form minimum-
variance combination where that is non-negative; on simulated juries whose judges err together
it beats the plain mean under cross-validation, and on independent equal judges it is not said
to; Dawid-Skene is compared beside them."""

from __future__ import annotations

import numpy as np
import pytest

from jurybox.calibration.maps.aggregation import compare_aggregations, error_weights

REPS = 60


def _jury(rng, n, rho):
    """Three judges whose errors correlate ``rho`` and one independent, all of sd 0.6."""
    human = np.clip(np.round(2 + rng.normal(0, 1, n)), 0, 4)
    shared = rng.normal(0, 1, n)
    errors = [np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.normal(0, 1, n) for _ in range(3)]
    errors.append(rng.normal(0, 1, n))
    return human, {f"j{k}": human + 0.6 * e for k, e in enumerate(errors)}


def test_weights_equal_the_closed_form_where_it_is_non_negative():
    rng = np.random.default_rng(0)
    human, scores = _jury(rng, 5000, 0.6)
    errors = np.vstack([s - human for s in scores.values()])
    m = errors @ errors.T / errors.shape[1]
    closed = np.linalg.solve(m, np.ones(4))
    closed /= closed.sum()
    assert (closed > 0).all()
    assert error_weights(errors) == pytest.approx(closed, abs=1e-4)
    # The independent judge carries the most weight.
    assert error_weights(errors).argmax() == 3


@pytest.mark.parametrize("rho", [0.9, 0.0])
def test_the_weights_beat_the_mean_only_when_judges_err_together(rho):
    rng = np.random.default_rng(1)
    better = 0
    for rep in range(REPS):
        human, scores = _jury(rng, 400, rho)
        result = compare_aggregations("accuracy", scores, human, n_resamples=300, seed=rep)
        better += result.better
    if rho:
        assert better / REPS >= 0.9, better / REPS
    else:
        assert better / REPS <= 0.1, better / REPS


def test_dawid_skene_is_compared_on_scale_points():
    rng = np.random.default_rng(2)
    human, scores = _jury(rng, 300, 0.5)
    points = {j: np.clip(np.round(s), 0, 4) for j, s in scores.items()}
    result = compare_aggregations("accuracy", points, human, [0, 1, 2, 3, 4], n_resamples=100)
    assert set(result.mae) == {"mean", "weighted", "dawid_skene"}
    assert sum(result.weights.values()) == pytest.approx(1.0)
    continuous = compare_aggregations("accuracy", scores, human, [0, 1, 2, 3, 4], n_resamples=100)
    assert "dawid_skene" not in continuous.mae and "expected scores" in continuous.notes[0]


def test_jurybox_calibrate_reports_the_aggregations(tmp_path):
    import json

    from typer.testing import CliRunner

    from jurybox.serving.cli import app

    rng = np.random.default_rng(5)
    human, scores = _jury(rng, 300, 0.9)
    verdicts, humans = [], []
    for k in range(300):
        votes = [
            {"judge": j, "criterion": "accuracy", "score": float(np.clip(round(s[k]), 0, 4))}
            for j, s in scores.items()
        ]
        verdicts.append(
            {
                "id": f"q{k}",
                "status": "scored",
                "rubric": "sim",
                "jury": "sim",
                "provenance": "sim",
                "votes": votes,
                "scores": {"accuracy": float(np.mean([v["score"] for v in votes]))},
            }
        )
        humans.append({"id": f"q{k}", "rater": "h", "accuracy": float(human[k])})
    for name, rows in (("v.jsonl", verdicts), ("h.jsonl", humans)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    rubric = tmp_path / "sim.yaml"
    rubric.write_text(
        "name: sim\ninputs: [question, response]\ntemplate: '{{ question }} "
        "{{ response }} {{ output_format }}'\ncriteria:\n  - name: accuracy\n"
        "    description: d\n    scale: {min: 0, max: 4}\n"
    )
    args = [
        "calibrate",
        str(tmp_path / "h.jsonl"),
        str(tmp_path / "v.jsonl"),
        "--rubric",
        str(rubric),
        "--out",
        str(tmp_path / "map.json"),
    ]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    (agg,) = json.loads(result.stdout)["aggregation"]
    assert agg["criterion"] == "accuracy" and set(agg["mae"]) == {"mean", "weighted", "dawid_skene"}
    assert agg["better"] and max(agg["weights"], key=agg["weights"].get) == "j3"
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0 and "the error-covariance weights beat the mean" in text.stdout
