"""What each labelling goal's labels are good for, in simulated sessions (seeded, over pools of
judged items with known human truth, 1,000 sessions per goal): `agreement`'s interval and
`benchmark-mean`'s cover the pool's truth at the nominal rate, and a cascade fitted on `cascade`'s
labels keeps its guarantee on the pool. For benchmark-mean also: the items' uncertainty and
inclusion probabilities, the weighted PPI++ estimate against ppi-python, active against uniform
choice, and the plan."""

from __future__ import annotations

import numpy as np
import pytest

from jurybox.calibration import InputDataError, load_human_labels
from jurybox.calibration.estimates.active import (
    Design,
    MeanEstimate,
    criterion_uncertainty,
    inclusion_probabilities,
    item_uncertainty,
    mean_estimates,
    plan_mean,
    weighted_mean,
    z_of,
)
from jurybox.calibration.estimates.cascade_threshold import CascadeTargetError, fit_threshold
from jurybox.calibration.estimates.selection import Selector, clopper_pearson, half_width, progress
from jurybox.calibration.estimates.synthetic import (
    CascadeSimulation,
    LabellingPool,
    simulate_mean_labelling,
    weighted_mean_path,
)
from jurybox.rubrics import Scale, VerdictRecord

SCALE = Scale.coerce([0, 1, 2, 3, 4])
SCALES = {"accuracy": SCALE}


def record(i, votes, score=2.0):
    return VerdictRecord.model_validate(
        {
            "id": f"i{i}",
            "status": "scored",
            "rubric": "r",
            "jury": "j",
            "provenance": "p",
            "scores": {"accuracy": score},
            "votes": [
                {"judge": f"j{k}", "criterion": "accuracy", **v} for k, v in enumerate(votes)
            ],
        }
    )


# --------------------------------------------------------------------------- the design


def test_uncertainty_is_the_variance_of_the_judges_mixed_distributions_over_the_range():
    a = {"score": 1.0, "distribution": {"1": 0.5, "2": 0.5}}
    b = {"score": 3.0}  # no distribution: a point mass on its score
    # The mixture puts 1/4, 1/4, 1/2 on 1, 2, 3: mean 2.25, E[x^2] 5.75, variance 0.6875.
    got = criterion_uncertainty(record(0, [a, b]).votes, SCALE)
    assert got == pytest.approx(0.6875 / 16)
    assert item_uncertainty(record(0, [a, b]), SCALES) == pytest.approx(0.6875 / 16)
    assert item_uncertainty(record(1, [a, b], score=None), SCALES) == 0.25  # unscored: maximal
    # The simulated pools' uncertainty is the same quantity.
    pool = LabellingPool.draw(np.random.default_rng(0), 5)
    for k in range(5):
        dist = {str(v): float(p) for v, p in enumerate(pool.dist[k])}
        r = record(k, [{"score": float(pool.score[k]).__round__(), "distribution": dist}])
        assert item_uncertainty(r, SCALES) == pytest.approx(pool.uncertainty[k])


def test_inclusion_probabilities_grow_with_the_root_of_the_uncertainty_between_floor_and_one():
    u = np.linspace(0, 0.25, 101)
    pi = inclusion_probabilities(u)
    assert pi[0] == pytest.approx(0.1) and np.all(np.diff(pi) >= 0)
    assert np.all(pi[u >= np.quantile(u, 0.9)] == 1.0)  # the most uncertain tenth: always
    mid = (pi > 0.1) & (pi < 1)
    assert np.allclose((pi[mid] - 0.1) / np.sqrt(u[mid]), (pi[mid][0] - 0.1) / np.sqrt(u[mid][0]))
    assert np.all(inclusion_probabilities(np.zeros(5)) == 1.0)  # nothing to be active about


