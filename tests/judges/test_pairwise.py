"""Pairwise rubrics and votes: both orders asked, A's share, a judge's two orders combined
(consistent, inconsistent as a tie or unscored), the winner, P(A better), records."""

from __future__ import annotations

import pytest

from jurybox.judges import load_jury_spec, provenance
from jurybox.judges.judging import decide, render_requests
from jurybox.rubrics import Item, Rubric, Verdict, VerdictRecord, Vote, load_rubric
from jurybox.rubrics.pairwise import combine_orders, jury_p_a, winner_of

PAIR = Item(
    id="p1",
    question="Which fungicide?",
    extra={"response_a": "Copper, weekly.", "response_b": "Water more."},
)


def vote(judge: str, order: str, score: float, dist: dict | None = None, criterion="better"):
    return Vote(
        judge=judge,
        criterion=criterion,
        score=score,
        order=order,
        distribution=dist,
        expected=None
        if dist is None
        else sum({"1": 1.0, "tie": 0.5, "2": 0.0}[k] * p for k, p in dist.items()),
    )


def test_every_item_is_asked_in_both_orders_with_the_answers_swapped():
    rubric = load_rubric("pairwise")
    requests = render_requests(rubric, [PAIR])
    assert requests.orders == ("ab", "ba") and len(requests.requests) == 2
    ab, ba = (r.messages[-1]["content"] for r in requests.requests)
    assert ab.index("Copper") < ab.index("Water") and ba.index("Water") < ba.index("Copper")
    assert rubric.judge_calls == 2 and load_rubric("general").judge_calls == 1
    # A cascade's open items keep their orders.
    assert requests.subset([0]).orders == ("ab", "ba")


def test_a_consistent_judge_s_two_orders_average_and_an_inconsistent_one_is_a_tie_or_unscored():
    c = load_rubric("pairwise").criteria[0]
    # A first: "1" (A better, share 1); B first: "2" (the second, A, is better; share 1).
    same = combine_orders(c.name, [vote("j", "ab", 1.0), vote("j", "ba", 1.0)], "tie")
    assert [v.score for v in same] == [1.0]
    # "1" both times: A first then B first -> the judge always picks the first: inconsistent.
    flip = [vote("j", "ab", 1.0), vote("j", "ba", 0.0)]
    assert combine_orders(c.name, flip, "tie")[0].score == 0.5
    (unscored,) = combine_orders(c.name, flip, "unscored")
    assert unscored.score is None and "inconsistent under order swap" in unscored.error
    assert "with A first it chose a, with B first b" in unscored.error
    # A tie one way and a win the other is inconsistent too; both ties are consistent.
    assert combine_orders(c.name, [vote("j", "ab", 0.5), vote("j", "ba", 1.0)], "unscored")[0].error
    assert (
        combine_orders(c.name, [vote("j", "ab", 0.5), vote("j", "ba", 0.5)], "unscored")[0].score
        == 0.5
    )
    # One order unscored: the judge's vote is unscored, saying which order failed.
    bad = Vote(judge="j", criterion="better", error="no JSON object", order="ba")
    (one,) = combine_orders(c.name, [vote("j", "ab", 1.0), bad], "tie")
    assert one.error == "with B first: no JSON object"
    (alone,) = combine_orders(c.name, [vote("j", "ab", 1.0)], "tie")
    assert "one order only" in alone.error


def test_an_inconsistent_judge_s_expected_score_is_a_tie_too():
    """Issue 60 (7): a judge whose two orders point to different answers is a tie on its
    expected score as well as its chosen one, not the mean of two contradictory readings (the
    tiny jury's 0.4948 read as "the other answer is better")."""
    c = load_rubric("pairwise").criteria[0]
    ab = vote("j", "ab", 1.0, {"1": 0.5, "tie": 0.1, "2": 0.4})  # chose A, expected 0.55
    ba = vote("j", "ba", 0.0, {"1": 0.6, "tie": 0.1, "2": 0.3})  # chose B, expected 0.65
    assert ab.expected is not None and ba.expected is not None
    assert (ab.expected + ba.expected) / 2 != pytest.approx(0.5)
    (tie,) = combine_orders(c.name, [ab, ba], "tie")
    assert tie.score == 0.5 and tie.expected == 0.5
    # A consistent judge keeps the mean of its two expected scores (the order-debiased verdict).
    ba_same = vote("j", "ba", 1.0, {"1": 0.1, "tie": 0.1, "2": 0.8})
    (kept,) = combine_orders(c.name, [ab, ba_same], "tie")
    assert kept.expected == pytest.approx((ab.expected + ba_same.expected) / 2)


