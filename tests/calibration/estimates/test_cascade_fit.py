"""Cascade thresholds: the guarantee verified by repeated simulation, the statistics against
independent computations, and the fit from verdict records."""

from __future__ import annotations

import math

import numpy as np
import pytest
from judging_helpers import one_criterion_rubric

from jurybox.calibration import human_labels_from_rows, judge_output_from_records
from jurybox.calibration.errors import InputDataError
from jurybox.calibration.estimates.cascade_threshold import (
    DEFAULT_GRID,
    CascadeTargetError,
    agreement_lower_bound,
    binomial_p_value,
    decided_stage,
    fit_threshold,
)
from jurybox.calibration.estimates.synthetic import CascadeSimulation, simulate_cascade_verdicts
from jurybox.rubrics import Scale
from jurybox.serving.runs.cascade_fit import fit_cascade


def test_binomial_p_value_is_the_binomial_lower_tail():
    for k, n, a in [(0, 10, 0.1), (3, 50, 0.1), (12, 100, 0.1), (40, 400, 0.08), (7, 7, 0.5)]:
        direct = sum(math.comb(n, i) * a**i * (1 - a) ** (n - i) for i in range(k + 1))
        assert binomial_p_value(k, n, a) == pytest.approx(direct, rel=1e-10)


def test_lower_bound_is_clopper_pearson():
    # Clopper-Pearson lower bound L: P(Binomial(n, L) >= x) = risk.
    for x, n, risk in [(90, 100, 0.1), (45, 50, 0.05), (1, 20, 0.1)]:
        low = agreement_lower_bound(x, n, risk)
        upper_tail = sum(math.comb(n, i) * low**i * (1 - low) ** (n - i) for i in range(x, n + 1))
        assert upper_tail == pytest.approx(risk, rel=1e-6)
    assert agreement_lower_bound(0, 10, 0.1) == 0.0


def test_decided_stage_is_the_first_confident_stage():
    conf = np.array([[0.99, 0.5, 0.5, 0.2], [0.1, 0.95, 0.2, 0.9], [0.0, 0.0, 0.0, 0.0]])
    assert decided_stage(conf, 0.9).tolist() == [0, 1, 2, 1]
    assert decided_stage(conf, math.inf).tolist() == [2, 2, 2, 2]


@pytest.mark.parametrize(
    ("target", "risk", "saving"), [(0.9, 0.1, 0.25), (0.92, 0.05, 0.0), (0.85, 0.2, 0.25)]
)
def test_guarantee_holds_in_repeated_simulation(target, risk, saving):
    """The true (population) agreement of the fitted cascade meets the target in at least
    1 - risk of the repetitions; an uncorrected choice on the same data does not. A cascade is
    chosen only where it saves calls on the labelled items (``saving``: in at least this share
    of the fits; at 0.92 the thresholds that keep the target let too few items leave early)."""
    sim = CascadeSimulation()
    truth = {t: sim.agreement(t) for t in (math.inf, *DEFAULT_GRID)}
    rng = np.random.default_rng(7)
    reps, n = 400, 600
    met = naive_met = saved = 0
    for _ in range(reps):
        conf, agrees = sim.sample(n, rng)
        # The uncorrected rule: the lowest threshold whose observed agreement reaches the target.
        items = np.arange(n)
        ok = [
            t
            for t in (math.inf, *DEFAULT_GRID)
            if agrees[decided_stage(conf, t), items].mean() >= target
        ]
        naive_met += not ok or truth[min(ok)] >= target
        try:
            fit = fit_threshold(
                conf,
                agrees,
                target_agreement=target,
                risk=risk,
                stage_calls=[1, 3],
                baseline_calls=3,
            )
        except CascadeTargetError:
            met += 1  # nothing certified: no false guarantee given
        else:
            met += truth[fit.threshold] >= target
            saved += fit.calls_saved > 0
            if fit.path[0]["rejected"]:  # never a cascade dearer than a certified whole jury
                assert fit.calls_saved >= 0
    assert met / reps >= 1 - risk, (met, reps)
    assert naive_met / reps < 1 - risk, "the simulation is too easy to tell a valid method apart"
    assert saved >= reps * saving, "the cascade should often let the cheap judge decide something"


