"""`Bench`: a benchmark run as ``jurybox bench`` makes it, called from Python."""

import pytest
from bench_helpers import bottom_of, rule_jury, top_of

from jurybox.rubrics.errors import InputError
from jurybox.serving.runs import bench as runs_bench
from jurybox.serving.runs.bench import Bench


def test_a_pack_without_a_jury_scores_and_writes_nothing(examples):
    bench = Bench("microvqa", examples / "microvqa.json", examples / "microvqa.predictions.jsonl")
    assert bench.judge is None and bench.target is None
    report = bench.run()
    assert report.to_dict()["accuracy"] == pytest.approx(4 / 6)
    assert bench.notes == [] and bench.warnings == []


def test_an_option_the_pack_does_not_take_is_an_input_error(examples):
    with pytest.raises(InputError, match="--subset does not apply to microvqa") as exc:
        Bench("microvqa", examples / "microvqa.json", examples / "p.jsonl", subset="contextual")
    assert exc.value.field == "subset"
    with pytest.raises(InputError):
        Bench("nope", examples / "microvqa.json", examples / "p.jsonl")


def test_a_judged_pack_judges_into_its_default_directory_and_says_which_jury(
    examples, tmp_path, monkeypatch
):
    made = rule_jury(top_of, bottom_of)
    monkeypatch.setattr(runs_bench, "make_jury", lambda spec: made)
    monkeypatch.chdir(tmp_path)
    bench = Bench(
        "mirage-mmmt",
        examples / "mirage_mmmt_decomp.json",
        examples / "mirage_mmmt.predictions.jsonl",
    )
    assert bench.target == tmp_path.joinpath(
        "mirage_mmmt.predictions.mirage-mmmt.bench"
    ).relative_to(tmp_path)
    seen = []
    report = bench.run(lambda task, done, total: seen.append(task))
    assert any("(default; pass --jury to choose)" in n for n in bench.notes)
    assert (tmp_path / bench.target / "mirage-mmmt.judged.jsonl").exists()
    assert seen and "| jury |" in report.to_markdown()
