"""agreement_report: structure, readable text, JSON-able dict, HTML with plots, no NaN."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from jurybox.calibration import agreement_report, cohen_kappa, krippendorff_alpha, simulate_judging


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("report")
    recs, humans = simulate_judging(120, labelled=80, unscored_rate=0.05, seed=3)
    out = tmp / "verdicts.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    hum = tmp / "humans.jsonl"
    hum.write_text("".join(json.dumps(r) + "\n" for r in humans))
    return hum, out


@pytest.fixture(scope="module")
def report(files):
    hum, out = files
    return agreement_report(
        hum,
        out,
        scales={"accuracy": [0, 1, 2, 3, 4], "supported": {"labels": {"yes": 1, "no": 0}}},
        n_resamples=200,
    )


def test_structure_and_values_match_direct_computation(report, files) -> None:
    acc = report.criteria["accuracy"]
    assert acc.n_items == 80 and acc.human_raters == ["h0", "h1"]
    assert set(acc.judge_human) == {"harsh", "lenient", "noisy", "jury"}
    assert set(acc.judge_judge) == {"harsh | lenient", "harsh | noisy", "lenient | noisy"}
    data = report.joined.criteria["accuracy"]
    keep = ~np.isnan(data.judges["harsh"])
    direct = krippendorff_alpha(
        np.vstack([data.judges["harsh"][keep], data.human_mean[keep]]), "interval"
    )
    stat = acc.judge_human["harsh"]["alpha"]
    assert stat.value == pytest.approx(direct.value)
    assert stat.ci[0] <= stat.value <= stat.ci[1]
    qwk = cohen_kappa(
        data.judges["harsh"][keep],
        data.human_reference[keep],
        weights="quadratic",
        labels=[0, 1, 2, 3, 4],
    )
    assert acc.judge_human["harsh"]["qwk"].value == pytest.approx(qwk.value)
    assert acc.missing["harsh"] > 0  # unscored votes on labelled items are counted


def test_to_dict_is_plain_json(report) -> None:
    text = json.dumps(report.to_dict(), allow_nan=False)
    assert '"judge_only"' in text and '"ci"' in text


def test_text_table(report) -> None:
    text = report.to_text()
    assert "human-human alpha[interval]" in text
    assert "judge-human" in text and "jury" in text and "judge-judge" in text
    assert "40 judged ids have no human label" in text
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)


def test_html_has_inline_svg_plots(report, tmp_path: Path) -> None:
    path = report.write_html(tmp_path / "r.html")
    html = path.read_text()
    assert html.count("<svg") >= 1 + 2 * 4 * 2  # forest + (confusion, reliability) x systems
    assert not re.search(r"\bnan\b", html, re.IGNORECASE)
