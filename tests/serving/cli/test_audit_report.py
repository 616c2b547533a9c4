"""`jurybox audit --html`: the report, opened in headless chromium (Debian's, through
Playwright), shows every finding of the JSON with its plot, flagged ones marked; for scored
verdicts (length, self-preference, dependence) and pairwise ones (position)."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from jurybox.serving.cli import app

CRITERIA = ("accuracy", "relevance", "completeness", "parsimony")


def _scored(tmp_path):
    rng = np.random.default_rng(5)
    preds, verdicts, humans = [], [], []
    for k in range(120):
        words = int(rng.integers(20, 400))
        writer = ["Qwen3-8B", "Llama-3-8B", "Phi-4"][k % 3]
        human = float(np.clip(round(2 + rng.normal(0, 1)), 0, 4))
        scores = {
            "qwen": human + (1.0 if writer.startswith("Qwen") else 0.0),
            "llama": human + 0.6 * words / 100 - 1,
            "phi": human,
        }
        scores = {j: float(np.clip(round(v + rng.normal(0, 0.4)), 0, 4)) for j, v in scores.items()}
        preds.append(
            {
                "id": f"q{k}",
                "question": "Q?",
                "reference": "R.",
                "model": writer,
                "response": " ".join(["word"] * words),
            }
        )
        votes = [
            {"judge": j, "criterion": c, "score": s} for c in CRITERIA for j, s in scores.items()
        ]
        verdicts.append(
            {
                "id": f"q{k}",
                "status": "scored",
                "rubric": "mirage-mg",
                "jury": "sim",
                "provenance": "sim",
                "votes": votes,
                "scores": dict.fromkeys(CRITERIA, sum(scores.values()) / 3),
            }
        )
        humans.append({"id": f"q{k}", "rater": "h", "accuracy": human})
    for name, rows in (("p.jsonl", preds), ("v.jsonl", verdicts), ("h.jsonl", humans)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [
        "audit",
        str(tmp_path / "v.jsonl"),
        "--predictions",
        str(tmp_path / "p.jsonl"),
        "--human",
        str(tmp_path / "h.jsonl"),
        "--resamples",
        "200",
        "--family",
        "qwen=qwen",
        "--family",
        "llama=llama",
        "--family",
        "phi=phi",
    ]


def _pairwise(tmp_path):
    rng = np.random.default_rng(6)
    verdicts = []
    for k in range(80):
        truth = float(rng.random() < 0.5)  # 1: A better
        votes = []
        for order in ("ab", "ba"):
            # "first" always picks the answer shown first; "fair" picks the better one.
            first_share = 1.0 if order == "ab" else 0.0
            for judge, share in (("first", first_share), ("fair", truth)):
                shown = share if order == "ab" else 1.0 - share
                votes.append(
                    {
                        "judge": judge,
                        "criterion": "better",
                        "score": share,
                        "label": "1" if shown == 1.0 else "2",
                        "order": order,
                    }
                )
        verdicts.append(
            {
                "id": f"p{k}",
                "status": "scored",
                "rubric": "pairwise",
                "jury": "sim",
                "provenance": "sim",
                "votes": votes,
                "scores": {"better": 0.5},
                "winner": "tie",
                "p_a": None,
            }
        )
    (tmp_path / "pw.jsonl").write_text("".join(json.dumps(r) + "\n" for r in verdicts))
    return ["audit", str(tmp_path / "pw.jsonl")]


def _shown(browser, html, tmp_path, name):
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(html.as_uri())
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    findings = page.locator(".finding")
    rows = [
        (
            findings.nth(i).locator("span").inner_text(),
            "flagged" in findings.nth(i).get_attribute("class"),
            findings.nth(i).locator("svg circle").count(),
        )
        for i in range(findings.count())
    ]
    page.close()
    return rows


def test_the_html_report_shows_each_finding_with_its_plot(browser, tmp_path):
    args = _scored(tmp_path)
    as_json = CliRunner().invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    html = tmp_path / "audit.html"
    run = CliRunner().invoke(app, [*args, "--html", str(html)])
    assert run.exit_code == 0 and f"wrote {html}" in run.stdout
    rows = _shown(browser, html, tmp_path, "audit")
    expected = [*data["length"], *data["self_preference"], *data["dependence"]]
    assert len(rows) == len(expected)
    by_text = {text.removeprefix("! "): (flagged, dots) for text, flagged, dots in rows}
    for finding in expected:
        flagged, dots = by_text[finding["finding"]]
        assert flagged == finding["flagged"]
        assert dots == (0 if finding.get("reason") else 1)  # the estimate's dot, when defined
    # The biases put in are there, flagged: llama's length, qwen's own family.
    assert any(
        f["judge"] == "llama" and f["criterion"] == "accuracy" and f["flagged"]
        for f in data["length"]
    )
    assert any(
        f["judge"] == "qwen" and f["criterion"] == "accuracy" and f["flagged"]
        for f in data["self_preference"]
    )
    assert not any(
        f["judge"] == "phi" and f["flagged"]
        for f in data["self_preference"]
        if f["criterion"] == "accuracy"
    )


def test_the_html_report_of_pairwise_verdicts_shows_position_bias(browser, tmp_path):
    args = _pairwise(tmp_path)
    html = tmp_path / "pw.html"
    run = CliRunner().invoke(app, [*args, "--html", str(html)])
    assert run.exit_code == 0, run.output
    rows = {
        text.split(" ")[1] if text.startswith("!") else text.split(" ")[0]: flagged
        for text, flagged, _ in _shown(browser, html, tmp_path, "pairwise")
    }
    assert rows == {"first": True, "fair": False}
