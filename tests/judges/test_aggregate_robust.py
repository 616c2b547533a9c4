"""What one juror that gives every answer the top can do to each aggregation (the guide's bounds).

docs/guides/juries.md, "One juror that fails: what each aggregation bounds", states these; each
is checked on 1,000 random sets of honest votes on a 0-4 scale, through the jury's own rule
(`aggregate_criterion`), against the verdict of the honest judges alone.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from jurybox.judges import JurySpec
from jurybox.judges.aggregate import aggregate_criterion
from jurybox.rubrics import Vote

LOW, TOP = 0, 4
SPAN = TOP - LOW
SETS = 1000


def _jury(method: str, weights: list[float]) -> JurySpec:
    judges = [
        {"name": f"j{k}", "model": "none", "backend": "replay", "weight": w}
        for k, w in enumerate(weights)
    ]
    return JurySpec.model_validate(
        {"name": "robust", "judges": judges, "aggregation": {"method": method}}
    )


def _cases(method: str, smallest: int):
    """(jury, honest votes, the bad juror's vote): J judges, the last one giving the top."""
    rng = np.random.default_rng(62)
    juries: dict[int, JurySpec] = {}
    for _ in range(SETS):
        n = int(rng.integers(smallest, 10))
        if method == "weighted":
            jury = _jury(method, [float(w) for w in rng.uniform(0.2, 3.0, n)])
        else:
            jury = juries.setdefault(n, _jury(method, [1.0] * n))
        honest = [
            Vote(judge=f"j{k}", criterion="c", score=float(s))
            for k, s in enumerate(rng.integers(LOW, TOP + 1, n - 1))
        ]
        yield jury, honest, Vote(judge=f"j{n - 1}", criterion="c", score=float(TOP))


def _both(jury: JurySpec, honest: list[Vote], bad: Vote) -> tuple[float | None, float | None]:
    alone = aggregate_criterion("c", honest, jury).score
    return alone, aggregate_criterion("c", [*honest, bad], jury).score


def test_the_mean_moves_at_most_a_span_over_the_jury():
    for jury, honest, bad in _cases("mean", 2):
        alone, both = _both(jury, honest, bad)
        assert alone is not None and both is not None
        assert 0 <= both - alone <= SPAN / len(jury.judges) + 1e-9


def test_the_median_stays_among_the_honest_votes():
    # From three judges: between the honest median and the (floor(J/2)+1)-th smallest honest vote.
    for jury, honest, bad in _cases("median", 3):
        alone, both = _both(jury, honest, bad)
        assert alone is not None and both is not None
        ranked = sorted(v.score for v in honest if v.score is not None)
        assert alone - 1e-9 <= both <= ranked[len(jury.judges) // 2] + 1e-9


def test_the_median_of_two_is_their_mean():
    jury = _jury("median", [1.0, 1.0])
    honest = [Vote(judge="j0", criterion="c", score=0.0)]
    _, both = _both(jury, honest, Vote(judge="j1", criterion="c", score=float(TOP)))
    assert both == SPAN / 2


def test_a_trimmed_mean_that_cuts_one_stays_within_the_honest_range():
    # trim 0.25 (the default) with J >= 4 judges: trim * J >= 1, one vote cut from each end.
    for jury, honest, bad in _cases("trimmed", 4):
        assert math.floor(jury.aggregation.trim * len(jury.judges)) >= 1
        _, both = _both(jury, honest, bad)
        scores = [v.score for v in honest if v.score is not None]
        assert both is not None and min(scores) - 1e-9 <= both <= max(scores) + 1e-9


def test_a_trimmed_mean_that_cuts_none_is_a_mean():
    jury = _jury("trimmed", [1.0, 1.0, 1.0])  # 0.25 * 3 < 1
    honest = [Vote(judge=f"j{k}", criterion="c", score=0.0) for k in range(2)]
    _, both = _both(jury, honest, Vote(judge="j2", criterion="c", score=float(TOP)))
    assert both == pytest.approx(SPAN / 3)


def test_the_weighted_mean_moves_at_most_its_weight_share_of_the_span():
    for jury, honest, bad in _cases("weighted", 2):
        alone, both = _both(jury, honest, bad)
        weights = [j.weight for j in jury.judges]
        assert alone is not None and both is not None
        assert 0 <= both - alone <= weights[-1] / sum(weights) * SPAN + 1e-9


def test_majority_can_only_flip_a_tie():
    moved = {"tie broken": 0, "tie made": 0}
    for _, honest, bad in _cases("majority", 2):
        jury = _jury("majority", [1.0] * (len(honest) + 1))
        alone, both = _both(jury, honest, bad)
        if alone is None:  # the honest votes tied: the top may break the tie, for itself
            assert both in (None, float(TOP))
            moved["tie broken"] += both == float(TOP)
        else:  # a majority: kept, or made a tie (unscored), never another value
            assert both in (alone, None)
            moved["tie made"] += both is None
    assert all(moved.values())  # (both happen among the random sets)
