import numpy as np
import pytest
from scipy import stats

from jurybox.judges import Jury, JurySpec, provenance
from jurybox.judges.aggregate import aggregate_criterion
from jurybox.judges.backends.protocol import Generation
from jurybox.judges.judging import decide
from jurybox.rubrics import Item, Vote, load_rubric


def jury(method="mean", quorum=1, n=3, weights=None, **agg):
    judges = [
        {"name": f"j{i}", "model": "org/m", "weight": (weights or [1] * n)[i]} for i in range(n)
    ]
    return JurySpec.model_validate(
        {"name": "t", "judges": judges, "aggregation": {"method": method, "quorum": quorum, **agg}}
    )


def votes(*scores, criterion="accuracy"):
    return [
        Vote(judge=f"j{i}", criterion=criterion, error="failed")
        if s is None
        else Vote(judge=f"j{i}", criterion=criterion, score=s)
        for i, s in enumerate(scores)
    ]


@pytest.mark.parametrize(
    "method,scores,expected",
    [
        ("mean", (1, 2, 4), 7 / 3),
        ("median", (1, 2, 4), 2.0),
        ("majority", (3, 3, 1), 3.0),
        ("trimmed", (0, 2, 2, 4), stats.trim_mean([0, 2, 2, 4], 0.25)),
    ],
)
def test_rules(method, scores, expected):
    r = aggregate_criterion("accuracy", votes(*scores), jury(method, n=len(scores)))
    assert r.score == pytest.approx(expected)
    assert r.std == pytest.approx(np.std(scores)) and r.range == max(scores) - min(scores)


def test_weighted_mean_uses_judge_weights_renormalised_over_scored_votes():
    spec = jury("weighted", weights=[1, 3, 2])
    assert aggregate_criterion("accuracy", votes(0, 4, 1), spec).score == pytest.approx(
        (0 + 12 + 2) / 6
    )
    assert aggregate_criterion("accuracy", votes(0, 4, None), spec).score == pytest.approx(12 / 4)


def test_majority_tie_is_unscored_not_guessed():
    r = aggregate_criterion("accuracy", votes(1, 2), jury("majority", n=2))
    assert r.score is None and "tie between 1, 2" in r.reason


def test_unscored_votes_count_against_quorum_and_never_as_zero():
    spec = jury("mean", quorum=2)
    r = aggregate_criterion("accuracy", votes(4, None, None), spec)
    assert r.score is None and r.n_scored == 1 and "below quorum: 1 of 3" in r.reason
    r = aggregate_criterion("accuracy", votes(4, 2, None), spec)
    assert r.score == 3.0  # not (4 + 2 + 0) / 3


@pytest.mark.parametrize(
    "quorum,count", [(1, 1), (3, 3), ("all", 3), (0.5, 2), (0.99, 3), (0.34, 2)]
)
def test_quorum_forms(quorum, count):
    assert jury(quorum=quorum).quorum_count() == count


def test_quorum_larger_than_jury_is_refused():
    with pytest.raises(ValueError, match="quorum 4 is larger than the jury"):
        jury(quorum=4)


def test_expected_scores_can_be_aggregated():
    spec = jury("mean", n=2, use="expected")
    vs = [
        Vote(judge="j0", criterion="accuracy", score=3, expected=2.5),
        Vote(judge="j1", criterion="accuracy", score=1, expected=None),
    ]
    assert aggregate_criterion("accuracy", vs, spec).score == pytest.approx((2.5 + 1) / 2)


def test_verdict_unscored_when_a_criterion_misses_quorum_and_formula_is_none():
    rubric = load_rubric("mirage-mg")
    spec = jury(quorum=2, n=2)
    vs = [
        v
        for c in rubric.criterion_names
        for v in votes(3, 3 if c != "parsimony" else None, criterion=c)
    ]
    verdict = decide(rubric, spec, provenance(rubric, spec), "x", vs)
    assert verdict.status == "unscored"
    assert verdict.scores["parsimony"] is None and verdict.scores["weighted_sum"] is None
    assert verdict.scores["accuracy"] == 3.0
    assert any("parsimony: below quorum" in r for r in verdict.reasons)


