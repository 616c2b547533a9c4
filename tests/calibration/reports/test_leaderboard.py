"""The leaderboard's table (jurybox.calibration.reports.leaderboard) on synthetic verdicts: its
means, counts, pairs, Holm decisions and ranks against independent computations, and its
human-corrected means by simulation (a biased jury: PPI++ covers the truth, the raw mean does
not)."""

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from jurybox.calibration.data.labels import scales_from
from jurybox.calibration.data.verdicts import judge_output_from_records
from jurybox.calibration.errors import InputDataError
from jurybox.calibration.reports.leaderboard import System, leaderboard
from jurybox.calibration.reports.leaderboard_html import render_leaderboard

SCALES = scales_from({"quality": [0, 1, 2, 3, 4]})


def output(scores, name="sys", formula=None):
    """Verdicts of one system: ``scores`` maps item id -> its quality score (None: unscored)."""
    records = []
    for item, value in scores.items():
        s = {"quality": value}
        if formula is not None:
            s["overall"] = None if value is None else formula(value)
        records.append(
            {
                "id": item,
                "status": "scored" if value is not None else "unscored",
                "provenance": "p",
                "rubric": "r",
                "jury": "j",
                "scores": s,
                "votes": [],
            }
        )
    return judge_output_from_records(records, source=name)


def three_systems():
    rng = np.random.default_rng(7)
    ids = [f"q{k}" for k in range(40)]
    difficulty = rng.normal(2.0, 0.8, 40)
    systems = {}
    for name, shift in (("small", -0.4), ("medium", 0.0), ("large", 0.05)):
        values = np.clip(difficulty + shift + rng.normal(0, 0.3, 40), 0, 4)
        scores = {i: float(v) for i, v in zip(ids, values)}
        systems[name] = scores
    systems["small"]["q3"] = None  # unscored
    del systems["medium"]["q5"]  # missing
    del systems["large"]["q6"]
    systems["large"]["q7"] = None
    return systems


def matrix(systems, ids):
    return {
        n: np.array([np.nan if s.get(i) is None else s[i] for i in ids]) for n, s in systems.items()
    }


def test_means_counts_pairs_and_holm_match_independent_computations():
    systems = three_systems()
    board = leaderboard(
        [System(n, output(s, n, formula=lambda v: v / 4)) for n, s in systems.items()],
        ["quality", "overall"],
        SCALES,
        resamples=500,
    )
    ids = [f"q{k}" for k in range(40)]
    x = matrix(systems, ids)
    # The common ground: q3, q5, q6, q7 each lack a score in one system.
    common = np.all([~np.isnan(v) for v in x.values()], axis=0)
    assert common.sum() == 36
    assert board.items == 40 and board.rank_by == "overall"
    assert board.ranked_on["quality"] == {
        "items": 36,
        "scored_by_any": 40,
        "dropped": 4,
        "lacking": {"small": 1, "medium": 1, "large": 2},
        "unranked": [],
    }
    for name, values in x.items():
        got = board.system(name)["criteria"]["quality"]
        ranked = values[common]
        assert got["mean"] == pytest.approx(ranked.mean()) and got["on"] == 36
        half = stats.t.ppf(0.975, ranked.size - 1) * ranked.std(ddof=1) / math.sqrt(ranked.size)
        assert got["ci"] == pytest.approx([ranked.mean() - half, ranked.mean() + half])
        scored = values[~np.isnan(values)]
        assert got["own"]["mean"] == pytest.approx(scored.mean())  # shown beside, not ranked
        assert got["scored"] == got["own"]["scored"] == scored.size
        assert got["scored"] + got["unscored"] + got["missing"] == 40
    assert board.system("small")["criteria"]["quality"]["unscored"] == 1
    assert board.system("medium")["criteria"]["quality"]["missing"] == 1
    large = board.system("large")["criteria"]["quality"]
    assert (large["unscored"], large["missing"]) == (1, 1)

    pairs = [p for p in board.pairs if p["criterion"] == "quality"]
    assert len(pairs) == 3
    for p in pairs:
        a, b = x[p["a"]], x[p["b"]]
        assert p["shared"] == 36  # the common items: never zero-filled, never other items
        ref = stats.ttest_rel(a[common], b[common])
        assert p["difference"] == pytest.approx(float(np.mean(a[common] - b[common])))
        assert p["ci"] == pytest.approx(list(ref.confidence_interval()))
        assert p["p"] == pytest.approx(ref.pvalue)
        both = ~np.isnan(a) & ~np.isnan(b)  # every pair here shares more than the ground
        ref = stats.ttest_rel(a[both], b[both])
        assert p["both_scored"]["shared"] == both.sum() > 36
        assert p["both_scored"]["p"] == pytest.approx(ref.pvalue)
        assert p["both_scored"]["ci"] == pytest.approx(list(ref.confidence_interval()))
    want = multipletests([p["p"] for p in pairs], method="holm")[1]
    assert [p["p_holm"] for p in pairs] == pytest.approx(list(want))
    assert [p["significant"] for p in pairs] == [bool(w < 0.05) for w in want]
    # Each pair is listed better-first, so a difference is how far ahead the first is.
    assert all(p["difference"] > 0 for p in pairs)
    # small is clearly behind; medium and large are not separated: two letters.
    by_name = {s["name"]: s for s in board.systems}
    assert by_name["small"]["criteria"]["quality"]["group"] == "b"
    assert by_name["medium"]["criteria"]["quality"]["group"] == "a"
    assert by_name["large"]["criteria"]["quality"]["group"] == "a"
    assert [s["name"] for s in board.systems][-1] == "small"
    assert board.system("small")["rank"] == 3 and board.system("small")["rank_ci"] == [3, 3]
    assert any(
        "quality: ranks, rank intervals, groups and pairs are on the 36 items every "
        "system scored; 4 of 40 dropped (small lacks 1, medium lacks 1, large lacks 2)" in n
        for n in board.notes
    ), board.notes


