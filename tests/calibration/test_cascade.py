"""Cascade thresholds: the guarantee verified by repeated simulation, the statistics against
independent computations, and the fit from verdict records."""

from __future__ import annotations

import math

import numpy as np
import pytest
from jurybox.calibration import human_labels_from_rows, judge_output_from_records
from jurybox.calibration.cascade import (
    DEFAULT_GRID,
    CascadeTargetError,
    agreement_lower_bound,
    binomial_p_value,
    decided_stage,
    fit_cascade,
    fit_threshold,
    record_confidence,
)
from jurybox.calibration.errors import InputDataError
from jurybox.calibration.synthetic import CascadeSimulation, simulate_cascade_verdicts
from jurybox.rubrics import Scale


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


def test_record_confidence_pools_the_judges_distributions():
    from jurybox.rubrics import VerdictRecord

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


def test_fit_cascade_from_verdicts_and_labels():
    cheap, panel, humans = simulate_cascade_verdicts(300, seed=3)
    humans.append({"id": "unjudged", "accuracy": 1})
    stages = [judge_output_from_records(cheap), judge_output_from_records(panel[:-5])]
    labels = human_labels_from_rows(humans)
    fit, data = fit_cascade(labels, stages, target_agreement=0.85, risk=0.1,
                            scales={"accuracy": [1, 2, 3]})
    assert data.stage_judges == [["small"], ["big1", "big2"]]
    assert data.stage_calls == [1, 2]
    assert data.excluded == {"not judged by every stage": 5}
    assert fit.n == 295
    assert 0.5 < fit.threshold <= 0.995  # trusted where it is sure (0.995), not when unsure
    # The cheap judge decides exactly the items it is sure about.
    sure = [r["id"] for r in cheap[:295] if r["votes"][0]["distribution"][str(
        r["votes"][0]["score"])] > 0.9]
    assert fit.decided_share[0] == pytest.approx(len(sure) / 295)
    assert fit.agreement >= 0.85
    assert fit.calls_per_item == pytest.approx(1 + 2 * fit.decided_share[1])
    assert fit.full_calls_per_item == 2
