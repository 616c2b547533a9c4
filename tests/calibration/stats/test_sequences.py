"""Confidence sequences (#41 item 3): the betting sequence against a plain loop written from the
paper's definitions, and by simulation, 1,000 labelling sessions per setting: the truth stays
inside the sequence at every number of labels at once (so a labeller who stops on the first
narrow interval is covered), including the overconfident jury the fixed-sample rule fails.

Coverage thresholds: at 1,000 sessions the standard error of a 95% coverage is 0.7 points; each
test asks for at least 93.5% (two standard errors below nominal), which a sequence covering
less than 92% would fail with probability above 99%."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jurybox.calibration.estimates.active import (
    Design,
    inclusion_probabilities,
    mean_sequences,
    rectifier_range,
)
from jurybox.calibration.estimates.selection import ALPHA, agreement_sequence, horizon
from jurybox.calibration.estimates.synthetic import (
    LabellingPool,
    overconfident_pool,
    sequence_session,
    simulate_mean_labelling,
)
from jurybox.calibration.stats.sequences import (
    betting_cs,
    betting_interval,
    even_path,
    labels_needed,
    log_wealth,
)
from jurybox.rubrics.rubric import Scale

RUNS = 1000
FLOOR = 0.935


def loop_cs(x, alpha, population=None, grid=200):
    """The hedged betting sequence one candidate mean and one value at a time (Waudby-Smith
    and Ramdas 2023, section 4; bets as confseq's lambda_predmix_eb; truncation at half of 1/m
    and 1/(1-m); without replacement, the unseen values' mean), with the grid bounds rounded
    outwards and the running intersection."""
    lows, highs = [], []
    inside_by_t = [[] for _ in x]
    for k in range(grid + 1):
        m = k / grid
        up = down = 1.0
        total, squares, var_prev = 0.0, 0.0, 0.25
        impossible = False
        for t, value in enumerate(x, start=1):
            bet = math.sqrt(2 * math.log(2 / alpha) / (t * math.log(1 + t) * var_prev))
            mu = m if population is None else (population * m - total) / (population - t + 1)
            if not 0.0 <= mu <= 1.0:
                impossible = True
            if not impossible:
                b_up = min(bet, 0.5 / mu) if mu > 0 else bet
                b_up = max(b_up, -0.5 / (1 - mu)) if mu < 1 else b_up
                b_down = min(bet, 0.5 / (1 - mu)) if mu < 1 else bet
                b_down = max(b_down, -0.5 / mu) if mu > 0 else b_down
                up *= 1 + b_up * (value - mu)
                down *= 1 - b_down * (value - mu)
            total += value
            mean_t = min((0.5 + total) / (t + 1), 1.0)
            squares += (value - mean_t) ** 2
            var_prev = (0.25 + squares) / (t + 1)
            inside_by_t[t - 1].append(not impossible and max(up, down) / 2 < 1 / alpha)
    for t, inside in enumerate(inside_by_t, start=1):
        ok = [k for k, flag in enumerate(inside) if flag]
        low = max(0.0, (ok[0] - 1) / grid) if ok else 0.0
        high = min(1.0, (ok[-1] + 1) / grid) if ok else 1.0
        if population is not None:
            seen = sum(x[:t])
            low, high = max(low, seen / population), min(high, 1 - (t - seen) / population)
        lows.append(max([low] + lows[-1:]))
        highs.append(min([high] + highs[-1:]))
    return np.array(lows), np.array(highs)


@pytest.mark.parametrize("population", [None, 60])
def test_the_sequence_is_the_papers_betting_sequence(population):
    rng = np.random.default_rng(0)
    x = rng.beta(2, 5, 40)
    low, high = betting_cs(x, 0.05, population, grid=200)
    want_low, want_high = loop_cs(list(x), 0.05, population)
    assert low == pytest.approx(want_low, abs=1e-12)
    assert high == pytest.approx(want_high, abs=1e-12)
    assert np.all(np.diff(low) >= 0) and np.all(np.diff(high) <= 0)
    assert low[-1] <= x.mean() <= high[-1]


def test_the_interval_after_the_last_value_is_the_sequence_s_set_at_that_time():
    """What the page shows after each label: the bounds found finely (no running intersection),
    inside the grid's bounds, which round outwards by one step."""
    rng = np.random.default_rng(1)
    x = (rng.random(150) < 0.7).astype(float)
    for n in (1, 10, 60, 150):
        fine = betting_interval(x[:n], 0.05, 400)
        wealth = log_wealth(x[:n], np.linspace(0, 1, 1001), 0.05, 400)[:, -1]
        admitted = np.linspace(0, 1, 1001)[wealth < np.log(20)]
        seen = x[:n].sum()  # and what the values seen imply for the pool of 400
        low, high = max(admitted.min(), seen / 400), min(admitted.max(), 1 - (n - seen) / 400)
        assert fine[0] <= low + 1e-9 and fine[1] >= high - 1e-9
        assert fine[0] >= low - 2e-3 and fine[1] <= high + 2e-3
    assert betting_interval([], 0.05) == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"values in \[0, 1\]"):
        betting_interval([1.5], 0.05)


