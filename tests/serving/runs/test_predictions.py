import json

import pandas as pd
import pytest

from jurybox.rubrics import load_rubric
from jurybox.serving.runs.predictions import PredictionsError, read_predictions

RUBRIC = load_rubric("general")


def row(i, **kw):
    base = {"id": f"r{i}", "question": "q?", "response": "an answer", "reference": "the answer"}
    base.update(kw)
    return base


def test_jsonl_bad_rows_are_reported_and_the_rest_is_read(tmp_path):
    p = tmp_path / "p.jsonl"
    lines = [
        json.dumps(row(1)).encode(),
        b'{"id": "r2", "question": ',  # malformed
        json.dumps(row(3, response="x" * 200_000)).encode(),  # too long
        json.dumps(row(4, reference=None)).encode(),  # missing reference
        b'{"id": "r5", "question": "caf\xe9", "response": "a", "reference": "b"}',  # latin-1 byte
        json.dumps(row(1)).encode(),  # duplicate id
        b"[1, 2]",  # not an object
        json.dumps(row(8, response={"text": "nested"})).encode(),  # wrong type
        b"",
        json.dumps(row(9, id=9)).encode(),  # numeric id is fine
    ]
    p.write_bytes(b"\n".join(lines) + b"\n")
    res = read_predictions(p, RUBRIC)
    assert [it.id for it in res.items] == ["r1", "9"]
    errors = {e.row: e for e in res.errors}
    assert set(errors) == {2, 3, 4, 5, 6, 7, 8}
    assert "invalid JSON" in errors[2].message
    assert errors[3].field == "response" and "200,000 characters" in errors[3].message
    assert errors[4].field == "reference" and "rubric general needs it" in errors[4].message
    assert "not valid UTF-8 (byte 0xe9" in errors[5].message
    assert (
        errors[6].field == "id" and "duplicate id 'r1' (first seen at row 1)" in errors[6].message
    )
    assert "expected a JSON object" in errors[7].message
    assert errors[8].field == "response" and "expected text, got dict" in errors[8].message
    assert str(errors[3]).startswith("row 3, field 'response':")


def test_empty_file_and_missing_column_are_file_errors(tmp_path):
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n \n")
    with pytest.raises(PredictionsError, match="empty"):
        read_predictions(empty, RUBRIC)
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"id": "1", "question": "q", "answer": "a", "reference": "r"}) + "\n")
    with pytest.raises(PredictionsError, match=r"no column 'response'.*--map response=COLUMN"):
        read_predictions(p, RUBRIC)
    res = read_predictions(p, RUBRIC, {"response": "answer"})
    assert res.items[0].response == "a" and "answer" not in res.items[0].extra


def test_csv_tsv_parquet_and_json_list(tmp_path):
    rows = [row(1, entity_name="beetle"), row(2)]
    pd.DataFrame(rows).to_csv(tmp_path / "p.csv", index=False)
    pd.DataFrame(rows).to_csv(tmp_path / "p.tsv", index=False, sep="\t")
    pd.DataFrame(rows).to_parquet(tmp_path / "p.parquet")
    (tmp_path / "p.json").write_text(json.dumps(rows))
    for name in ("p.csv", "p.tsv", "p.parquet", "p.json"):
        res = read_predictions(tmp_path / name, RUBRIC)
        assert [it.id for it in res.items] == ["r1", "r2"], name
        assert res.items[0].extra["entity_name"] == "beetle", name
        assert res.items[0].question == "q?"


def test_csv_non_utf8_field_names_row_and_field(tmp_path):
    p = tmp_path / "p.csv"
    p.write_bytes(b"id,question,response,reference\nr1,q,ok,ref\nr2,q,caf\xe9,ref\n")
    res = read_predictions(p, RUBRIC)
    assert [it.id for it in res.items] == ["r1"]
    (e,) = res.errors
    assert e.row == 3 and e.field == "response" and "UTF-8" in e.message


def test_unknown_extension(tmp_path):
    p = tmp_path / "p.txt"
    p.write_text("x")
    with pytest.raises(PredictionsError, match="unknown file type '.txt'"):
        read_predictions(p, RUBRIC)


def test_missing_or_empty_required_fields_are_rejected_by_row_and_field(tmp_path):
    p = tmp_path / "p.jsonl"
    rows = [
        row(1, response=""),
        row(2, response=None),
        row(3),
        row(4, reference="   "),
        row(5, response=" \n "),
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    res = read_predictions(p, RUBRIC)
    assert [it.id for it in res.items] == ["r3"]
    errors = {e.row: (e.field, e.message) for e in res.errors}
    assert errors[1] == (
        "response",
        "empty, but the rubric general needs it (judge empty answers with --allow-empty)",
    )
    assert errors[2][0] == "response" and errors[2][1].startswith("missing, but")
    assert errors[4] == ("reference", "empty, but the rubric general needs it")
    assert errors[5][0] == "response"
    # An empty answer is what a model may really have given: judged only when asked, and counted.
    res = read_predictions(p, RUBRIC, allow_empty=True)
    assert [(it.id, it.response) for it in res.items] == [
        ("r1", ""),
        ("r3", "an answer"),
        ("r5", " \n "),
    ]
    assert res.empty_responses == 2
    assert {e.row for e in res.errors} == {2, 4}  # null is no answer at all; reference is needed


def test_csv_row_with_too_few_cells_is_rejected(tmp_path):
    p = tmp_path / "p.csv"
    p.write_text("id,question,response,reference\nr1,q,a,ref\nr2,q,a\n\nr3,q,a,ref\n")
    res = read_predictions(p, RUBRIC)
    assert [it.id for it in res.items] == ["r1", "r3"]
    (e,) = res.errors
    assert (e.row, e.field) == (3, "reference") and "3 of the 4 header columns" in e.message


def test_parquet_binary_column_with_bad_bytes_is_a_row_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": ["r1", "r2"],
            "question": ["q", "q"],
            "response": ["a", "b"],
            "reference": ["r", "r"],
            "notes": pa.array([b"fine", b"caf\xe9"], pa.binary()),
        }
    )
    pq.write_table(table, tmp_path / "p.parquet")
    res = read_predictions(tmp_path / "p.parquet", RUBRIC)
    assert [it.id for it in res.items] == ["r1"] and res.items[0].extra["notes"] == "fine"
    (e,) = res.errors
    assert (e.row, e.field) == (2, "notes") and "not valid UTF-8" in e.message
    from jurybox.rubrics import input_hash

    assert len(input_hash(res.items[0])) == 16


