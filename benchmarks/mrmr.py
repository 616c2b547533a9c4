"""MRMR (expert multimodal retrieval, 1,502 queries): nDCG@10 and Hit@1 of a run, and grading.

nDCG@10 and Hit@1 of a run against the human qrels, overall and per task/category; and, with a jury,
relevance grading of (query, document) pairs with the ``mrmr-relevance`` rubric and the agreement of
those grades with the human qrels.

Data (``--data``): the qrels, as rows ``query_id``, ``corpus_id``, ``score`` (JSONL, CSV/TSV,
Parquet, a JSON list; ``query-id``/``corpus-id`` as in BEIR files are read too), as a JSON object
``{query_id: {corpus_id: score}}``, or as TREC qrels (``qid 0 docid rel`` per line, any other file
extension).

Predictions: the run, as a JSON object ``{query_id: {doc_id: score}}`` (what MTEB and BEIR write),
rows ``query_id``, ``corpus_id``, ``score``, or a TREC run (``qid Q0 docid rank score tag`` per
line). Scores must be finite numbers.

Queries (optional, ``queries=``): MRMR's query rows: ``id`` (or ``query_id``), and any of
``category`` (the domain, e.g. Clinical_Medicine), ``task`` (e.g. Knowledge, Theorem, Negation),
``text`` (needed for grading) and ``instruction`` (what counts as relevant for this query's task,
e.g. "a document that contradicts the query"; shown to the judges). With it, the metrics are also
reported per category and per task. Corpus (``corpus=``, grading only): rows ``id`` (or
``corpus_id``) and ``text``.

Metrics, one deterministic definition:

* ranking: documents by run score, higher first; **ties broken by doc id, ascending** (string
  order). The same run always gives the same numbers, whatever tool wrote it;
* nDCG@10: gain = the qrel score (0 for documents the qrels do not list, negative scores as 0),
  discount 1/log2(rank + 1), ideal DCG from the query's qrels sorted by score; a query whose qrels
  list no relevant document scores 0 (as trec_eval does);
* Hit@1: 1 when the top-ranked document has a qrel score above 0 (= recall@1 with one positive;
  MRMR's Negation metric, where the run ranks each query's own 4 candidates);
* every query in the qrels counts: one the run lacks scores 0 on both and is listed in
  ``missing_queries``; run queries the qrels do not have are ignored and counted.

Differences from the public evaluator (MTEB's retrieval evaluator, via pytrec_eval) and why: queries
missing from a run are dropped there, which raises the mean over the queries left; jurybox scores
them 0 and lists them. Ties: trec_eval orders tied documents by doc id descending and other tools by
insertion order, so an all-equal run can score anything from 0.03 to 0.99 (recall@3 in MRMR's own
comparison); jurybox states its one rule above.

Grading (with a jury, needs ``queries`` and ``corpus``): for each evaluated query, the documents its
qrels list and the run's top ``depth`` (default 10) are graded relevant / irrelevant. Human labels
for agreement: a qrel score above 0 is relevant; a document the qrels do not list counts as
irrelevant, as nDCG counts it (so the agreement says whether the jury would make the same calls the
metric makes). Reported: the jury's and each judge's agreement with those labels (Cohen's kappa,
Gwet's AC1, exact agreement, bootstrap CIs; the statistics of ``jurybox agree``), and how many
unlisted documents the jury finds relevant (candidate qrels, kept in ``jury_qrels.jsonl`` with
``--out``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from jurybox.rubrics import Item, load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.rows import FORMATS

from .data import EXAMPLES, limited, plural, read_records, text_id
from .judging import Judge, Judged
from .report import (
    BenchReport,
    Kind,
    Metric,
    MetricOptions,
    Table,
    by_group,
    mean_metric,
    undefined,
)

NAME = "mrmr"
K_NDCG = 10
UNKNOWN = "unknown"
Scores = dict[str, dict[str, float]]

_QUERY_FIELDS = ("query_id", "query-id", "qid")
_DOC_FIELDS = ("corpus_id", "corpus-id", "doc_id", "docid")
_SCORE_FIELDS = ("score", "relevance")


# ------------------------------------------------------------------------------ the metrics


def ranking(scores: Mapping[str, float]) -> list[str]:
    """Doc ids by score, higher first; ties by doc id ascending."""
    return sorted(scores, key=lambda d: (-scores[d], d))


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int = K_NDCG) -> float:
    """nDCG@k of a ranked list: gain = qrel score (>0), discount log2(rank + 1)."""
    gains = np.array([max(qrels.get(d, 0.0), 0.0) for d in ranked[:k]], dtype=float)
    ideal = np.sort(np.array([max(v, 0.0) for v in qrels.values()], dtype=float))[::-1][:k]
    idcg = float((ideal / np.log2(np.arange(2, ideal.size + 2))).sum())
    if idcg == 0.0:
        return 0.0
    return float((gains / np.log2(np.arange(2, gains.size + 2))).sum()) / idcg


def hit_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int = 1) -> float:
    """1.0 when a document with a qrel score above 0 is among the top k."""
    return float(any(qrels.get(d, 0.0) > 0 for d in ranked[:k]))


# ------------------------------------------------------------------------------ the files


def read_qrels(path: str | Path) -> Scores:
    """Qrels as ``{query_id: {corpus_id: score}}`` (queries in file order)."""
    return _read_scores(Path(path), "qrels", trec_columns=4)


def read_run(path: str | Path) -> Scores:
    """A run as ``{query_id: {doc_id: score}}``."""
    return _read_scores(Path(path), "run", trec_columns=6)


def _read_scores(path: Path, what: str, trec_columns: int) -> Scores:
    suffix = path.suffix.lower()
    if suffix == ".json":
        nested = _nested_json(path, what)
        if nested is not None:
            return nested
    if suffix in FORMATS:
        return _from_rows(path, what)
    return _from_trec(path, what, trec_columns)


def _nested_json(path: Path, what: str) -> Scores | None:
    """``{query_id: {doc_id: score}}``, or None when the file is a list of rows."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or (
        len(data) == 1 and isinstance(next(iter(data.values())), list)
    ):
        return None
    out: Scores = {}
    for qid, docs in data.items():
        if not isinstance(docs, dict):
            raise InputError(
                f"{path}: {what} entry {qid!r} must map doc ids to scores, got {docs!r:.40}",
                field=str(qid),
            )
        out[str(qid)] = {
            str(d): _score(s, f"{path}: {what} {qid!r} -> {d!r}") for d, s in docs.items()
        }
    if not out:
        raise InputError(f"{path}: the {what} is empty")
    return out


