"""The fast paths of the judging machinery give exactly what the plain code gives.

Each optimisation (perf/machinery.py) keeps a straightforward reference here: detokenizing
(memoized, against backends/vllm.py's own functions), reading answers and score distributions
(cached scale texts, against the Scale's own methods), aggregating (plain floats for one or two
votes, against numpy), writing records (built directly, against VerdictRecord.to_dict).
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from judging_helpers import (
    reference_distribution,
    reference_steps_from_logprobs,
    reference_token_pieces,
)

from jurybox.judges import JurySpec
from jurybox.judges.aggregate import RULES, _small, aggregate_criterion
from jurybox.judges.backends.base import Detokenizer, steps_from_logprobs
from jurybox.judges.backends.protocol import TokenStep
from jurybox.judges.parsing import _scale_texts, parse_answers, score_distribution
from jurybox.rubrics import Criterion, CriterionResult, Scale, Verdict, Vote

RANGE = Criterion(name="accuracy", description="", scale=Scale(min=0, max=4))
WIDE = Criterion(name="overall", description="", scale=Scale(min=0, max=10))
LABELS = Criterion(name="spurious", description="", scale=Scale(labels={"yes": 1, "no": 0}))
VALUES = Criterion(name="share", description="", scale=Scale(values=[0, 0.5, 1]))


# -- detokenizing -------------------------------------------------------------------------------


class ToyTokenizer:
    """A tokenizer whose decoding is not local: a run of tokens 1 reads as one 'X' per pair, so
    a token's text depends on tokens far to its left (beyond the 8-token window)."""

    vocab = ("a", "", " b", "é", "<s>")

    def decode(self, ids, skip_special_tokens=False):
        assert skip_special_tokens is False
        out, run = [], 0
        for i in list(ids) + [None]:
            if i == 1:
                run += 1
                continue
            out.append("X" * (run // 2))
            run = 0
            if i is not None:
                out.append(self.vocab[i])
        return "".join(out)


@pytest.mark.parametrize("seed", range(20))
def test_memoized_steps_are_the_vllm_backend_s_steps(seed):
    rnd = random.Random(seed)
    tok = ToyTokenizer()
    detok = Detokenizer(tok)
    plain = lambda ids: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    ids = [rnd.choice([0, 1, 1, 1, 2, 3, 4]) for _ in range(rnd.randrange(40))]
    logprobs = [{rnd.randrange(5): -rnd.random() * 3 for _ in range(3)} for _ in ids]
    if logprobs:
        logprobs[0][4] = -math.inf  # forbidden by the grammar: left out
    for _ in range(2):  # the second time from the memo
        text, steps = steps_from_logprobs(detok, ids, logprobs)
        ref_text, ref_steps = reference_steps_from_logprobs(plain, ids, logprobs)
        assert text == ref_text == plain(ids)
        assert [(s.offset, s.text) for s in steps] == [(s.offset, s.text) for s in ref_steps]
        assert [s.top for s in steps] == [s.top for s in ref_steps]
    assert detok.pieces(ids) == reference_token_pieces(plain, ids)


def test_a_token_step_makes_its_alternatives_once():
    calls = []

    def make(i):
        calls.append(i)
        return {"x": -0.5}

    step = TokenStep(0, "x", make, 3)
    assert step.top == {"x": -0.5} and step.top == {"x": -0.5} and calls == [3]
    assert TokenStep(0, "x", lambda: {"y": 0.0}).top == {"y": 0.0}
    assert TokenStep(0, "x", {"z": 0.0}).top == {"z": 0.0}


# -- reading answers ----------------------------------------------------------------------------


RAW = [
    0,
    1,
    4,
    5,
    -1,
    3.0,
    2.5,
    1e-12,
    2.9999999999,
    True,
    False,
    None,
    "3",
    " 3 ",
    "3.0",
    "x",
    "yes",
    "YES",
    " no",
    "maybe",
    "0.5",
    0.5,
    1,
    float("nan"),
    float("inf"),
    [1],
    {"a": 1},
]


@pytest.mark.parametrize("criterion", [RANGE, WIDE, LABELS, VALUES], ids=lambda c: c.name)
def test_cached_scale_texts_read_answers_as_the_scale_does(criterion):
    texts = _scale_texts(criterion)
    assert _scale_texts(criterion) is texts
    assert texts.answers == criterion.scale.answer_texts()
    for raw in RAW:
        try:
            expected = criterion.scale.parse(raw)
        except ValueError as exc:
            with pytest.raises(ValueError) as got:
                texts.parse(raw)
            assert str(got.value) == str(exc)
            continue
        value = texts.parse(raw)
        assert value == expected and type(value) is type(expected)
        assert texts.label_of(value) == criterion.scale.label_of(value)


ALTERNATIVES = [
    " 0",
    " 1",
    " 2",
    " 3",
    " 4",
    " 10",
    "1",
    "3,",
    "4}",
    '"',
    ' "',
    "\n",
    " ",
    "yes",
    '"yes',
    '"no',
    '"n',
    '"y',
    "Yes",
    "0.5",
    " 0.",
    " 5",
    "9",
    "no,",
]


@pytest.mark.parametrize("seed", range(40))
def test_score_distributions_are_the_reference_s(seed):
    rnd = random.Random(seed)
    criterion = rnd.choice([RANGE, WIDE, LABELS, VALUES])
    for pieces in (
        ['{"', criterion.name, '":', " 3", "}"],
        ['{"', criterion.name, '": "', "yes", '"}'],
        ['{"', criterion.name, '":', ' "no', '"}'],
        ['{"', criterion.name, '": ', "0.5", "}"],
    ):
        text = "".join(pieces)
        tops = {
            i: {alt: math.log(rnd.random() + 1e-9) for alt in rnd.sample(ALTERNATIVES, 6)}
            for i in range(len(pieces))
        }
        tops[3][pieces[3]] = math.log(rnd.random() + 1e-9)  # the chosen token is among them
        steps, offset = [], 0
        for i, piece in enumerate(pieces):
            steps.append(TokenStep(offset, piece, tops[i]))
            offset += len(piece)
        answer = parse_answers(text, [criterion])[criterion.name]
        for position in (answer.position, len(text) - 3, None, 999):
            for _ in range(2):  # the second time from the attribution memo
                assert score_distribution(criterion, steps, position) == reference_distribution(
                    criterion, steps, position
                )


# -- aggregating --------------------------------------------------------------------------------


SPECIAL = [0.0, -0.0, 1.0, 4.0, 0.1, 0.2, 0.3, 2 / 3, 1e-300, 5e-324, 1e300, 3.999999999]


def test_one_or_two_values_give_numpy_s_mean_and_spread_to_the_bit():
    rnd = random.Random(0)
    for _ in range(20000):
        values = [
            rnd.choice(SPECIAL) if rnd.random() < 0.3 else rnd.uniform(-5, 5)
            for _ in range(rnd.choice([1, 2]))
        ]
        a = np.array(values, dtype=float)
        with np.errstate(over="ignore"):
            expected = (float(a.mean()), float(a.std(ddof=0)), float(a.max() - a.min()))
        got = _small(values)
        assert got is not None
        for x, y in zip(got, expected):
            assert x == y and math.copysign(1, x) == math.copysign(1, y), (values, got, expected)
    assert _small([]) is None and _small([1.0, 2.0, 3.0]) is None and _small([math.nan]) is None


def reference_aggregate(criterion, votes, jury):
    """aggregate_criterion as first written (numpy throughout)."""
    agg = jury.aggregation
    weight_of = {j.name: j.weight for j in jury.judges}
    scored = [
        (
            (v.expected if agg.use == "expected" and v.expected is not None else v.score),
            weight_of[v.judge],
        )
        for v in votes
        if v.scored
    ]
    values = np.array([v for v, _ in scored], dtype=float)
    weights = np.array([w for _, w in scored], dtype=float)
    n = len(values)
    spread = {
        "std": float(values.std(ddof=0)) if n else None,
        "range": float(values.max() - values.min()) if n else None,
    }
    need = jury.quorum_count()
    if n < need:
        return CriterionResult(
            score=None,
            n_votes=len(votes),
            n_scored=n,
            reason=(f"below quorum: {n} of {len(votes)} judges scored {criterion}, {need} needed"),
            **spread,
        )
    score, reason = RULES[agg.methods.get(criterion, agg.method)](values, weights, agg)
    return CriterionResult(score=score, n_votes=len(votes), n_scored=n, reason=reason, **spread)


# Every rule over chosen and expected scores, but majority over expected scores, which a jury
# file refuses (continuous values almost never form a majority).
@pytest.mark.parametrize(
    "method,use",
    [
        (method, use)
        for method in ("mean", "median", "majority", "weighted", "trimmed")
        for use in ("score", "expected")
        if (method, use) != ("majority", "expected")
    ],
)
def test_aggregation_is_the_reference_s(method, use):
    rnd = random.Random(f"{method}-{use}")
    for n_judges in (1, 2, 3, 4):
        jury = JurySpec.model_validate(
            {
                "name": "j",
                "aggregation": {"method": method, "quorum": rnd.randint(1, n_judges), "use": use},
                "judges": [
                    {"name": f"j{k}", "model": "x/y", "weight": rnd.choice([1.0, 2.5])}
                    for k in range(n_judges)
                ],
            }
        )
        for _ in range(200):
            votes = []
            for k in range(n_judges):
                if rnd.random() < 0.2:
                    votes.append(Vote(judge=f"j{k}", criterion="accuracy", error="no answer"))
                else:
                    votes.append(
                        Vote(
                            judge=f"j{k}",
                            criterion="accuracy",
                            score=rnd.randint(0, 4),
                            expected=rnd.choice([None, rnd.uniform(0, 4)]),
                        )
                    )
            assert aggregate_criterion("accuracy", votes, jury) == reference_aggregate(
                "accuracy", votes, jury
            )


# -- writing ------------------------------------------------------------------------------------


def test_records_are_the_verdict_record_s_data():
    rnd = random.Random(0)
    for _ in range(200):
        votes = []
        for judge in ("a", "b", "c")[: rnd.randint(1, 3)]:
            for criterion in ("accuracy", "spurious"):
                if rnd.random() < 0.3:
                    votes.append(
                        Vote(
                            judge=judge,
                            criterion=criterion,
                            error="cut at max_tokens",
                            raw=rnd.choice([None, '{"accura']),
                            latency_s=0.25,
                        )
                    )
                else:
                    dist = rnd.choice([None, {"0": 0.25, "1": 0.75}])
                    votes.append(
                        Vote(
                            judge=judge,
                            criterion=criterion,
                            score=rnd.randint(0, 1),
                            label=rnd.choice([None, "yes"]),
                            distribution=dist,
                            expected=None if dist is None else 0.75,
                            raw=rnd.choice([None, '{"x": 1}']),
                            latency_s=1.5,
                            reasoning=rnd.choice([None, "because"]),
                        )
                    )
        scores = {"accuracy": rnd.choice([None, 2.5]), "spurious": 1, "weighted_sum": None}
        verdict = Verdict(
            id=f"item-{rnd.randint(0, 9)}",
            status=rnd.choice(["scored", "unscored"]),
            rubric="r",
            jury="j",
            provenance="abc",
            scores=scores,
            votes=votes,
            criteria={
                "accuracy": CriterionResult(
                    score=scores["accuracy"],
                    n_votes=2,
                    n_scored=1,
                    std=0.0,
                    range=0.0,
                    reason="below quorum",
                ),
                "spurious": CriterionResult(score=1, n_votes=1, n_scored=1, std=None),
            },
            reasons=rnd.choice([[], ["accuracy: below quorum"]]),
        )
        for keep_raw in (False, True):
            expected = verdict.verdict_record(keep_raw).to_dict()
            record = verdict.to_record(keep_raw)
            assert record == expected
            assert json.dumps(record) == json.dumps(expected)  # key order and number types too
            record["votes"][0]["judge"] = "changed"  # a copy: the verdict is not touched
            assert verdict.votes[0].judge != "changed"
