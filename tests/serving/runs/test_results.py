import json

import pytest

from jurybox.serving.runs.results import ResultsError, ResultsFile, write_manifest


def rec(i, prov="p1"):
    return {
        "id": f"r{i}",
        "provenance": prov,
        "status": "scored",
        "scores": {},
        "rubric": "general",
        "jury": "t",
    }


def test_a_directory_as_out_is_a_clear_error(tmp_path):
    with pytest.raises(ResultsError, match="is a directory"):
        ResultsFile(tmp_path, "p1").__enter__()


def test_append_and_resume(tmp_path):
    out = tmp_path / "o.jsonl"
    with ResultsFile(out, "p1") as f:
        assert f.done() == set()
        f.append([rec(1), rec(2)])
    with ResultsFile(out, "p1") as f:
        assert f.done() == {"r1", "r2"}
        f.append([rec(3)])
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["r1", "r2", "r3"]


def test_incomplete_last_line_from_a_killed_run_is_removed(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps(rec(1)) + "\n" + json.dumps(rec(2))[:17])
    with ResultsFile(out, "p1") as f:
        assert f.repaired and f.done() == {"r1"}
        f.append([rec(2)])
    lines = out.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["r1", "r2"]


def test_other_provenance_or_foreign_file_is_refused_untouched(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps(rec(1, "other")) + "\n")
    with pytest.raises(ResultsError, match="different rubric/jury configuration"):
        ResultsFile(out, "p1").__enter__()
    assert out.read_text() == json.dumps(rec(1, "other")) + "\n"
    foreign = tmp_path / "f.jsonl"
    foreign.write_text('{"hello": 1}\n')
    with pytest.raises(ResultsError, match="line 1 is not a jurybox result"):
        ResultsFile(foreign, "p1").__enter__()
    assert foreign.read_text() == '{"hello": 1}\n'
    # Predictions passed as --out by mistake, without a final newline: not one byte is cut.
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": "1", "question": "q"}\n{"question": "q2", "id": "2"}')
    before = preds.read_bytes()
    with pytest.raises(ResultsError, match="not a jurybox result"):
        ResultsFile(preds, "p1").__enter__()
    assert preds.read_bytes() == before
    single = tmp_path / "single.jsonl"
    single.write_text('{"question": "only line, no newline"}')
    with pytest.raises(ResultsError, match="not a jurybox result"):
        ResultsFile(single, "p1").__enter__()
    assert single.read_text() == '{"question": "only line, no newline"}'


@pytest.mark.parametrize(
    "content",
    [
        '{"id": "keep-me", "note": "important"}',  # looks like the start of a torn record
        '{"id": "keep-me"',
        '{"id',
    ],
)
def test_a_one_line_file_that_is_not_ours_is_never_truncated(tmp_path, content):
    precious = tmp_path / "precious.json"
    precious.write_text(content)
    with pytest.raises(ResultsError, match="not a jurybox result"):
        ResultsFile(precious, "p1").__enter__()
    assert precious.read_text() == content


@pytest.mark.parametrize("cut", [1, 2, 4, 7, 20])
def test_a_torn_write_cut_at_any_byte_is_repaired(tmp_path, cut):
    line = json.dumps(rec(2))
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps(rec(1)) + "\n" + line[:cut])
    with ResultsFile(out, "p1") as f:
        assert f.repaired and f.done() == {"r1"}
    assert out.read_text() == json.dumps(rec(1)) + "\n"
    # With no complete line, the manifest of the run that was killed says whose file it is.
    first = tmp_path / "first.jsonl"
    first.write_text(line[:cut])
    write_manifest(first, {"jurybox": "0", "provenance": "p1", "status": "running"})
    with ResultsFile(first, "p1") as f:
        assert f.repaired and f.done() == set()
    assert first.read_text() == ""