def test_systems_are_ranked_on_the_items_every_system_scored():
    """#52 defect 1: B scores 0.2 below A on every item and lacks the 20 hardest of 200. Ranked
    on each system's own items, B came first (mean 2.910 against 2.805, group "a") while its
    own pair said B - A = -0.2, significant. On common ground A is first, B second, in
    different groups; B's own mean is still shown, labelled, and the board says which items
    were dropped and who lacks them."""
    rng = np.random.default_rng(52)
    ids = [f"q{k}" for k in range(200)]
    a = np.concatenate([rng.uniform(0.0, 0.5, 20), rng.uniform(2.0, 4.0, 180)])  # 20 hard
    b = a - 0.2
    systems = [
        System("A", output(dict(zip(ids, map(float, a))), "A")),
        System("B", output(dict(zip(ids[20:], map(float, b[20:]))), "B")),
    ]
    board = leaderboard(systems, ["quality"], SCALES, resamples=300)
    first, second = board.systems
    assert (first["name"], first["rank"], first["group"]) == ("A", 1, "a")
    assert (second["name"], second["rank"], second["group"]) == ("B", 2, "b")
    assert (first["rank_ci"], second["rank_ci"]) == ([1, 1], [2, 2])
    assert board.ranked_on["quality"] == {
        "items": 180,
        "scored_by_any": 200,
        "dropped": 20,
        "lacking": {"B": 20},
        "unranked": [],
    }
    entry_a, entry_b = (s["criteria"]["quality"] for s in board.systems)
    assert entry_a["mean"] == pytest.approx(a[20:].mean())
    assert entry_b["mean"] == pytest.approx(b[20:].mean())
    # Each system's mean over its own items, shown and labelled: B's is the higher.
    assert entry_b["own"]["mean"] == pytest.approx(b[20:].mean())
    assert entry_a["own"]["mean"] == pytest.approx(a.mean())
    assert entry_a["own"]["mean"] < entry_b["own"]["mean"]
    (pair,) = board.pairs
    assert (pair["a"], pair["b"], pair["shared"]) == ("A", "B", 180)
    assert pair["difference"] == pytest.approx(0.2) and pair["significant"]
    assert "both_scored" not in pair  # two systems: the ground is the items both scored
    assert "B lacks 20" in " ".join(board.notes)


