"""Group rewards (jurybox.judges.groups, rankings, resolution): the designs, Bradley-Terry
against the tested implementation in calibration, expected scores against a jury that
combines them, and the whole judging path with simulated judges of known qualities
(tests/group_helpers.py) and the replay jury (the tiny jury's real answers)."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from group_helpers import SimJudge, sim_jury
from judging_helpers import ITEMS, QUESTION, REFERENCE

from jurybox.judges import Jury, rankings
from jurybox.judges.groups import (
    Group,
    GroupJob,
    GroupSpec,
    judge_groups,
    listwise_rubric,
    no_signal_share,
    sign_flip_test,
)
from jurybox.judges.resolution import ResolvedReward, redecided
from jurybox.rubrics import load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec
from jurybox.serving.service.groups_protocol import GroupResponse

FIELDS = {"question": QUESTION, "reference": REFERENCE}
QUALITY = {f"[answer {k}]": q for k, q in enumerate([-1.2, -0.4, 0.3, 1.1])}


def job(spec: GroupSpec, rubric: str, groups, jury, pointwise: str | None = None, **kw):
    return GroupJob(
        spec,
        load_rubric(rubric),
        jury.spec,
        groups,
        load_rubric(pointwise) if pointwise else None,
        **kw,
    )


# -- designs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("k,r", [(k, r) for k in range(2, 12) for r in range(1, 6)])
def test_a_regular_design_meets_r_others_each_never_twice_and_connected(k, r):
    pairs = rankings.regular(k, r, np.random.default_rng(k * 10 + r))
    assert len(set(pairs)) == len(pairs) and all(a < b for a, b in pairs)
    degree = np.bincount(np.ravel(pairs), minlength=k)
    want = min(r, k - 1)
    assert degree.max() == want
    # exactly r each, but one completion at r - 1 when k x r is odd
    assert sorted(degree)[1:] == [want] * (k - 1) and degree.min() >= want - (k * want) % 2
    if want >= 2:
        reach = np.eye(k, dtype=bool)
        for a, b in pairs:
            reach[a, b] = reach[b, a] = True
        for _ in range(k):
            reach = (reach.astype(int) @ reach.astype(int)) > 0
        assert reach.all()


def test_swiss_rounds_never_repeat_a_pair_and_pair_by_standing():
    rng = np.random.default_rng(0)
    played: set[tuple[int, int]] = set()
    for _ in range(5):
        pairs = rankings.swiss_round(6, [0.0] * 6, played, rng)
        assert not played & set(pairs)
        played |= set(pairs)
    assert len(played) == 15  # five rounds of three: the round robin of six, no repeats
    top = rankings.swiss_round(4, [1.0, 0.9, 0.1, 0.0], set(), rng)
    assert top == [(0, 1), (2, 3)]  # the leaders meet each other


def test_the_costs_per_group_are_the_issue_s_for_eight_completions():
    pairwise, point = load_rubric("pairwise"), load_rubric("mirage-mg")
    calls = {
        d: GroupSpec(design=d).cost(8, pairwise, point).calls
        for d in ("round_robin", "regular", "anchor")
    }
    assert calls == {"round_robin": 56, "regular": 24, "anchor": 14 + 8}
    assert GroupSpec(design="anchor").cost(8, pairwise, point).group_calls == 14
    assert GroupSpec(design="swiss").cost(8, pairwise).calls == 24
    assert GroupSpec(design="listwise").cost(8, point).calls == 1
    words = GroupSpec().cost(8, pairwise).words
    assert words == (
        "56 judge calls per judge per group of 8 (round robin: 28 pairs x 2 calls (both orders))"
    )
    assert GroupSpec(design="round_robin", weight=0.5).cost(8, pairwise, point).calls == 64


# -- Bradley-Terry -----------------------------------------------------------------------------


def test_strengths_without_a_prior_are_the_calibration_fit():
    """The group's maximum-likelihood strengths equal jurybox.calibration's tested fit
    (preference.bradley_terry: Hunter's MM, checked there against a direct fit of the
    likelihood), graded shares and ties included."""
    from jurybox.calibration.audits.preference import bradley_terry

    rng = np.random.default_rng(3)
    for _ in range(5):
        k = 5
        pairs = [p for p in itertools.combinations(range(k), 2) for _ in range(3)]
        share = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=len(pairs))
        i, j = [a for a, _ in pairs], [b for _, b in pairs]
        ours = rankings.strengths(k, i, j, share, prior=0)
        theirs = bradley_terry([f"s{a}" for a in i], [f"s{b}" for b in j], share, n_resamples=0)
        assert theirs.strength is not None
        assert np.allclose(ours, [theirs.strength[f"s{x}"] for x in range(k)], atol=1e-7)


def test_the_prior_is_virtual_ties_between_every_pair():
    """With a prior of m - 1 virtual games per completion, each pair has one tie more: the
    fit equals calibration's on the comparisons plus those ties, and exists where the plain
    estimate does not (a completion that won everything)."""
    from jurybox.calibration.audits.preference import bradley_terry

    i, j, share = [0, 0, 1], [1, 2, 2], [1.0, 1.0, 0.5]  # 0 never lost: no plain estimate
    with pytest.raises(ValueError, match="do not exist"):
        rankings.strengths(3, i, j, share, prior=0)
    ours = rankings.strengths(3, i, j, share, prior=2.0)  # m - 1 = 2: one tie per pair
    ties = list(itertools.combinations(range(3), 2))
    theirs = bradley_terry(
        [f"s{a}" for a in [*i, *(a for a, _ in ties)]],
        [f"s{b}" for b in [*j, *(b for _, b in ties)]],
        [*share, *[0.5] * len(ties)],
        n_resamples=0,
    )
    assert theirs.strength is not None
    assert np.allclose(ours, [theirs.strength[f"s{x}"] for x in range(3)], atol=1e-7)


def test_expected_wins_are_the_mean_bt_probability_against_the_others():
    theta = np.array([0.3, -0.1, np.nan, -0.2])
    got = rankings.expected_wins(theta)
    p = lambda a, b: 1 / (1 + math.exp(theta[b] - theta[a]))  # noqa: E731
    assert got[0] == pytest.approx((p(0, 1) + p(0, 3)) / 2)
    assert math.isnan(got[2])
    assert np.nansum(got) == pytest.approx(1.5)  # each pair's probabilities add up to one


# -- expected scores ---------------------------------------------------------------------------


def test_expected_rewards_equal_a_jury_that_combines_expected_scores(replay_tiny):
    """A verdict decided again from its votes' expected scores is what a jury with ``use:
    expected`` decides judging the same items (the tiny jury's recorded answers, the same
    judges' backends)."""
    rubric = load_rubric("mirage-mg")
    items = list(ITEMS)
    records = replay_tiny.score_records(rubric, items)
    spec = replay_tiny.spec.model_copy(
        update={"aggregation": replay_tiny.spec.aggregation.model_copy(update={"use": "expected"})}
    )
    want = Jury(spec, dict(replay_tiny._backends)).score_records(rubric, items)
    reward = ResolvedReward.bind(RewardSpec(), rubric, replay_tiny.spec, "expected")
    chosen = ResolvedReward.bind(RewardSpec(), rubric, replay_tiny.spec, "score")
    for record, other in zip(records, want):
        again, note = redecided(record, rubric, replay_tiny.spec)
        assert note == "" and again.scores == pytest.approx(other["scores"])
        reading = reward.read(record)
        assert reading.used == "expected"
        assert reading.value == pytest.approx(other["scores"]["weighted_sum"])
        assert chosen.read(record).value == record["scores"]["weighted_sum"]
    # The tiny jury's chosen scores tie (0.075 each); its expected scores do not.
    assert len({chosen.read(r).value for r in records}) == 1
    assert len({reward.read(r).value for r in records}) == len(records)


def test_chosen_scores_stand_where_a_judge_gave_no_distribution(replay_tiny):
    rubric = load_rubric("mirage-mg")
    (record,) = replay_tiny.score_records(rubric, [ITEMS[0]])
    record["votes"][0]["expected"] = None
    record["votes"][0]["distribution"] = None
    reading = ResolvedReward.bind(RewardSpec(), rubric, replay_tiny.spec, "expected").read(record)
    assert reading.used == "score" and reading.value == record["scores"]["weighted_sum"]
    assert reading.note == "smollm2-135m gave no distribution on accuracy (its chosen score stands)"
    majority = replay_tiny.spec.model_copy(
        update={
            "aggregation": replay_tiny.spec.aggregation.model_copy(update={"method": "majority"})
        }
    )
    assert "majority" in redecided(record, rubric, majority)[1]
    with pytest.raises(InputError, match="calibrated") as caught:
        ResolvedReward.bind(RewardSpec(calibrated=True), rubric, replay_tiny.spec, "expected")
    assert caught.value.field == "use"


# -- the judging path --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "design,rubric,pointwise",
    [
        ("round_robin", "pairwise", None),
        ("regular", "pairwise", None),
        ("swiss", "pairwise", None),
        ("anchor", "pairwise", "mirage-mg"),
        ("listwise", "mirage-mg", None),
        ("pointwise", "mirage-mg", None),
    ],
)
def test_every_design_ranks_a_group_of_known_qualities(design, rubric, pointwise):
    jury = sim_jury(QUALITY, tie=0.1)
    spec = GroupSpec(design=design, per_completion=2)
    (result,) = judge_groups(
        jury, job(spec, rubric, [Group("g", FIELDS, list(QUALITY))], jury, pointwise)
    )
    assert None not in result.rewards
    rewards = np.array(result.rewards)
    assert np.all(np.diff(rewards) > 0), (design, rewards)  # the true order, strictly
    assert (
        result.asked
        == result.calls
        == spec.cost(4, load_rubric(rubric), load_rubric(pointwise) if pointwise else None).calls
    )
    assert all(c.used == "expected" for c in result.completions)