def test_a_few_labels_give_a_wide_interval_and_no_minimum_is_needed():
    """Three agreeing labels are no evidence of 100% agreement: the sequence stays wide."""
    low, high = betting_interval([1.0, 1.0, 1.0], 0.05)
    assert low < 0.2 and high == 1.0


def test_planning_uses_the_typical_path_and_the_whole_pool_bounds_it():
    path = even_path(0.25, 400)
    assert set(path) <= {0.0, 1.0}
    assert all(abs(path[:n].sum() - 0.25 * n) <= 0.5 for n in range(1, 401))
    needed = labels_needed(0.8, 0.05, horizon=horizon(0.05))
    low, high = betting_cs(even_path(0.8, needed), 0.05, horizon=horizon(0.05))
    assert (high[-1] - low[-1]) / 2 <= 0.05 < (high[-2] - low[-2]) / 2
    assert labels_needed(0.8, 0.05, population=300) <= 300  # the whole pool is exact


# --------------------------------------------------------------------------- agreement


def test_over_a_thousand_sessions_the_agreement_sequence_holds_at_every_label():
    """Pools of 2,000 items whose jury agrees with the humans on a share drawn in [0.6, 0.95];
    the items labelled in a uniform order without replacement; the pool's agreement stays
    inside the sequence (target half-width 0.05) at every one of the first 1,000 labels."""
    rng = np.random.default_rng(41)
    h = horizon(0.05)
    covered = 0
    for _ in range(RUNS):
        agreed = (rng.random(2000) < rng.uniform(0.6, 0.95)).astype(float)
        x = agreed[rng.permutation(2000)[:1000]]
        wealth = log_wealth(x, np.array([agreed.mean()]), ALPHA, 2000, h)[0]
        covered += bool(np.all(wealth < np.log(1 / ALPHA)))
    assert covered / RUNS >= FLOOR, covered


def test_the_page_s_agreement_is_each_item_s_share_over_the_pool_it_scored():
    scale = Scale(min=0, max=4)
    lines = [
        {"id": "a", "rater": "r1", "accuracy": 3},
        {"id": "b", "rater": "r1", "accuracy": 0},
        {"id": "a", "rater": "r2", "accuracy": 2},
    ]
    jury = {
        "a": {"accuracy": 3.2},
        "b": {"accuracy": 1.0},
        "c": {"accuracy": None},
        "d": {"accuracy": 2.0},
    }
    got = agreement_sequence(lines, jury, "accuracy", scale, 0.1)
    assert got["agreement"] == pytest.approx(0.25)  # a: 1 of 2 raters agree, b: none
    assert (got["n"], got["labels"], got["pool"]) == (2, 3, 3)
    assert (got["low"], got["high"]) == betting_interval([0.5, 0.0], ALPHA, 3, horizon(0.1))