def test_the_selector_offers_only_chosen_items_in_the_visiting_order_and_records_the_choice():
    ids = [f"i{k}" for k in range(200)]
    u = dict(zip(ids, np.random.default_rng(3).random(200) * 0.2))
    sel = Selector(ids, "benchmark-mean", seed=5, uncertainty=u)
    again = Selector(ids, "benchmark-mean", seed=5, uncertainty=u)
    assert sel.order == again.order and sel.chosen == again.chosen  # fixed by the seed
    latest: dict = {}
    offered = []
    while (choice := sel.next("ann", latest)) is not None:
        offered.append(choice)
        latest[(choice.id, "ann")] = {
            "id": choice.id,
            "rater": "ann",
            "accuracy": 1,
            "selection": choice.selection,
        }
    assert [c.id for c in offered] == [i for i in sel.order if i in sel.chosen]
    positions = [c.selection["position"] for c in offered]
    assert positions == sorted(positions) and len(offered) < 200
    for c in offered:
        assert c.selection["strategy"] == "benchmark-mean" and c.selection["pool"] == 200
        assert c.selection["probability"] == pytest.approx(sel.probability[c.id])
        assert 0.1 <= c.selection["probability"] <= 1
    with pytest.raises(InputDataError, match="uncertainty"):
        Selector(ids, "benchmark-mean")


# --------------------------------------------------------------------------- the estimate