def test_the_swap_removes_a_pure_position_bias():
    """Judges that prefer the answer shown first whatever it says (probability 0.9, in
    either order) make every comparison a tie: every completion gets the same reward, from
    chosen or expected scores; without the swap each pair would have gone to whichever
    answer a single order showed first."""
    same = dict.fromkeys(QUALITY, 0.0)
    for use in ("score", "expected"):
        jury = sim_jury(same, bias=2.0, tie=0.1, sharpness=1.1)
        (result,) = judge_groups(
            jury, job(GroupSpec(use=use), "pairwise", [Group("g", FIELDS, list(QUALITY))], jury)
        )
        assert result.rewards == pytest.approx([0.5] * 4, abs=1e-12)
        assert all(
            x.share == pytest.approx(0.5, abs=1e-12)
            for c in result.completions
            for x in c.comparisons
        )
        if use == "score":  # each judge's two orders chose different answers: a tie each
            assert all(
                x.winner == "tie" and len(x.inconsistent) == 2
                for c in result.completions
                for x in c.comparisons
            )
    # ... while one order alone is all position: the first shown wins every pair.
    judge = SimJudge("j", same, bias=2.0, tie=0.1)
    pair = load_rubric("pairwise")
    from jurybox.judges.judging import render_requests
    from jurybox.rubrics import Item

    requests = render_requests(
        pair,
        [
            Item(
                id="p",
                question=QUESTION,
                extra={"response_a": "[answer 0]", "response_b": "[answer 1]"},
            )
        ],
    )
    texts = [g.text for g in judge.generate([r for r in requests.requests if r])]
    assert texts == ['{"better": "1"}', '{"better": "1"}']  # A first, then B first: "1" both


