"""Cascade thresholds: the guarantee verified by repeated simulation, the statistics against
independent computations, and the fit from verdict records."""

from __future__ import annotations

import math

import numpy as np
import pytest
from judging_helpers import one_criterion_rubric

from jurybox.calibration import human_labels_from_rows, judge_output_from_records
from jurybox.calibration.cascade_threshold import (
    DEFAULT_GRID,
    CascadeTargetError,
    agreement_lower_bound,
    binomial_p_value,
    decided_stage,
    fit_threshold,
)
from jurybox.calibration.errors import InputDataError
from jurybox.calibration.synthetic import CascadeSimulation, simulate_cascade_verdicts
from jurybox.rubrics import Scale
from jurybox.serving.runs.cascade_fit import fit_cascade


def test_binomial_p_value_is_the_binomial_lower_tail():
    for k, n, a in [(0, 10, 0.1), (3, 50, 0.1), (12, 100, 0.1), (40, 400, 0.08), (7, 7, 0.5)]:
        direct = sum(math.comb(n, i) * a ** i * (1 - a) ** (n - i) for i in range(k + 1))
        assert binomial_p_value(k, n, a) == pytest.approx(direct, rel=1e-10)


def test_lower_bound_is_clopper_pearson():
    # Clopper-Pearson lower bound L: P(Binomial(n, L) >= x) = risk.
    for x, n, risk in [(90, 100, 0.1), (45, 50, 0.05), (1, 20, 0.1)]:
        low = agreement_lower_bound(x, n, risk)
        upper_tail = sum(math.comb(n, i) * low ** i * (1 - low) ** (n - i) for i in range(x, n + 1))
        assert upper_tail == pytest.approx(risk, rel=1e-6)
    assert agreement_lower_bound(0, 10, 0.1) == 0.0


def test_decided_stage_is_the_first_confident_stage():
    conf = np.array([[0.99, 0.5, 0.5, 0.2], [0.1, 0.95, 0.2, 0.9], [0.0, 0.0, 0.0, 0.0]])
    assert decided_stage(conf, 0.9).tolist() == [0, 1, 2, 1]
    assert decided_stage(conf, math.inf).tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize(("target", "risk"), [(0.9, 0.1), (0.92, 0.05), (0.85, 0.2)])
def test_guarantee_holds_in_repeated_simulation(target, risk):
    """The true (population) agreement of the fitted cascade meets the target in at least
    1 - risk of the repetitions; an uncorrected choice on the same data does not."""
    sim = CascadeSimulation()
    truth = {t: sim.agreement(t) for t in (math.inf, *DEFAULT_GRID)}
    rng = np.random.default_rng(7)
    reps, n = 400, 600
    met = naive_met = saved = 0
    for _ in range(reps):
        conf, agrees = sim.sample(n, rng)
        # The uncorrected rule: the lowest threshold whose observed agreement reaches the target.
        items = np.arange(n)
        ok = [t for t in (math.inf, *DEFAULT_GRID)
              if agrees[decided_stage(conf, t), items].mean() >= target]
        naive_met += not ok or truth[min(ok)] >= target
        try:
            fit = fit_threshold(conf, agrees, target_agreement=target, risk=risk,
                                stage_calls=[1, 3], baseline_calls=3)
        except CascadeTargetError:
            met += 1  # nothing certified: no false guarantee given
        else:
            met += truth[fit.threshold] >= target
            saved += fit.threshold < 1.0
    assert met / reps >= 1 - risk, (met, reps)
    assert naive_met / reps < 1 - risk, "the simulation is too easy to tell a valid method apart"
    assert saved > reps // 4, "the cascade should often let the cheap judge decide something"


def test_unsupportable_target_is_refused_with_the_reason():
    sim = CascadeSimulation()
    conf, agrees = sim.sample(500, np.random.default_rng(1))
    with pytest.raises(CascadeTargetError, match=r"cannot support agreement 0.97 at risk 0.1.*"
                                                 r"last stage alone agrees"):
        fit_threshold(conf, agrees, target_agreement=0.97, risk=0.1)


def test_fit_reports_shares_calls_and_agreement():
    # 10 items: stage 1 confident and right on 6, confident and wrong on 1, unsure on 3 (the
    # panel right on all). Target 0.5 at risk 0.5 so the small sample certifies every threshold.
    conf = np.array([[0.99] * 7 + [0.3] * 3, [1.0] * 10])
    agrees = np.array([[True] * 6 + [False] + [False] * 3, [True] * 10])
    fit = fit_threshold(conf, agrees, target_agreement=0.5, risk=0.5, stage_calls=[1, 2],
                        baseline_calls=2)
    assert fit.threshold == 0.0  # every grid point certified: the walk reaches the end
    assert fit.decided_share == [1.0, 0.0]
    assert fit.agreement == pytest.approx(0.6)
    fit = fit_threshold(conf, agrees, target_agreement=0.5, risk=0.5, stage_calls=[1, 2],
                        baseline_calls=2, grid=[0.99])
    assert fit.threshold == 0.99
    assert fit.decided_share == pytest.approx([0.7, 0.3])
    assert fit.agreement == pytest.approx(0.9)
    assert fit.full_agreement == 1.0
    assert fit.calls_per_item == pytest.approx(0.7 * 1 + 0.3 * 3)
    assert fit.calls_saved == pytest.approx(1 - 1.6 / 2)
    assert [row["threshold"] for row in fit.path] == [None, 0.99]


