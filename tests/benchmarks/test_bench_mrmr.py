"""MRMR: nDCG@10 and Hit@1 against an independent implementation (pytrec_eval) and by hand, the
one tie rule, missing queries scored 0 and listed, the file formats, and relevance grading with
its agreement against the human qrels."""

import json
import math

import pytest
from bench_helpers import scripted_judge

from jurybox.benchmarks import mrmr
from jurybox.rubrics.errors import InputError

QRELS = {
    "q1": {"d1": 3, "d2": 2, "d3": 1, "d4": 0, "d12": 2},
    "q2": {"a": 1},
    "q3": {"x1": 1, "x2": 1, "x3": 2},
    "q4": {"n1": 0, "n2": 0},
}
RUN = {  # no ties, so every tool ranks it the same way
    "q1": {
        "d4": 0.95,
        "d2": 0.90,
        "d9": 0.85,
        "d1": 0.80,
        "d5": 0.70,
        "d6": 0.60,
        "d7": 0.50,
        "d8": 0.40,
        "d10": 0.30,
        "d11": 0.20,
        "d3": 0.10,
        "d12": 0.05,
    },
    "q2": {"b": 0.9, "c": 0.8, "a": 0.7},
    "q3": {"x3": 2.5, "y": 1.5, "x1": -0.5},
    "q4": {"n1": 1.0, "z": 0.5},
}
# Produced by pytrec_eval-terrier 0.5 (trec_eval's ndcg_cut.10 and success.1) in a separate
# venv: RelevanceEvaluator(QRELS, {"ndcg_cut.10", "success.1"}).evaluate(RUN).
PYTREC_EVAL = {
    "q1": (0.4486382084, 0.0),
    "q2": (0.5, 0.0),
    "q3": (0.7984848581, 1.0),
    "q4": (0.0, 0.0),
}


@pytest.mark.parametrize("qid", list(QRELS))
def test_ndcg_and_hit_match_trec_eval(qid):
    ranked = mrmr.ranking(RUN[qid])
    ndcg, hit = PYTREC_EVAL[qid]
    assert mrmr.ndcg_at_k(ranked, QRELS[qid]) == pytest.approx(ndcg, abs=1e-9)
    assert mrmr.hit_at_k(ranked, QRELS[qid]) == hit


def test_ndcg_by_hand():
    # q3: ranking x3 (gain 2), y (0), x1 (1); ideal 2, 1, 1
    dcg = 2 / math.log2(2) + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert mrmr.ndcg_at_k(["x3", "y", "x1"], QRELS["q3"]) == pytest.approx(dcg / idcg)


def test_ties_are_broken_by_doc_id_ascending():
    # All-equal scores: the ranking is by doc id, whatever order the run lists them.
    run = {"zeta": 1.0, "beta": 1.0, "alpha": 1.0, "top": 2.0}
    assert mrmr.ranking(run) == ["top", "alpha", "beta", "zeta"]
    qrels = {"zeta": 1}
    ranked = mrmr.ranking({"zeta": 1.0, "beta": 1.0, "alpha": 1.0})
    assert mrmr.hit_at_k(ranked, qrels) == 0.0
    assert mrmr.ndcg_at_k(ranked, qrels) == pytest.approx(1 / math.log2(4))


def test_example_files_by_hand(examples):
    report = mrmr.evaluate(
        examples / "mrmr.qrels.jsonl",
        examples / "mrmr.run.json",
        queries=examples / "mrmr.queries.jsonl",
    )
    data = report.to_dict()
    k1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))  # doc-40 at 1, doc-12 at 3
    n2 = 1 / math.log2(3)  # the positive at rank 2
    # knowledge-2 is missing from the run (0); theorem-1's tie goes to thm-3 (relevant)
    assert data["ndcg@10"] == pytest.approx((k1 + 0 + 1 + 1 + n2) / 5)
    assert data["hit@1"] == pytest.approx(3 / 5)
    assert data["missing_queries"] == ["knowledge-2"]
    assert data["counted"]["ndcg@10"] == "1 query missing from the run scored 0"
    assert data["ndcg@10_by_task"]["Contradiction"] == pytest.approx((1 + n2) / 2)
    assert data["hit@1_by_category"] == pytest.approx(
        {"Clinical_Medicine": 1.0, "Biology": 0.0, "Physics": 1.0, "Negation": 0.5}
    )
    assert any("knowledge-9" in n for n in report.notes)  # run query not in the qrels