def test_a_position_biased_judge_with_a_real_preference_still_ranks_by_quality():
    jury = sim_jury(QUALITY, bias=0.6, tie=0.05)
    (result,) = judge_groups(
        jury, job(GroupSpec(use="score"), "pairwise", [Group("g", FIELDS, list(QUALITY))], jury)
    )
    assert np.all(np.diff(result.rewards) > 0)


def test_listwise_measures_the_position_effect_by_the_shuffle():
    """A judge that scores whatever it shows first one point higher (on a [-2, 2] span):
    over many shuffled calls the first position's mean score stands above the call's mean,
    the others below, by about the bias; each judge saw its own order."""
    quality = {f"[answer {k}]": 0.0 for k in range(4)}
    groups = [
        Group(f"g{n}", {**FIELDS, "question": f"{QUESTION} ({n})"}, list(quality))
        for n in range(40)
    ]
    jury = sim_jury(quality, bias=1.0, sharpness=8.0)
    results = judge_groups(
        jury,
        job(
            GroupSpec(design="listwise", use="score"),
            "general",
            groups,
            jury,
            reward=RewardSpec(score="accuracy"),
        ),
    )
    effects = np.array([r.position_effect for r in results], dtype=float)
    first, rest = np.nanmean(effects[:, 0]), np.nanmean(effects[:, 1:])
    # one point of four on the general rubric's 0-4 scale is 0.25 of its span: the first
    # position sits 0.25 x 3/4 above the call's mean, the others 0.25 / 4 below
    assert first == pytest.approx(0.1875, abs=0.03) and rest == pytest.approx(-0.0625, abs=0.02)
    assert all(b.calls == len(groups) for b in jury._backends.values())  # one call per group