# --------------------------------------------------------------------------- benchmark mean


def _mean_coverage(draw, active, seed):
    rng = np.random.default_rng(seed)
    return sum(sequence_session(draw(rng), rng, active=active)["covered"] for _ in range(RUNS))


@pytest.mark.parametrize(
    ("name", "draw", "active"),
    [
        ("overconfident", lambda rng: overconfident_pool(rng, 2000, wrong=0.03), True),
        ("overconfident-5%", lambda rng: overconfident_pool(rng, 2000, wrong=0.05), True),
        ("calibrated", lambda rng: LabellingPool.draw(rng, 2000), True),
        ("calibrated-uniform", lambda rng: LabellingPool.draw(rng, 2000), False),
        ("underconfident", lambda rng: LabellingPool.draw(rng, 2000, stated=4.0), True),
    ],
)
def test_over_a_thousand_sessions_the_mean_sequence_holds_at_every_visit(name, draw, active):
    """The pool's mean label stays inside the benchmark-mean sequence over the whole visiting
    order, for juries whose distributions are calibrated, underconfident, or overconfident
    (0.999 on their own score, wrong on 3% or 5% of the items: the case #41 reports the
    fixed-sample rule covering 70-79%)."""
    covered = _mean_coverage(draw, active, seed=hash(name) % 1000)
    assert covered / RUNS >= FLOOR, (name, covered)


def test_the_fixed_sample_rule_fails_the_overconfident_jury_the_sequence_does_not():
    """The contrast #41 starts from, 300 sessions each: stopping on the first 95% interval of
    half-width 0.1 after 30 labels, the fixed-sample rule covers the pool's mean far less
    often than 95% (its labels rarely see one of the jury's confident errors, and its
    distributions say it has none); the sequence's stopping point is covered."""
    rng = np.random.default_rng(7)
    fixed = [
        simulate_mean_labelling(overconfident_pool(rng, 2000), 0.1, rng)["covered"]
        for _ in range(300)
    ]
    assert np.mean(fixed) < 0.9
    sessions = [sequence_session(overconfident_pool(rng, 2000), rng, width=0.1) for _ in range(20)]
    # The price: the sequence waits for the labels to show the errors' share.
    assert all(s["labels"] is not None and s["labels"] > 100 for s in sessions)


def test_the_page_s_mean_sequence_is_the_simulation_s():
    """mean_sequences (what the page shows) from label lines equals the simulation's sequence
    for the same session: the rectifiers' betting interval, shifted by the jury's pool mean."""
    rng = np.random.default_rng(3)
    pool = LabellingPool.draw(rng, 300)
    ids = [f"i{k}" for k in range(300)]
    pi = inclusion_probabilities(pool.uncertainty)
    seed = 11
    design = Design.draw(pi, np.random.default_rng(seed))
    chosen = np.flatnonzero(design.chosen)[:40]
    lines = [
        {
            "id": ids[design.order[k]],
            "rater": "r",
            "accuracy": pool.human[design.order[k]],
            "selection": {
                "strategy": "benchmark-mean",
                "probability": float(design.pi[k]),
                "position": int(k),
                "pool": 300,
                "seed": seed,
            },
        }
        for k in chosen
    ]
    scale = Scale(min=0, max=4)
    jury = {i: {"accuracy": float(s)} for i, s in zip(ids, pool.score)}
    got = mean_sequences(lines, jury, {"accuracy": scale}, dict(zip(ids, map(float, pi))))
    row = got["accuracy"]
    assert row["labelled"] == 40 and row["visited"] == chosen[-1] + 1
    order = design.order[: chosen[-1] + 1]
    d = np.where(
        design.chosen[: chosen[-1] + 1],
        (pool.human[order] - pool.score[order]) / design.pi[: chosen[-1] + 1],
        0.0,
    )
    low, high = rectifier_range(pool.score, pi, 0.0, 4.0)
    lo, hi = betting_interval((d - low) / (high - low), ALPHA)
    mean = pool.score.mean()
    assert row["low"] == pytest.approx(max(0.0, mean + low + lo * (high - low)))
    assert row["high"] == pytest.approx(min(4.0, mean + low + hi * (high - low)))


