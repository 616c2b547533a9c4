"""The benchmark packs' judged runs that test_bench_models.py makes on the replay jury, defined
once: tests/data/record.py runs the same cases with the real tiny jury to record its answers
(tests/data/tiny-bench-recorded.json.gz), so the recording holds every prompt the tests send.

Each case is ``case(examples, tmp_path, jury, wrap)``: it builds the judge its test uses from
``jury`` (``wrap`` sees it first: the recorder keeps the rubric and items it is asked) and
returns the pack's report."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jurybox.benchmarks import BenchReport, Judge, jury_judge, run_benchmark
from jurybox.serving.runs.bench import ResumableJudge

Wrap = Callable[[Judge], Judge]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "benchmarks"


def subset(
    examples: Path, tmp_path: Path, data_name: str, preds_name: str, keep: list[int]
) -> tuple[Path, Path]:
    """The data items at positions ``keep`` and their predictions, as files."""
    items = json.loads((examples / data_name).read_text())
    chosen = [items[i] for i in keep]
    ids = {str(it.get("id", it.get("key_question"))) for it in chosen}
    data = tmp_path / data_name
    data.write_text(json.dumps(chosen))
    lines = (examples / preds_name).read_text().splitlines()
    preds = tmp_path / preds_name
    preds.write_text("".join(line + "\n" for line in lines if json.loads(line)["id"] in ids))
    return data, preds


def mirage_mmmt(examples: Path, tmp_path: Path, jury: Any, wrap: Wrap) -> BenchReport:
    """Two MMMT dialogues through the resumable runner (the judged files of ``jurybox bench``)."""
    data, preds = subset(
        examples, tmp_path, "mirage_mmmt_decomp.json", "mirage_mmmt.predictions.jsonl", [0, 1]
    )
    judge = wrap(ResumableJudge(jury, tmp_path / "out"))
    return run_benchmark("mirage-mmmt", data, preds, judge=judge)


def microvqa(examples: Path, tmp_path: Path, jury: Any, wrap: Wrap) -> BenchReport:
    """Every MicroVQA example: the rules extract most answers, the jury reads the rest."""
    return run_benchmark(
        "microvqa",
        examples / "microvqa.json",
        examples / "microvqa.predictions.jsonl",
        judge=wrap(jury_judge(jury)),
    )


def mir(examples: Path, tmp_path: Path, jury: Any, wrap: Wrap) -> BenchReport:
    """Two MIR items, one answer the rules parse and one they cannot; the steps judged."""
    data, preds = subset(examples, tmp_path, "mir.json", "mir.predictions.jsonl", [0, 4])
    return run_benchmark("mir", data, preds, judge=wrap(jury_judge(jury)))


def mrmr(examples: Path, tmp_path: Path, jury: Any, wrap: Wrap) -> BenchReport:
    """One MRMR query's qrels documents graded by the jury."""
    return run_benchmark(
        "mrmr",
        examples / "mrmr.qrels.jsonl",
        examples / "mrmr.run.json",
        queries=examples / "mrmr.queries.jsonl",
        corpus=examples / "mrmr.corpus.jsonl",
        judge=wrap(jury_judge(jury)),
        limit=1,
        depth=1,
    )


CASES: dict[str, Callable[[Path, Path, Any, Wrap], BenchReport]] = {
    "mirage-mmmt": mirage_mmmt,
    "microvqa": microvqa,
    "mir": mir,
    "mrmr": mrmr,
}