def test_trec_files_give_the_same_numbers_as_json(tmp_path):
    qrels = tmp_path / "test.qrels"
    qrels.write_text(
        "".join(f"{q} 0 {d} {s}\n" for q, docs in QRELS.items() for d, s in docs.items())
    )
    run = tmp_path / "model.run"
    run.write_text(
        "# comment\n"
        + "".join(
            f"{q} Q0 {d} {i} {s} model\n"
            for q, docs in RUN.items()
            for i, (d, s) in enumerate(docs.items(), start=1)
        )
    )
    as_json = tmp_path / "run.json"
    as_json.write_text(json.dumps(RUN))
    rows = tmp_path / "qrels.tsv"
    rows.write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{s}\n" for q, docs in QRELS.items() for d, s in docs.items())
    )
    trec = mrmr.evaluate(qrels, run).to_dict()
    mixed = mrmr.evaluate(rows, as_json).to_dict()
    expected = sum(v[0] for v in PYTREC_EVAL.values()) / 4
    assert trec["ndcg@10"] == pytest.approx(expected) == mixed["ndcg@10"]
    assert trec["hit@1"] == mixed["hit@1"] == 0.25


@pytest.mark.parametrize(
    "name,text,message",
    [
        (
            "q.jsonl",
            (
                '{"query_id": "q", "corpus_id": "d", "score": 1}\n'
                '{"query_id": "q", "corpus_id": "d", "score": 0}\n'
            ),
            "appears twice",
        ),
        ("q.jsonl", '{"query_id": "q", "corpus_id": "d", "score": "high"}\n', "finite number"),
        ("q.jsonl", '{"query_id": "q", "doc": "d", "score": 1}\n', "no 'corpus_id'"),
        ("q.txt", "q 0 d\n", "line 1: 3 columns"),
        ("q.json", '{"q": 1, "r": {"d": 1}}', "must map doc ids to scores"),
    ],
)
def test_bad_qrels_are_named(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    run = tmp_path / "run.json"
    run.write_text('{"q": {"d": 1}}')
    with pytest.raises(InputError) as err:
        mrmr.evaluate(path, run)
    assert message in str(err.value)


def test_a_non_finite_run_score_is_refused(tmp_path):
    qrels = tmp_path / "q.jsonl"
    qrels.write_text('{"query_id": "q", "corpus_id": "d", "score": 1}\n')
    run = tmp_path / "run.json"
    run.write_text('{"q": {"d": NaN}}')
    with pytest.raises(InputError, match="finite number"):
        mrmr.evaluate(qrels, run)


def test_grading_needs_texts_and_reports_agreement_with_the_qrels(examples):
    with pytest.raises(InputError, match="needs the query texts"):
        mrmr.evaluate(
            examples / "mrmr.qrels.jsonl", examples / "mrmr.run.json", judge=scripted_judge({})
        )
    calls = []
    votes = {
        "knowledge-1::doc-12": {"j0": {"relevance": 1}, "j1": {"relevance": 1}},
        "knowledge-1::doc-40": {"j0": {"relevance": 1}, "j1": {"relevance": 0}},
        "knowledge-1::doc-03": {"j0": {"relevance": 1}, "j1": {"relevance": 1}},
    }
    report = mrmr.evaluate(
        examples / "mrmr.qrels.jsonl",
        examples / "mrmr.run.json",
        queries=examples / "mrmr.queries.jsonl",
        corpus=examples / "mrmr.corpus.jsonl",
        judge=scripted_judge(votes, calls),
        limit=1,
        depth=2,
    )
    # the qrels' two documents, then the run's top 2 (doc-40 again, doc-03)
    assert calls == [("mrmr-relevance", list(votes))]
    data = report.to_dict()
    assert data["graded_pairs"] == 3 and data["unlisted_pairs"] == 1
    assert data["jury_relevant_unlisted"] == 1  # doc-03: a candidate qrel
    # human: 1, 1, 0 (unlisted). jury: 1, 0.5 (snapped down to 0), 1 -> one of three agree
    assert data["grading_exact"] == pytest.approx(1 / 3)
    assert data["judges"]["j0"]["grading_exact"] == pytest.approx(2 / 3)
    assert data["judges"]["j1"]["grading_exact"] == pytest.approx(1 / 3)
    assert "relevance" in data["grading_agreement"]["criteria"]
    rows = {r["corpus_id"]: r for r in report.artifacts["jury_qrels"]}
    assert rows["doc-03"] == {
        "query_id": "knowledge-1",
        "corpus_id": "doc-03",
        "jury": 1.0,
        "human": None,
        "in_qrels": False,
    }
    assert "Relevance grading vs human qrels" in report.to_markdown()