# --------------------------------------------------------------------------- asymptotic (#52)


@pytest.mark.parametrize(("t", "horizon"), [(10, 50), (100, 100), (1000, 300)])
def test_the_asymptotic_boundary_is_where_robbins_normal_mixture_reaches_one_over_alpha(t, horizon):
    """The asymptotic sequence's half-width per standard deviation, times t, is the sum of t
    unit-variance values at which Robbins' normal-mixture martingale (Waudby-Smith et al.
    2024, Theorem 2.2: exp(lambda S - lambda^2 t / 2) mixed over lambda ~ N(0, rho^2)),
    integrated numerically from its definition, reaches 1 / alpha."""
    from scipy import integrate, stats

    from jurybox.calibration.stats.sequences import asymptotic_margin, best_rho2

    rho2 = best_rho2(horizon, 0.05)
    s = t * float(asymptotic_margin(t, rho2, 0.05))
    mixture, _ = integrate.quad(
        lambda lam: math.exp(lam * s - lam**2 * t / 2) * stats.norm.pdf(lam, 0, math.sqrt(rho2)),
        -np.inf,
        np.inf,
        epsabs=1e-12,
        epsrel=1e-10,
    )
    assert mixture == pytest.approx(1 / 0.05, rel=1e-6)


def test_rho_is_the_one_that_makes_the_sequence_narrowest_at_the_horizon():
    """best_rho2 against a numerical minimisation of the width at the horizon, and against the
    paper's closed-form approximation rho^2 = (-2 log alpha + log(1 - 2 log alpha)) / t*
    (within 5%: the approximation drops a term)."""
    from scipy import optimize

    from jurybox.calibration.stats.sequences import asymptotic_margin, best_rho2

    for t_star, alpha in ((50, 0.05), (400, 0.05), (200, 0.1)):

        def width(r, t_star=t_star, alpha=alpha):
            return float(asymptotic_margin(t_star, r, alpha))

        got = optimize.minimize_scalar(
            width, bounds=(1e-6, 2.0), method="bounded", options={"xatol": 1e-10}
        )
        assert best_rho2(t_star, alpha) == pytest.approx(got.x, rel=1e-4)
        approx = (-2 * math.log(alpha) + math.log(1 - 2 * math.log(alpha))) / t_star
        assert best_rho2(t_star, alpha) == pytest.approx(approx, rel=0.05)
    # The price of looking after every value: about 1.55 times the normal interval at 95%.
    ratio = float(asymptotic_margin(100, best_rho2(100), 0.05)) * 10 / 1.959964
    assert ratio == pytest.approx(1.549, abs=0.002)


