"""The replay backend: recorded generations of the tiny judges through the real judging path.

It tokenizes prompts with the judges' own tokenizers; no model runs (a fast test, as every test
on the replay backend). The recording is ``perf/data/tiny-mirage-mg.json.gz``.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from judging_helpers import reference_distribution, reference_steps_from_logprobs

from jurybox.judges import Jury
from jurybox.judges.backends.base import Detokenizer, steps_from_logprobs
from jurybox.judges.backends.replay import Recording, ReplayBackend
from jurybox.judges.judging import decide_verdicts, judge_votes, render_requests
from jurybox.rubrics import Item, Verdict, VerdictRecord, load_rubric

RECORDING = Path(__file__).resolve().parents[2] / "perf" / "data" / "tiny-mirage-mg.json.gz"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mirage_mg.jsonl"


@pytest.fixture(scope="module")
def recording():
    return Recording.load(RECORDING)


@pytest.fixture(scope="module")
def replay(recording):
    spec = Jury.load("tiny").spec
    backends = {j.name: ReplayBackend(j, recording) for j in spec.judges}
    return spec, backends


@pytest.fixture(scope="module")
def items(recording):
    return [Item.model_validate(d) for d in recording.items]


def test_prompts_are_tokenized_as_the_backends_do_and_as_recorded(replay, recording, items):
    spec, backends = replay
    requests = render_requests(load_rubric(recording.rubric), items)
    for judge in spec.judges:
        backend = backends[judge.name]
        ids = backend.encoder.encode(judge, backend._bos, requests.requests, False, None)
        assert [tuple(x) for x in ids] == [g.prompt_ids for g in recording.judges[judge.name]]
        # These prompts' pieces give the whole prompts' ids (the recording predates pieces).
        texts = [backend.prompt_text(r.messages) for r in requests.requests]
        assert ids == backend.tokenizer(texts, add_special_tokens=False)["input_ids"]


def test_replayed_votes_are_the_recorded_answers(replay, recording, items):
    spec, backends = replay
    rubric = load_rubric(recording.rubric)
    requests = render_requests(rubric, items)
    for judge in spec.judges:
        backend = backends[judge.name]
        before = backend.replayed
        votes = judge_votes(judge, backend, requests)
        assert backend.replayed - before == len(items)  # every prompt found its own recording
        for item_votes, recorded in zip(votes, recording.judges[judge.name]):
            answer = json.loads(recorded.text)
            assert [v.criterion for v in item_votes] == rubric.criterion_names
            for vote in item_votes:
                assert vote.error is None, vote.error
                assert vote.raw == recorded.text
                assert vote.score == answer[vote.criterion]
                assert vote.distribution is not None
                assert list(vote.distribution) == ["0", "1", "2", "3", "4"]
                assert math.isclose(sum(vote.distribution.values()), 1.0, rel_tol=1e-9)
                assert vote.distribution[str(int(vote.score))] > 0
                assert 0 <= vote.expected <= 4


def test_steps_are_the_vllm_backend_s_steps(replay, recording):
    """The shared detokenizing helpers give what the vLLM backend's first functions gave:
    the same text, token pieces and top alternatives, on every recorded answer and on random
    token sequences (special tokens, byte tokens, split characters)."""
    spec, backends = replay
    rnd = random.Random(0)
    for judge in spec.judges:
        tok = backends[judge.name].tokenizer
        detok = Detokenizer(tok)
        plain = lambda ids, tok=tok: tok.decode(ids, skip_special_tokens=False)  # noqa: E731
        cases = [(g.output_ids, g.logprobs) for g in recording.judges[judge.name]]
        for _ in range(100):
            ids = [rnd.randrange(len(tok)) for _ in range(rnd.randrange(30))]
            cases.append(
                (ids, [{rnd.randrange(len(tok)): -rnd.random() * 5 for _ in range(4)} for _ in ids])
            )
        for text in ["héllo wörld ✓ 你好 🙂🙂", '{"accuracy": 3}', "<|im_end|> é\n\n"]:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            cases.append(
                (ids, [{i: -0.5, (i + 7) % len(tok): -1.5, i + 0: -math.inf} for i in ids])
            )
        for ids, logprobs in cases:
            text, steps = steps_from_logprobs(detok, ids, logprobs)
            ref_text, ref_steps = reference_steps_from_logprobs(plain, ids, logprobs)
            assert text == ref_text
            assert [(s.offset, s.text) for s in steps] == [(s.offset, s.text) for s in ref_steps]
            assert [s.top for s in steps] == [s.top for s in ref_steps]


# -- the whole path against a straightforward reference ------------------------------------------


def reference_record(rubric, jury, prov, item_id, generations):
    """One item's verdict record, computed plainly: json.loads for the answer, the scale's
    own parse, numpy for mean and spread, VerdictRecord for the record."""
    votes = []
    for judge, gen in generations:
        answer = json.loads(gen.text)
        for c in rubric.criteria:
            score = c.scale.parse(answer[c.name])
            position = gen.text.index(f'"{c.name}": ') + len(f'"{c.name}": ')
            dist = reference_distribution(c, gen.steps, position)
            assert dist is not None
            expected = float(sum(c.scale.answer_texts()[a] * p for a, p in dist.items()))
            votes.append(
                {
                    "judge": judge,
                    "criterion": c.name,
                    "score": score,
                    "label": None,
                    "expected": expected,
                    "distribution": dist,
                    "error": None,
                    "latency_s": 0.0,
                    "reasoning": None,
                }
            )
    scores, disagreement = {}, {}
    for c in rubric.criteria:
        values = np.array(
            [
                v["expected"] if jury.aggregation.use == "expected" else v["score"]
                for v in votes
                if v["criterion"] == c.name
            ]
        )
        scores[c.name] = float(values.mean())
        disagreement[c.name] = {
            "n": len(values),
            "std": float(values.std()),
            "range": float(values.max() - values.min()),
        }
    scores[rubric.formula.name] = rubric.formula.evaluate(scores)
    record = VerdictRecord(
        id=item_id,
        status="scored",
        rubric=rubric.name,
        jury=jury.name,
        provenance=prov,
        scores=scores,
        disagreement=disagreement,
        votes=votes,
    )
    return record.to_dict()


def test_the_whole_path_gives_the_reference_records(replay, recording, items):
    spec, backends = replay
    rubric = load_rubric(recording.rubric)
    jury = Jury(spec, backends)
    verdicts = jury.score(rubric, items)
    records = [v.to_record() for v in verdicts]
    prov = jury.provenance(rubric)

    # The reference reads the same generations (a replay is deterministic).
    requests = render_requests(rubric, items)
    gens = {j.name: backends[j.name].generate(list(requests.requests)) for j in spec.judges}
    for i, item in enumerate(items):
        expected = reference_record(
            rubric, spec, prov, item.id, [(j.name, gens[j.name][i]) for j in spec.judges]
        )
        assert records[i] == expected
        assert json.dumps(records[i]) == json.dumps(expected)  # same key order, same floats


def test_records_survive_the_round_trip(replay, recording, items):
    spec, backends = replay
    rubric = load_rubric(recording.rubric)
    jury = Jury(spec, backends)
    requests = render_requests(rubric, items[:4])
    votes = [judge_votes(j, backends[j.name], requests) for j in spec.judges]
    for verdict in decide_verdicts(rubric, spec, jury.provenance(rubric), requests.item_ids, votes):
        for keep_raw in (False, True):
            record = verdict.to_record(keep_raw=keep_raw)
            assert record == verdict.verdict_record(keep_raw).to_dict()
            again = Verdict.from_record(VerdictRecord.from_record(json.loads(json.dumps(record))))
            assert again.to_record(keep_raw=keep_raw) == record


@pytest.mark.parametrize("seed", range(2))
def test_remembered_template_pieces_give_each_prompt_s_own_ids(replay, seed):
    """`PieceEncoder` remembers the template's pieces across batches: with the tiny judges' own
    tokenizers and framing, two rubrics mixed, batches of any size, each prompt gets the ids a
    fresh encoder gives it alone."""
    from jurybox.judges.backends.base import PieceEncoder

    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    rnd = random.Random(seed)
    items = [
        Item(id=f"i{k}", question=r["question"], reference=r["reference"], response=r["response"])
        for k, r in enumerate(rnd.choices(rows, k=16))
    ]
    requests = [
        r
        for name in ("mirage-mg", "general")
        for r in render_requests(load_rubric(name), items).requests
    ]
    rnd.shuffle(requests)
    spec, backends = replay
    for judge in spec.judges:
        backend = backends[judge.name]
        encoder = PieceEncoder(backend.tokenizer)
        got, start = [], 0
        while start < len(requests):
            size = rnd.randint(1, 12)
            got += encoder.encode(judge, backend._bos, requests[start : start + size], False, None)
            start += size
        alone = [
            PieceEncoder(backend.tokenizer).encode(judge, backend._bos, [r], False, None)[0]
            for r in requests
        ]
        assert got == alone, judge.name


def test_a_call_that_fills_the_memo_keeps_the_pieces_it_needs(replay):
    """Found in review: a call adding template pieces to a full memo evicted an older piece the
    same call still needed (KeyError for the whole batch: an inline rubric with a number that
    changes per item, over a thousand items, reached it)."""
    from jurybox.judges.backends.base import PieceEncoder

    spec, backends = replay
    encoder = PieceEncoder(backends[spec.judges[0].name].tokenizer)
    encoder([[("X template piece", False)]])
    for k in range(encoder.MEMO - 1):
        encoder([[(f"filler {k}", False)]])
    assert next(iter(encoder._memo)) == "X template piece"  # the oldest: evicted next
    prompt = [("X template piece", False), ("q", True), ("a new template piece", False)]
    assert encoder([prompt]) == PieceEncoder(encoder.tokenizer)([prompt])
    assert len(encoder._memo) == encoder.MEMO