def test_listwise_orders_differ_per_judge_and_call():
    quality = {f"[answer {k}]": 0.0 for k in range(6)}
    jury = sim_jury(quality)
    seen: list[list[str]] = []
    for backend in jury._backends.values():
        generate = backend.generate

        def record(requests, cancelled=None, generate=generate, backend=backend):
            seen.extend(backend.shown(r.messages[-1]["content"]) for r in requests)
            return generate(requests)

        backend.generate = record  # type: ignore[method-assign]
    groups = [Group(f"g{n}", {**FIELDS, "question": f"q{n}"}, list(quality)) for n in range(3)]
    judge_groups(jury, job(GroupSpec(design="listwise"), "mirage-mg", groups, jury))
    assert len(seen) == 6 and len({tuple(s) for s in seen}) == 6  # 2 judges x 3 groups


def test_a_completion_whose_comparisons_are_all_unscored_gets_none_and_why():
    jury = sim_jury(QUALITY, fail=("[answer 2]",))
    (result,) = judge_groups(
        jury, job(GroupSpec(), "pairwise", [Group("g", FIELDS, list(QUALITY))], jury)
    )
    assert result.rewards[2] is None
    assert result.completions[2].reason.startswith("all its comparisons unscored: ")
    assert "simulated failure" in result.completions[2].reason
    others = [r for k, r in enumerate(result.rewards) if k != 2]
    assert None not in others and np.all(np.diff(others) > 0)


def test_identical_completions_tie_without_a_judge_call():
    jury = sim_jury(QUALITY)
    texts = ["[answer 3]", "[answer 3]", "[answer 0]"]
    (result,) = judge_groups(jury, job(GroupSpec(), "pairwise", [Group("g", FIELDS, texts)], jury))
    tie = result.completions[0].comparisons[0]
    assert (tie.other, tie.share, tie.judged) == (1, 0.5, False)
    assert result.asked == 2 * 1 and result.calls == 2 * 3  # one pair asked, the other twice
    assert result.rewards[0] == pytest.approx(result.rewards[1])