def test_the_asymptotic_sequence_holds_at_every_time_for_well_behaved_values():
    """1,000 sequences of 2,000 values, tuned for 200: the mean stays inside at every time at
    once in at least 93.5% of them, for normal values from the 10th value on (measured 96.1%),
    and for skewed (exponential) ones from the 100th (95.6%): the guarantee is asymptotic, and
    from the 30th the exponential's was 91.6%, which is why the page shows it only once the
    labels hold enough departures from the jury (jurybox.calibration.estimates.rectified)."""
    from jurybox.calibration.stats.sequences import asymptotic_cs

    rng = np.random.default_rng(17)
    for draw, start in (
        (lambda: rng.normal(1.0, 2.0, 2000), 10),
        (lambda: rng.exponential(1.0, 2000), 100),
    ):
        covered = 0
        for _ in range(RUNS):
            lo, hi = asymptotic_cs(draw(), 0.05, 200)
            covered += bool(np.all((lo[start - 1 :] <= 1.0) & (hi[start - 1 :] >= 1.0)))
        assert covered / RUNS >= FLOOR, (start, covered)
    x = rng.normal(size=50)
    lo, hi = asymptotic_cs(x, 0.05, 40, variance_floor=4.0)
    assert (lo[9] + hi[9]) / 2 == pytest.approx(x[:10].mean()) and np.isinf(lo[0])
    half = (hi[9] - lo[9]) / 2
    from jurybox.calibration.stats.sequences import asymptotic_margin, best_rho2

    assert half == pytest.approx(
        math.sqrt(max(4.0, np.var(x[:10], ddof=1)))
        * float(asymptotic_margin(10, best_rho2(40), 0.05))
    )


def _asymptotic_coverage(draw, active, seed):
    from jurybox.calibration.estimates.active import mean_horizon

    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(RUNS):
        pool = draw(rng)
        pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
        horizon = mean_horizon(pool.score, pool.score, pool.uncertainty * 16, pi, 0.1)
        covered += sequence_session(pool, rng, active=active, method="asymptotic", horizon=horizon)[
            "covered"
        ]
    return covered


@pytest.mark.parametrize(
    ("name", "draw", "active"),
    [
        ("overconfident", lambda rng: overconfident_pool(rng, 2000, wrong=0.03), True),
        ("overconfident-10%", lambda rng: overconfident_pool(rng, 2000, wrong=0.1), True),
        ("calibrated", lambda rng: LabellingPool.draw(rng, 2000), True),
        ("underconfident-uniform", lambda rng: LabellingPool.draw(rng, 2000, stated=4.0), False),
    ],
)
def test_over_a_thousand_sessions_the_asymptotic_mean_sequence_holds_at_every_visit(
    name, draw, active
):
    """#52 item 4: the page's asymptotic sequence for the mean (the betting sequence until 5
    labels depart from the jury's score, then the asymptotic one tuned for the plan's count
    at half-width 0.1, its variance floored by the jury's distributions) holds the pool's
    mean at every visit at once, including the overconfident juries whose rare errors the
    labels see late (measured over 1,000 sessions in perf/sequences.py: 95.8-99.5%)."""
    covered = _asymptotic_coverage(draw, active, seed=hash(name) % 1000)
    assert covered / RUNS >= FLOOR, (name, covered)


def test_the_asymptotic_sequence_costs_the_active_design_a_fraction_of_the_betting_s_labels():
    """#52 item 4: with the active choice (weights 1/pi up to 10), the betting sequence needs
    about 820 labels for half-width 0.1 on a calibrated jury's 2,000 items, the asymptotic one
    about 180 (a fixed-sample interval: about 70); 15 sessions each, medians."""
    from jurybox.calibration.estimates.active import mean_horizon

    rng = np.random.default_rng(44)
    needs = {"betting": [], "asymptotic": []}
    for method in needs:
        for _ in range(15):
            pool = LabellingPool.draw(rng, 2000)
            pi = inclusion_probabilities(pool.uncertainty)
            horizon = (
                mean_horizon(pool.score, pool.score, pool.uncertainty * 16, pi, 0.1)
                if method == "asymptotic"
                else None
            )
            got = sequence_session(pool, rng, width=0.1, grid=200, method=method, horizon=horizon)[
                "labels"
            ]
            needs[method].append(np.inf if got is None else got)
    betting, asymptotic = np.median(needs["betting"]), np.median(needs["asymptotic"])
    assert asymptotic * 3 <= betting and asymptotic <= 250, (asymptotic, betting)