def test_unsupportable_target_is_refused_with_the_reason():
    sim = CascadeSimulation()
    conf, agrees = sim.sample(500, np.random.default_rng(1))
    with pytest.raises(
        CascadeTargetError,
        match=r"cannot support agreement 0.97 at risk 0.1.*"
        r"whole jury on every item agrees",
    ):
        fit_threshold(conf, agrees, target_agreement=0.97, risk=0.1)


def test_fit_reports_shares_calls_and_agreement():
    # 10 items: stage 1 confident and right on 6, confident and wrong on 1, unsure on 3 (the
    # panel right on all). Target 0.5 at risk 0.5 so the small sample certifies every threshold.
    conf = np.array([[0.99] * 7 + [0.3] * 3, [1.0] * 10])
    agrees = np.array([[True] * 6 + [False] + [False] * 3, [True] * 10])
    fit = fit_threshold(
        conf, agrees, target_agreement=0.5, risk=0.5, stage_calls=[1, 2], baseline_calls=2
    )
    # Every threshold certified; the cheapest on the labelled items, the highest of equals:
    # at 0.3 and below stage 1 decides every item (one call each).
    assert all(row["rejected"] for row in fit.path)
    assert fit.threshold == 0.3
    assert fit.decided_share == [1.0, 0.0]
    assert fit.in_sample_agreement == pytest.approx(0.6)
    fit = fit_threshold(
        conf,
        agrees,
        target_agreement=0.5,
        risk=0.5,
        stage_calls=[1, 2],
        baseline_calls=2,
        grid=[0.99],
    )
    assert fit.threshold == 0.99
    assert fit.decided_share == pytest.approx([0.7, 0.3])
    assert fit.in_sample_agreement == pytest.approx(0.9)
    assert fit.full_in_sample_agreement == 1.0
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


def _valid():
    return np.array([[0.99, 0.5, 0.8, 0.3], [1.0, 1.0, 1.0, 1.0]]), np.ones((2, 4), dtype=bool)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c, a: (c, np.where(a, np.nan, 0.0)), r"agreement of stage 1 on item 0 is nan"),
        (lambda c, a: (c, np.full(a.shape, 0.3)), r"agreement of stage 1 on item 0 is 0.3"),
        (lambda c, a: (c, np.full(a.shape, "False")), r"agreement of stage 1 on item 0 is 'False'"),
        (
            lambda c, a: (c, np.array([[True, None, True, True], [True] * 4], dtype=object)),
            r"agreement of stage 1 on item 1 is None",
        ),
        (
            lambda c, a: (np.vstack([np.full(4, np.nan), c[1]]), a),
            r"confidence of stage 1 on item 0 is nan \(4 bad value\(s\) in all\)",
        ),
        (
            lambda c, a: (np.vstack([[np.inf, 0.5, 0.8, 0.3], c[1]]), a),
            r"confidence of stage 1 on item 0 is inf",
        ),
        (
            lambda c, a: (np.vstack([[0.9, 1.5, 0.8, 0.3], c[1]]), a),
            r"confidence of stage 1 on item 1 is 1.5.*in \[0, 1\], or -1 where",
        ),
        (
            lambda c, a: (np.vstack([[0.9, 0.5, -0.5, 0.3], c[1]]), a),
            r"confidence of stage 1 on item 2 is -0.5",
        ),
    ],
)
def test_bad_confidences_and_agreements_are_refused_naming_the_entry(change, message):
    conf, agrees = change(*_valid())
    with pytest.raises(InputDataError, match=message):
        fit_threshold(conf, agrees, target_agreement=0.5, risk=0.5)


