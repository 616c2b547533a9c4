"""Checklists on items (#63): points, the rule, units, assembly, HealthBench's score, dropout."""

import json
import re
import textwrap

import pytest

from jurybox.rubrics import DefinitionError, Item, input_hash, load_rubric, render_messages
from jurybox.rubrics.checklist import (
    DROPPED,
    assemble,
    checklist_calls,
    dropout,
    points_score,
    units,
)
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.points import ChecklistRule, Point, read_points
from jurybox.rubrics.verdict import CriterionResult, Verdict, VerdictRecord, Vote

HEALTHBENCH = [
    {"criterion": "Advises seeing a doctor", "points": 5, "tags": ["axis:completeness"]},
    {"criterion": "Recommends an antibiotic without a prescription", "points": -4, "tags": []},
    {"criterion": "Asks about the duration", "points": 3, "tags": ["level:example"]},
]


def item(id="a", checklist=HEALTHBENCH, **kw):
    return Item(id=id, question="q?", response="r.", checklist=checklist, **kw)


def test_healthbench_points_are_read_as_they_are_and_keyed_by_position():
    points = item().checklist
    assert [p.key for p in points] == ["p1", "p2", "p3"]
    assert [p.text for p in points] == [r["criterion"] for r in HEALTHBENCH]
    assert [p.points for p in points] == [5, -4, 3]
    assert points[0].tags == ["axis:completeness"] and points[1].pitfall
    # "text" is read too, a JSON string as its list, and a given key is kept
    again = read_points(json.dumps([{"text": "x", "points": 1, "tag": "essential", "key": "p7"}]))
    assert again == [Point(key="p7", text="x", points=1, tag="essential")]


@pytest.mark.parametrize(
    "raw, where",
    [
        ([], "checklist: a checklist needs at least one point"),
        (
            [{"criterion": "x", "points": 1}, {"criterion": "y", "points": 0}],
            "checklist[1]: points",
        ),
        ([{"criterion": "x", "points": 1}, {"criterion": "y"}], "checklist[1]: points: missing"),
        ([{"criterion": "x", "points": 1, "weight": 2}], "checklist[0]: weight: not a field"),
        ([{"criterion": "x", "text": "x", "points": 1}], "checklist[0]: give the point's text"),
        (["x"], "checklist[0]: expected a point"),
        ([{"criterion": "x", "points": 1, "tag": "must"}], "checklist[0]: tag"),
        ([{"criterion": " ", "points": 1}], "checklist[0]: criterion: a point's text is blank"),
        (
            [{"criterion": "x", "points": 1, "key": "p2"}, {"criterion": "y", "points": 1}],
            "checklist[1]: key 'p2' repeats that of checklist[0]",
        ),
        ("[not json", "checklist: not a JSON list"),
        ({"criterion": "x", "points": 1}, "checklist: expected a list"),
    ],
)
def test_errors_name_the_point_and_what_is_wrong(raw, where):
    with pytest.raises(ValueError, match=re.escape(where)):
        read_points(raw)
    with pytest.raises(ValueError, match="checklist"):
        item(checklist=raw)


def test_item_without_checklist_hashes_as_before():
    # The hash the code before checklists gave this item (computed on that code).
    golden = Item(
        id="golden-1",
        question="Is the sky blue?",
        response="Yes, by Rayleigh scattering.",
        reference="Yes.",
        context="c",
        extra={"goal": "x", "n": 3},
    )
    assert input_hash(golden) == "14774badf380dbd6"
    assert "checklist" not in golden.fields()
    # with a checklist the hash covers it: each point's text and points
    a, b = item(), item(checklist=[{**HEALTHBENCH[0], "points": 4}, *HEALTHBENCH[1:]])
    assert len({input_hash(golden), input_hash(a), input_hash(b)}) == 3


def test_provenance_of_a_rubric_without_checklist_is_as_before():
    from jurybox.judges import load_jury_spec
    from jurybox.judges.spec import provenance

    # The provenance the code before checklists gave (computed on that code).
    assert provenance(load_rubric("general"), load_jury_spec("tiny")) == "6ba75ee415908667"


def test_fields_show_the_checklist_to_templates():
    shown = item().fields()["checklist"]
    assert shown[1] == {
        "key": "p2",
        "text": HEALTHBENCH[1]["criterion"],
        "points": -4.0,
        "tag": None,
    }