def test_a_system_without_any_score_is_not_ranked_and_does_not_shrink_the_ground():
    ids = [f"q{k}" for k in range(10)]
    systems = [
        System("x", output(dict(zip(ids, [1.0 + k % 3 for k in range(10)])))),
        System("y", output(dict(zip(ids, [2.0 + k % 2 for k in range(10)])))),
        System("none", output(dict.fromkeys(ids))),
    ]
    board = leaderboard(systems, ["quality"], SCALES, resamples=200)
    assert board.ranked_on["quality"]["items"] == 10
    assert board.ranked_on["quality"]["unranked"] == ["none"]
    assert board.system("none")["rank"] is None and board.system("none")["group"] == ""
    assert board.system("y")["rank"] == 1


def test_the_json_holds_what_other_tools_read():
    systems = three_systems()
    board = leaderboard(
        [System(n, output(s, n)) for n, s in systems.items()], ["quality"], SCALES, resamples=200
    ).to_dict()
    # On which items the ranks are computed (#52), per criterion.
    assert board["ranked_on"]["quality"]["items"] == 36
    for s in board["systems"]:
        assert {"name", "rank", "rank_ci", "criteria"} <= set(s)
        assert {"mean", "ci", "on", "scored", "unscored", "own"} <= set(s["criteria"]["quality"])
    for p in board["pairs"]:
        assert {
            "a",
            "b",
            "criterion",
            "difference",
            "ci",
            "shared",
            "p_holm",
            "significant",
        } <= set(p)


def test_bad_input_is_refused_with_what_was_expected():
    one = output({"a": 1.0, "b": 2.0})
    with pytest.raises(InputDataError, match="at least 2 systems"):
        leaderboard([System("x", one)], ["quality"], SCALES)
    with pytest.raises(InputDataError, match="two systems are named 'x'"):
        leaderboard([System("x", one), System("x", one)], ["quality"], SCALES)
    with pytest.raises(InputDataError, match="--criterion nope"):
        leaderboard([System("x", one), System("y", one)], ["quality"], SCALES, rank_by="nope")


def test_a_system_with_no_shared_item_is_compared_on_nothing_not_on_zeros():
    board = leaderboard(
        [System("x", output({"a": 1.0, "b": 2.0})), System("y", output({"c": 3.0, "d": 4.0}))],
        ["quality"],
        SCALES,
        resamples=200,
    )
    (pair,) = board.pairs
    assert pair["shared"] == 0 and pair["difference"] is None and pair["significant"] is False
    assert board.system("y")["criteria"]["quality"]["missing"] == 2
    # No common ground: nobody is ranked, and the board says why.
    assert [s["rank"] for s in board.systems] == [None, None]
    assert board.ranked_on["quality"]["items"] == 0
    assert "no item was scored for every system" in " ".join(board.notes)


def _biased_run(rng, n_items=200, n_labels=40):
    """Two systems whose human labels average 2.4 and 2.0; the jury overrates the first by 0.6
    and the second by 0.1 (so it also overstates their difference). The same random items are
    labelled for both."""
    ids = [f"i{k}" for k in range(n_items)]
    truth = {}
    systems = []
    labelled = rng.choice(n_items, n_labels, replace=False)
    for name, p, bias in (("a", 0.6, 0.6), ("b", 0.5, 0.1)):
        human = rng.binomial(4, p, n_items).astype(float)
        jury = np.clip(human + bias + rng.normal(0, 0.7, n_items), 0, 4)
        truth[name] = human.mean()
        lines = [{"id": ids[k], "rater": "r", "quality": int(human[k])} for k in labelled]
        systems.append(System(name, output(dict(zip(ids, map(float, jury))), name), lines))
    return systems, truth