class FakeBackend:
    """Scripted outputs, for testing the jury's fan-out and bookkeeping (not judging)."""

    def __init__(self, name, outputs):
        self.name, self.outputs, self.seen = name, list(outputs), []

    def generate(self, requests, cancelled=None):
        self.seen.extend(requests)
        return [self.outputs.pop(0) for _ in requests]

    def close(self):
        pass


def test_jury_fans_out_and_records_failures_as_unscored_votes():
    rubric = load_rubric("general")
    spec = jury(n=2, quorum=1)
    ok = '{"accuracy": 4, "relevance": 3, "completeness": 2, "parsimony": 1}'
    backends = {
        "j0": FakeBackend("j0", [Generation(text=ok), Generation(text="I cannot grade this.")]),
        "j1": FakeBackend("j1", [Generation(error="prompt is 9000 tokens"), Generation(text=ok)]),
    }
    items = [Item(id=str(i), question="q", response="r", reference="a") for i in range(2)]
    v0, v1 = Jury(spec, backends).score(rubric, items)
    assert (
        len(backends["j0"].seen) == 2 and backends["j0"].seen[0].schema["required"][0] == "accuracy"
    )
    assert v0.scores["accuracy"] == 4.0 and v0.status == "scored"
    failed = [v for v in v0.votes if v.judge == "j1"]
    assert all(v.score is None and v.error == "prompt is 9000 tokens" for v in failed)
    unparsed = [v for v in v1.votes if v.judge == "j0"]
    assert all(v.score is None and "no answer for" in v.error for v in unparsed)
    assert v1.scores["parsimony"] == 1.0


def test_per_criterion_rubric_makes_one_call_per_criterion(tmp_path):
    rubric = load_rubric("general").model_copy(update={"mode": "per_criterion"})
    spec = jury(n=1)
    outs = [Generation(text=f'{{"{c}": 2}}') for c in rubric.criterion_names]
    backend = FakeBackend("j0", outs)
    (verdict,) = Jury(spec, {"j0": backend}).score(
        rubric, [Item(id="1", question="q", response="r", reference="a")]
    )
    assert [r.schema["required"] for r in backend.seen] == [[c] for c in rubric.criterion_names]
    assert verdict.scores == dict.fromkeys(rubric.criterion_names, 2.0)


def test_provenance_changes_with_what_the_verdict_depends_on():
    rubric = load_rubric("general")
    base = provenance(rubric, jury())
    assert provenance(rubric, jury()) == base
    assert provenance(rubric, jury(method="median")) != base
    other = rubric.model_copy(update={"template": rubric.template + " "})
    assert provenance(other, jury()) != base
    hotter = JurySpec.model_validate(
        {
            **jury().model_dump(),
            "judges": [{**j.model_dump(), "sampling": {"temperature": 0.7}} for j in jury().judges],
        }
    )
    assert provenance(rubric, hotter) != base


def test_an_item_whose_prompt_cannot_render_is_unscored_and_the_rest_judged():
    rubric = load_rubric("general").model_copy(
        update={"template": "{{ question }} {{ response }} {{ reference }} {{ context.upper() }}"}
    )
    ok = '{"accuracy": 4, "relevance": 3, "completeness": 2, "parsimony": 1}'
    backend = FakeBackend("j0", [Generation(text=ok)])
    items = [
        Item(id="bad", question="q", response="r", reference="a"),  # no context: None.upper()
        Item(id="good", question="q", response="r", reference="a", context="c"),
    ]
    bad, good = Jury(jury(n=1), {"j0": backend}).score(rubric, items)
    assert len(backend.seen) == 1
    assert bad.status == "unscored" and all(
        "prompt could not be rendered" in v.error for v in bad.votes
    )
    assert good.status == "scored"


def test_a_backend_that_fails_or_loses_outputs_stops_the_run():
    from jurybox.judges import JudgeFailed

    items = [Item(id=str(i), question="q", response="r", reference="a") for i in range(3)]
    short = FakeBackend("j0", [Generation(text="{}")] * 2)
    short.generate = lambda requests: [Generation(text="{}")] * 2
    with pytest.raises(JudgeFailed, match="returned 2 outputs for 3 prompts"):
        Jury(jury(n=1), {"j0": short}).score(load_rubric("general"), items)

    class Broken(FakeBackend):
        def generate(self, requests, cancelled=None):
            raise MemoryError("out of memory")

    with pytest.raises(JudgeFailed, match="judge j0 failed: MemoryError: out of memory"):
        Jury(jury(n=1), {"j0": Broken("j0", [])}).score(load_rubric("general"), items)


