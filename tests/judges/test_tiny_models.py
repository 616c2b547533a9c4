"""The real tiny models (SmolLM2-135M-Instruct, Gemma-3-270M) through the transformers backend."""

import pytest
from judging_helpers import ITEMS, check_scored_vote

from jurybox.judges import Jury, JurySpec
from jurybox.rubrics import Item, load_rubric

pytestmark = pytest.mark.models


def test_both_judges_score_every_criterion_within_the_scale(tiny_jury):
    rubric = load_rubric("mirage-mg")
    verdicts = tiny_jury.score(rubric, ITEMS)
    assert [v.id for v in verdicts] == ["good", "bad"]
    for verdict in verdicts:
        assert {v.judge for v in verdict.votes} == {"smollm2-135m", "gemma3-270m"}
        assert len(verdict.votes) == 8
        for vote in verdict.votes:
            check_scored_vote(vote, [0, 1, 2, 3, 4])
        assert verdict.status == "scored"
        s = verdict.scores
        assert s["weighted_sum"] == pytest.approx(
            round((2 * s["accuracy"] + s["relevance"] + s["completeness"] + s["parsimony"]) / 20, 4)
        )


def test_labelled_scale_and_binary_criteria(tiny_jury):
    rubric = load_rubric("mirage-mmmt")
    item = Item(
        id="t1",
        context="user: my tomato leaves curl\nexpert: is the plant indoors?",
        response="Is it in full sun?",
        reference="How often do you water it?",
        extra={
            "decision": "<Clarify>",
            "known_goal": ["plant: tomato"],
            "missing_goal": ["watering"],
        },
    )
    (verdict,) = tiny_jury.score(rubric, [item])
    spurious = [v for v in verdict.votes if v.criterion == "spurious"]
    assert len(spurious) == 2
    for vote in spurious:
        check_scored_vote(vote, [0, 1])
        assert vote.label in ("yes", "no") and set(vote.distribution) == {"yes", "no"}
    for vote in verdict.votes:
        if vote.criterion == "decision_accuracy":
            check_scored_vote(vote, [0, 1])


def spec_with(**judge_overrides):
    base = Jury.load("tiny").spec.judges[0].model_dump()
    base.update(judge_overrides)
    return JurySpec.model_validate({"name": "t", "judges": [base]})


def reuse(tiny_jury, spec):
    """A jury over the already-loaded SmolLM2 weights with another spec."""
    from jurybox.judges.backends.transformers import TransformersBackend

    loaded = tiny_jury.backend(tiny_jury.spec.judges[0])
    backend = TransformersBackend.__new__(TransformersBackend)
    backend.__dict__.update(loaded.__dict__)
    backend.spec = spec.judges[0]
    backend.name = spec.judges[0].name
    return Jury(spec, {spec.judges[0].name: backend})


def test_reasoning_judge_that_exhausts_its_budget_is_unscored(tiny_jury):
    spec = spec_with(reasoning={"mode": "think", "end": "</verdict-never>", "budget_tokens": 8})
    (verdict,) = reuse(tiny_jury, spec).score(load_rubric("general"), ITEMS[:1])
    assert verdict.status == "unscored"
    for vote in verdict.votes:
        assert vote.score is None
        assert "thinking budget of 8 tokens exhausted" in vote.error


def test_reasoning_then_constrained_answer(tiny_jury):
    # SmolLM2 does not think in tags; a period closes its first sentence of "reasoning".
    spec = spec_with(
        reasoning={"mode": "think", "start": "", "end": ".", "budget_tokens": 64, "keep": True}
    )
    (verdict,) = reuse(tiny_jury, spec).score(load_rubric("general"), ITEMS[:1])
    for vote in verdict.votes:
        check_scored_vote(vote, [0, 1, 2, 3, 4])
        assert vote.reasoning is not None


def test_prompt_longer_than_the_context_is_an_unscored_vote(tiny_jury):
    # SmolLM2's context is 8192 tokens; this response alone is about 12,000.
    long_item = ITEMS[0].model_copy(update={"id": "long", "response": "blight " * 12000})
    jury = reuse(tiny_jury, spec_with(max_prompt_tokens=20000))
    verdicts = jury.score(load_rubric("general"), [long_item, ITEMS[1]])
    assert verdicts[0].status == "unscored"
    assert all(
        "exceeds the 8192-token context of judge smollm2-135m" in v.error for v in verdicts[0].votes
    )
    assert verdicts[1].status == "scored"


def test_a_prompt_over_max_prompt_tokens_is_unscored_and_long_ones_under_it_are_judged(tiny_jury):
    rubric = load_rubric("general")
    # About 2,500 tokens: read in chunks (prefill), judged like a short one.
    long_item = ITEMS[0].model_copy(update={"id": "long", "response": "blight " * 2400})
    verdicts = reuse(tiny_jury, spec_with(max_prompt_tokens=2000)).score(
        rubric, [long_item, ITEMS[1]]
    )
    assert verdicts[0].status == "unscored" and verdicts[1].status == "scored"
    for vote in verdicts[0].votes:
        assert "more than 2000 (its max_prompt_tokens)" in vote.error
    (verdict,) = reuse(tiny_jury, spec_with(max_prompt_tokens=4000)).score(rubric, [long_item])
    for vote in verdict.votes:
        check_scored_vote(vote, [0, 1, 2, 3, 4])
    # On a CPU the default limit is 8192 tokens, below what the machine can hold.
    huge = ITEMS[0].model_copy(update={"id": "huge", "response": "blight " * 9000})
    (verdict,) = reuse(tiny_jury, spec_with()).score(rubric, [huge])
    assert all("the default max_prompt_tokens on a CPU" in v.error for v in verdict.votes)


def test_sampling_with_a_seed_is_reproducible(tiny_jury):
    spec = spec_with(sampling={"temperature": 1.0, "max_tokens": 96, "seed": 7})
    jury = reuse(tiny_jury, spec)
    rubric = load_rubric("general")

    def outcome():
        return [(v.score, v.expected, v.raw) for v in jury.score(rubric, ITEMS[:1])[0].votes]

    first = outcome()
    assert first == outcome()
    assert all(raw for _, _, raw in first)
