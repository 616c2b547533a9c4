"""#60 item 1: rare sure errors behind ordinary noise.

A jury calibrated within a level on most items but 0.999 sure of the top level on 2-5% of them
where the label is 0 (`synthetic.sure_errors_pool`): its one-level disagreements open the
normal interval (5 departures) at about 20 labels, long before a sure error is labelled, and the
interval then missed below (the issue: 0.885 at 30 labels, 0.917 at 60 and 100; the asymptotic
sequence 0.761-0.944 over every count). The interval now keeps an allowance for the errors the
items the jury is sure of could hide (`rectified.sure_allowance`: the one-sided Clopper-Pearson
bound on their error rate, checked against statsmodels, times the farthest the scale lets them
go), until 5 labels on those items depart from the jury.

Coverage: 300 sessions per cell; the standard error of a 95% coverage is 1.3 points and each
test asks for 93% (as test_small_sample.py); measured (perf/fixed_sample.py, perf/sequences.py,
2,000 and 1,000 sessions): 0.97-0.99 here, where today's rule gives 0.70-0.94.
"""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from jurybox.calibration.estimates.active import (
    inclusion_probabilities,
    mean_estimates,
    mean_horizon,
    mean_sequences,
)
from jurybox.calibration.estimates.rectified import NORMAL_DEPARTURES, SURE_SD, sure_allowance
from jurybox.calibration.estimates.synthetic import (
    fixed_sample_session,
    sequence_session,
    sure_errors_pool,
)
from jurybox.rubrics import Scale

SCALE = Scale.coerce([0, 1, 2, 3, 4])
RUNS = 300
FLOOR = 0.93


@pytest.mark.parametrize(("k", "n"), [(0, 0), (0, 12), (2, 40), (4, 4), (5, 60)])
def test_the_allowance_is_the_clopper_pearson_bound_on_the_sure_items_errors(k, n):
    """share of sure items x the one-sided 97.5% Clopper-Pearson bound (statsmodels' two-sided
    95% upper end) x the mean distance to each end; 1 as the bound with none labelled, 0 once
    NORMAL_DEPARTURES have departed."""
    f = np.array([4.0, 4.0, 3.0, 2.0, 1.5])
    var = np.array([0.0075, 0.001, 0.5, (SURE_SD + 0.01) ** 2, 0.3])
    down, up = sure_allowance(f, var, n, k, (0.0, 4.0), 1.0, 0.05)
    bound = 1.0 if n == 0 else proportion_confint(k, n, 0.05, method="beta")[1]
    bound = 0.0 if k >= NORMAL_DEPARTURES else bound
    assert (down, up) == pytest.approx((0.4 * bound * 4.0, 0.0), abs=1e-12)
    assert sure_allowance(f[2:], var[2:], n, k, (0.0, 4.0), 1.0, 0.05) == (0.0, 0.0)


def _session(seed=1, n_items=1000, count=30):
    """30 labels on items the jury is not sure of (none of its sure errors among them, as in
    most sessions of 30 labels at 5%), its labels, the pool and its mean."""
    rng = np.random.default_rng(seed)
    pool = sure_errors_pool(rng, n_items, wrong=0.05)
    var = pool.uncertainty * 16
    ids = [f"i{k}" for k in range(n_items)]
    pick = rng.choice(np.flatnonzero(var > SURE_SD**2), count, replace=False)
    jury = {i: {"accuracy": float(s)} for i, s in zip(ids, pool.score)}
    model = {i: {"accuracy": (float(s), float(v))} for i, s, v in zip(ids, pool.score, var)}
    lines = [{"id": ids[k], "rater": "r", "accuracy": int(pool.human[k])} for k in pick]
    return lines, jury, model, pool, float(pool.human.mean())


def test_agree_ppi_covers_a_mean_its_labels_have_seen_no_sure_error_of():
    """The reproduction with mean_estimates (agree --ppi, the page, the leaderboard's means):
    7 of 30 labels depart from the jury (its ordinary one-level noise), so the normal
    interval is shown, but none is one of its sure errors: the truth lay below the interval;
    the allowance takes it in and says so."""
    lines, jury, model, _pool, truth = _session()
    got = mean_estimates(lines, jury, {"accuracy": SCALE}, model=model)["accuracy"]
    assert got.interval == "normal" and got.departures >= NORMAL_DEPARTURES
    assert got.ci[0] <= truth <= got.ci[1], (got.ci, truth)
    assert any("sure of some items" in note for note in got.notes)
    down = float(got.notes[-1].split("(-")[1].split(",")[0])
    assert got.ci[0] + down > truth  # without the allowance: missed


def test_the_page_s_asymptotic_sequence_keeps_the_allowance(monkeypatch):
    """mean_sequences(method='asymptotic') on 60 such labels: the asymptotic sequence (the
    jury's floor on its variance) lay above the truth; less the allowance it covers it."""
    from jurybox.calibration.estimates import active

    lines, jury, model, _pool, truth = _session(seed=4, count=60)
    scales = {"accuracy": SCALE}
    got = mean_sequences(lines, jury, scales, None, method="asymptotic", model=model)["accuracy"]
    monkeypatch.setattr(active, "_sure_allowance", lambda *args: (0.0, 0.0))
    alone = mean_sequences(lines, jury, scales, None, method="asymptotic", model=model)["accuracy"]
    assert got["method"] == "asymptotic" and got["low"] <= truth <= got["high"]
    assert alone["low"] > truth and got["high"] >= alone["high"]


@pytest.mark.parametrize(
    ("wrong", "count", "active"), [(0.05, 30, False), (0.02, 60, False), (0.02, 100, True)]
)
def test_the_fixed_sample_interval_covers_a_jury_with_rare_sure_errors(wrong, count, active):
    """The issue's cells (0.885 at 30 labels and 5%, 0.917 at 60 and 100 and 2%), over 300
    sessions: covered at least 93% by the interval shown (fixed_sample_session: mean_estimates'
    interval, checked equal in test_small_sample.py)."""
    rng = np.random.default_rng(int(count + 1000 * wrong))
    rows = [
        fixed_sample_session(sure_errors_pool(rng, 2000, wrong=wrong), rng, [count], active=active)[
            0
        ]
        for _ in range(RUNS)
    ]
    assert np.mean([r["covered"] for r in rows]) >= FLOOR


@pytest.mark.parametrize(("wrong", "active"), [(0.05, False), (0.02, True)])
def test_the_asymptotic_sequence_holds_at_every_visit_for_rare_sure_errors(wrong, active):
    """The issue's time-uniform cells (0.872 at 5%, 0.761 at 2% with the active design), over
    300 sessions: the pool's mean inside the page's asymptotic sequence at every visit at
    least 93% of the time."""
    rng = np.random.default_rng(int(100 * wrong) + active)
    covered = 0
    for _ in range(RUNS):
        pool = sure_errors_pool(rng, 2000, wrong=wrong)
        pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(2000)
        horizon = mean_horizon(pool.score, pool.score, pool.uncertainty * 16, pi, 0.1)
        got = sequence_session(pool, rng, active=active, method="asymptotic", horizon=horizon)
        covered += got["covered"]
    assert covered / RUNS >= FLOOR, covered