def test_human_corrected_means_cover_the_truth_where_the_biased_jury_s_do_not():
    # 200 repetitions, 40 labels of 200 items per system: the PPI++ interval covers the mean
    # human label in at least 90% of them (3 se below 0.95 is 0.904), the jury's own interval
    # (biased by 0.6 and 0.1 points) far less often; the corrected difference covers the
    # true difference (0.4 points; the jury says about 0.9) as often. Measured: 96.5% and
    # 93.5% for the means, 98.5% for the difference; the jury alone 0% for a, 0.5% for the
    # difference.
    rng = np.random.default_rng(21)
    reps = 200
    covered = {"a": 0, "b": 0}
    raw = {"a": 0, "b": 0}
    diff_covered = diff_raw = 0
    for _ in range(reps):
        systems, truth = _biased_run(rng)
        board = leaderboard(systems, ["quality"], SCALES, resamples=100)
        for name in ("a", "b"):
            entry = board.system(name)["criteria"]["quality"]
            lo, hi = entry["human_corrected"]["ci"]
            covered[name] += lo <= truth[name] <= hi
            raw[name] += entry["ci"][0] <= truth[name] <= entry["ci"][1]
        (pair,) = board.pairs
        sign = 1 if pair["a"] == "a" else -1
        true_diff = sign * (truth["a"] - truth["b"])
        lo, hi = pair["human_corrected"]["ci"]
        diff_covered += lo <= true_diff <= hi
        diff_raw += pair["ci"][0] <= true_diff <= pair["ci"][1]
    assert covered["a"] / reps >= 0.904 and covered["b"] / reps >= 0.904, covered
    assert diff_covered / reps >= 0.904, diff_covered
    assert raw["a"] / reps < 0.05 and diff_raw / reps < 0.05, (raw, diff_raw)


def test_a_system_without_labels_says_so():
    rng = np.random.default_rng(2)
    systems, _ = _biased_run(rng)
    systems[1].labels = None
    board = leaderboard(systems, ["quality"], SCALES, resamples=100)
    assert board.system("b")["criteria"]["quality"]["human_corrected"] == {
        "mean": None,
        "reason": "no human labels for this system",
    }
    assert "b: no human labels" in " ".join(board.notes)
    (pair,) = board.pairs
    assert pair["human_corrected"]["difference"] is None
    assert "has no human labels" in pair["human_corrected"]["reason"]


def test_length_control_says_whether_the_order_changes():
    # b is longer-winded than a and the jury rewards length: b leads raw, a once length is
    # controlled (each system's slope on its own scores, at one common length).
    rng = np.random.default_rng(4)
    ids = [f"i{k}" for k in range(120)]
    systems = []
    for name, base, words in (("a", 2.2, 80), ("b", 2.0, 300)):
        length = rng.integers(words // 2, words * 2, 120).astype(float)
        score = base + 0.8 * np.log1p(length) + rng.normal(0, 0.3, 120)
        systems.append(
            System(
                name,
                output(dict(zip(ids, map(float, score))), name),
                lengths=dict(zip(ids, length)),
            )
        )
    board = leaderboard(systems, ["quality"], SCALES, resamples=100, centre_length=150)
    assert board.system("b")["rank"] == 1
    controlled = {
        s["name"]: s["criteria"]["quality"]["length_controlled"]["mean"] for s in board.systems
    }
    assert controlled["a"] > controlled["b"]
    assert board.length_control["quality"]["order_changes"] is True


def test_the_page_draws_every_criterion_and_marks_significant_pairs():
    systems = three_systems()
    board = leaderboard(
        [System(n, output(s, n, formula=lambda v: v / 4)) for n, s in systems.items()],
        ["quality", "overall"],
        SCALES,
        resamples=200,
    )
    page = render_leaderboard(board)
    assert page.count("<svg class='forest'") == 2 and page.count("<table class='pairs'>") == 2
    # On which items the ranks stand, per criterion, and the own-item means beside (#52).
    assert (
        page.count(
            "Ranked on the <b>36</b> items every system scored; 4 of 40 dropped "
            "(small lacks 1, medium lacks 1, large lacks 2)"
        )
        == 2
    )
    assert page.count("<table class='own'>") == 2
    significant = sum(p["significant"] for p in board.pairs)
    assert page.count("class='sig-pos'") + page.count("class='sig-neg'") == 2 * significant