def test_a_torn_tail_after_our_lines_that_is_not_a_record_prefix_is_refused(tmp_path):
    out = tmp_path / "o.jsonl"
    content = json.dumps(rec(1)) + "\n" + '{"other": 1'
    out.write_text(content)
    with pytest.raises(ResultsError, match="the last line is not a jurybox result"):
        ResultsFile(out, "p1").__enter__()
    assert out.read_text() == content


def test_a_manifest_of_another_configuration_does_not_claim_the_file(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": "r')
    write_manifest(out, {"jurybox": "0", "provenance": "other", "status": "running"})
    with pytest.raises(ResultsError, match="different rubric/jury configuration"):
        ResultsFile(out, "p1").__enter__()
    assert out.read_text() == '{"id": "r'


def test_a_failed_open_releases_the_lock(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps(rec(1, "other")) + "\n")
    for _ in range(2):  # the second attempt must not report "another jurybox run"
        with pytest.raises(ResultsError, match="different rubric/jury"):
            ResultsFile(out, "p1").__enter__()


def test_a_run_killed_during_its_first_write_resumes(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps(rec(1))[:20])
    write_manifest(out, {"jurybox": "0", "provenance": "p1", "status": "running"})
    with ResultsFile(out, "p1") as f:
        assert f.repaired and f.done() == set()


def test_two_runs_cannot_write_one_file(tmp_path):
    out = tmp_path / "o.jsonl"
    with ResultsFile(out, "p1"), pytest.raises(ResultsError, match="another jurybox run"):
        ResultsFile(out, "p1").__enter__()


def test_calibrated_and_uncalibrated_records_do_not_mix(tmp_path):
    out = tmp_path / "o.jsonl"
    with ResultsFile(out, "p1") as f:
        f.append([rec(1)])
    with pytest.raises(ResultsError, match="calibration map None, this run uses m.yaml:abc"):
        ResultsFile(out, "p1", calibration="m.yaml:abc").__enter__()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_directory_of_shards_reads_like_one_file_in_agree_and_resume(tmp_path, fmt):
    from typer.testing import CliRunner

    from jurybox.calibration import load_judge_output, simulate_judging
    from jurybox.serving.cli import app
    from jurybox.serving.runs.results import ResultsDir, open_results

    records, humans = simulate_judging(30)
    records = [{**r, "input": f"h{i}"} for i, r in enumerate(records)]
    single = tmp_path / "all.jsonl"
    single.write_text("".join(json.dumps(r) + "\n" for r in records))
    shards = tmp_path / "shards"
    write_manifest(shards, {"jurybox": "0", "provenance": "prov-test", "status": "running"})
    with ResultsDir(shards, "prov-test", format=fmt, shard_size=7) as out:
        out.append(records)
    assert len(list(shards.glob(f"part-*.{fmt}"))) == 5  # 7+7+7+7+2
    assert [r.to_dict() for r in load_judge_output(shards).records] == [
        r.to_dict() for r in load_judge_output(single).records
    ]
    human = tmp_path / "h.jsonl"
    human.write_text("".join(json.dumps(h) + "\n" for h in humans))
    runner = CliRunner()
    via_dir = runner.invoke(app, ["agree", str(human), str(shards), "--json", "--resamples", "50"])
    via_file = runner.invoke(app, ["agree", str(human), str(single), "--json", "--resamples", "50"])
    assert via_dir.exit_code == 0, via_dir.output
    a, b = json.loads(via_dir.stdout), json.loads(via_file.stdout)
    for report in (a, b):  # where the verdicts came from is named, and differs
        report.pop("sources")
        report["warnings"] = [
            w.replace(str(shards), "X").replace(str(single), "X") for w in report["warnings"]
        ]
    assert a == b
    # Resuming reads the ids and input hashes back; a torn temporary shard is dropped.
    (shards / f".part-000009.{fmt}.tmp").write_bytes(b"half a shard")
    with open_results(shards, "prov-test", format=fmt) as again:
        assert again.repaired and again.inputs == {r["id"]: r["input"] for r in records}
    assert not list(shards.glob(".*.tmp"))