def test_the_page_s_asymptotic_mean_sequence_is_the_simulation_s():
    """mean_sequences(method='asymptotic') from label lines: the betting sequence while fewer
    than 5 labels depart from the jury, then the asymptotic sequence of the session's terms
    (the jury's floor on their variance), shifted by the jury's pool mean."""
    from jurybox.calibration.estimates.rectified import term_variance
    from jurybox.calibration.stats.sequences import asymptotic_cs

    rng = np.random.default_rng(4)
    pool = LabellingPool.draw(rng, 300)
    ids = [f"i{k}" for k in range(300)]
    pi = inclusion_probabilities(pool.uncertainty)
    seed = 12
    design = Design.draw(pi, np.random.default_rng(seed))
    scale = Scale(min=0, max=4)
    jury = {i: {"accuracy": float(s)} for i, s in zip(ids, pool.score)}
    model = {
        i: {"accuracy": (float(s), float(u * 16))}
        for i, s, u in zip(ids, pool.score, pool.uncertainty)
    }
    for count, method in ((2, "betting"), (40, "asymptotic")):
        chosen = np.flatnonzero(design.chosen)[:count]
        lines = [
            {
                "id": ids[design.order[k]],
                "rater": "r",
                "accuracy": pool.human[design.order[k]],
                "selection": {
                    "strategy": "benchmark-mean",
                    "probability": float(design.pi[k]),
                    "position": int(k),
                    "pool": 300,
                    "seed": seed,
                },
            }
            for k in chosen
        ]
        got = mean_sequences(
            lines,
            jury,
            {"accuracy": scale},
            dict(zip(ids, map(float, pi))),
            horizon=80,
            method="asymptotic",
            model=model,
        )["accuracy"]
        assert got["method"] == method, got
        order = design.order[: chosen[-1] + 1]
        d = np.where(
            design.chosen[: chosen[-1] + 1],
            (pool.human[order] - pool.score[order]) / design.pi[: chosen[-1] + 1],
            0.0,
        )
        mean = pool.score.mean()
        if method == "betting":
            low, high = rectifier_range(pool.score, pi, 0.0, 4.0)
            lo, hi = betting_interval((d - low) / (high - low), ALPHA)
            want = (mean + low + lo * (high - low), mean + low + hi * (high - low))
        else:
            floor = term_variance(pool.score, pool.uncertainty * 16, pool.score, pi)
            lo, hi = asymptotic_cs(d, ALPHA, 80, floor)
            want = (mean + lo[-1], mean + hi[-1])
        assert got["low"] == pytest.approx(max(0.0, want[0]))
        assert got["high"] == pytest.approx(min(4.0, want[1]))


def test_the_asymptotic_sequence_of_one_value_is_at_least_the_bounded_score_interval():
    """#60: values that all take one value estimate no variance; with their bounds the
    asymptotic sequence is at least the bounded score interval (Wilson's on {0, 1}, the margin
    times sqrt(t) in place of the normal quantile), and unchanged once they spread."""
    from statistics import NormalDist

    from statsmodels.stats.proportion import proportion_confint

    from jurybox.calibration.stats.sequences import (
        asymptotic_cs,
        asymptotic_margin,
        best_rho2,
    )

    x = np.concatenate([np.zeros(40), [1.0, 0.0]])
    lo, hi = asymptotic_cs(x, 0.05, 50.0, 0.0, (0.0, 1.0))
    bare_lo, bare_hi = asymptotic_cs(x, 0.05, 50.0)
    t = 30
    q = float(asymptotic_margin(t, best_rho2(50.0)) * np.sqrt(t))
    wilson = proportion_confint(0, t, alpha=2 * (1 - NormalDist().cdf(q)), method="wilson")
    assert (lo[t - 1], hi[t - 1]) == pytest.approx(wilson, abs=1e-9)
    assert bare_hi[t - 1] == 0.0 and hi[t - 1] > 0.1
    assert (lo[-2:], hi[-2:]) == (pytest.approx(bare_lo[-2:]), pytest.approx(bare_hi[-2:]))