def test_the_unscored_sentinel_and_zero_one_agreements_are_taken():
    conf, agrees = _valid()
    conf[0, 1] = -1.0  # stage 1 unscored on item 1: never leaves there
    fit = fit_threshold(conf, agrees.astype(int), target_agreement=0.5, risk=0.5, grid=[0.0])
    assert fit.threshold == 0.0 and fit.decided_share == [0.75, 0.25]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stage_calls": [-1, 3]}, r"stage_calls must be positive numbers of judge calls"),
        ({"stage_calls": [0, 3]}, r"stage_calls must be positive"),
        ({"stage_calls": [1]}, r"stage_calls needs 2 number\(s\)"),
        ({"baseline_calls": 0}, r"baseline_calls must be positive"),
        ({"baseline_calls": float("nan")}, r"baseline_calls must be positive"),
        ({"grid": [0.9, 2.0]}, r"grid thresholds must be confidences in \[0, 1\]; got \[2.0\]"),
        ({"grid": [float("nan")]}, r"grid thresholds must be confidences"),
        ({"procedure": "bonferroni"}, r"procedure must be one of"),
    ],
)
def test_bad_calls_grids_and_procedures_are_refused(kwargs, message):
    with pytest.raises(InputDataError, match=message):
        fit_threshold(*_valid(), target_agreement=0.5, risk=0.5, **kwargs)


def test_the_risk_is_shared_out_in_advance_and_adds_up():
    from jurybox.calibration.estimates.cascade_threshold import FIRST_SHARE, RESTARTS, risk_shares

    shares = risk_shares(1 + len(DEFAULT_GRID))
    assert shares.sum() == pytest.approx(1.0) and shares[0] == FIRST_SHARE
    assert np.count_nonzero(shares[1:]) == RESTARTS
    assert risk_shares(5, "fixed-sequence").tolist() == [1, 0, 0, 0, 0]
    assert risk_shares(1).tolist() == [1.0] and risk_shares(3).sum() == pytest.approx(1.0)


def test_a_cascade_better_than_the_whole_jury_is_certified_where_the_jury_is_not():
    # The whole jury agrees on 85 of 100 items; trusting stage 1 where it is sure (0.99) on the
    # 60 items it is right about raises that to 99 (the jury was wrong on 14 of them).
    conf = np.array([[0.99] * 60 + [0.2] * 40, [1.0] * 100])
    agrees = np.array([[True] * 60 + [False] * 40, [False] * 14 + [True] * 85 + [False]])
    with pytest.raises(CascadeTargetError):
        fit_threshold(
            conf, agrees, target_agreement=0.9, risk=0.1, grid=[0.95], procedure="fixed-sequence"
        )  # stops at the whole jury
    fit = fit_threshold(conf, agrees, target_agreement=0.9, risk=0.1, grid=[0.95])
    assert fit.threshold == 0.95 and fit.in_sample_agreement == pytest.approx(0.99)
    assert [row["rejected"] for row in fit.path] == [False, True]
    assert fit.path[1]["level"] == pytest.approx(0.1 * 0.3)  # its own share of the risk


def _simulate(sim, target, risk, n, reps, seed):
    """Per procedure: the share of fits whose true agreement is below the target (a refusal
    certifies nothing, so violates nothing) and the mean population savings over all fits (a
    refusal, or no cascade, saves nothing), against the panel alone on every item."""
    rng = np.random.default_rng(seed)
    truth: dict[float, float] = {}
    out = {p: [0, 0.0] for p in ("fallback", "fixed-sequence")}
    for _ in range(reps):
        conf, agrees = sim.sample(n, rng)
        for procedure, tally in out.items():
            try:
                fit = fit_threshold(
                    conf,
                    agrees,
                    target_agreement=target,
                    risk=risk,
                    stage_calls=[1, 3],
                    baseline_calls=3,
                    procedure=procedure,
                )
            except CascadeTargetError:
                continue
            if fit.threshold not in truth:
                truth[fit.threshold] = sim.agreement(fit.threshold)
            tally[0] += truth[fit.threshold] < target
            tally[1] += 1 - sim.expected_calls(fit.threshold) / 3 if fit.calls_saved > 0 else 0
    return {p: (v / reps, s / reps) for p, (v, s) in out.items()}