def test_a_mixed_reward_is_the_pointwise_reward_plus_the_weighted_term():
    jury = sim_jury(QUALITY)
    spec = GroupSpec(weight=0.5, centred=True, low=-1.0, high=1.0)
    (result,) = judge_groups(
        jury, job(spec, "pairwise", [Group("g", FIELDS, list(QUALITY))], jury, "mirage-mg")
    )
    for c in result.completions:
        assert c.reward == pytest.approx(c.pointwise + 0.5 * c.term)
    assert sum(c.term for c in result.completions) == pytest.approx(0.0, abs=1e-12)


def test_the_anchor_is_the_median_completion():
    jury = sim_jury(QUALITY)
    (result,) = judge_groups(
        jury,
        job(
            GroupSpec(design="anchor"),
            "pairwise",
            [Group("g", FIELDS, list(QUALITY))],
            jury,
            "mirage-mg",
        ),
    )
    # pointwise order is the qualities' order: the lower median is completion 1
    assert [len(c.comparisons) for c in result.completions] == [1, 3, 1, 1]
    assert all(c.comparisons[0].other == 1 for k, c in enumerate(result.completions) if k != 1)


def test_a_pair_in_either_order_is_one_cache_entry_with_both_orders(tmp_path):
    from jurybox.judges.cache import VerdictCache

    cache = VerdictCache(tmp_path / "verdicts.sqlite")
    jury = sim_jury(QUALITY)
    jury.cache = cache
    texts = list(QUALITY)[:2]
    (first,) = judge_groups(jury, job(GroupSpec(), "pairwise", [Group("g", FIELDS, texts)], jury))
    assert cache.stats().entries == 1 and jury.cache_hits == 0
    (again,) = judge_groups(
        jury, job(GroupSpec(), "pairwise", [Group("h", FIELDS, texts[::-1])], jury)
    )
    assert cache.stats().entries == 1 and jury.cache_hits == 1
    assert again.rewards == pytest.approx(first.rewards[::-1])
    (blob,) = cache._db.execute("SELECT verdict FROM verdicts").fetchone()
    assert '"order":"ab"' in blob and '"order":"ba"' in blob
    cache.close()


def test_a_group_of_one_is_rewarded_pointwise_saying_so():
    jury = sim_jury(QUALITY)
    groups = [Group("one", FIELDS, ["[answer 3]"]), Group("two", FIELDS, list(QUALITY)[:2])]
    one, two = judge_groups(jury, job(GroupSpec(), "pairwise", groups, jury, "mirage-mg"))
    assert one.design == "pointwise" and one.fallback.startswith(
        "a group of one completion is rewarded pointwise (mirage-mg)"
    )
    assert one.rewards[0] == one.completions[0].pointwise is not None
    assert two.design == "round_robin" and two.fallback is None
    with pytest.raises(
        InputError,
        match="group one has one completion: a group of one is "
        "rewarded pointwise, which needs a pointwise rubric",
    ) as e:
        job(GroupSpec(), "pairwise", groups, jury)
    assert e.value.field == "groups[0].completions"


@pytest.mark.parametrize(
    "spec,rubric,pointwise,field,words",
    [
        (
            GroupSpec(),
            "mirage-mg",
            None,
            "rubric",
            "the round_robin design compares completions in pairs: it needs a pairwise rubric",
        ),
        (GroupSpec(design="listwise"), "pairwise", None, "rubric", "it needs a pointwise rubric"),
        (GroupSpec(design="anchor"), "pairwise", None, "pointwise", "median pointwise score"),
        (GroupSpec(weight=1.0), "pairwise", None, "pointwise", "a mixed reward"),
        (GroupSpec(), "pairwise", "pairwise", "pointwise", "is pairwise"),
    ],
)
def test_a_rubric_that_does_not_fit_the_design_is_refused_naming_the_field(
    spec, rubric, pointwise, field, words
):
    jury = sim_jury(QUALITY)
    with pytest.raises(InputError, match=words) as caught:
        job(spec, rubric, [Group("g", FIELDS, list(QUALITY))], jury, pointwise)
    assert caught.value.field == field