def test_rule_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="calls applies to score: points"):
        ChecklistRule(score="implicit", calls="all_points")
    with pytest.raises(ValueError, match="clashes"):
        ChecklistRule(name="p3")
    with pytest.raises(ValueError):
        ChecklistRule(max_points=0)


BASE = """
    inputs: [question, response, checklist]
    checklist: {score: points}
    template: "{{ question }} {{ response }} {{ point }} {{ output_format }}"
    criteria:
      - name: met
        description: met?
        scale: {labels: {"yes": 1, "no": 0}}
"""


@pytest.mark.parametrize(
    "change, message",
    [
        (("inputs: [question, response, checklist]", "inputs: [question, response]"), "inputs"),
        (("name: met", "name: hit"), "one criterion, met"),
        (('{"yes": 1, "no": 0}', '{"yes": 1, "no": 0.5}'), "met \\(1\\) or not \\(0\\)"),
        (
            (
                "checklist: {score: points}",
                "checklist: {score: points}\nformula: {name: f, expression: met}",
            ),
            "takes no formula",
        ),
        (("{{ point }}", "{{ pointt }}"), "pointt"),
    ],
)
def test_a_checklist_rubric_is_checked_when_it_loads(tmp_path, change, message):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(BASE).replace(*change))
    with pytest.raises(DefinitionError, match=message):
        load_rubric(path)
    path.write_text(textwrap.dedent(BASE))
    assert load_rubric(path).checklist == ChecklistRule()


@pytest.mark.parametrize("name", ["checklist", "checklist-all", "checklist-implicit"])
def test_shipped_checklist_rubrics_load_and_render_every_point(name):
    rubric = load_rubric(name)
    assert rubric.checklist is not None and "checklist" in rubric.inputs
    one = item()
    for group in units(rubric, [one]):
        for unit in group.items:
            for call in group.rubric.calls():
                text = render_messages(group.rubric, unit, call)[-1]["content"]
                assert "r." in text
                shown = [p["criterion"] in text for p in HEALTHBENCH]
                # a unit per point shows its point; the others show every point
                assert sum(shown) == (
                    1
                    if rubric.checklist.calls == "per_point" and rubric.checklist.score == "points"
                    else 3
                )


def test_a_pitfall_is_said_to_be_one():
    rubric = load_rubric("checklist")
    (group,) = units(rubric, [item()])
    texts = [
        render_messages(group.rubric, u, group.rubric.criteria)[-1]["content"] for u in group.items
    ]
    assert ["pitfall" in t for t in texts] == [False, True, False]


def test_unit_rubrics():
    per = load_rubric("checklist")
    unit = per.unit_rubric()
    assert unit.name == "checklist.point" and unit.checklist is None
    assert "point" in unit.inputs and "checklist" not in unit.inputs
    assert unit.criterion_names == ["met"] and per.unit_rubric() is unit
    assert per == load_rubric("checklist")  # made once, and the rubric is as it was
    every = load_rubric("checklist-all")
    four = every.unit_rubric(4)
    assert four.name == "checklist-all.all4"
    assert four.criterion_names == ["p1", "p2", "p3", "p4"]
    assert all(c.scale == every.criteria[0].scale for c in four.criteria)
    with pytest.raises(ValueError, match="takes no n"):
        per.unit_rubric(3)
    with pytest.raises(ValueError, match="the number of points"):
        every.unit_rubric()
    implicit = load_rubric("checklist-implicit")
    assert implicit.unit_rubric() is implicit
    with pytest.raises(ValueError, match="not a checklist rubric"):
        load_rubric("general").unit_rubric()


def test_units_per_point_all_points_and_implicit():
    two = item("b", checklist=HEALTHBENCH[:2], images=["x.png"], extra={"k": 1})
    items = [item("a"), two, item("c")]
    (group,) = units(load_rubric("checklist"), items)
    assert [u.id for u in group.items][:4] == ["a::p1", "a::p2", "a::p3", "b::p1"]
    assert group.owner[3] == (1, "p1") and len(group.items) == 8
    b2 = group.items[4]
    assert b2.checklist is None and b2.images == ["x.png"]
    assert b2.extra == {
        "k": 1,
        "point": HEALTHBENCH[1]["criterion"],
        "point_points": -4.0,
        "point_tag": None,
    }
    groups = units(load_rubric("checklist-all"), items)
    assert [(g.rubric.name, g.owner) for g in groups] == [
        ("checklist-all.all3", ((0, ""), (2, ""))),
        ("checklist-all.all2", ((1, ""),)),
    ]
    (implicit,) = units(load_rubric("checklist-implicit"), items)
    assert implicit.items == tuple(items)
    assert [
        checklist_calls(load_rubric(n), items)
        for n in ("checklist", "checklist-all", "checklist-implicit", "general")
    ] == [8, 3, 3, 3]