def _from_rows(path: Path, what: str) -> Scores:
    out: Scores = {}
    rows = read_records(path, what)
    for n, r in rows:
        qid = _field(path, n, r, _QUERY_FIELDS, what)
        did = _field(path, n, r, _DOC_FIELDS, what)
        raw = next((r[f] for f in _SCORE_FIELDS if r.get(f) is not None), None)
        if raw is None:
            raise InputError(
                f"{path} row {n}: no 'score' ({what} rows are query_id, corpus_id, score)",
                field="score",
            )
        _add(out, qid, did, _score(raw, f"{path} row {n}: score"), f"{path} row {n}", what)
    return out


def _from_trec(path: Path, what: str, columns: int) -> Scores:
    form = "qid 0 docid relevance" if columns == 4 else "qid Q0 docid rank score tag"
    out: Scores = {}
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    for n, line in enumerate(lines, start=1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) != columns:
            raise InputError(
                f"{path} line {n}: {len(parts)} columns; a TREC {what} line is "
                f"'{form}' ({columns} columns). For JSON/JSONL/CSV, name the file "
                ".json/.jsonl/.csv"
            )
        qid, did = parts[0], parts[2]
        score = parts[3] if columns == 4 else parts[4]
        _add(out, qid, did, _score(score, f"{path} line {n}"), f"{path} line {n}", what)
    if not out:
        raise InputError(f"{path}: the {what} is empty")
    return out


