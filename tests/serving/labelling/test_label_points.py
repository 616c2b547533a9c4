"""The labelling page's point-by-point view (#63): `jurybox label` in its own process, as a user
starts it, over checklist verdicts (built by `units`/`assemble` from made-up votes:
checklist_helpers), in a real headless Chromium (Debian's `chromium`, driven by Playwright from
PyPI). Each point of an item is a row (its text, points, tag, the jury's met) with yes/no; the
labels file gets the ``pK`` columns, which `jurybox agree` reads per point."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from checklist_helpers import checklist_item, judged_records, write_jsonl
from service_helpers import free_port, labelling

from jurybox.serving.labelling.start import start_session
from jurybox.serving.runs.agree import agreement_with_humans
from jurybox.serving.runs.inputs import judged_items

WEIGHTS = {"a": [5, -4, 3], "b": [2, 1], "c": [4, 2, 2, -1]}
VOTES = {
    "x": {"a": [1, 0, 1], "b": [0, 1], "c": [1, 1, 0, 0]},
    "y": {"a": [1, 1, 0], "b": [0, 1], "c": [1, 0, 0, 1]},
}


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    """Three items with checklists (a predictions file) and the checklist rubric's verdicts."""
    items = [checklist_item(i, w) for i, w in WEIGHTS.items()]
    rows = [it.model_dump(mode="json", include={"id", "question", "response"}) for it in items]
    for row, it in zip(rows, items):
        row["checklist"] = [p.shown() for p in it.checklist]
    return {
        "items": write_jsonl(tmp_path / "items.jsonl", rows),
        "judged": write_jsonl(tmp_path / "judged.jsonl", judged_records(items, VOTES)),
        "labels": tmp_path / "labels.jsonl",
    }


def shown(page) -> str:
    page.wait_for_selector("#why:has-text('item ')")
    return page.inner_text("#why").split(":")[0].removeprefix("item ").strip()


def saved(page, item: str) -> None:
    page.wait_for_function(
        "id => document.getElementById('last').innerText.startsWith('item ' + id + '\\n')", arg=item
    )


def test_point_by_point_view_labels_each_point(files, browser, tmp_path):
    port = free_port()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    with labelling(files["items"], files["judged"], files["labels"], port, "--show-judges") as (
        url,
        _,
    ):
        page.goto(f"{url}/?rater=ana")
        item = shown(page)
        rows = page.locator("#criteria .criterion")
        assert rows.count() == len(WEIGHTS[item])
        for k, weight in enumerate(WEIGHTS[item]):
            row = rows.nth(k).inner_text()
            assert f"p{k + 1}" in row and f"point {k + 1} of {item}" in row
            assert f"{weight} points" in row
            assert ("a pitfall" in row) == (weight < 0)
            assert "jury's met:" in row
            assert [b.strip() for b in rows.nth(k).locator("button").all_inner_texts()] == [
                "yes",
                "no",
            ]
        assert "essential" in rows.nth(0).inner_text()
        # Click yes on p1, no on p2 (and the others yes), then save.
        answers = ["yes", "no"] + ["yes"] * (len(WEIGHTS[item]) - 2)
        for k, answer in enumerate(answers):
            rows.nth(k).locator("button", has_text=answer).click()
        assert "chosen" in (rows.nth(1).locator("button", has_text="no").get_attribute("class"))
        page.screenshot(path=str(tmp_path / "points.png"), full_page=True)
        page.keyboard.press("Enter")
        saved(page, item)
        # The saved table shows the rater's and the jury's met per point.
        last = page.inner_text("#last")
        page.screenshot(path=str(tmp_path / "points-saved.png"), full_page=True)
        assert all(f"p{k + 1}" in last for k in range(len(answers)))
        line = json.loads(files["labels"].read_text().splitlines()[0])
        assert line["id"] == item and line["rater"] == "ana"
        assert line["p1"] == 1 and line["p2"] == 0
        assert all(line[f"p{k + 1}"] == 1 for k in range(2, len(answers)))
        # The keyboard moves between points: 1 (yes) / 2 (no) per point, focus moving down
        # (it stays on the last), then up one point to set it yes.
        second = shown(page)
        assert second != item
        for _ in WEIGHTS[second]:
            page.keyboard.press("2")
        page.keyboard.press("ArrowUp")
        page.keyboard.press("1")  # the last point but one: yes
        page.keyboard.press("Enter")
        saved(page, second)
        again = json.loads(files["labels"].read_text().splitlines()[1])
        n = len(WEIGHTS[second])
        assert [again[f"p{k + 1}"] for k in range(n)] == [0] * (n - 2) + [1, 0]
        # The API refuses a point the item does not have, naming it; nothing is written.
        bad = httpx.post(
            f"{url}/api/labels", json={"id": "b", "rater": "ana", "labels": {"p7": "yes"}}
        )
        assert bad.status_code == 422 and "p7" in bad.json()["error"]["message"]
        assert len(files["labels"].read_text().splitlines()) == 2
    page.close()
    # `jurybox agree` reads what the page wrote, per point.
    found = agreement_with_humans(files["labels"], files["judged"], resamples=20)
    assert found.report.criteria["met"].n_items == len(WEIGHTS[item]) + len(WEIGHTS[second])
    assert found.report.criteria["score"].n_items == 2


def test_point_by_point_refuses_what_it_has_no_estimate_for(files):
    judged = judged_items(files["items"], files["judged"])
    with pytest.raises(Exception, match="--target-width is not built for a checklist"):
        start_session(
            judged.items, judged.verdicts, judged.rubric, files["labels"], target_width=0.1
        )
    session = start_session(judged.items, judged.verdicts, judged.rubric, files["labels"])
    try:
        offered = session.next("ana")
        assert offered is not None
        # blind by default: no jury's met before the label
        assert all("jury_met" not in c["point"] for c in offered["criteria"])
        assert "checklist" not in offered["fields"]
        # once saved, the jury's met per point as it has it: c's p2 is x's yes and y's no
        got = session.save({"id": "c", "rater": "ana", "labels": {"p1": "yes", "p2": "no"}})
        assert got["judges"]["p2"]["jury"] == 0.5 and got["judges"]["p2"]["disagrees"]
        assert got["judges"]["p1"] == {"jury": 1.0, "votes": {"x": 1, "y": 1}, "disagrees": False}
        assert got["saved"]["p1"] == 1 and "p3" not in got["saved"]  # unlabelled: no column
    finally:
        session.store.close()