def _at_most(violations, reps, risk):
    """The one-sided 95% Clopper-Pearson upper bound on the violation rate is at most ``risk``."""
    from scipy.stats import beta

    k = round(violations * reps)
    return k == reps or beta.ppf(0.95, k + 1, reps - k) <= risk


def test_past_a_dip_the_fallback_procedure_saves_far_more_and_keeps_the_guarantee():
    """The agreement curve dips below the target where the cheap judge is confidently wrong
    and recovers below it: the fixed sequence stops at the dip, the fallback goes on."""
    sim = CascadeSimulation.with_dip()
    reps, risk = 300, 0.1
    got = _simulate(sim, target=0.84, risk=risk, n=2000, reps=reps, seed=11)
    (fb_violated, fb_saved), (fs_violated, fs_saved) = got["fallback"], got["fixed-sequence"]
    assert fb_saved > fs_saved + 0.15, got  # ~28% against ~1% (perf/RESULTS.md)
    assert _at_most(fb_violated, reps, risk) and _at_most(fs_violated, reps, risk), got


def test_on_a_steady_curve_the_fallback_procedure_loses_little():
    sim = CascadeSimulation()
    reps, risk = 300, 0.1
    got = _simulate(sim, target=0.9, risk=risk, n=1000, reps=reps, seed=12)
    (fb_violated, fb_saved), (fs_violated, fs_saved) = got["fallback"], got["fixed-sequence"]
    assert fb_saved > 0.1 and fb_saved >= fs_saved - 0.02, got
    assert _at_most(fb_violated, reps, risk) and _at_most(fs_violated, reps, risk), got


# --------------------------------------------------------------------------- from verdict records


def _vote(judge, score, dist):
    return {"judge": judge, "criterion": "accuracy", "score": score, "distribution": dist}


def _record(i, jury, votes, score, prov):
    return {
        "id": f"i{i}",
        "status": "scored" if score is not None else "unscored",
        "rubric": "r",
        "jury": jury,
        "provenance": prov,
        "scores": {"accuracy": score},
        "votes": votes,
    }


def test_confidence_pools_the_judges_distributions():
    from jurybox.judges.cascade import confidence
    from jurybox.rubrics import VerdictRecord

    def record_confidence(rec, criterion, scale, tolerance=0.0):
        return confidence(rec, {criterion: scale}, [criterion], tolerance)

    scale = Scale(min=1, max=3)
    rec = VerdictRecord.model_validate(
        _record(
            0,
            "j",
            [
                _vote("a", 2, {"1": 0.1, "2": 0.8, "3": 0.1}),
                _vote("b", 3, {"1": 0.0, "2": 0.4, "3": 0.6}),
            ],
            2.5,
            "p",
        )
    )
    # Verdict 2.5 snaps to 2 (ties go to the lower point); pooled mass at 2 = (0.8 + 0.4) / 2.
    assert record_confidence(rec, "accuracy", scale) == pytest.approx(0.6)
    assert record_confidence(rec, "accuracy", scale, tolerance=1) == pytest.approx(1.0)
    no_dist = VerdictRecord.model_validate(_record(1, "j", [_vote("a", 2, None)], 2, "p"))
    assert record_confidence(no_dist, "accuracy", scale) == 0.0
    unscored = VerdictRecord.model_validate({**_record(2, "j", [], None, "p"), "reasons": ["x"]})
    assert record_confidence(unscored, "accuracy", scale) == 0.0


@pytest.mark.parametrize(
    ("distribution", "why"),
    [
        ({"1": float("nan"), "2": 0.9, "3": 0.1}, "not a probability distribution"),
        ({"1": 0.1, "2": 0.5, "3": 0.1}, "not a probability distribution"),  # sums to 0.7
        ({"1": -0.1, "2": 1.0, "3": 0.1}, "not a probability distribution"),
        (None, "has no score distribution"),
    ],
)
def test_a_distribution_that_is_not_one_gives_confidence_zero_with_the_reason(distribution, why):
    from jurybox.judges.cascade import confidence, confidence_and_reason
    from jurybox.rubrics import VerdictRecord

    scale = Scale(min=1, max=3)
    rec = VerdictRecord.model_validate(
        _record(
            0,
            "j",
            [_vote("a", 2, {"1": 0.05, "2": 0.9, "3": 0.05}), _vote("b", 2, distribution)],
            2,
            "p",
        )
    )
    value, reason = confidence_and_reason(rec, {"accuracy": scale}, ["accuracy"])
    assert value == 0.0 and why in reason and "judge b" in reason
    assert confidence(rec, {"accuracy": scale}, ["accuracy"]) == 0.0
    rounded = VerdictRecord.model_validate(
        _record(0, "j", [_vote("a", 2, {"1": 0.0333, "2": 0.9333, "3": 0.0333})], 2, "p")
    )  # sums to 0.9999
    assert confidence(rounded, {"accuracy": scale}, ["accuracy"]) == pytest.approx(0.9333)