def test_the_verdict_has_a_winner_p_a_and_reasons():
    rubric, spec = load_rubric("pairwise"), load_jury_spec("tiny")
    prov = provenance(rubric, spec)
    ja, jb = (j.name for j in spec.judges)
    votes = [
        vote(ja, "ab", 1.0, {"1": 0.8, "tie": 0.1, "2": 0.1}),
        vote(ja, "ba", 1.0, {"2": 0.6, "tie": 0.2, "1": 0.2}),
        vote(jb, "ab", 1.0, {"1": 0.9, "tie": 0.0, "2": 0.1}),
        vote(jb, "ba", 0.0, {"1": 0.7, "tie": 0.0, "2": 0.3}),
    ]
    v = decide(rubric, spec, prov, "p1", votes)
    # ja: A both times (1.0); jb: the first both times -> a tie (0.5); mean 0.75 -> a.
    assert v.scores == {"better": 0.75} and v.winner == "a" and v.status == "scored"
    # P(A better): ja (0.8 + 0.6) / 2, jb (0.9 + 0.3) / 2; their mean.
    assert v.p_a == pytest.approx(((0.8 + 0.6) / 2 + (0.9 + 0.3) / 2) / 2)
    assert jury_p_a(rubric, votes) == v.p_a
    assert v.criteria["better"].n_votes == 2  # judges, not orders
    # The inconsistent judge is named, with what it chose in each order.
    assert v.inconsistent == [
        f"{jb} on better: inconsistent under order swap: with A first it chose a, with B first b"
    ]
    record = v.to_record()
    assert record["winner"] == "a" and {vo["order"] for vo in record["votes"]} == {"ab", "ba"}
    back = VerdictRecord.from_record(record)
    assert back.to_dict() == record and Verdict.from_record(back).to_record() == record
    assert Verdict.from_record(back).criteria["better"].n_votes == 2
    # Unscored under "unscored": no winner, and the reason names the inconsistent judge.
    strict = rubric.model_copy(update={"inconsistent": "unscored"})
    spec1 = spec.model_copy(update={"judges": spec.judges[1:]})
    u = decide(strict, spec1, prov, "p1", votes[2:])
    assert u.winner is None and u.status == "unscored"
    assert "inconsistent under order swap" in u.reasons[0] and jb in u.reasons[0]
    assert u.to_record()["winner"] is None  # present, null: a pairwise verdict without winner


def test_records_of_other_rubrics_carry_no_pairwise_fields():
    rubric, spec = load_rubric("general"), load_jury_spec("tiny")
    votes = [
        Vote(judge=j.name, criterion=c.name, score=3) for j in spec.judges for c in rubric.criteria
    ]
    record = decide(rubric, spec, provenance(rubric, spec), "x", votes).to_record()
    assert "winner" not in record and "p_a" not in record and "inconsistent" not in record
    assert all("order" not in v for v in record["votes"])
    assert VerdictRecord.from_record(record).to_dict() == record


def test_winner_of():
    assert [winner_of(x) for x in (1.0, 0.75, 0.5, 0.25, 0.0, None)] == [
        "a",
        "a",
        "tie",
        "b",
        "b",
        None,
    ]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"inputs": ["question", "response"]}, "list ['response_a', 'response_b'] under inputs"),
        (
            {
                "criteria": [
                    {"name": "better", "description": "d", "scale": {"labels": {"1": 1, "2": 0.2}}}
                ]
            },
            "symmetric about 0.5",
        ),
        (
            {"criteria": [{"name": "better", "description": "d", "scale": {"min": 0, "max": 4}}]},
            "runs from 0",
        ),
        (
            {
                "criteria": [
                    {"name": "x", "description": "d", "scale": {"labels": {"1": 1, "2": 0}}},
                    {"name": "y", "description": "d", "scale": {"labels": {"1": 1, "2": 0}}},
                ]
            },
            "needs a formula",
        ),
    ],
)
def test_a_pairwise_rubric_that_cannot_swap_is_refused_at_load(change, message):
    data = load_rubric("pairwise").model_dump(mode="json", by_alias=True)
    data.update(change)
    with pytest.raises(ValueError, match="pairwise|symmetric|formula") as exc:
        Rubric.model_validate(data)
    assert message in str(exc.value)


def test_the_shipped_pairwise_rubrics_load_and_other_rubrics_hash_as_before():
    assert load_rubric("general-pairwise").formula.name == "overall"
    # A rubric that is not pairwise hashes without the `inconsistent` field it does not use.
    general, spec = load_rubric("general"), load_jury_spec("tiny")
    changed = general.model_copy(update={"inconsistent": "unscored"})
    assert provenance(changed, spec) == provenance(general, spec)
    pairwise = load_rubric("pairwise")
    assert provenance(pairwise.model_copy(update={"inconsistent": "unscored"}), spec) != provenance(
        pairwise, spec
    )


def test_a_cascaded_jury_refuses_a_pairwise_rubric_saying_why():
    from jurybox.judges import load_jury_spec as load
    from jurybox.rubrics.errors import InputError

    unfitted = load("examples/tiny-cascade.yaml")
    first = unfitted.stages[0].model_copy(update={"threshold": 0.9})
    spec = unfitted.model_copy(update={"stages": [first, *unfitted.stages[1:]]})
    assert spec.cascaded
    unfitted.check_rubric(load_rubric("pairwise"))  # unfitted stages judge like a plain jury
    with pytest.raises(InputError, match="cascades do not judge pairwise rubrics yet"):
        spec.check_rubric(load_rubric("pairwise"))
    spec.check_rubric(load_rubric("general"))  # other rubrics as before
