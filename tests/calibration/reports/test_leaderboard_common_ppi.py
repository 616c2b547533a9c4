"""The leaderboard's human-corrected (PPI++) means stand on the ranking's common ground (#60):
a system that lacks the hardest items no longer looks better by PPI++ than one that is better
on every item; each system's PPI++ mean over its own items is shown apart, not ranked."""

import dataclasses

import numpy as np

from jurybox.calibration.data.labels import scales_from
from jurybox.calibration.data.verdicts import judge_output_from_records
from jurybox.calibration.estimates.active import mean_estimates, pool_model
from jurybox.calibration.reports.leaderboard import System, leaderboard

SCALES = scales_from({"quality": [0, 1, 2, 3, 4]})


def output(scores, name):
    """Verdicts of one system: ``scores`` maps item id -> its quality score."""
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


def worse_system_lacking_the_hardest(seed=60, n=200, hardest=30):
    """The issue's reproduction: B is worse than A on every item (equal, or 1 lower on 40%) and
    lacks the 30 hardest; the jury is right on 70% of the items and one level off on the rest;
    half of each system's items are labelled, at random. Returns the systems and, per system,
    its human labels on every item it has (the truth)."""
    rng = np.random.default_rng(seed)
    ids = [f"i{k}" for k in range(n)]
    human_a = np.where(
        np.arange(n) < hardest, 0, rng.choice([2, 3, 4], n, p=[0.1, 0.4, 0.5])
    ).astype(float)
    human_b = human_a - (rng.random(n) < 0.4) * (human_a >= 1)
    truth, systems = {}, []
    for name, human, keep in (("A", human_a, np.arange(n)), ("B", human_b, np.arange(hardest, n))):
        jury = np.clip(human + (rng.random(n) < 0.3) * rng.choice([-1, 1], n), 0, 4)
        labelled = rng.choice(keep, keep.size // 2, replace=False)
        lines = [{"id": ids[k], "rater": "r", "quality": int(human[k])} for k in labelled]
        scores = {ids[k]: float(jury[k]) for k in keep}
        systems.append(System(name, output(scores, name), lines))
        truth[name] = {ids[k]: float(human[k]) for k in keep}
    return systems, truth


def test_the_human_corrected_means_are_on_the_items_every_system_scored():
    systems, truth = worse_system_lacking_the_hardest()
    board = leaderboard(systems, ["quality"], SCALES, resamples=200)
    common = sorted(truth["B"])  # B's items: the common ground
    assert board.ranked_on["quality"]["items"] == len(common) == 170
    a = board.system("A")["criteria"]["quality"]
    b = board.system("B")["criteria"]["quality"]
    # Both on the 170 common items, and A (better on every item) ahead by PPI++ too.
    assert a["human_corrected"]["pool"] == b["human_corrected"]["pool"] == 170
    assert a["human_corrected"]["mean"] > b["human_corrected"]["mean"]
    for name, entry in (("A", a), ("B", b)):
        lo, hi = entry["human_corrected"]["ci"]
        assert lo <= np.mean([truth[name][i] for i in common]) <= hi
    # Each system's own-item PPI++ mean is kept apart (A's over its 200 items, with the 30
    # hardest: lower than B's over its 170), not in the ranked column.
    assert a["own"]["human_corrected"]["pool"] == 200
    assert b["own"]["human_corrected"]["pool"] == 170
    assert a["own"]["human_corrected"]["mean"] < b["own"]["human_corrected"]["mean"]


def test_the_common_ground_estimate_is_the_estimate_over_a_pool_of_those_items_alone():
    # Independently: the same estimator given only the common items' verdicts (and the labels
    # on them) gives the same mean and interval as the board's, which keeps every verdict
    # and leaves the items off the common ground out of the pool.
    systems, truth = worse_system_lacking_the_hardest(seed=61)
    board = leaderboard(systems, ["quality"], SCALES, resamples=200)
    common = set(truth["B"])
    a = systems[0]
    records = [r for r in a.output.records if r.id in common]
    lines = [line for line in a.labels if line["id"] in common]
    (alone,) = mean_estimates(
        lines,
        {r.id: r.scores for r in records},
        SCALES,
        model=pool_model(records, SCALES),
    ).values()
    got = board.system("A")["criteria"]["quality"]["human_corrected"]
    assert got["mean"] == alone.estimate and got["ci"] == list(alone.ci)
    assert got["labelled"] == alone.labelled and got["pool"] == alone.pool == 170
    assert not any("unscored" in note for note in got["notes"])
    assert any("170 items every system scored" in note for note in got["notes"])
    assert dataclasses.is_dataclass(alone)