RUBRIC = one_criterion_rubric("cascade-test", top=3)


def cascade_jury(threshold=None):
    from jurybox.judges import JurySpec

    return JurySpec.model_validate(
        {
            "name": "cascade",
            "judges": [{"name": n, "model": "org/m"} for n in ("small", "big1", "big2")],
            "stages": [{"judges": ["small"], "threshold": threshold}, {"judges": ["big1", "big2"]}],
        }
    )


def test_fit_cascade_from_verdicts_and_labels():
    from jurybox.judges import provenance

    jury = cascade_jury()
    records, humans = simulate_cascade_verdicts(300, provenance=provenance(RUBRIC, jury), seed=3)
    humans = humans[:-5] + [{"id": "unjudged", "accuracy": 1}]
    labels = human_labels_from_rows(humans)
    fit, data, fitted = fit_cascade(
        labels, judge_output_from_records(records), RUBRIC, jury, target_agreement=0.85, risk=0.1
    )
    assert data.stage_judges == [["small"], ["big1", "big2"]]
    assert data.excluded == {"labelled but not in the verdicts": 1}
    assert fit.n == 295
    assert 0.5 < fit.threshold <= 0.995  # trusted where it is sure (0.995), not when unsure
    # The cheap judge decides exactly the items it is sure about.
    sure = [r for r in records[:295] if max(r["votes"][0]["distribution"].values()) > 0.9]
    assert fit.decided_share[0] == pytest.approx(len(sure) / 295)
    assert fit.in_sample_agreement >= 0.85
    assert fit.calls_per_item == pytest.approx(1 + 2 * fit.decided_share[1])
    assert fit.full_calls_per_item == 3
    assert fitted.stages[0].threshold == fit.threshold and fitted.stages[1].threshold is None
    assert fitted.cascaded and fitted.unfitted() == jury
    # The fit decides as the fitted jury will: each labelled item's stage-1 verdict settles it
    # exactly when the walk of a cascaded run would.
    from jurybox.judges.cascade import settle

    for record, conf in zip(records[:295], data.confidence[0]):
        votes = [
            v for v in judge_output_from_records([record]).records[0].votes if v.judge == "small"
        ]
        verdict, _ = settle(RUBRIC, fitted, "p", 0, record["id"], votes)
        assert (verdict is not None) == (conf >= fit.threshold)


def test_fit_cascade_refuses_verdicts_of_another_configuration_or_missing_judges():
    jury = cascade_jury()
    records, humans = simulate_cascade_verdicts(50, provenance="something-else")
    with pytest.raises(InputDataError, match="another configuration"):
        fit_cascade(
            human_labels_from_rows(humans),
            judge_output_from_records(records),
            RUBRIC,
            jury,
            target_agreement=0.8,
            risk=0.1,
        )
    for r in records:
        r["votes"] = r["votes"][:2]
    with pytest.raises(InputDataError, match=r"no votes from \['big2'\]"):
        fit_cascade(
            human_labels_from_rows(humans),
            judge_output_from_records(records),
            RUBRIC,
            jury,
            target_agreement=0.8,
            risk=0.1,
        )


