"""fit_calibration / CalibrationMap end to end on synthetic judging with known distortions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from jurybox.calibration import (
    CalibrationMap,
    InputDataError,
    NotFittedError,
    ProvenanceMismatchError,
    fit_calibration,
    human_labels_from_rows,
    judge_output_from_records,
    prediction_powered_mean,
    simulate_judging,
)

SCALES = {"accuracy": [0, 1, 2, 3, 4], "supported": {"labels": {"yes": 1, "no": 0}}}


@pytest.fixture(scope="module")
def synthetic() -> tuple[list[dict], list[dict]]:
    # Every judge scores too low (a shared bias the jury mean cannot cancel), with different
    # compression and noise: calibration has to learn each judge's map.
    judges = (("harsh", -1.0, 1.0, 0.4), ("compressed", -0.5, 0.5, 0.5), ("noisy", -0.8, 1.0, 1.2))
    return simulate_judging(300, labelled=150, judges=judges, unscored_rate=0.03, seed=11)


@pytest.fixture(scope="module")
def fitted(synthetic) -> CalibrationMap:
    recs, humans = synthetic
    return fit_calibration(
        human_labels_from_rows(humans), judge_output_from_records(recs), scales=SCALES
    )


def test_cv_shows_calibration_helps_for_biased_judges(fitted: CalibrationMap) -> None:
    cv = fitted.cv_["accuracy"]
    assert cv["after"]["mae"]["value"] < cv["before"]["mae"]["value"]
    assert cv["helps"] is True
    assert abs(cv["after"]["bias"]["value"]) < abs(cv["before"]["bias"]["value"])
    for judge in ("harsh", "compressed", "noisy"):
        assert cv["per_judge"][judge]["mae_after"] < cv["per_judge"][judge]["mae_before"]


def test_weights_favour_the_reliable_judge(fitted: CalibrationMap) -> None:
    w = fitted.criteria_["accuracy"].weights
    assert sum(w.values()) == pytest.approx(1.0)
    assert w["harsh"] > w["compressed"] > w["noisy"]  # ordered by noise after calibration
    assert fitted.criteria_["supported"].kind == "categorical"
    conf = fitted.criteria_["supported"].confusion
    assert np.trace(conf["harsh"]) > np.trace(conf["compressed"])  # 90% vs 70% accurate


def test_apply_to_record_adds_calibrated_and_keeps_scores(
    fitted: CalibrationMap, synthetic
) -> None:
    recs, _ = synthetic
    rec = next(r for r in recs if r["scores"]["accuracy"] is not None)
    out = fitted.apply_to_record(rec)
    assert out["scores"] == rec["scores"] and "calibrated" not in rec
    assert 0.0 <= out["calibrated"]["accuracy"] <= 4.0
    assert 0.0 <= out["calibrated"]["supported"] <= 1.0
    below_quorum = dict(rec, scores={"accuracy": None, "supported": 1.0})
    assert fitted.apply_to_record(below_quorum)["calibrated"]["accuracy"] is None


def test_apply_to_record_computes_the_rubric_formula_on_calibrated_values(
    fitted: CalibrationMap, synthetic
) -> None:
    from jurybox.rubrics import Formula

    recs, _ = synthetic
    rec = next(r for r in recs if r["scores"]["accuracy"] is not None)
    formula = Formula(name="weighted_sum", expression="(2 * accuracy + supported) / 9")
    cal = fitted.apply_to_record(rec, formula=formula)["calibrated"]
    assert cal["weighted_sum"] == pytest.approx((2 * cal["accuracy"] + cal["supported"]) / 9)
    assert "weighted_sum" not in rec["scores"]
    # A criterion the formula needs is unscored or not in the map: no value, no raw mixed in.
    below_quorum = dict(rec, scores={"accuracy": None, "supported": 1.0})
    assert (
        fitted.apply_to_record(below_quorum, formula=formula)["calibrated"]["weighted_sum"] is None
    )
    other = Formula(name="total", expression="accuracy + relevance")
    assert fitted.apply_to_record(rec, formula=other)["calibrated"]["total"] is None
    out = fitted.apply_to_records([rec], formula=formula)[0]["calibrated"]
    assert out["weighted_sum"] == pytest.approx(cal["weighted_sum"])


def test_dawid_skene_non_convergence_is_a_note(synthetic, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    module = sys.modules["jurybox.calibration.stats.dawid_skene"]
    real = module.dawid_skene
    monkeypatch.setattr(
        module, "dawid_skene", lambda *a, **k: real(*a, **{**k, "max_iter": 1, "tol": 0.0})
    )
    recs, humans = synthetic
    # Items without a human label on `supported` are not clamped, so EM has work to do.
    humans = [
        {k: v for k, v in h.items() if k != "supported" or int(h["id"][1:]) % 3} for h in humans
    ]
    cmap = fit_calibration(
        human_labels_from_rows(humans), judge_output_from_records(recs), scales=SCALES
    )
    prefix = "supported: Dawid-Skene EM did not converge in 1 step "
    notes = [n for n in cmap.notes_ if n.startswith(prefix)]
    assert notes, cmap.notes_
    assert "did not converge" in cmap.describe()
    assert not any("accuracy" in n and "converge" in n for n in cmap.notes_)


def test_calibrated_value_is_weighted_mean_of_judge_maps(fitted: CalibrationMap) -> None:
    cmap = fitted.criteria_["accuracy"]
    raw = {"harsh": 1.0, "compressed": 3.0}  # noisy did not vote
    cal = {j: float(cmap.calibrators[j].predict(np.array([v]))[0]) for j, v in raw.items()}
    w = {j: cmap.weights[j] for j in raw}
    expected = sum(w[j] * cal[j] for j in raw) / sum(w.values())
    assert fitted.predict("accuracy", raw)[0] == pytest.approx(expected)


def test_provenance_mismatch_is_an_error_unless_forced(fitted: CalibrationMap, synthetic) -> None:
    recs, _ = synthetic
    other = dict(recs[0], provenance="someone-else")
    with pytest.raises(ProvenanceMismatchError, match="prov-test"):
        fitted.apply_to_record(other)
    assert "calibrated" in fitted.apply_to_record(other, force=True)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_save_load_roundtrip(
    fitted: CalibrationMap, synthetic, tmp_path: Path, suffix: str
) -> None:
    recs, _ = synthetic
    path = fitted.save(tmp_path / f"map{suffix}")
    text = path.read_text()
    assert "prov-test" in text and "isotonic" in text  # readable, records provenance
    loaded = CalibrationMap.load(path)
    assert loaded.provenance_ == "prov-test"
    for rec in recs[:25]:
        a = fitted.apply_to_record(rec)["calibrated"]
        b = loaded.apply_to_record(rec)["calibrated"]
        assert a.keys() == b.keys()
        for k in a:
            assert (a[k] is None and b[k] is None) or a[k] == pytest.approx(b[k])


def test_load_rejects_foreign_files(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"format": "something"}))
    with pytest.raises(InputDataError, match="not a jurybox calibration map"):
        CalibrationMap.load(p)
    with pytest.raises(NotFittedError):
        CalibrationMap().apply_to_record({})
    broken = tmp_path / "m.yaml"
    broken.write_text("format: jurybox.calibration_map/1\ncriteria: [\n")
    with pytest.raises(InputDataError, match=r"m.yaml: line 3, column 1: invalid YAML"):
        CalibrationMap.load(broken)
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\x89PNG\xff")
    with pytest.raises(InputDataError, match="not UTF-8 text"):
        CalibrationMap.load(binary)


def test_ordinal_method_and_round_output(synthetic) -> None:
    recs, humans = synthetic
    cmap = fit_calibration(
        human_labels_from_rows(humans),
        judge_output_from_records(recs),
        scales=SCALES,
        method="ordinal",
        output="round",
    )
    values = [cmap.apply_to_record(r)["calibrated"]["accuracy"] for r in recs[:40]]
    assert {v for v in values if v is not None} <= {0.0, 1.0, 2.0, 3.0, 4.0}
    assert (
        cmap.cv_["accuracy"]["after"]["mae"]["value"]
        < cmap.cv_["accuracy"]["before"]["mae"]["value"]
    )


def test_describe_is_readable(fitted: CalibrationMap) -> None:
    text = fitted.describe()
    assert "accuracy: isotonic per judge" in text and "MAE" in text
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)


def test_missing_provenance_is_an_error(synthetic) -> None:
    recs, humans = synthetic
    bare = [dict(r, provenance=None) for r in recs]
    with pytest.raises(InputDataError, match="provenance"):
        fit_calibration(human_labels_from_rows(humans), judge_output_from_records(bare))


def test_prediction_powered_mean_from_files(
    synthetic, tmp_path: Path, fitted: CalibrationMap
) -> None:
    recs, humans = synthetic
    est = prediction_powered_mean(
        human_labels_from_rows(humans), judge_output_from_records(recs), "accuracy", scales=SCALES
    )
    assert est.n_labeled + est.n_unlabeled < 300  # unscored items excluded ...
    assert any("unscored" in n for n in est.notes)  # ... and said so
    assert est.ci[0] < est.estimate < est.ci[1]
    cal = prediction_powered_mean(
        human_labels_from_rows(humans),
        judge_output_from_records(recs),
        "accuracy",
        scales=SCALES,
        calibration=fitted,
    )
    assert cal.lam >= est.lam - 1e-9 or cal.width_ratio <= est.width_ratio + 0.05
    json.dumps(cal.to_dict())