def test_uniform_labels_give_the_ppi_python_interval_on_a_large_pool():
    """With every visited item labelled and a pool far larger than the labels, the design-based
    estimate is PPI++'s (the finite-population correction is then ~1)."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    rng = np.random.default_rng(7)
    big_n, n = 200_000, 400
    f = rng.normal(2, 1, big_n)
    labelled = rng.choice(big_n, n, replace=False)
    y = f[labelled] + 0.3 + rng.normal(0, 0.5, n)
    est, se, *_ = weighted_mean(f, f[labelled], y, np.ones(n), n, lam=1.0)
    rest = np.delete(f, labelled)
    ref = float(np.asarray(ppi_mean_pointestimate(y, f[labelled], rest, lam=1.0)).ravel()[0])
    low, high = (
        float(np.asarray(b).ravel()[0])
        for b in ppi_mean_ci(y, f[labelled], rest, alpha=0.05, lam=1.0)
    )
    assert est == pytest.approx(ref, abs=0.02 * se)
    assert 2 * z_of(0.95) * se == pytest.approx(high - low, rel=0.01)


def _session_with_unscored(seed, n_items=400, unscored=0.15, labels=60, bias=0.8):
    """A benchmark-mean session over a pool of which ``unscored`` the jury left unscored, a
    jury biased by ``bias``; the first ``labels`` chosen items labelled with their truth.
    Returns the selector, the pool, the label lines and the truth over the scored items."""
    rng = np.random.default_rng(seed)
    ids = [f"i{k}" for k in range(n_items)]
    truth = rng.integers(0, 5, n_items).astype(float)
    left = rng.random(n_items) < unscored
    scores = {
        i: {"accuracy": None if out else float(np.clip(t + bias, 0, 4))}
        for i, t, out in zip(ids, truth, left)
    }
    uncertainty = {i: 0.25 if out else float(rng.uniform(0.01, 0.1)) for i, out in zip(ids, left)}
    sel = Selector(ids, "benchmark-mean", seed=seed, uncertainty=uncertainty)
    lines = []
    for item in sel.order:
        if item in sel.chosen and scores[item]["accuracy"] is not None and len(lines) < labels:
            k = sel.position[item]
            lines.append(
                {
                    "id": item,
                    "accuracy": truth[int(item[1:])],
                    "selection": {
                        "strategy": "benchmark-mean",
                        "probability": sel.probability[item],
                        "position": k,
                        "pool": n_items,
                        "seed": seed,
                    },
                }
            )
    return sel, scores, lines, float(truth[~left].mean())


def test_unscored_items_visited_do_not_count_as_visited_items_of_the_pool():
    """#43 item 3: M counts the visited items of the pool the estimate is over, the scored
    ones; counting the unscored ones too biased the estimate towards the jury (a jury biased
    +0.8 with 15% unscored: +0.026 over many sessions). Checked exactly on one session, and as
    the bias over 400 sessions (within 3 standard errors of 0)."""
    sel, scores, lines, _ = _session_with_unscored(1)
    probabilities = {i: sel.probability[i] for i in scores}
    got = mean_estimates(lines, scores, SCALES, probabilities=probabilities)["accuracy"]
    reach = max(line["selection"]["position"] for line in lines) + 1
    scored_visited = sum(scores[i]["accuracy"] is not None for i in sel.order[:reach])
    assert scored_visited < reach and got.visited == scored_visited
    assert any("mean label over the" in note and "items it scored" in note for note in got.notes)
    errors = []
    for seed in range(400):
        sel, scores, lines, truth = _session_with_unscored(seed)
        e = mean_estimates(
            lines, scores, SCALES, probabilities={i: sel.probability[i] for i in scores}
        )["accuracy"]
        errors.append(e.estimate - truth)
    bias, se = np.mean(errors), np.std(errors, ddof=1) / np.sqrt(len(errors))
    assert abs(bias) <= 3 * se, (bias, se)


def test_labels_from_the_session_file_mix_no_design_and_are_refused_by_unweighted_readers(tmp_path):
    pool = {f"i{k}": {"accuracy": float(k % 5)} for k in range(50)}
    active = [
        {
            "id": f"i{k}",
            "rater": "ann",
            "accuracy": k % 5,
            "labelled_at": "t",
            "selection": {"strategy": "benchmark-mean", "probability": 0.5, "position": 2 * k},
        }
        for k in range(10)
    ]
    got = mean_estimates(active, pool, SCALES)["accuracy"]
    assert isinstance(got, MeanEstimate) and got.visited == 19 and "active" in got.design
    uniform = {
        "id": "i40",
        "rater": "bob",
        "accuracy": 1,
        "labelled_at": "t",
        "selection": {"strategy": "uniform", "probability": None},
    }
    with pytest.raises(InputDataError, match="one design"):
        mean_estimates([*active, uniform], pool, SCALES)
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(__import__("json").dumps(line) for line in active) + "\n")
    with pytest.raises(InputDataError, match=r"10 labels .* chosen actively .* agree --ppi"):
        load_human_labels(path, scales=SCALES)
    assert (
        progress({(x["id"], "ann"): x for x in active}, pool, SCALES, 0.1, 50, "benchmark-mean")[
            "mean"
        ]["accuracy"]["labelled"]
        == 10
    )
    # The page's progress says why, rather than failing, when a client labelled its own pick.
    mixed = progress(
        {(x["id"], x["rater"]): x for x in [*active, uniform]},
        pool,
        SCALES,
        0.1,
        50,
        "benchmark-mean",
    )
    assert "one design" in mixed["mean"]["accuracy"]["reason"] and not mixed["goal_met"]


# --------------------------------------------------------------------------- simulated sessions


def _sessions(active, runs, seed, width=0.06, share=0.3, floor=True):
    rng = np.random.default_rng(seed)
    return [
        simulate_mean_labelling(
            LabellingPool.draw(rng, uncertain_share=share),
            width,
            rng,
            active=active,
            step=5,
            floor=floor,
        )
        for _ in range(runs)
    ]


@pytest.mark.parametrize("floor", [True, False])
@pytest.mark.parametrize("active", [True, False])
def test_the_simulations_running_sums_are_weighted_mean_after_every_label(active, floor):
    """The simulated sessions below take weighted_mean after each label from running sums
    (weighted_mean_path); here they are weighted_mean itself, label by label."""
    rng = np.random.default_rng(7 + active + 2 * floor)
    pool = LabellingPool.draw(rng, 400)
    pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(400)
    model = (pool.score, pool.uncertainty * 16.0, pi) if floor else None
    design = Design.draw(pi, rng)
    at = np.flatnonzero(design.chosen)
    items = design.order[at]
    estimates, ses = weighted_mean_path(
        pool.score, pool.score[items], pool.human[items], design.pi[at], at + 1, model=model
    )
    assert np.isnan(estimates[0]) and np.isnan(ses[0])
    for n in range(2, len(at) + 1):
        estimate, se, *_ = weighted_mean(
            pool.score,
            pool.score[items[:n]],
            pool.human[items[:n]],
            design.pi[at[:n]],
            int(at[n - 1]) + 1,
            model=model,
        )
        assert (estimates[n - 1], ses[n - 1]) == pytest.approx((estimate, se), rel=1e-9), n


def _coverage(runs):
    covered = sum(r["covered"] for r in runs)
    return covered, clopper_pearson(covered, len(runs))


@pytest.mark.parametrize("share", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("active", [True, False], ids=["active", "uniform"])
def test_over_a_thousand_sessions_the_interval_covers_the_pool_mean_at_the_nominal_rate(
    active, share
):
    """Each session stops as the page does: at the first check where the half-width is at most
    the target; ``share`` of the items are ones the jury is unsure of (0: sharp on every item).
    The coverage is not below 95% (its binomial interval reaches 0.95), and not far above
    where the jury's uncertainty varies (a jury sharp on every item is covered conservatively:
    the floor on the variance, from its own distributions, rules there)."""
    covered, (low, high) = _coverage(
        _sessions(active, 1000, seed=int(20 + 10 * share + active), share=share)
    )
    assert high >= 0.95, covered
    assert share == 0 or low <= 0.975, covered


def test_without_the_jurys_floor_on_the_variance_a_sharp_jury_undercovers():
    """Why the floor (calibration.active's text): where the jury is sharp on every item, the
    first labels rarely see one of its errors, and their variance alone is too small."""
    covered, (_, high) = _coverage(_sessions(True, 1000, seed=25, share=0.0, floor=False))
    assert high < 0.9, covered


def test_an_underconfident_jury_pays_no_labels_for_the_floor_and_stays_covered():
    """#43 item 1: a jury stating four times the variance of its errors (means as accurate)
    needed 330 labels with the floor against 142 without it (coverage 1.000). Once the labels
    show its distributions overstate its errors the floor is dropped: the labels needed are
    those without it (median within 10%), the coverage still nominal (its binomial interval
    reaches 0.95) over 600 sessions."""

    def sessions(floor):
        rng = np.random.default_rng(5)
        return [
            simulate_mean_labelling(
                LabellingPool.draw(rng, stated=4.0), 0.06, rng, step=5, floor=floor
            )
            for _ in range(600)
        ]

    kept, bare = sessions(True), sessions(False)
    needed = np.median([r["labels"] for r in kept])
    assert needed <= 1.1 * np.median([r["labels"] for r in bare]), needed
    covered, (_, high) = _coverage(kept)
    assert high >= 0.95, covered


def test_the_overstatement_test_keeps_the_floor_for_a_sharp_calibrated_jury():
    """The floor is dropped only on evidence: for a calibrated jury sharp on every item, whose
    first labels often show none of its rare errors, the test rejects in at most 5% of
    sessions after 30 labels (the bound on its variance makes it conservative), and for the
    underconfident jury above it rejects in most."""
    from jurybox.calibration.estimates.active import OVERSTATED_Z, overstatement

    def rejected(stated, share):
        rng, hits = np.random.default_rng(8), 0
        for _ in range(400):
            pool = LabellingPool.draw(rng, 200, uncertain_share=share, stated=stated)
            got = rng.choice(200, 30, replace=False)
            z = overstatement(
                pool.human[got], pool.score[got], pool.uncertainty[got] * 16, 0.0, 4.0
            )
            hits += z[-1] < -OVERSTATED_Z
        return hits / 400

    assert rejected(1.0, 0.0) <= 0.05 and rejected(1.0, 0.3) <= 0.05
    assert rejected(4.0, 0.3) >= 0.8
    # mean_estimates (the page, agree --ppi, labels plan) takes the same decision and says so.
    rng = np.random.default_rng(3)
    pool = LabellingPool.draw(rng, 300, stated=4.0)
    ids = [f"i{k}" for k in range(300)]
    scores = {i: {"accuracy": float(v)} for i, v in zip(ids, pool.score)}
    model = {
        i: {"accuracy": (float(m), float(u * 16))}
        for i, m, u in zip(ids, pool.score, pool.uncertainty)
    }
    lines = [{"id": ids[k], "accuracy": float(pool.human[k])} for k in range(60)]
    with_model = mean_estimates(lines, scores, SCALES, model=model)["accuracy"]
    bare = mean_estimates(lines, scores, SCALES)["accuracy"]
    assert with_model.half_width == pytest.approx(bare.half_width)
    assert any("overstate its errors" in note for note in with_model.notes)


def test_active_choice_reaches_the_target_with_at_least_30_percent_fewer_labels():
    """perf/labelling.py reports the ratio (perf/RESULTS.md)."""
    active = np.median([r["labels"] for r in _sessions(True, 200, seed=31)])
    uniform = np.median([r["labels"] for r in _sessions(False, 200, seed=32)])
    assert active <= 0.7 * uniform, (active, uniform)


def test_the_plan_from_the_first_labels_predicts_the_simulated_need_within_a_quarter():
    """After 40 actively chosen labels, the plan for the target against the labels the same
    session then needed (median ratio over 200 sessions)."""
    rng = np.random.default_rng(41)
    ratios = []
    for _ in range(200):
        pool = LabellingPool.draw(rng)
        pi = inclusion_probabilities(pool.uncertainty)
        seed = int(rng.integers(1 << 31))
        design = Design.draw(pi, np.random.default_rng(seed))
        at = np.flatnonzero(design.chosen)[:40]
        ids = [f"i{k}" for k in range(pool.score.size)]
        lines = [
            {
                "id": ids[k],
                "accuracy": float(pool.human[k]),
                "selection": {
                    "strategy": "benchmark-mean",
                    "probability": float(p),
                    "position": int(j),
                },
            }
            for k, p, j in zip(design.order[at], design.pi[at], at)
        ]
        scores = {i: {"accuracy": float(s)} for i, s in zip(ids, pool.score)}
        model = {
            i: {"accuracy": (float(s), float(u * 16))}
            for i, s, u in zip(ids, pool.score, pool.uncertainty)
        }
        planned = plan_mean(lines, scores, model, SCALES, 0.06, dict(zip(ids, pi)))["accuracy"]
        need = simulate_mean_labelling(pool, 0.06, np.random.default_rng(seed), step=1)
        ratios.append(planned["needed"] / need["labels"])
    assert 0.75 <= float(np.median(ratios)) <= 1.25, np.percentile(ratios, [10, 50, 90])


def _plan_inputs(pool):
    """A simulated pool as plan_mean takes it: scores, the jury's model, inclusion
    probabilities, per item id."""
    ids = [f"i{k}" for k in range(pool.score.size)]
    pi = dict(zip(ids, inclusion_probabilities(pool.uncertainty)))
    model = {
        i: {"accuracy": (float(s), float(u * 16))}
        for i, s, u in zip(ids, pool.score, pool.uncertainty)
    }
    return {i: {"accuracy": float(s)} for i, s in zip(ids, pool.score)}, model, pi


def test_before_any_label_the_plan_comes_from_the_jurys_own_uncertainty():
    rng = np.random.default_rng(51)
    pool = LabellingPool.draw(rng)
    scores, model, pi = _plan_inputs(pool)
    planned = plan_mean([], scores, model, SCALES, 0.06, pi)["accuracy"]
    need = np.median(
        [simulate_mean_labelling(pool, 0.06, rng, step=1)["labels"] for _ in range(50)]
    )
    assert planned["range"][0] <= planned["needed"] <= (planned["range"][1] or pool.score.size)
    assert 0.75 <= planned["needed"] / need <= 1.25, (planned, need)
    assert "verdicts alone" in planned["basis"]
    assert plan_mean([], scores, model, SCALES, 1e-4, pi)["accuracy"]["needed"] is None


def test_the_plan_for_the_page_s_sequence_predicts_its_simulated_need():
    """The labels the page's confidence sequence needs (the page stops on it), planned before
    any label from the jury's own distributions, are within 20% of the median need over 20
    sessions on a pool whose labels are drawn from those distributions (a calibrated jury); a
    uniform order needs fewer than the active choice under the sequence (perf/RESULTS.md)."""
    from jurybox.calibration.estimates.synthetic import sequence_session

    rng = np.random.default_rng(52)
    pool = LabellingPool.draw(rng, 600)
    scores, model, pi = _plan_inputs(pool)
    planned = plan_mean([], scores, model, SCALES, 0.35, pi, sequence=True, method="betting")[
        "accuracy"
    ]["sequence"]
    need = np.median(
        [sequence_session(pool, rng, width=0.35, grid=1000)["labels"] or np.inf for _ in range(20)]
    )
    assert planned["needed"] is not None and 0.8 <= planned["needed"] / need <= 1.2, (planned, need)
    assert "confidence sequence" in planned["basis"]
    uniform = plan_mean([], scores, model, SCALES, 0.35, None, sequence=True, method="betting")[
        "accuracy"
    ]["sequence"]
    assert uniform["needed"] < planned["needed"]


@pytest.mark.parametrize("stated", [0.1, 1.0, 4.0])
def test_before_any_label_the_plan_says_what_it_cannot_know_and_counts_the_shown_interval(stated):
    """#43 item 2: before any label the plan for an overconfident jury (stating a tenth of
    its errors' variance) said ~13 labels where ~200 were needed, and its "factor of two"
    range held the need in 0% of runs. The count is still the calibrated jury's (labels alone
    can show the calibration), said as such; the range runs from a jury better than it says to
    labels that never depart from the jury (None: more than the pool), and it holds every
    session's simulated need, calibrated, over- or underconfident. #52: no 30-label floor; the
    count is the one the interval shown needs, so never a normal interval on fewer labels than
    the departures it waits for."""
    from jurybox.calibration.estimates.active import NORMAL_DEPARTURES

    rng = np.random.default_rng(int(stated * 10))
    needs, planned = [], {}
    for _ in range(20):
        pool = LabellingPool.draw(rng, 1000, stated=stated)
        scores, model, pi = _plan_inputs(pool)
        planned = plan_mean([], scores, model, SCALES, 0.06, pi)["accuracy"]
        need = simulate_mean_labelling(pool, 0.06, rng, step=1, min_labels=2)["labels"]
        needs.append(need)
        assert planned["range"][0] <= need <= (planned["range"][1] or pool.score.size)
        assert planned["range"][0] <= planned["needed"]
    assert "only labels can show" in planned["basis"]
    if stated < 1:  # what the count cannot know: the overconfident jury needs several times it
        assert np.median(needs) >= 3 * planned["needed"], (needs, planned)
    easy = plan_mean([], scores, model, SCALES, 1.5, pi)["accuracy"]
    assert easy["normal"] < NORMAL_DEPARTURES  # the bare normal formula: a label or two
    assert easy["needed"] >= NORMAL_DEPARTURES and easy["needed"] == easy["further"]


def test_the_plan_s_count_is_what_the_shown_interval_needs_for_an_overconfident_jury():
    """#52: for a jury 0.999 sure of its score and wrong on 3% of items, labels plan's headline
    was the normal approximation's 30 labels, where the interval agree --ppi shows now (the
    betting interval: no label departs from the jury yet) has a half-width of about 0.64, not
    0.1. The plan now counts what the interval shown needs, saying it is the betting interval,
    and at that count the median of 40 simulated sessions' intervals is within the target."""
    from jurybox.calibration.estimates.synthetic import fixed_sample_session, overconfident_pool

    rng = np.random.default_rng(61)
    pool = overconfident_pool(rng, 2000)
    scores, model, pi = _plan_inputs(pool)
    planned = plan_mean([], scores, model, SCALES, 0.1, pi)["accuracy"]
    assert planned["interval"] == "betting" and planned["needed"] > 100, planned
    at = [
        fixed_sample_session(overconfident_pool(rng, 2000), rng, [planned["needed"]])[0]
        for _ in range(40)
    ]
    assert np.median([r["half_width"] for r in at]) <= 0.1
    early = [fixed_sample_session(overconfident_pool(rng, 2000), rng, [30])[0] for _ in range(40)]
    assert np.median([r["half_width"] for r in early]) > 0.3  # the old headline's count


