"""Pairwise judging end to end with the tiny jury's recorded real answers to these pairs (the
replay jury: the judges' real tokenizers and distributions, no model's time): `jurybox judge
--pairs A B` asks every judge both orders, counts inconsistent pairs, and `jurybox compare`
prints win rates and Bradley-Terry ratings from the verdicts; `jurybox audit` measures position
bias. (Pairs on the real models: test_pairwise.py, test_service.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.models
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
JURYBOX = [sys.executable, "-c", "from jurybox.serving.cli import main; main()"]


def jurybox(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*JURYBOX, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=900
    )


def test_judge_pairs_then_compare_and_audit(tmp_path, replay_jury):
    rows = [json.loads(line) for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines()]
    (tmp_path / "long.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    short = [{**r, "response": r["response"].split(". ")[0] + "."} for r in rows[:3]]
    short.append({**rows[3], "response": "x"})  # in one file only: named, not judged
    (tmp_path / "short.jsonl").write_text("".join(json.dumps(r) + "\n" for r in short))
    run = jurybox(
        "judge",
        "--pairs",
        "long.jsonl",
        "short.jsonl",
        "--rubric",
        "pairwise",
        "--jury",
        replay_jury,
        "--no-cache",
        "--quiet",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert "pairs: 3 ids in both files, A = long, B = short" in run.stderr
    assert f"1 id(s) only in short.jsonl (B, short), not judged: {rows[3]['id']!r}" in run.stderr
    out = tmp_path / "long-vs-short.pairwise.judged.jsonl"
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3
    for rec in records:
        # Every judge answered both orders; the verdict says who won (or tie) and P(A better).
        orders = sorted((v["judge"], v["order"]) for v in rec["votes"])
        assert orders == sorted(
            (j, o) for j in ("smollm2-135m", "gemma3-270m") for o in ("ab", "ba")
        )
        assert rec["winner"] in ("a", "b", "tie") and 0.0 <= rec["p_a"] <= 1.0
        assert rec["scores"]["better"] == {"a": 1.0, "b": 0.0, "tie": 0.5}.get(
            rec["winner"], rec["scores"]["better"]
        )
    # The summary counts winners and each judge's inconsistent pairs (from the votes).
    flips = {
        j: sum(
            1
            for rec in records
            for o in [{v["order"]: v["score"] for v in rec["votes"] if v["judge"] == j}]
            if o["ab"] != o["ba"]
        )
        for j in ("smollm2-135m", "gemma3-270m")
    }
    for judge, n in flips.items():
        assert f"{judge}: inconsistent under order swap on {n} of 3 pairs" in run.stdout
    for rec in records:  # each verdict names its inconsistent judges
        flipped = {
            j for j in flips if len({v["score"] for v in rec["votes"] if v["judge"] == j}) > 1
        }
        assert {x.split(" on ")[0] for x in rec["inconsistent"]} == flipped
    manifest = json.loads(out.with_name(out.name + ".manifest.json").read_text())
    assert (
        manifest["summary"]["pairwise"]["judges"]["gemma3-270m"]["inconsistent"]
        == flips["gemma3-270m"]
    )

    compare = jurybox("compare", out, "--json", "--resamples", "200", cwd=tmp_path)
    assert compare.returncode == 0, compare.stderr
    result = json.loads(compare.stdout)
    (rate,) = result["win_rates"]
    shares = [r["scores"]["better"] for r in records]
    assert (rate["a"], rate["b"], rate["n"]) == ("long", "short", 3)
    assert rate["rate"] == pytest.approx(sum(shares) / 3)
    assert result["bradley_terry"]["systems"] == ["long", "short"]
    text = jurybox("compare", out, cwd=tmp_path)
    assert text.returncode == 0 and "long beats short" in text.stdout
    assert "Bradley-Terry ratings" in text.stdout

    audit = jurybox("audit", out, "--json", cwd=tmp_path)
    assert audit.returncode == 0, audit.stderr
    position = {f["judge"]: f for f in json.loads(audit.stdout)["position"]}
    for judge, n in flips.items():
        assert position[judge]["n_pairs"] == 3 and position[judge]["flip_rate"] == n / 3

    # Human preference labels (a, b, tie) with agree and calibrate.
    (tmp_path / "pref.jsonl").write_text(
        "".join(
            json.dumps({"id": r["id"], "rater": "h", "better": label}) + "\n"
            for r, label in zip(records, ["a", "b", "tie"])
        )
    )
    agree = jurybox("agree", "pref.jsonl", out, "--json", "--resamples", "50", cwd=tmp_path)
    assert agree.returncode == 0, agree.stderr
    better = json.loads(agree.stdout)["criteria"]["better"]
    assert better["n_items"] == 3 and better["scale"] == [0.0, 0.5, 1.0]
    calibrate = jurybox("calibrate", "pref.jsonl", out, "--out", "map.json", cwd=tmp_path)
    assert calibrate.returncode == 0, calibrate.stderr
    assert json.loads((tmp_path / "map.json").read_text())["provenance"] == records[0]["provenance"]

    # A rubric that is not pairwise is refused with --pairs, saying so.
    wrong = jurybox(
        "judge", "--pairs", "long.jsonl", "short.jsonl", "--rubric", "general", cwd=tmp_path
    )
    assert wrong.returncode != 0 and "is not pairwise" in wrong.stderr