def _field(path: Path, n: int, r: Mapping[str, Any], names: Sequence[str], what: str) -> str:
    for name in names:
        if r.get(name) is not None:
            return text_id(path, n, r[name], name)
    raise InputError(
        f"{path} row {n}: no {names[0]!r} ({what} rows are query_id, corpus_id, "
        f"score; this row has {', '.join(sorted(r)[:8])})",
        field=names[0],
    )


def _score(raw: Any, where: str) -> float:
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise InputError(
            f"{where}: the score must be a finite number, got {raw!r:.40}", field="score"
        )
    return value


def _add(out: Scores, qid: str, did: str, score: float, where: str, what: str) -> None:
    docs = out.setdefault(qid, {})
    if did in docs:
        raise InputError(f"{where}: ({qid}, {did}) appears twice in the {what}")
    docs[did] = score


def read_queries(path: str | Path) -> dict[str, dict[str, Any]]:
    """Query rows by id (``id``, else ``query_id``).

    An InputError for a row without one or a repeated id.
    """
    out: dict[str, dict[str, Any]] = {}
    for n, r in read_records(path, "MRMR queries"):
        key = "id" if r.get("id") is not None else "query_id"
        if r.get(key) is None:
            raise InputError(f"{path} row {n}: no 'id' (a query row needs its id)", field="id")
        qid = text_id(path, n, r[key], key)
        if qid in out:
            raise InputError(f"{path} row {n}: query {qid!r} appears twice", field="id")
        out[qid] = r
    return out


def _corpus_texts(path: str | Path, wanted: set[str]) -> dict[str, str]:
    """Text of the wanted documents, streaming the corpus."""
    from jurybox.rubrics.rows import RowError, read_rows

    out: dict[str, str] = {}
    for n, r in read_rows(path):
        if isinstance(r, RowError):
            raise InputError(f"{path} (corpus): {r}", field=r.field)
        key = "id" if r.get("id") is not None else "corpus_id"
        if r.get(key) is None:
            raise InputError(f"{path} row {n}: no 'id' (a corpus row needs its id)", field="id")
        did = text_id(path, n, r[key], key)
        if did in wanted and isinstance(r.get("text"), str) and r["text"].strip():
            out[did] = r["text"]
    return out


# ------------------------------------------------------------------------------ the pack