def test_the_plans_upper_end_is_what_labels_as_spread_as_the_scale_allows_need():
    """The range's upper end, checked where it is finite (a uniform order on a large pool): a
    jury that says 2 on every item, sure of it, whose labels are 0 or 4 half the time each (the
    widest spread on 0-4), needs about that many labels (the simulated median within 10%)."""
    n_items = 50_000
    ids = [f"i{k}" for k in range(n_items)]
    scores = {i: {"accuracy": 2.0} for i in ids}
    model = {i: {"accuracy": (2.0, 0.0)} for i in ids}
    planned = plan_mean([], scores, model, SCALES, 0.1)["accuracy"]
    rng = np.random.default_rng(4)
    z, needs = z_of(0.95), []
    for _ in range(200):
        y = 4.0 * (rng.random(2000) < 0.5)
        n = np.arange(2, 2001)
        sd = np.sqrt([np.var(y[:k], ddof=1) for k in n] * (1 - n / n_items) / n)
        needs.append(int(n[np.argmax((z * sd <= 0.1) & (n >= 30))]))
    assert planned["range"][1] == pytest.approx(np.median(needs), rel=0.1), (planned, needs[:5])


# --------------------------------------------------------------------------- the uniform goals


def _order(n, seed, goal):
    """The item indices in the order a session with ``goal`` offers them."""
    sel = Selector([str(k) for k in range(n)], goal, seed=seed)
    return np.array([int(i) for i in sel.order])