def test_units_refuse_items_without_checklist_or_with_too_many_points(tmp_path):
    with pytest.raises(InputError, match="item 'x' has no checklist") as err:
        units(load_rubric("checklist"), [item(), Item(id="x", question="q", response="r")])
    assert err.value.field == "items[1].checklist"
    many = [{"criterion": f"c{k}", "points": 1} for k in range(65)]
    with pytest.raises(InputError, match="65 points.*at most 64"):
        units(load_rubric("checklist"), [item(checklist=many)])
    with pytest.raises(InputError, match="not a checklist rubric"):
        units(load_rubric("general"), [item()])


def test_a_point_s_unit_hash_covers_only_its_own_point():
    rubric = load_rubric("checklist")
    (old,) = units(rubric, [item()])
    edited = [HEALTHBENCH[0], {**HEALTHBENCH[1], "criterion": "Recommends bleach"}, HEALTHBENCH[2]]
    (new,) = units(rubric, [item(checklist=edited)])
    same = [input_hash(a) == input_hash(b) for a, b in zip(old.items, new.items)]
    assert same == [True, False, True]


def test_healthbench_score_clips_and_counts_pitfalls():
    points = item().checklist  # +5, -4 (pitfall), +3
    assert points_score(points, {"p1": 1, "p2": 0, "p3": 1}) == (1.0, None)
    assert points_score(points, {"p1": 1, "p2": 1, "p3": 0}) == (pytest.approx(1 / 8), None)
    # a met pitfall cannot take the score below 0
    assert points_score(points, {"p1": 0, "p2": 1, "p3": 0}) == (0.0, None)
    # met is the jury's probability: partial credit
    assert points_score(points, {"p1": 0.5, "p2": 0, "p3": 1}) == (pytest.approx(5.5 / 8), None)
    assert points_score(points, {"p1": 1, "p2": None, "p3": 1}) == (None, "point(s) p2 unscored")
    pitfalls = read_points([{"criterion": "x", "points": -1}])
    assert points_score(pitfalls, {"p1": 0}) == (None, "no positive points to earn")


def votes_for(unit_id, criteria, scores):
    return [
        Vote(judge="j", criterion=c, score=s)
        if s is not None
        else Vote(judge="j", criterion=c, error="unparseable")
        for c, s in zip(criteria, scores)
    ]


def unit_verdict(unit, rubric, scores):
    names = rubric.criterion_names
    return Verdict(
        id=unit.id,
        status="scored" if None not in scores else "unscored",
        rubric=rubric.name,
        jury="j",
        provenance="u",
        scores=dict(zip(names, scores)),
        criteria={
            n: CriterionResult(
                score=s,
                n_votes=1,
                n_scored=int(s is not None),
                reason=None if s is not None else "below quorum (0 of 1)",
            )
            for n, s in zip(names, scores)
        },
        votes=votes_for(unit.id, names, scores),
    )


def test_assemble_per_point_gives_each_point_its_result_votes_and_the_score():
    rubric = load_rubric("checklist")
    items = [item("a"), item("b", checklist=HEALTHBENCH[:2])]
    (group,) = units(rubric, items)
    mets = [1, 0, 1, 1, None]
    got = [unit_verdict(u, group.rubric, [m]) for u, m in zip(group.items, mets)]
    a, b = assemble(rubric, items, [group], [got], "jury", "prov")
    assert a.status == "scored" and a.id == "a" and a.rubric == "checklist"
    assert a.scores == {"p1": 1, "p2": 0, "p3": 1, "score": 1.0}
    assert [v.criterion for v in a.votes] == ["p1", "p2", "p3"]
    assert a.points["p2"].points == -4 and a.points["p2"].met == 0
    assert a.provenance == "prov" and a.jury == "jury"
    assert b.status == "unscored" and b.scores["score"] is None
    assert b.reasons == ["p2: below quorum (0 of 1)", "score: point(s) p2 unscored"]
    assert b.points["p2"].reason == "below quorum (0 of 1)"
    # the record keeps the points, and reads back
    record = b.to_record()
    assert record["points"]["p1"]["met"] == 1 and "dropped" not in record
    back = Verdict.from_record(VerdictRecord.from_record(record))
    assert back.points == b.points and back.to_record() == record


