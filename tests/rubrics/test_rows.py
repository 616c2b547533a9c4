"""The one row reader: every format, rows numbered as an editor shows them, bad rows as errors
that name the row (and field), files in the wrong format named for what they look like."""

import json

import pytest

from jurybox.rubrics.rows import FileFormatError, RowError, read_rows


def rows(path):
    return list(read_rows(path))


def test_the_same_rows_from_every_format(tmp_path):
    import pandas as pd

    data = [{"id": "a", "x": "1"}, {"id": "b", "x": "2"}]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    (tmp_path / "r.json").write_text(json.dumps(data))
    (tmp_path / "w.json").write_text(json.dumps({"data": data}))
    pd.DataFrame(data).to_csv(tmp_path / "r.csv", index=False)
    pd.DataFrame(data).to_csv(tmp_path / "r.tsv", index=False, sep="\t")
    pd.DataFrame(data).to_parquet(tmp_path / "r.parquet")
    for name in ("r.jsonl", "r.json", "w.json", "r.csv", "r.tsv", "r.parquet"):
        assert [r for _, r in rows(tmp_path / name)] == data, name


def test_row_numbers_count_blank_lines_and_headers(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"id": "a"}\n\n\n{"id": "b"}\nnot json\n')
    got = rows(p)
    assert [n for n, _ in got] == [1, 4, 5]
    assert isinstance(got[2][1], RowError) and got[2][1].kind == "syntax"
    c = tmp_path / "r.csv"
    c.write_bytes(b'\xef\xbb\xbfid,x\r\na,"two\r\nlines"\r\n\r\nb,3\r\n')
    assert [(n, r["id"]) for n, r in rows(c)] == [(2, "a"), (5, "b")]


def test_bad_rows_name_what_is_wrong(tmp_path):
    c = tmp_path / "r.csv"
    c.write_bytes(b"id,x,y\na,1,2\nb,1\nc,1,2,3\nd,caf\xe9,2\n")
    got = dict(rows(c))
    assert got[2] == {"id": "a", "x": "1", "y": "2"}
    assert (got[3].field, got[3].kind) == ("y", "shape") and "2 of the 3 header columns" in got[
        3
    ].message
    assert got[4].kind == "shape" and "1 more value(s)" in got[4].message
    assert (got[5].field, got[5].kind) == ("x", "encoding")
    j = tmp_path / "r.jsonl"
    j.write_text('{"id": "a", "id": "b"}\n[1]\n{"n": {"k": 1, "k": 2}}\n')
    got = dict(rows(j))
    assert got[1].field == "id" and "appears more than once" in got[1].message
    assert "expected a JSON object, got a list" in got[2].message
    assert got[3].field == "n.k"


def test_whole_file_problems_raise(tmp_path):
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(FileFormatError, match="the file is empty"):
        rows(tmp_path / "e.jsonl")
    (tmp_path / "dup.csv").write_text("id,x,x\na,1,2\n")
    with pytest.raises(FileFormatError, match=r"names \['x'\] more than once"):
        rows(tmp_path / "dup.csv")
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(FileFormatError, match="unknown file type '.txt'"):
        rows(tmp_path / "x.txt")
    with pytest.raises(FileFormatError, match="no such file"):
        rows(tmp_path / "missing.jsonl")
    (tmp_path / "notpq.parquet").write_text("x")
    with pytest.raises(FileFormatError, match="cannot read as Parquet"):
        rows(tmp_path / "notpq.parquet")