def test_agreement_goal_over_a_thousand_sessions_its_interval_covers_the_pools_agreement():
    """Each session labels in the Selector's order until the Clopper-Pearson half-width of the
    jury's agreement is at most 0.06 (as the page's progress stops it); the pool's true rate
    varies from session to session. Clopper-Pearson is conservative: the coverage is at least
    the nominal 95% (its binomial interval reaches 0.95 or above)."""
    rng = np.random.default_rng(61)
    covered, runs = 0, 1000
    for run in range(runs):
        pool = rng.random(1500) < rng.uniform(0.55, 0.95)  # the jury agrees with the human
        order = _order(pool.size, run, "agreement")
        agreed = np.cumsum(pool[order])
        n = next(
            n for n in range(20, pool.size + 1, 5) if half_width(int(agreed[n - 1]), n) <= 0.06
        )
        low, high = clopper_pearson(int(agreed[n - 1]), n)
        covered += low <= pool.mean() <= high
    assert clopper_pearson(covered, runs)[1] >= 0.95, covered


def test_cascade_goal_over_a_thousand_sessions_a_fitted_cascade_keeps_its_guarantee_on_the_pool():
    """400 labels in the Selector's order from a pool of 3,000 items; the fitted cascade's
    agreement on the whole pool reaches the target in at least 1 - risk of the sessions that
    certify one (one-sided 95% Clopper-Pearson bound on the violation rate)."""
    sim, rng = CascadeSimulation(), np.random.default_rng(71)
    target, risk, violated, fitted = 0.9, 0.1, 0, 0
    for run in range(1000):
        conf, agrees = sim.sample(3000, rng)
        labelled = _order(3000, run, "cascade")[:400]
        try:
            fit = fit_threshold(
                conf[:, labelled],
                agrees[:, labelled],
                target_agreement=target,
                risk=risk,
                stage_calls=[1, 3],
                baseline_calls=3,
            )
        except CascadeTargetError:
            continue  # certifies nothing, so violates nothing
        fitted += 1
        decided = np.where(conf[0] >= fit.threshold, agrees[0], agrees[1])
        violated += decided.mean() < target
    assert fitted >= 500, fitted  # the simulation lets most sessions certify a cascade
    from scipy.stats import beta

    assert beta.ppf(0.95, violated + 1, 1000 - violated) <= risk, violated