def test_assemble_all_points_maps_positions_to_keys():
    rubric = load_rubric("checklist-all")
    kept = dropout(item("a"), 0.5, seed=1, step=0)
    k = 0
    while kept.checklist == item("a").checklist or len(kept.checklist) < 2:
        k += 1
        kept = dropout(item("a"), 0.5, seed=1, step=k)
    (group,) = units(rubric, [kept])
    assert [p.key for p in group.items[0].checklist] == [
        f"p{n + 1}" for n in range(len(kept.checklist))
    ]
    scores = [1.0] + [0.0] * (len(kept.checklist) - 1)
    (v,) = assemble(
        rubric, [kept], [group], [[unit_verdict(group.items[0], group.rubric, scores)]], "j", "p"
    )
    keys = [p.key for p in kept.checklist]
    assert list(v.points) == keys and v.scores[keys[0]] == 1.0
    assert v.dropped == kept.extra[DROPPED] and v.dropped
    assert {x.criterion for x in v.votes} == set(keys)


def test_assemble_implicit_echoes_the_points():
    rubric = load_rubric("checklist-implicit")
    (group,) = units(rubric, [item()])
    (v,) = assemble(
        rubric, [item()], [group], [[unit_verdict(group.items[0], group.rubric, [7.0])]], "j", "p"
    )
    assert v.scores == {"score": 7.0} and v.provenance == "p"
    assert [p.met for p in v.points.values()] == [None, None, None]


def test_old_records_stay_valid():
    old = {
        "id": "x",
        "status": "scored",
        "rubric": "r",
        "jury": "j",
        "provenance": "p",
        "scores": {"a": 1.0},
    }
    record = VerdictRecord.from_record(old)
    assert record.points is None and record.dropped == []
    assert "points" not in record.to_dict() and "dropped" not in record.to_dict()


def test_dropout_is_seeded_keeps_keys_and_a_positive_point():
    many = [{"criterion": f"c{k}", "points": 1 if k % 3 else -1} for k in range(12)]
    one = item(checklist=many)
    a = dropout(one, 0.5, seed=3, step=1)
    assert a == dropout(one, 0.5, seed=3, step=1)
    assert a.checklist != one.checklist and one.checklist is not None and len(one.checklist) == 12
    others = {tuple(p.key for p in dropout(one, 0.5, seed=3, step=s).checklist) for s in range(6)}
    assert len(others) > 1
    assert set(a.extra[DROPPED]) | {p.key for p in a.checklist} == {f"p{k + 1}" for k in range(12)}
    assert dropout(one, 0.0, seed=3, step=1) is one
    for step in range(30):  # rate near 1 still keeps a positive point
        kept = dropout(one, 0.99, seed=0, step=step).checklist
        assert any(p.points > 0 for p in kept)
    with pytest.raises(ValueError, match="in \\[0, 1\\)"):
        dropout(one, 1.0, seed=0, step=0)


def test_a_checklist_column_becomes_the_item_s_checklist_and_errors_name_the_point():
    from jurybox.rubrics.item_fields import FieldError, to_item

    rubric = load_rubric("checklist")
    row = {"id": "a", "question": "q", "response": "r", "rubrics": HEALTHBENCH}
    got = to_item(row, {"checklist": "rubrics"}, rubric)  # --map checklist=rubrics
    assert got.checklist == item().checklist and "rubrics" not in got.extra
    as_json = to_item({**row, "checklist": json.dumps(HEALTHBENCH)}, {}, rubric)
    assert as_json.checklist == got.checklist
    bad = {**row, "checklist": [HEALTHBENCH[0], {"criterion": "x"}]}
    with pytest.raises(FieldError, match=re.escape("checklist[1]: points: missing")) as err:
        to_item(bad, {}, rubric)
    assert err.value.field == "checklist[1]"
    with pytest.raises(FieldError, match="checklist: missing, but the rubric checklist needs"):
        to_item(row, {}, rubric)
    with pytest.raises(FieldError, match="checklist\\[0\\]: 11 characters"):
        to_item({**row, "checklist": [{"criterion": "x" * 11, "points": 1}]}, {}, rubric, 10)
    # another rubric's rows keep a checklist column as an extra field, as before
    plain = to_item(
        {**row, "checklist": "kept"},
        {},
        load_rubric("general").model_copy(update={"inputs": ["question", "response"]}),
    )
    assert plain.checklist is None and plain.extra["checklist"] == "kept"