def test_json_row_with_a_duplicate_key_is_rejected(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text(
        '{"id": "r1", "id": "r9", "question": "q", "response": "a", "reference": "r"}\n'
        + json.dumps(row(2))
        + "\n"
    )
    res = read_predictions(p, RUBRIC)
    assert [it.id for it in res.items] == ["r2"]
    (e,) = res.errors
    assert (e.row, e.field) == (1, "id") and "appears more than once" in e.message


def test_map_to_a_field_nothing_reads_is_refused(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps(row(1)) + "\n")
    with pytest.raises(PredictionsError, match="--map nosuchfield=question: no part of the rubric"):
        read_predictions(p, RUBRIC, {"nosuchfield": "question"})
    with pytest.raises(PredictionsError, match="no column 'ctx'"):
        read_predictions(p, RUBRIC, {"context": "ctx"})


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("list.jsonl", '[\n  {"id": "r1"},\n  {"id": "r2"}\n]\n', "looks like a JSON list"),
        (
            "pretty.jsonl",
            '{\n  "id": "r1",\n  "question": "q"\n}\n',
            "looks like pretty-printed JSON",
        ),
        ("lines.json", '{"id": "r1"}\n{"id": "r2"}\n', "looks like JSON Lines"),
    ],
)
def test_a_file_in_the_wrong_format_says_what_it_looks_like(tmp_path, name, content, message):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(PredictionsError, match=message):
        read_predictions(p, RUBRIC)


def test_a_directory_or_glob_is_read_as_one_file_and_an_empty_one_is_named(tmp_path):
    with pytest.raises(PredictionsError, match="is a directory with no row files"):
        read_predictions(tmp_path, RUBRIC)
    (tmp_path / "a.jsonl").write_text(json.dumps(row(1)) + "\n" + json.dumps(row(2)) + "\n")
    pd.DataFrame([row(3), row(1)]).to_parquet(tmp_path / "b.parquet")
    for source in (tmp_path, str(tmp_path / "*.*")):
        res = read_predictions(source, RUBRIC)
        assert [it.id for it in res.items] == ["r1", "r2", "r3"]
        (dup,) = res.errors  # ids repeat across the files too
        assert str(dup).startswith("b.parquet: row 2, field 'id': duplicate id 'r1'")
        assert "(first seen at a.jsonl: row 1)" in str(dup)


def test_csv_long_multiline_fields_and_row_numbers(tmp_path):
    p = tmp_path / "p.csv"
    long = "word " * 40_000  # 200,000 characters: over the csv module's default field limit
    pd.DataFrame(
        [row(1, response="line one\nline two\nline three"), row(2, response=long), row(3)]
    ).to_csv(p, index=False)
    res = read_predictions(p, RUBRIC)
    assert [it.id for it in res.items] == ["r1", "r3"]
    (e,) = res.errors
    # The header is line 1, r1 spans lines 2-4, so r2 starts on line 5.
    assert (e.row, e.field) == (5, "response") and "200,000 characters" in e.message


def test_jsonl_with_a_byte_order_mark(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(row(1)).encode() + b"\n")
    assert [it.id for it in read_predictions(p, RUBRIC).items] == ["r1"]


def test_a_run_keeps_one_id_index_and_limit_is_a_position_in_it(tmp_path):
    """RowStream: ids within --limit are the run's; later rows are still checked for duplicates
    (and a duplicate of a row past the limit names where it was first seen)."""
    from jurybox.serving.runs.local import RowStream

    p = tmp_path / "p.jsonl"
    ids = [1, 2, 3, 4, 2, 5, 4]
    p.write_text("".join(json.dumps(row(i)) + "\n" for i in ids))
    stream = RowStream(p, RUBRIC, limit=3)
    judged = [it.id for chunk, _ in stream.chunks(set(), 2) for it in chunk]
    assert judged == ["r1", "r2", "r3"]
    assert [i for i in ("r1", "r2", "r3", "r4", "r5", "r9") if i in stream] == ["r1", "r2", "r3"]
    assert stream.counts()["items"] == 3 and stream.rows == 7
    assert [str(e) for e in stream.errors] == [
        "row 5, field 'id': duplicate id 'r2' (first seen at row 2)",
        "row 7, field 'id': duplicate id 'r4' (first seen at row 4)",
    ]
    unlimited = RowStream(p, RUBRIC, limit=None)
    assert [it.id for chunk, _ in unlimited.chunks({"r2"}, 10) for it in chunk] == [
        "r1",
        "r3",
        "r4",
        "r5",
    ]
    assert all(f"r{i}" in unlimited for i in range(1, 6)) and unlimited.items == 5
    none = RowStream(p, RUBRIC, limit=0)
    assert [it.id for chunk, _ in none.chunks(set(), 10) for it in chunk] == []
    assert "r1" not in none and none.items == 0 and none.n_errors == 2