def test_bad_arguments_are_input_errors():
    conf, agrees = np.ones((2, 5)), np.ones((2, 5), dtype=bool)
    with pytest.raises(InputDataError, match="target agreement"):
        fit_threshold(conf, agrees, target_agreement=1.5, risk=0.1)
    with pytest.raises(InputDataError, match="risk"):
        fit_threshold(conf, agrees, target_agreement=0.9, risk=0)
    with pytest.raises(InputDataError, match="two stages"):
        fit_threshold(conf[:1], agrees[:1], target_agreement=0.9, risk=0.1)


# --------------------------------------------------------------------------- from verdict records


def _vote(judge, score, dist):
    return {"judge": judge, "criterion": "accuracy", "score": score, "distribution": dist}


def _record(i, jury, votes, score, prov):
    return {"id": f"i{i}", "status": "scored" if score is not None else "unscored",
            "rubric": "r", "jury": jury, "provenance": prov, "scores": {"accuracy": score},
            "votes": votes}


def test_confidence_pools_the_judges_distributions():
    from jurybox.judges.cascade import confidence
    from jurybox.rubrics import VerdictRecord

    def record_confidence(rec, criterion, scale, tolerance=0.0):
        return confidence(rec, {criterion: scale}, [criterion], tolerance)

    scale = Scale(min=1, max=3)
    rec = VerdictRecord.model_validate(_record(0, "j", [
        _vote("a", 2, {"1": 0.1, "2": 0.8, "3": 0.1}),
        _vote("b", 3, {"1": 0.0, "2": 0.4, "3": 0.6})], 2.5, "p"))
    # Verdict 2.5 snaps to 2 (ties go to the lower point); pooled mass at 2 = (0.8 + 0.4) / 2.
    assert record_confidence(rec, "accuracy", scale) == pytest.approx(0.6)
    assert record_confidence(rec, "accuracy", scale, tolerance=1) == pytest.approx(1.0)
    no_dist = VerdictRecord.model_validate(_record(1, "j", [_vote("a", 2, None)], 2, "p"))
    assert record_confidence(no_dist, "accuracy", scale) == 0.0
    unscored = VerdictRecord.model_validate(
        {**_record(2, "j", [], None, "p"), "reasons": ["x"]})
    assert record_confidence(unscored, "accuracy", scale) == 0.0


RUBRIC = one_criterion_rubric("cascade-test", top=3)


def cascade_jury(threshold=None):
    from jurybox.judges import JurySpec

    return JurySpec.model_validate({
        "name": "cascade", "judges": [{"name": n, "model": "org/m"}
                                      for n in ("small", "big1", "big2")],
        "stages": [{"judges": ["small"], "threshold": threshold}, {"judges": ["big1", "big2"]}]})


def test_fit_cascade_from_verdicts_and_labels():
    from jurybox.judges import provenance

    jury = cascade_jury()
    records, humans = simulate_cascade_verdicts(300, provenance=provenance(RUBRIC, jury), seed=3)
    humans = humans[:-5] + [{"id": "unjudged", "accuracy": 1}]
    labels = human_labels_from_rows(humans)
    fit, data, fitted = fit_cascade(labels, judge_output_from_records(records), RUBRIC, jury,
                                    target_agreement=0.85, risk=0.1)
    assert data.stage_judges == [["small"], ["big1", "big2"]]
    assert data.excluded == {"labelled but not in the verdicts": 1}
    assert fit.n == 295
    assert 0.5 < fit.threshold <= 0.995  # trusted where it is sure (0.995), not when unsure
    # The cheap judge decides exactly the items it is sure about.
    sure = [r for r in records[:295] if max(r["votes"][0]["distribution"].values()) > 0.9]
    assert fit.decided_share[0] == pytest.approx(len(sure) / 295)
    assert fit.agreement >= 0.85
    assert fit.calls_per_item == pytest.approx(1 + 2 * fit.decided_share[1])
    assert fit.full_calls_per_item == 3
    assert fitted.stages[0].threshold == fit.threshold and fitted.stages[1].threshold is None
    assert fitted.cascaded and fitted.unfitted() == jury
    # The fit decides as the fitted jury will: each labelled item's stage-1 verdict settles it
    # exactly when the walk of a cascaded run would.
    from jurybox.judges.cascade import settle

    for record, conf in zip(records[:295], data.confidence[0]):
        votes = [v for v in judge_output_from_records([record]).records[0].votes
                 if v.judge == "small"]
        verdict, _ = settle(RUBRIC, fitted, "p", 0, record["id"], votes)
        assert (verdict is not None) == (conf >= fit.threshold)


def test_fit_cascade_refuses_verdicts_of_another_configuration_or_missing_judges():
    jury = cascade_jury()
    records, humans = simulate_cascade_verdicts(50, provenance="something-else")
    with pytest.raises(InputDataError, match="another configuration"):
        fit_cascade(human_labels_from_rows(humans), judge_output_from_records(records), RUBRIC,
                    jury, target_agreement=0.8, risk=0.1)
    for r in records:
        r["votes"] = r["votes"][:2]
    with pytest.raises(InputDataError, match=r"no votes from \['big2'\]"):
        fit_cascade(human_labels_from_rows(humans), judge_output_from_records(records), RUBRIC,
                    jury, target_agreement=0.8, risk=0.1)