def test_stratified_agreement_order_keeps_every_prefix_proportional_and_narrows_the_estimate():
    """--stratify: thirds by the jury's uncertainty, random within each, every prefix holding
    each third in proportion (so the labels stay self-weighting); where the jury agrees with
    the humans less on its unsure items, the agreement after 60 labels varies less from
    session to session than with a uniform order, around the same mean."""
    ids = [str(k) for k in range(300)]
    u = {i: k / 300 for k, i in enumerate(ids)}  # item k in third k // 100
    sel = Selector(ids, seed=4, uncertainty=u, stratify=True)
    third = {i: int(i) // 100 for i in ids}
    for n in range(1, 301):
        counts = np.bincount([third[i] for i in sel.order[:n]], minlength=3)
        assert counts.max() - counts.min() <= 1, (n, counts)
    choice = sel.next("ann", {})
    assert choice.selection == {
        "strategy": "stratified",
        "probability": None,
        "stratum": sel.stratum[choice.id],
    }
    assert sel.stratum["0"] == "surest" and sel.stratum["299"] == "least sure"
    with pytest.raises(InputDataError, match="stratify is for goal agreement"):
        Selector(ids, "cascade", uncertainty=u, stratify=True)

    rng = np.random.default_rng(81)
    agrees = rng.random(300) < np.repeat([0.98, 0.8, 0.4], 100)
    got = {True: [], False: []}
    for run in range(1000):
        for stratify in got:
            order = Selector(ids, seed=run, uncertainty=u, stratify=stratify).order
            got[stratify].append(agrees[[int(i) for i in order[:60]]].mean())
    assert abs(np.mean(got[True]) - agrees.mean()) < 0.005
    assert abs(np.mean(got[False]) - agrees.mean()) < 0.005
    # Theory: sqrt(within-third variance / total) = 0.84 for these rates.
    assert np.std(got[True]) < 0.93 * np.std(got[False]), (np.std(got[True]), np.std(got[False]))


def test_the_plan_picks_the_design_that_needs_fewer_labels_under_the_page_s_sequence():
    """#52 item 4: never the active choice where it costs more than a uniform order. Under the
    betting sequence its weights 1/pi widen the range the bets must allow (on 2,000 items it
    needed 822 labels against a uniform order's 337, perf/RESULTS.md): the plan picks uniform
    and says why; under the asymptotic sequence, whose width follows the terms' variance, the
    active choice keeps its advantage and is picked."""
    rng = np.random.default_rng(52)
    pool = LabellingPool.draw(rng, 400)
    scores, model, pi = _plan_inputs(pool)
    picks = {}
    for method in ("betting", "asymptotic"):
        row = plan_mean(
            [], scores, model, SCALES, 0.4, pi, sequence=True, method=method, compare=True
        )["accuracy"]
        got = row["designs"]
        assert got["active"] == row["sequence"]["needed"] and got["uniform"] is not None
        assert got["pick"] == min(
            ("active", "uniform"), key=lambda k: np.inf if got[k] is None else got[k]
        )
        picks[method] = got["pick"]
        assert method in got["why"] and f"about {got['uniform']}" in got["why"]
    assert picks == {"betting": "uniform", "asymptotic": "active"}, picks
    # With labels already chosen one way, nothing is compared: the session keeps its design.
    assert (
        "designs"
        not in plan_mean([], scores, model, SCALES, 0.4, None, sequence=True, compare=True)[
            "accuracy"
        ]
    )


def test_benchmark_mean_in_a_uniform_order_records_uniform_choices():
    """#52 item 4: goal benchmark-mean with design uniform offers every item in a uniform order
    (no uncertainty needed) and records the choice as uniform, so the estimate takes the labels
    as a simple random sample; the design is refused for other goals."""
    ids = [f"i{k}" for k in range(20)]
    sel = Selector(ids, "benchmark-mean", seed=3, design="uniform")
    choice = sel.next("r", {})
    assert choice is not None and choice.selection == {"strategy": "uniform", "probability": None}
    assert "a uniform order needs fewer labels" in choice.why
    assert sorted(sel.order) == sorted(ids) and sel.chosen is None
    with pytest.raises(InputDataError, match="design is for goal benchmark-mean"):
        Selector(ids, "agreement", design="uniform")
    with pytest.raises(InputDataError, match="design must be one of"):
        Selector(ids, "benchmark-mean", design="stratified")
