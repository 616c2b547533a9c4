"""A system with few scored items (#60): it is named as what shrinks every system's common
ground, the intervals stay on the rubric's scale, and ``exclude`` / ``min_items`` rank the
others without it, listed apart."""

import numpy as np
import pytest
from scipy import stats

from jurybox.calibration.data.labels import scales_from
from jurybox.calibration.data.verdicts import judge_output_from_records
from jurybox.calibration.errors import InputDataError
from jurybox.calibration.reports.leaderboard import System, leaderboard
from jurybox.calibration.reports.leaderboard_html import render_leaderboard

SCALES = scales_from({"quality": [0, 1, 2, 3, 4]})


def output(scores, name):
    records = [
        {
            "id": item,
            "status": "scored",
            "provenance": "p",
            "rubric": "r",
            "jury": "j",
            "scores": {"quality": value},
            "votes": [],
        }
        for item, value in scores.items()
    ]
    return judge_output_from_records(records, source=name)


def systems_with_a_sparse_one():
    """Three systems on 40 items; ``sparse`` scored 3 of them (0, 3 and 4)."""
    rng = np.random.default_rng(60)
    ids = [f"q{k}" for k in range(40)]
    level = rng.integers(0, 5, 40)
    values = {
        name: {i: float(np.clip(v + shift + rng.integers(-1, 2), 0, 4)) for i, v in zip(ids, level)}
        for name, shift in (("good", 1), ("fair", 0))
    }
    values["sparse"] = {"q0": 0.0, "q1": 3.0, "q2": 4.0}
    return [System(n, output(v, n)) for n, v in values.items()], values, ids


def test_intervals_stay_on_the_scale_and_the_sparse_system_is_named():
    systems, values, _ = systems_with_a_sparse_one()
    board = leaderboard(systems, ["quality"], SCALES, resamples=200)
    assert board.ranked_on["quality"]["items"] == 3
    sparse = board.system("sparse")["criteria"]["quality"]
    # The Student interval on its 3 items runs past both ends of 0-4; the board's does not.
    x = np.array(list(values["sparse"].values()))
    half = stats.t.ppf(0.975, 2) * x.std(ddof=1) / np.sqrt(3)
    assert x.mean() - half < 0 and x.mean() + half > 4
    assert sparse["ci"] == [0.0, 4.0] and sparse["own"]["ci"] == [0.0, 4.0]
    for s in board.systems:
        for ci in (s["criteria"]["quality"]["ci"], s["criteria"]["quality"]["own"]["ci"]):
            assert ci is None or 0.0 <= ci[0] <= ci[1] <= 4.0
    for pair in board.pairs:
        assert pair["ci"] is None or -4.0 <= pair["ci"][0] <= pair["ci"][1] <= 4.0
    # Named, with its count and what ranking without it would stand on, and how to ask for it.
    assert board.ranked_on["quality"]["sparse"] == [
        {"system": "sparse", "scored": 3, "without": 40}
    ]
    (note,) = [n for n in board.notes if "--exclude" in n]
    assert "sparse has 3 scored item(s)" in note and "(without it: 40)" in note
    assert "--exclude sparse" in note and "--min-items 4" in note


@pytest.mark.parametrize("how", [{"exclude": ["sparse"]}, {"min_items": 4}])
def test_excluding_it_ranks_the_others_on_their_common_items_and_lists_it_apart(how):
    systems, values, ids = systems_with_a_sparse_one()
    board = leaderboard(systems, ["quality"], SCALES, resamples=200, **how)
    ground = board.ranked_on["quality"]
    assert ground["items"] == 40 and list(ground["left_out"]) == ["sparse"]
    assert "sparse" not in ground and not any("--exclude" in n for n in board.notes)
    # The others: means over all 40 items (independently: numpy), ranked good before fair.
    for name in ("good", "fair"):
        entry = board.system(name)["criteria"]["quality"]
        assert entry["mean"] == pytest.approx(np.mean([values[name][i] for i in ids]))
    assert [s["name"] for s in board.systems[:2]] == ["good", "fair"]
    assert [s["rank"] for s in board.systems[:2]] == [1, 2]
    # The left-out system: not ranked, in no pair's common-ground difference, its own mean kept.
    apart = board.system("sparse")
    entry = apart["criteria"]["quality"]
    assert apart["rank"] is None and entry["mean"] is None and entry["left_out"]
    assert entry["own"]["mean"] == pytest.approx(7 / 3) and entry["own"]["scored"] == 3
    for pair in board.pairs:
        if "sparse" in (pair["a"], pair["b"]):
            assert pair["difference"] is None and pair["p_holm"] is None
    (ranked,) = [p for p in board.pairs if {p["a"], p["b"]} == {"good", "fair"}]
    assert ranked["shared"] == 40
    # The page: the left-out system is named beside the ground, not drawn among the ranked.
    page = render_leaderboard(board)
    assert "left out of the common ground, not ranked: sparse (" in page
    assert "sparse" not in page.split("<svg class='forest'")[1].split("</svg>")[0]


def test_an_unknown_system_to_exclude_is_refused_by_name():
    systems, _, _ = systems_with_a_sparse_one()
    with pytest.raises(InputDataError, match="--exclude nobody: no such system") as got:
        leaderboard(systems, ["quality"], SCALES, exclude=["nobody"])
    assert got.value.field == "exclude"


def test_a_left_out_system_s_human_corrected_mean_is_its_own_not_the_ranked_one():
    systems, values, _ = systems_with_a_sparse_one()
    for s in systems:
        s.labels = [{"id": i, "rater": "r", "quality": int(v)} for i, v in values[s.name].items()]
    board = leaderboard(systems, ["quality"], SCALES, resamples=100, exclude=["sparse"])
    entry = board.system("sparse")["criteria"]["quality"]
    assert entry["human_corrected"] == {"mean": None, "reason": "left out of the common ground"}
    # Every item labelled: the PPI++ mean is the labels' own mean.
    assert entry["own"]["human_corrected"]["mean"] == pytest.approx(7 / 3)
    good = board.system("good")["criteria"]["quality"]["human_corrected"]
    assert good["pool"] == 40 and good["mean"] == pytest.approx(
        np.mean(list(values["good"].values()))
    )
