"""Judging items on their own checklists in process (`Jury.score`, #63): units judged by the
ordinary path, assembled into one verdict per item; the verdict cache per unit. A scripted judge
answers by the point's text (``[no]``: not met, ``[fails]``: an error), so what each mode asks
and what the verdict holds are exact; the replay jury's real answers are in
tests/serving/cli/test_cli_checklist.py."""

from __future__ import annotations

import json
import re

import pytest

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.protocol import Generation
from jurybox.judges.cache import VerdictCache
from jurybox.rubrics import Item, load_rubric
from jurybox.rubrics.checklist import checklist_calls, dropout

POINTS = [
    {"criterion": "Names the cause", "points": 5, "tag": "essential"},
    {"criterion": "Gives a remedy [no]", "points": 3},
    {"criterion": "Recommends something harmful [no]", "points": -4},
    {"criterion": "Says when to act", "points": 2},
]


class Scripted:
    """A judge that meets every point but those marked ``[no]`` (and fails on ``[fails]``),
    scores 7 on a whole checklist, and counts the prompts it was given."""

    def __init__(self) -> None:
        self.asked = 0

    def generate(self, requests, cancelled=None):
        self.asked += len(requests)
        return [self._answer(r) for r in requests]

    @staticmethod
    def _answer(request):
        text = request.messages[-1]["content"]
        keys = list(request.schema["properties"])
        if keys == ["score"]:
            return Generation(text='{"score": 7}')
        if keys == ["met"]:
            point = text.split("Checklist point", 1)[1]
            lines = {"met": point}
        else:
            lines = {k: re.search(rf"^{k}: (.*)$", text, re.M)[1] for k in keys}
        if any("[fails]" in line for line in lines.values()):
            return Generation(error="the judge failed on this prompt")
        answer = {k: "no" if "[no]" in line else "yes" for k, line in lines.items()}
        return Generation(text=json.dumps(answer))

    def close(self) -> None:
        pass


def spec(quorum: int = 1) -> JurySpec:
    return JurySpec.model_validate(
        {
            "name": "j",
            "aggregation": {"method": "mean", "quorum": quorum},
            "judges": [{"name": "a", "model": "org/not-a-model"}],
        }
    )


def jury(backend=None, cache=None) -> Jury:
    return Jury(spec(), {"a": backend or Scripted()}, cache=cache)


def item(id="x", points=POINTS, response="Blight; spray in the morning.") -> Item:
    return Item(
        id=id, question="Brown rings on my tomato leaves?", response=response, checklist=points
    )


def test_per_point_verdict_has_a_result_and_votes_per_point():
    backend = Scripted()
    (v,) = jury(backend).score(load_rubric("checklist"), [item()])
    assert backend.asked == 4  # a call per point
    assert v.status == "scored" and v.rubric == "checklist" and v.id == "x"
    assert v.scores == {"p1": 1.0, "p2": 0.0, "p3": 0.0, "p4": 1.0, "score": 7 / 10}
    assert [(x.judge, x.criterion, x.score) for x in v.votes] == [
        ("a", "p1", 1.0),
        ("a", "p2", 0.0),
        ("a", "p3", 0.0),
        ("a", "p4", 1.0),
    ]
    assert set(v.criteria) == {"p1", "p2", "p3", "p4"} and v.criteria["p1"].n_votes == 1
    assert v.points["p3"].points == -4 and v.points["p3"].met == 0.0
    assert v.provenance == jury().provenance(load_rubric("checklist"))


def test_all_points_makes_one_call_per_item():
    backend = Scripted()
    items = [item("x"), item("y", POINTS[:3]), item("z")]
    rubric = load_rubric("checklist-all")
    verdicts = jury(backend).score(rubric, items)
    assert backend.asked == 3 == checklist_calls(rubric, items)
    assert [v.id for v in verdicts] == ["x", "y", "z"]  # in order across the groups by n
    x, y, _ = verdicts
    assert x.scores == {"p1": 1.0, "p2": 0.0, "p3": 0.0, "p4": 1.0, "score": 7 / 10}
    assert y.scores["score"] == 5 / 8 and list(y.points) == ["p1", "p2", "p3"]
    per_point = Scripted()
    jury(per_point).score(load_rubric("checklist"), items)
    assert per_point.asked == 11 == checklist_calls(load_rubric("checklist"), items)