def test_a_group_spec_refuses_what_means_nothing():
    with pytest.raises(ValueError, match="high above low"):
        GroupSpec(low=1.0, high=1.0)
    with pytest.raises(ValueError, match="the pointwise design has none"):
        GroupSpec(design="pointwise", weight=0.5)
    with pytest.raises(InputError, match="shows 2 to 26"):
        listwise_rubric(load_rubric("mirage-mg"), 27)


def test_the_replay_jury_s_groups_spread_under_expected_scores_where_chosen_ones_tie(replay_tiny):
    """The tiny jury's real (recorded) answers: pointwise from chosen scores, every
    completion of the group ties; from expected scores, and compared in pairs, they do not."""
    texts = [ITEMS[0].response, ITEMS[1].response, "Early blight.", "A virus."]
    groups = [Group("g", FIELDS, texts)]
    (chosen,) = judge_groups(
        replay_tiny,
        job(GroupSpec(design="pointwise", use="score"), "mirage-mg", groups, replay_tiny),
    )
    (expected,) = judge_groups(
        replay_tiny, job(GroupSpec(design="pointwise"), "mirage-mg", groups, replay_tiny)
    )
    assert chosen.spread == 0.0
    assert expected.spread > 0


def test_the_tiny_jury_s_self_contradicting_comparisons_are_ties_and_no_signal(replay_tiny):
    """Issue 60 (7): through the pairwise design the tiny jury's judges contradict themselves
    on every pair when its order is swapped. Each comparison is then a tie (it was "winner:
    other", share 0.4948, from the mean of contradictory expected scores), the group's rewards
    all tie and the group reports no signal, as the share of such groups does."""
    texts = [ITEMS[0].response, ITEMS[1].response, "Early blight.", "A virus."]
    (pairs,) = judge_groups(
        replay_tiny, job(GroupSpec(), "pairwise", [Group("g", FIELDS, texts)], replay_tiny)
    )
    shown = [x for c in pairs.completions for x in c.comparisons]
    assert all(len(x.inconsistent) == 2 and x.used == "expected" for x in shown)
    assert all(x.winner == "tie" and x.share == 0.5 for x in shown)
    assert pairs.spread == 0.0 and pairs.signal is False
    assert no_signal_share([pairs]) == 1.0
    wire = GroupResponse(groups=[pairs]).model_dump(mode="json")["groups"][0]
    assert wire["signal"] is False and wire["null_p"] == 1.0


def _brute_p(k, pairs, share):
    """The sign-flip p-value by enumeration in plain Python (an independent implementation)."""

    def spread(values):
        wins = [[] for _ in range(k)]
        for (a, b), v in zip(pairs, values):
            wins[a].append(v)
            wins[b].append(1.0 - v)
        return statistics.pstdev([sum(w) / len(w) for w in wins if w])

    seen = spread(share)
    null = [
        spread([v if keep else 1.0 - v for v, keep in zip(share, flips)])
        for flips in itertools.product([True, False], repeat=len(share))
    ]
    return sum(x >= seen - 1e-12 for x in null) / len(null)


def test_the_sign_flip_test_equals_an_enumeration_and_the_count_of_orders():
    rng = np.random.default_rng(5)
    for k, pairs in [
        (4, list(itertools.combinations(range(4), 2))),
        (5, rankings.regular(5, 2, rng)),
        (3, [(0, 1), (1, 2)]),
    ]:
        for _ in range(4):
            share = list(rng.choice([0.0, 0.25, 0.5, 0.6, 1.0], size=len(pairs)))
            i, j = [a for a, _ in pairs], [b for _, b in pairs]
            p, _ = sign_flip_test(k, i, j, share, rng)
            assert p == pytest.approx(_brute_p(k, pairs, share), abs=1e-12)
    # A whole order (every pair won by the better one): the flips that spread as far are the
    # k! transitive tournaments of 2^(k(k-1)/2); a round robin of 4 cannot reach 0.05.
    for k in (4, 5, 6, 7):
        pairs = list(itertools.combinations(range(k), 2))
        i, j = [a for a, _ in pairs], [b for _, b in pairs]
        p, reachable = sign_flip_test(k, i, j, [1.0] * len(pairs), np.random.default_rng(0))
        want = math.factorial(k) / 2 ** len(pairs)
        if len(pairs) <= 12:
            assert p == pytest.approx(want) and reachable == (want <= 0.05)
        else:  # simulated: within 4 Monte Carlo standard errors
            assert abs(p - want) < 4 * math.sqrt(want * (1 - want) / 4095) + 1 / 4096
            assert reachable


