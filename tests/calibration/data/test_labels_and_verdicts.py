"""Human labels + judge output loaders and the join on id."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jurybox.calibration import (
    InputDataError,
    JoinError,
    join,
    load_human_labels,
    load_judge_output,
    simulate_judging,
)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _record(i: str, acc: float | None = 3.0, prov: str = "p1", votes: list | None = None) -> dict:
    return {
        "id": i,
        "status": "scored",
        "rubric": "general",
        "jury": "tiny",
        "provenance": prov,
        "scores": {"accuracy": acc},
        "votes": votes
        if votes is not None
        else [
            {
                "judge": "a",
                "criterion": "accuracy",
                "score": 3,
                "label": None,
                "expected": 2.7,
                "distribution": None,
                "error": None,
            },
            {
                "judge": "b",
                "criterion": "accuracy",
                "score": None,
                "label": None,
                "expected": None,
                "distribution": None,
                "error": "timeout",
            },
        ],
        "disagreement": {},
    }


def test_csv_with_raters_and_label_mapping(tmp_path: Path) -> None:
    p = tmp_path / "h.csv"
    p.write_text(
        "id,rater,accuracy,supported,notes\nq1,alice,3,yes,ok\nq1,bob,2,No,\nq2,alice,,yes,x\n"
    )
    labels = load_human_labels(
        p,
        scales={"accuracy": [0, 1, 2, 3, 4], "supported": {"labels": {"yes": 1, "no": 0}}},
        criteria=["accuracy", "supported"],
    )
    assert labels.ids == ["q1", "q1", "q2"]
    assert labels.raters == ["alice", "bob", "alice"]
    assert np.isnan(labels.values["accuracy"][2])
    assert labels.values["supported"].tolist() == [1.0, 0.0, 1.0]
    assert labels.extra_columns == ["notes"]
    mat, raters = labels.matrix("accuracy", ["q1", "q2"])
    assert raters == ["alice", "bob"]
    assert mat[0, 0] == 3 and mat[1, 0] == 2 and np.isnan(mat[1, 1])


def test_jsonl_without_rater_numbers_rows_per_id(tmp_path: Path) -> None:
    p = _write_jsonl(
        tmp_path / "h.jsonl",
        [{"id": "q1", "accuracy": 1}, {"id": "q1", "accuracy": 2}, {"id": "q2", "accuracy": None}],
    )
    labels = load_human_labels(p)
    assert labels.raters == ["r1", "r2", "r1"]


def test_off_scale_and_non_numeric_values_are_reported_with_rows(tmp_path: Path) -> None:
    p = tmp_path / "h.csv"
    p.write_text("id,accuracy\nq1,7\nq2,good\nq3,2\n")
    with pytest.raises(InputDataError) as err:
        load_human_labels(p, scales={"accuracy": [0, 1, 2, 3, 4]})
    msg = str(err.value)
    assert "2 bad values" in msg and "row 2" in msg and "not on the scale" in msg
    assert "row 3" in msg and "'good' is not a number" in msg


def test_duplicate_rater_rows_and_missing_id_column(tmp_path: Path) -> None:
    p = tmp_path / "h.csv"
    p.write_text("id,rater,accuracy\nq1,a,1\nq1,a,2\n")
    with pytest.raises(InputDataError, match="duplicate"):
        load_human_labels(p)
    q = tmp_path / "bad.csv"
    q.write_text("item,accuracy\nq1,1\n")
    with pytest.raises(InputDataError, match="no 'id' column"):
        load_human_labels(q)


def test_judge_output_mixed_provenance_and_duplicates(tmp_path: Path) -> None:
    p = _write_jsonl(tmp_path / "o.jsonl", [_record("q1"), _record("q2", prov="p2")])
    with pytest.raises(InputDataError, match="2 configurations"):
        load_judge_output(p)
    assert load_judge_output(p, provenance="p2").ids == ["q2"]
    d = _write_jsonl(tmp_path / "d.jsonl", [_record("q1"), _record("q1")])
    with pytest.raises(InputDataError, match="more than once"):
        load_judge_output(d)
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"id": "q1"}\nnot json\n')
    with pytest.raises(InputDataError, match="line 2 is not JSON"):
        load_judge_output(bad)


def test_labels_from_excel_csv_json_lists_and_jsonl_with_blank_lines(tmp_path: Path) -> None:
    bom = tmp_path / "excel.csv"
    bom.write_bytes(b"\xef\xbb\xbfid,accuracy\r\nq1,3\r\nq2,4\r\n")
    assert load_human_labels(bom).ids == ["q1", "q2"]
    listed = tmp_path / "h.json"
    listed.write_text(json.dumps([{"id": "q1", "accuracy": 3}, {"id": "q2", "accuracy": 1}]))
    assert load_human_labels(listed).values["accuracy"].tolist() == [3.0, 1.0]
    gaps = tmp_path / "gaps.jsonl"
    gaps.write_text('{"id": "q1", "accuracy": 1}\n\n\n{"id": "q2", "accuracy": 9}\n')
    with pytest.raises(InputDataError, match=r"1 bad value; first: row 4 \(id 'q2'\)"):
        load_human_labels(gaps, scales={"accuracy": [0, 1, 2, 3, 4]})


def test_predictions_passed_where_verdicts_belong_are_named_as_such(tmp_path: Path) -> None:
    preds = _write_jsonl(tmp_path / "p.jsonl", [{"id": "q1", "question": "q", "response": "a"}])
    with pytest.raises(InputDataError, match="is not jurybox judge output"):
        load_judge_output(preds)


def test_join_reports_unjoined_ids_and_keeps_unscored_votes_missing(tmp_path: Path) -> None:
    out = _write_jsonl(
        tmp_path / "o.jsonl", [_record("q1"), _record("q2", acc=None), _record("q3")]
    )
    hum = _write_jsonl(
        tmp_path / "h.jsonl",
        [{"id": "q1", "accuracy": 3}, {"id": "q2", "accuracy": 2}, {"id": "zz9", "accuracy": 1}],
    )
    joined = join(hum, out)
    s = joined.summary
    assert s.n_joined == 2
    assert s.human_only == ["zz9"] and s.judge_only == ["q3"]
    assert "1 labelled ids have no judge record (e.g. zz9)" in s.describe()
    data = joined.criteria["accuracy"]
    assert data.ids == ["q1", "q2"]
    assert data.judges["a"].tolist() == [3.0, 3.0]
    assert np.isnan(data.judges["b"]).all()  # unscored votes stay missing
    assert np.isnan(data.jury[1])  # below-quorum jury stays missing
    expected = join(hum, out, value="expected").criteria["accuracy"].judges["a"]
    assert expected.tolist() == [2.7, 2.7]


def test_join_with_nothing_in_common(tmp_path: Path) -> None:
    out = _write_jsonl(tmp_path / "o.jsonl", [_record("q1")])
    hum = _write_jsonl(tmp_path / "h.jsonl", [{"id": "Q1", "accuracy": 3}])
    with pytest.raises(JoinError, match="no ids in common"):
        join(hum, out)


def test_join_infers_categorical_from_vote_labels() -> None:
    from jurybox.calibration import human_labels_from_rows, judge_output_from_records

    recs, humans = simulate_judging(20)
    joined = join(human_labels_from_rows(humans), judge_output_from_records(recs))
    assert joined.criteria["supported"].categorical
    assert not joined.criteria["accuracy"].categorical
    assert joined.criteria["accuracy"].scale.values == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_human_yes_no_labels_map_through_judge_votes_without_a_rubric(tmp_path: Path) -> None:
    recs, _ = simulate_judging(10, seed=4)
    out = _write_jsonl(tmp_path / "o.jsonl", recs)
    hum = tmp_path / "h.csv"
    hum.write_text("id,accuracy,supported\nq0,3,yes\nq1,2,NO\nq2,,\n")
    data = join(hum, out, value="expected").criteria["supported"]
    assert data.human[0, :2].tolist() == [1.0, 0.0]
    # labelled criteria use the vote's label value even when expected scores are requested
    assert set(np.unique(data.judges["harsh"])) <= {0.0, 1.0}