def test_implicit_is_one_judgment_with_points_echoed():
    backend = Scripted()
    (v,) = jury(backend).score(load_rubric("checklist-implicit"), [item()])
    assert backend.asked == 1
    assert v.scores == {"score": 7.0} and v.status == "scored"
    assert [p.text for p in v.points.values()] == [p["criterion"] for p in POINTS]
    assert all(p.met is None for p in v.points.values())


def test_unscored_point_makes_item_unscored_with_reason():
    points = [*POINTS[:3], {"criterion": "Says when to act [fails]", "points": 2}]
    (v,) = jury().score(load_rubric("checklist"), [item(points=points)])
    assert v.status == "unscored" and v.scores["score"] is None and v.scores["p4"] is None
    assert v.reasons[0].startswith("p4: ") and v.reasons[-1] == "score: point(s) p4 unscored"
    assert v.points["p4"].met is None and v.points["p4"].reason
    assert v.scores["p1"] == 1.0  # the other points keep their results
    assert any(x.criterion == "p4" and x.error for x in v.votes)


def test_dropped_points_are_not_judged_and_are_listed():
    backend = Scripted()
    many = [{"criterion": f"point {k}", "points": 1 + k} for k in range(10)]
    kept = dropout(item(points=many), 0.5, seed=0, step=3)
    (v,) = jury(backend).score(load_rubric("checklist"), [kept])
    assert backend.asked == len(kept.checklist) < 10
    assert v.dropped and set(v.dropped).isdisjoint(v.points)
    assert set(v.dropped) | set(v.points) == {f"p{k + 1}" for k in range(10)}
    assert v.scores["score"] == 1.0  # the denominator is the points kept


@pytest.fixture
def cache(tmp_path):
    c = VerdictCache(tmp_path / "verdicts.sqlite")
    yield c
    c.close()


def test_changed_point_rejudges_only_that_point(cache):
    rubric = load_rubric("checklist")
    backend = Scripted()
    first = jury(backend, cache).score(rubric, [item()])
    edited = [POINTS[0], {**POINTS[1], "criterion": "Gives another remedy [no]"}, *POINTS[2:]]
    again = jury(backend, cache)
    assert again.needs_judging(rubric, [item(points=edited)])
    (v,) = again.score(rubric, [item(points=edited)])
    # one point judged again: the item is not counted as found in the cache (hits count items)
    assert backend.asked == 4 + 1 and again.cache_hits == 0
    assert v.votes[2:] == first[0].votes[2:] and v.points["p2"].text.startswith("Gives another")
    # the same checklist again: every unit from the cache, the same verdict
    third = jury(backend, cache)
    assert not third.needs_judging(rubric, [item()])
    assert third.score(rubric, [item()])[0].to_record() == first[0].to_record()
    assert backend.asked == 5 and third.cache_hits == 1


def test_rule_change_changes_provenance_not_units(cache, tmp_path):
    rubric = load_rubric("checklist")
    other = rubric.model_copy(
        update={"checklist": rubric.checklist.model_copy(update={"max_points": 10})}
    )
    backend = Scripted()
    (a,) = jury(backend, cache).score(rubric, [item()])
    j = jury(backend, cache)
    (b,) = j.score(other, [item()])
    assert a.provenance != b.provenance
    assert backend.asked == 4 and j.cache_hits == 1  # every unit reused: the item found whole
    assert a.scores == b.scores


def test_progress_counts_items_not_units():
    told = []
    jury().score(
        load_rubric("checklist"),
        [item("x"), item("y", POINTS[:2])],
        lambda name, n: told.append((name, n)),
    )
    assert sum(n for _, n in told) == 2 and all(n >= 1 for _, n in told)


def test_an_item_without_checklist_is_refused_with_its_name():
    from jurybox.rubrics.errors import InputError

    with pytest.raises(InputError, match="item 'bare' has no checklist"):
        jury().score(
            load_rubric("checklist"), [item(), Item(id="bare", question="q", response="r")]
        )