def test_execution_settings_do_not_change_provenance_but_weights_do(tmp_path):
    rubric = load_rubric("general")
    base = jury()
    moved = JurySpec.model_validate(
        {
            **base.model_dump(),
            "judges": [
                {
                    **j.model_dump(),
                    "batch_size": 32,
                    "device": "cuda:1",
                    "reasoning": {"keep": True},
                }
                for j in base.judges
            ],
        }
    )
    assert provenance(rubric, moved) == provenance(rubric, base)
    pinned = JurySpec.model_validate(
        {
            **base.model_dump(),
            "judges": [{**j.model_dump(), "revision": "abc123"} for j in base.judges],
        }
    )
    assert provenance(rubric, pinned) != provenance(rubric, base)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"weights v1")
    local = JurySpec.model_validate(
        {
            **base.model_dump(),
            "judges": [{**j.model_dump(), "model": str(gguf)} for j in base.judges],
        }
    )
    before = provenance(rubric, local)
    gguf.write_bytes(b"weights v2")
    assert provenance(rubric, local) != before


def test_local_model_directories_with_different_weights_never_share_an_identity(tmp_path):
    from jurybox.judges.weights import weights_identity

    a, b = tmp_path / "a", tmp_path / "b"
    for d, weights in ((a, b"\x01" * 64), (b, b"\x02" * 64)):  # same sizes, other bytes
        d.mkdir()
        (d / "config.json").write_text('{"model_type": "llama"}')
        (d / "model.safetensors").write_bytes(weights)
    assert weights_identity(str(a)) != weights_identity(str(b))
    assert weights_identity(str(a)).startswith("dir:")
    c = tmp_path / "c"
    c.mkdir()
    for f in a.iterdir():
        (c / f.name).write_bytes(f.read_bytes())
    assert weights_identity(str(c)) == weights_identity(str(a))  # content, not path
    (c / "tokenizer.json").write_text("{}")  # the tokenizer changes what the judge reads
    assert weights_identity(str(c)) != weights_identity(str(a))
    before = weights_identity(str(a))
    (a / "model.safetensors").write_bytes(b"\x03" * 64)  # rewritten in place: size unchanged
    assert weights_identity(str(a)) != before


def test_majority_on_expected_scores_and_a_quorum_of_1_0_are_refused():
    with pytest.raises(ValueError, match="majority voting needs the judges' chosen scores"):
        jury("majority", use="expected")
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        jury(quorum=1.0)


def test_quorum_true_is_refused_not_read_as_one():
    with pytest.raises(ValueError, match="quorum must be a count, a fraction or 'all', not True"):
        jury(quorum=True)


def test_aggregation_methods_for_a_criterion_the_rubric_lacks_are_refused():
    spec = jury(methods={"accuracyy": "median"})
    with pytest.raises(ValueError, match=r"aggregation.methods names \['accuracyy'\]") as info:
        Jury(spec).provenance(load_rubric("general"))
    assert info.value.field == "aggregation.methods.accuracyy"


def test_a_formula_undefined_for_an_item_leaves_it_unscored_with_the_reason(tmp_path):
    path = tmp_path / "ratio.yaml"
    path.write_text(
        "inputs: [question, response]\n"
        'template: "{{ question }} {{ response }} {{ output_format }}"\n'
        "criteria:\n"
        "  - {name: hits, description: h, scale: {min: 0, max: 4}}\n"
        "  - {name: tries, description: t, scale: {min: 0, max: 4}}\n"
        "formula: {name: rate, expression: hits / tries}\n"
    )
    rubric = load_rubric(path)
    spec = jury(n=1)
    zero = [
        Vote(judge="j0", criterion="hits", score=2),
        Vote(judge="j0", criterion="tries", score=0),
    ]
    v = decide(rubric, spec, "p", "i1", zero)
    assert v.scores["rate"] is None and v.status == "unscored"
    assert v.reasons == ["rate: undefined (hits / tries divides by zero for these scores)"]
    ok = [Vote(judge="j0", criterion="hits", score=2), Vote(judge="j0", criterion="tries", score=4)]
    v = decide(rubric, spec, "p", "i2", ok)
    assert v.scores["rate"] == 0.5 and v.status == "scored" and v.reasons == []