def evaluate(
    data: str | Path,
    predictions: str | Path,
    *,
    queries: str | Path | None = None,
    corpus: str | Path | None = None,
    judge: Judge | None = None,
    limit: int | None = None,
    depth: int = K_NDCG,
) -> BenchReport:
    """nDCG@10 and Hit@1 of the run ``predictions`` against the qrels ``data``.

    Per category and task with ``queries``; relevance grading and agreement with ``judge``.
    """
    qrels = read_qrels(data)
    run = read_run(predictions)
    query_rows = read_queries(queries) if queries is not None else {}
    if judge is not None and (queries is None or corpus is None):
        raise InputError(
            "relevance grading needs the query texts (queries=, --queries FILE) and "
            "the document texts (corpus=, --corpus FILE)",
            field="queries" if queries is None else "corpus",
        )
    if depth < 1:
        raise InputError(f"depth must be at least 1, got {depth}", field="depth")
    qids = limited(list(qrels), limit)
    ranked = {q: ranking(run[q]) for q in qids if q in run}
    missing = [q for q in qids if q not in run]
    ndcg = [ndcg_at_k(ranked[q], qrels[q]) if q in ranked else 0.0 for q in qids]
    hit = [hit_at_k(ranked[q], qrels[q]) if q in ranked else 0.0 for q in qids]
    no_relevant = [q for q in qids if not any(v > 0 for v in qrels[q].values())]
    extra_queries = [q for q in run if q not in qrels]

    share: MetricOptions = {"kind": "share"}
    metrics: dict[str, Any] = {
        "ndcg@10": mean_metric(ndcg, **share),
        "hit@1": mean_metric(hit, **share),
    }
    if missing:
        counted = f"{plural(len(missing), 'query')} missing from the run scored 0"
        metrics = {k: dataclasses.replace(m, counted=counted) for k, m in metrics.items()}
    notes: list[str] = []
    tables = [
        Table(
            "MRMR retrieval (x100)",
            ["nDCG@10", "Hit@1"],
            [("overall", [metrics["ndcg@10"], metrics["hit@1"]])],
        )
    ]
    if query_rows:
        for field in ("task", "category"):
            if not any(query_rows.get(q, {}).get(field) for q in qids):
                continue
            groups = [str(query_rows.get(q, {}).get(field) or UNKNOWN) for q in qids]
            by_ndcg = metrics[f"ndcg@10_by_{field}"] = by_group(ndcg, groups, **share)
            by_hit = metrics[f"hit@1_by_{field}"] = by_group(hit, groups, **share)
            tables.append(
                Table(
                    f"by {field} (x100)",
                    ["nDCG@10", "Hit@1"],
                    [(g, [by_ndcg[g], by_hit[g]]) for g in by_ndcg],
                )
            )
        absent = [q for q in qids if q not in query_rows]
        if absent:
            notes.append(
                f"{plural(len(absent), 'query')} of the qrels not in the query file "
                f"(grouped '{UNKNOWN}'): {', '.join(absent[:EXAMPLES])}"
            )
    if missing:
        notes.append(
            f"{plural(len(missing), 'query')} of the qrels missing from the run, "
            f"scored 0: {', '.join(missing[:EXAMPLES])}"
        )
    if no_relevant:
        notes.append(
            f"{plural(len(no_relevant), 'query')} whose qrels list no relevant "
            "document score 0 (as trec_eval does)"
        )
    if extra_queries:
        notes.append(
            f"{plural(len(extra_queries), 'run query')} not in the qrels, ignored: "
            f"{', '.join(extra_queries[:EXAMPLES])}"
        )
    if limit is not None and limit < len(qrels):
        notes.append(f"trial run: the first {len(qids)} of {len(qrels)} queries")
    notes.append("ranking: higher score first, ties by doc id ascending")
    report = BenchReport(
        benchmark=NAME,
        title=f"MRMR ({len(qids)} queries)",
        metrics=metrics,
        counts={"queries": len(qids), "run_queries": len(run), "missing_query_count": len(missing)},
        lists={"missing_queries": missing},
        tables=tables,
        notes=notes,
        artifacts={
            "queries": [
                {
                    "query_id": q,
                    "ndcg@10": n,
                    "hit@1": h,
                    "in_run": q in run,
                    **(
                        {f: query_rows.get(q, {}).get(f) for f in ("task", "category")}
                        if query_rows
                        else {}
                    ),
                }
                for q, n, h in zip(qids, ndcg, hit)
            ]
        },
    )
    if judge is not None:
        assert corpus is not None
        _grade(report, qids, qrels, ranked, query_rows, corpus, judge, depth)
    return report


def _pairs(
    qids: Sequence[str], qrels: Scores, ranked: Mapping[str, list[str]], depth: int
) -> Iterator[tuple[str, str]]:
    for q in qids:
        for d in dict.fromkeys([*qrels[q], *ranked.get(q, [])[:depth]]):
            yield q, d


