"""Jurors that fail loudly: each failing fake juror is flagged, and leaving it out works."""

from __future__ import annotations

import pytest
from exploit_helpers import fake_judges, fake_jury  # noqa: F401

from jurybox.judges.jurors import (
    AgreementHistory,
    JurorCheck,
    decide_without,
    departed_note,
    fewer_agreements,
    flag_jurors,
    mark_flagged,
    records_flagged,
    records_without,
)
from jurybox.rubrics import Item, Verdict, VerdictRecord, load_rubric

WORDS = ["alpha", "bravo", "charlie", "delta"]


def _items(n: int = 16) -> list[Item]:
    # The honest judges score each item by the share of the reference's words it holds: mostly
    # half of them (2 on a 0-4 scale), some one or three, so the honest votes vary.
    held = [2, 2, 1, 2, 3, 2, 2, 1] * (n // 8)
    return [
        Item(
            id=f"q{k}",
            question=f"What are the words of item {k}?",
            response=" ".join(WORDS[:h]),
            reference=" ".join(WORDS),
        )
        for k, h in enumerate(held)
    ]


def _judge(backend: str, items: list[Item]) -> tuple:
    rubric = load_rubric("mirage-mg")
    jury = fake_jury("honest-for-tests", "honest-for-tests", backend)
    return rubric, jury, jury.score(rubric, items)


@pytest.mark.parametrize(
    ("backend", "kind"),
    [
        ("flatterer-for-tests", "departed"),
        ("collapsed-for-tests", "collapsed"),
        ("refuser-for-tests", "refused"),
    ],
)
def test_a_failing_juror_is_flagged_and_left_out(fake_judges, backend, kind):  # noqa: F811
    items = _items()
    rubric, jury, verdicts = _judge(backend, items)
    bad = jury.spec.judges[2].name
    flags = flag_jurors(rubric, jury, verdicts)
    assert {f.judge for f in flags} == {bad}
    assert kind in {f.kind for f in flags}

    honest = fake_jury("honest-for-tests", "honest-for-tests").score(rubric, items)
    again = decide_without(rubric, jury, verdicts, flags)
    for v, h in zip(again, honest):
        assert v.scores == h.scores and v.status == h.status
        assert len(v.left_out) == 1 and v.left_out[0].startswith(f"{bad}: ")
        assert f"{kind} " in v.left_out[0]
        assert {vote.judge for vote in v.votes} == {j.name for j in jury.spec.judges}
        assert v.provenance == verdicts[0].provenance
    # Flagged but kept: each verdict names the juror in flagged, and the jury's decision stands.
    marked = mark_flagged(verdicts, flags)
    for m, v, a in zip(marked, verdicts, again):
        assert m.scores == v.scores and m.left_out == [] and m.flagged == a.flagged
        assert len(m.flagged) == 1 and m.flagged[0].startswith(f"{bad}: ") and kind in m.flagged[0]
    assert [r["flagged"] for r in records_flagged([v.to_record() for v in verdicts], flags)] == [
        m.flagged for m in marked
    ]
    assert VerdictRecord.from_record(marked[0].to_record()).flagged == marked[0].flagged
    # Unflagged, nothing changes, and a record without a juror left out has no left_out.
    assert decide_without(rubric, jury, verdicts, []) == verdicts
    assert "left_out" not in verdicts[0].to_record()
    assert "flagged" not in verdicts[0].to_record() and mark_flagged(verdicts, []) == verdicts
    records = [v.to_record(input=f"h{k}") for k, v in enumerate(verdicts)]
    assert flag_jurors(rubric, jury, records) == flags
    written = records_without(rubric, jury, records, flags)
    assert written[0]["left_out"] == again[0].left_out and written[0]["input"] == "h0"
    assert VerdictRecord.from_record(written[0]).to_dict() == written[0]
    assert Verdict.from_record(VerdictRecord.from_record(written[0])).left_out == again[0].left_out


def test_the_flatterer_is_also_collapsed_and_the_honest_are_never_flagged(fake_judges):  # noqa: F811
    rubric, jury, verdicts = _judge("flatterer-for-tests", _items())
    kinds = {(f.judge, f.kind) for f in flag_jurors(rubric, jury, verdicts)}
    assert kinds == {("flatterer-2", "collapsed"), ("flatterer-2", "departed")}


def test_two_judges_cannot_tell_who_departed(fake_judges):  # noqa: F811
    rubric = load_rubric("mirage-mg")
    jury = fake_jury("honest-for-tests", "flatterer-for-tests")
    verdicts = jury.score(rubric, _items())
    flags = flag_jurors(rubric, jury, verdicts, JurorCheck(min_items=1000))
    assert flags == []  # (min_items: no collapse either; with three judges it is departed)
    assert "nothing says which judge departed" in departed_note(jury)
    assert departed_note(fake_jury(*["honest-for-tests"] * 3)) is None


def test_departure_is_judged_over_a_window_of_one_item_batches(fake_judges):  # noqa: F811
    rubric, jury, verdicts = _judge("flatterer-for-tests", _items())
    history = AgreementHistory(64)
    seen = [flag_jurors(rubric, jury, [v], JurorCheck(), history) for v in verdicts]
    assert seen[0] == []  # one item (4 comparisons) says nothing, nor is one value a collapse
    assert [f.kind for f in seen[-1]] == ["departed"]
    assert seen[-1][0].judge == "flatterer-2"


def test_a_small_batch_is_not_a_collapse(fake_judges):  # noqa: F811
    rubric, jury, verdicts = _judge("collapsed-for-tests", _items())
    assert flag_jurors(rubric, jury, verdicts[:7]) == []


def test_fishers_lower_tail():
    assert fewer_agreements(2, 2, 2, 2) == pytest.approx(1.0)
    assert fewer_agreements(0, 2, 2, 2) == pytest.approx(1 / 6)
    assert fewer_agreements(0, 3, 3, 3) == pytest.approx(1 / 20)
    assert fewer_agreements(1, 3, 3, 3) == pytest.approx(4 / 20)  # (1 at least: 4 of 6 agreed)
    assert fewer_agreements(5000, 10_000, 6000, 10_000) < 1e-40  # (no overflow)


def test_a_jury_without_judges_caps_its_quorum(fake_judges):  # noqa: F811
    from exploit_helpers import fake_spec

    from jurybox.judges import JurySpec
    from jurybox.rubrics.errors import InputError

    spec = fake_spec("honest-for-tests", "honest-for-tests", "refuser-for-tests")
    spec = JurySpec.model_validate({**spec.model_dump(), "aggregation": {"quorum": 3}})
    fewer = spec.without(["refuser-2"])
    assert [j.name for j in fewer.judges] == ["honest-0", "honest-1"]
    assert fewer.aggregation.quorum == 2 and fewer.name == spec.name
    with pytest.raises(InputError, match="leaves no judge"):
        spec.without([j.name for j in spec.judges])


def _batches(judges: int, runs: int, bad: str | None, seed: int):
    """Batches of 16 items: honest judges near each item's truth; the last one ``bad``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    names = [f"j{k}" for k in range(judges)]
    criteria = load_rubric("mirage-mg").criterion_names
    for _ in range(runs):
        truth = rng.uniform(0, 4, (16, len(criteria), 1))
        votes = np.clip(np.round(truth + rng.normal(0, 0.7, (16, len(criteria), judges))), 0, 4)
        if bad == "random":
            votes[:, :, -1] = rng.integers(0, 5, (16, len(criteria)))
        yield (
            names,
            [
                {
                    (n, c): float(votes[i, m, k])
                    for m, c in enumerate(criteria)
                    for k, n in enumerate(names)
                }
                for i in range(16)
            ],
        )


@pytest.mark.parametrize("judges", [3, 5])
def test_honest_jurors_are_seldom_found_departed(judges):
    from jurybox.judges.jurors import _departed

    rubric = load_rubric("mirage-mg")
    flagged = sum(
        bool(_departed(rubric, names, batch, JurorCheck(), AgreementHistory(64)))
        for names, batch in _batches(judges, 300, None, judges)
    )
    assert flagged <= 300 * 0.01 + 3 * (300 * 0.01 * 0.99) ** 0.5  # the level, and 3 SE


def test_a_juror_answering_at_random_is_found_departed_among_five():
    from jurybox.judges.jurors import _departed

    rubric = load_rubric("mirage-mg")
    found = [
        [f.judge for f in _departed(rubric, names, batch, JurorCheck(), AgreementHistory(64))]
        for names, batch in _batches(5, 100, "random", 7)
    ]
    assert sum(flags == ["j4"] for flags in found) >= 95