def trapped(records, humans, every=10):
    """Every ``every``-th item is in group ``trap``, where the small judge is sure (0.995) and
    wrong; the rest are ``plain``. Returns the groups by item id."""
    groups = {}
    for i, (record, human) in enumerate(zip(records, humans)):
        if i % every == 0:
            wrong = human["accuracy"] % 3 + 1
            record["votes"][0] = _vote(
                "small", wrong, {str(v): 0.995 if v == wrong else 0.0025 for v in (1, 2, 3)}
            )
        groups[record["id"]] = "trap" if i % every == 0 else "plain"
    return groups


def test_groups_show_where_the_population_guarantee_hides_a_failing_group():
    from jurybox.judges import provenance
    from jurybox.serving.runs.cascade_fit import describe, group_results

    jury = cascade_jury()
    records, humans = simulate_cascade_verdicts(300, provenance=provenance(RUBRIC, jury), seed=3)
    groups = trapped(records, humans)
    fit, data, fitted = fit_cascade(
        human_labels_from_rows(humans),
        judge_output_from_records(records),
        RUBRIC,
        jury,
        target_agreement=0.75,
        risk=0.1,
        groups=groups,
    )
    assert fitted is not None and fit.threshold <= 0.995  # the small judge decides sure items
    results = {g.group: g for g in group_results(fit, data)}
    assert results["trap"].n == 30 and results["plain"].n == 270
    assert results["trap"].agreement == 0.0 and results["trap"].below_target
    assert results["plain"].agreement >= 0.75 and not results["plain"].below_target
    # The upper bound is Clopper-Pearson's: P(Binomial(n, u) <= agreed) = risk.
    from scipy.stats import binom

    plain = results["plain"]
    assert binom.cdf(round(plain.agreement * plain.n), plain.n, plain.upper_bound) == pytest.approx(
        0.1, rel=1e-6
    )
    text = describe(fit, data)
    assert "trap: 0.000 on 30 items" in text and "BELOW THE TARGET" in text
    assert "not per group" in text and "in-sample" in text


def test_one_threshold_per_group_each_at_its_share_of_the_risk():
    from jurybox.judges import provenance
    from jurybox.serving.runs.cascade_fit import fit_by_group

    jury = cascade_jury()
    records, humans = simulate_cascade_verdicts(300, provenance=provenance(RUBRIC, jury), seed=3)
    groups = trapped(records, humans)
    del groups["i1"]  # an item without a group is left out, and said so
    fits = fit_by_group(
        human_labels_from_rows(humans),
        judge_output_from_records(records),
        RUBRIC,
        jury,
        groups,
        target_agreement=0.75,
        risk=0.1,
    )
    assert sorted(fits) == ["plain", "trap"]
    plain_fit, plain_data, plain_jury, _ = fits["plain"]
    trap_fit, trap_data, trap_jury, refused = fits["trap"]
    assert plain_fit.risk == 0.05  # Bonferroni: risk / groups
    assert plain_data.excluded == {"no value in the group column": 1} and plain_fit.n == 269
    assert plain_jury is not None and plain_fit.threshold <= 0.995
    # 30 items where the small judge is sure and wrong: nothing can be certified there.
    assert trap_fit is None and trap_jury is None and len(trap_data.ids) == 30
    assert "cannot support agreement 0.75 at risk 0.05" in refused


def test_label_groups_reads_the_column_and_refuses_what_it_cannot_use(tmp_path):
    from jurybox.calibration import label_groups

    path = tmp_path / "h.jsonl"
    path.write_text(
        '{"id": "a", "accuracy": 1, "task": "x"}\n{"id": "a", "accuracy": 2, '
        '"task": "x", "rater": "r2"}\n{"id": "b", "accuracy": 1, "task": ""}\n'
        '{"id": "c", "accuracy": 3, "task": 7}\n'
    )
    assert label_groups(path, "task") == {"a": "x", "c": "7"}
    with pytest.raises(InputDataError, match=r"no 'domain' column to group by"):
        label_groups(path, "domain")
    path.write_text('{"id": "a", "task": "x"}\n{"id": "a", "task": "y"}\n')
    with pytest.raises(InputDataError, match=r"row 2: item 'a' is in group 'y' here and 'x'"):
        label_groups(path, "task")