def _grade(
    report: BenchReport,
    qids: Sequence[str],
    qrels: Scores,
    ranked: Mapping[str, list[str]],
    query_rows: Mapping[str, Mapping[str, Any]],
    corpus: str | Path,
    judge: Judge,
    depth: int,
) -> None:
    from jurybox.calibration import (
        agreement_report,
        human_labels_from_rows,
        judge_output_from_records,
    )

    rubric = load_rubric("mrmr-relevance")
    pairs = list(_pairs(qids, qrels, ranked, depth))
    texts = _corpus_texts(corpus, {d for _, d in pairs})
    items, skipped = [], []
    for q, d in pairs:
        query = query_rows.get(q, {})
        if not isinstance(query.get("text"), str) or not query["text"].strip() or d not in texts:
            skipped.append(f"{q}::{d}")
            continue
        extra = {"query": query["text"], "document": texts[d]}
        extra.update({f: str(query[f]) for f in ("instruction", "task") if query.get(f)})
        items.append(Item(id=f"{q}::{d}", extra=extra))
    if skipped:
        report.notes.append(
            f"{plural(len(skipped), 'pair')} not graded: the query or document "
            f"has no text (e.g. {', '.join(skipped[:3])})"
        )
    judged = judge("mrmr-relevance", rubric, items) if items else Judged({})
    human = {
        f"{q}::{d}": (1.0 if qrels[q].get(d, 0.0) > 0 else 0.0, d in qrels[q]) for q, d in pairs
    }
    rows: list[dict[str, Any]] = []
    for item in items:
        record = judged.records.get(item.id)
        q, d = item.id.split("::", 1)
        rows.append(
            {
                "query_id": q,
                "corpus_id": d,
                "jury": record.scores.get("relevance") if record is not None else None,
                "human": qrels[q].get(d),
                "in_qrels": human[item.id][1],
            }
        )
    report.artifacts["jury_qrels"] = rows
    unjudged_relevant = sum(1 for r in rows if not r["in_qrels"] and (r["jury"] or 0) > 0.5)
    report.counts.update(
        graded_pairs=len(items),
        ungraded_pairs=len(skipped),
        unlisted_pairs=sum(1 for r in rows if not r["in_qrels"]),
        jury_relevant_unlisted=unjudged_relevant,
    )
    records = [judged.records[i.id] for i in items if i.id in judged.records]
    if not records:
        report.metrics["grading_kappa"] = undefined("no pair was graded")
        return
    labels = human_labels_from_rows(
        [{"id": i, "relevance": v} for i, (v, _) in human.items() if i in judged.records],
        scales=rubric,
        source="qrels",
    )
    agreement = agreement_report(labels, judge_output_from_records(records), scales=rubric, seed=0)
    crit = agreement.criteria.get("relevance")
    report.extra["grading_agreement"] = agreement.to_dict()
    if crit is None:
        report.metrics["grading_kappa"] = undefined("no graded pair has a jury grade")
        return
    systems = crit.judge_human
    for name, stats in systems.items():
        target = report.metrics if name == "jury" else report.judges.setdefault(name, {})
        target["grading_kappa"] = _metric(stats["kappa"], "score")
        target["grading_ac1"] = _metric(stats["ac1"], "score")
        target["grading_exact"] = _metric(stats["exact"], "share")
    order = ["jury", *[j for j in systems if j != "jury"]]
    report.tables.append(
        Table(
            "Relevance grading vs human qrels (rubric mrmr-relevance)",
            ["kappa", "AC1", "exact agreement (%)"],
            # Each is one Metric, set just above (not a per-group dict of them).
            [
                (
                    name,
                    [
                        cast(Metric, (report.metrics if name == "jury" else report.judges[name])[k])
                        for k in ("grading_kappa", "grading_ac1", "grading_exact")
                    ],
                )
                for name in order
            ],
        )
    )
    report.notes.append(
        "grading: human label = qrel score above 0; documents the qrels do not "
        "list count as irrelevant, as nDCG counts them"
    )


def _metric(stat: Any, kind: Kind) -> Metric:
    return Metric(stat.value, stat.ci, stat.n, kind, 3, "", stat.reason)
