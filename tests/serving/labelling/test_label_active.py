"""`jurybox label --goal benchmark-mean` for real (its own process, real HTTP), over verdicts with
known human truth (a simulated calibrated jury: labelling is what is tested here, the judging
has its own tests), then what the file it writes is good for: `jurybox agree --ppi` weights it,
`jurybox agree` and `calibrate` refuse it with the reason, `jurybox labels plan` plans it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from service_helpers import free_port, labelling

from jurybox.calibration.estimates.synthetic import LabellingPool

JURYBOX = str(Path(sys.executable).with_name("jurybox"))
CRITERIA = ["accuracy", "relevance", "completeness", "parsimony"]  # mirage-mg's, 0-4 each


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory):
    """300 predictions, their verdicts (two judges per criterion, each with its score
    distribution) and each item's human truth per criterion."""
    rng = np.random.default_rng(8)
    folder = tmp_path_factory.mktemp("active")
    pools = {c: LabellingPool.draw(rng, 300) for c in CRITERIA}
    items, verdicts, truth = [], [], {}
    for k in range(300):
        item = f"q{k:03d}"
        items.append(
            {
                "id": item,
                "question": f"Question {k}?",
                "response": f"Answer {k}.",
                "reference": f"Reference {k}.",
            }
        )
        votes = []
        for c, pool in pools.items():
            dist = {str(v): float(p) for v, p in enumerate(pool.dist[k])}
            votes += [
                {
                    "judge": j,
                    "criterion": c,
                    "score": float(np.argmax(pool.dist[k])),
                    "distribution": dist,
                }
                for j in ("a", "b")
            ]
        verdicts.append(
            {
                "id": item,
                "status": "scored",
                "rubric": "mirage-mg",
                "jury": "sim",
                "provenance": "sim",
                "votes": votes,
                "scores": {c: float(pool.score[k]) for c, pool in pools.items()},
            }
        )
        truth[item] = {c: int(pool.human[k]) for c, pool in pools.items()}
    (folder / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (folder / "judged.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    means = {c: float(pool.human.mean()) for c, pool in pools.items()}
    return folder, truth, means


def jurybox(*args):
    return subprocess.run([JURYBOX, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_active_labels_end_to_end(benchmark, browser):
    folder, truth, means = benchmark
    items, judged, labels = folder / "items.jsonl", folder / "judged.jsonl", folder / "l.jsonl"
    offered = []
    server = labelling(
        items,
        judged,
        labels,
        free_port(),
        "--goal",
        "benchmark-mean",
        "--target-width",
        "0.8",
        "--seed",
        "3",
        "--design",
        "active",
    )
    with server as (url, _), httpx.Client(base_url=url, timeout=30) as http:
        while (got := http.get("/api/next", params={"rater": "ann"})).status_code == 200:
            item = got.json()
            assert "chosen for the benchmark mean" in item["why"], item["why"]
            offered.append(item["id"])
            saved = http.post(
                "/api/labels", json={"id": item["id"], "rater": "ann", "labels": truth[item["id"]]}
            )
            assert saved.status_code == 200, saved.text
            assert len(offered) <= 300
            if len(offered) == 12:  # what the page shows of it, in a real browser
                page = browser.new_page(viewport={"width": 1100, "height": 900})
                page.goto(f"{url}/?rater=ann")
                page.wait_for_selector("#why:has-text('chosen for the benchmark mean')")
                page.wait_for_selector("#estimate:has-text('from 12 labels')")
                estimate = page.inner_text("#estimate")
                assert all(f"{c}: mean" in estimate for c in CRITERIA), estimate
                assert estimate.count("valid whenever you stop") == len(CRITERIA), estimate
                page.screenshot(path=str(folder / "page.png"), full_page=True)
                page.close()
        assert got.status_code == 204
        done = http.get("/api/progress").json()
    # The page stopped at the target: every criterion's confidence sequence within +-0.8 (on a
    # 0-4 scale: a 300-item pool chosen actively is small for a sequence); they hold the pool's
    # true means.
    sequences = {c: done["mean"][c]["sequence"] for c in CRITERIA}
    assert done["goal_met"] and all(s["half_width"] <= 0.8 for s in sequences.values())
    assert "agreement" not in done and len(offered) == len(set(offered))
    for c, got_c in sequences.items():
        assert got_c["low"] <= means[c] <= got_c["high"], (c, got_c, means[c])
        assert got_c["labelled"] == len(offered)
    lines = [json.loads(line) for line in labels.read_text().splitlines()]
    assert [line["id"] for line in lines] == offered
    positions = [line["selection"]["position"] for line in lines]
    assert positions == sorted(positions)
    assert all(
        line["selection"]["strategy"] == "benchmark-mean"
        and 0.1 <= line["selection"]["probability"] <= 1
        for line in lines
    )

    ppi = jurybox("agree", labels, judged, "--ppi", "--json")
    assert ppi.returncode == 0, ppi.stderr
    result = json.loads(ppi.stdout)
    assert result["design"] == "active" and result["pool"] == 300
    for c in CRITERIA:
        e = result["criteria"][c]
        assert e["labelled"] == len(lines) and e["visited"] == positions[-1] + 1
        assert e["estimate"] == pytest.approx(done["mean"][c]["estimate"])
        assert abs(e["estimate"] - means[c]) <= 4 * e["half_width"] / 1.96, (e, means[c])
    text = jurybox("agree", labels, judged, "--ppi")
    assert text.returncode == 0 and "accuracy: mean" in text.stdout, text.stderr

    for refused in (
        jurybox("agree", labels, judged),
        jurybox("calibrate", labels, judged, "--out", folder / "map.json"),
    ):
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "chosen actively" in refused.stderr and "agree --ppi" in refused.stderr

    plan = jurybox(
        "labels",
        "plan",
        labels,
        judged,
        "--goal",
        "benchmark-mean",
        "--target-width",
        "0.1",
        "--json",
    )
    assert plan.returncode == 0, plan.stderr
    for c, row in json.loads(plan.stdout)["criteria"].items():
        assert row["labelled"] == len(lines), (c, row)
        assert row["further"] == max(0, row["needed"] - row["labelled"]), (c, row)
        assert "confidence sequence" in row["sequence"]["basis"], row  # what the page needs
    wrong = jurybox("labels", "plan", labels, judged, "--target-width", "0.7")
    assert wrong.returncode == 2 and "between 0 and 0.5" in wrong.stderr