def test_a_group_of_known_qualities_is_signal_and_one_of_equals_is_not():
    quality = {f"[answer {k}]": q for k, q in enumerate(np.linspace(-2, 2, 8))}
    jury = sim_jury(quality, tie=0.05)
    (result,) = judge_groups(
        jury, job(GroupSpec(), "pairwise", [Group("g", FIELDS, list(quality))], jury)
    )
    assert result.signal is True and result.null_p is not None and result.null_p < 0.01
    same = dict.fromkeys(quality, 0.0)
    flat = sim_jury(same, noise=1.0, tie=0.05)
    (noise,) = judge_groups(
        flat, job(GroupSpec(), "pairwise", [Group("g", FIELDS, list(same))], flat)
    )
    assert noise.spread is not None and noise.spread > 0  # not an exact tie ...
    assert noise.signal is False and noise.null_p is not None and noise.null_p > 0.05
    # Mixed with a pointwise reward, the comparisons' noise says nothing of the pointwise part.
    (mixed,) = judge_groups(
        flat,
        job(
            GroupSpec(weight=0.5),
            "pairwise",
            [Group("g", FIELDS, list(same))],
            flat,
            pointwise="mirage-mg",
        ),
    )
    assert mixed.null_p is not None and mixed.null_p > 0.05 and mixed.signal is None


def test_the_pointwise_design_s_term_is_on_the_unit_range_whatever_the_reward_s_scale():
    jury = sim_jury(QUALITY)
    groups = [Group("g", FIELDS, list(QUALITY))]
    unit, raw = (
        judge_groups(
            jury,
            job(
                GroupSpec(design="pointwise", low=-1.0, high=1.0),
                "general",
                groups,
                jury,
                reward=RewardSpec(score="accuracy", scale=scale),
            ),
        )[0]
        for scale in ("unit", "raw")
    )
    assert raw.rewards == pytest.approx(unit.rewards)
    assert [c.pointwise for c in raw.completions] == pytest.approx(
        [4 * c.pointwise for c in unit.completions]
    )  # accuracy's 0-4 scale, raw
    assert min(unit.rewards) >= -1.0 and max(unit.rewards) <= 1.0


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"seed": -1}, "greater than or equal to 0"),
        ({"seed": 2**63}, "less than or equal to"),
        ({"low": -1e308, "high": 1e308}, "high - low must be a finite number"),
        ({"design": "round_robin", "weight": 1e300, "high": 1e10}, "weight times"),
    ],
)
def test_a_spec_whose_numbers_numpy_or_floats_cannot_hold_is_refused(fields, words):
    # Seeds numpy refuses (a negative one crashed at the first group) and ranges whose width
    # overflows (every reward null) are refused where the spec is made, in process as on the
    # service's route.
    with pytest.raises(ValueError, match=words):
        GroupSpec(**fields)


def test_signal_is_the_comparisons_agreeing_signs_not_the_spread_s_size():
    """The group rewards guide: consistent gaps of 0.505 against 0.495 over a round robin of
    six are signal (p about 0.02), though the win shares spread by less than 0.01."""
    pairs = list(itertools.combinations(range(6), 2))
    i, j = [a for a, _ in pairs], [b for _, b in pairs]
    for seed in range(3):
        p, reachable = sign_flip_test(6, i, j, [0.505] * len(pairs), np.random.default_rng(seed))
        assert reachable and p is not None and 0.01 < p < 0.03
