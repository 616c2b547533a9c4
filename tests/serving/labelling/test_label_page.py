"""The labelling page for real: `jurybox label` in its own process, as a user starts it, over
what `jurybox judge` wrote for the example predictions (with the tiny jury's recorded real
answers: the replay jury; the page is the subject, not the models), driven by keyboard in a
real headless Chromium (Debian's `chromium` package, driven by Playwright from PyPI; no browser
download). Then `jurybox agree` and `jurybox calibrate` read the labels file it wrote."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from service_helpers import free_port
from service_helpers import labelling as _labelling

pytestmark = pytest.mark.models

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "mirage_mg.jsonl"
JURYBOX = str(Path(sys.executable).with_name("jurybox"))
CRITERIA = ["accuracy", "relevance", "completeness", "parsimony"]  # mirage-mg's, in order


@pytest.fixture(scope="module")
def judged(tmp_path_factory, replay_jury) -> Path:
    """The example predictions judged by the tiny jury's recorded answers, as the README's first
    command judges them with the models."""
    out = tmp_path_factory.mktemp("judged") / "judged.jsonl"
    run = subprocess.run(
        [
            JURYBOX,
            "judge",
            str(EXAMPLES),
            "--rubric",
            "mirage-mg",
            "--jury",
            str(replay_jury),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def labelling(judged: Path, labels: Path, port: int, *options: str, **kw):
    """`jurybox label VERDICTS` over the example predictions (service_helpers.labelling): the
    predictions file is the one the verdicts' manifest names (#36)."""
    return _labelling(None, judged, labels, port, *options, **kw)


def shown(page) -> str:
    """The id of the item the page shows."""
    page.wait_for_selector("#why:has-text('item ')")
    return page.inner_text("#why").split(":")[0].removeprefix("item ").strip()


def label_by_keyboard(page, keys: list[str]) -> str:
    """Press ``keys`` on the item shown, then Enter; returns the item's id once the page shows
    its judges' votes (saved) and the next item."""
    item = shown(page)
    for key in keys:
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "id => document.getElementById('last').innerText.startsWith('item ' + id + '\\n')", arg=item
    )
    return item


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_labelling_by_keyboard_survives_reload_and_sigkill_with_two_raters(
    judged, browser, tmp_path
):
    labels = tmp_path / "human.jsonl"
    port = free_port()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    with labelling(judged, labels, port, "--overlap", "0.5") as (url, proc):
        page.goto(f"{url}/?rater=ana")
        # Blind: no judge's vote is on the page before the label is saved.
        shown(page)
        assert "smollm2-135m" not in page.inner_text("body")
        first = label_by_keyboard(page, ["3", "4", "2", "2"])  # a digit per criterion
        assert "smollm2-135m" in page.inner_text("#last")  # revealed once labelled
        # Tab and the arrows move between criteria: set 2-4, go back up, set the first.
        second = label_by_keyboard(
            page, ["Tab", "1", "1", "1", "ArrowUp", "ArrowUp", "ArrowUp", "0"]
        )
        third = label_by_keyboard(page, ["4", "4", "4", "4"])
        saved = lines(labels)
        assert [(x["id"], x["rater"]) for x in saved] == [
            (first, "ana"),
            (second, "ana"),
            (third, "ana"),
        ]
        assert [saved[0][c] for c in CRITERIA] == [3, 4, 2, 2]
        assert [saved[1][c] for c in CRITERIA] == [0, 1, 1, 1]
        assert all(x["selection"]["strategy"] == "uniform" for x in saved)
        # Reload: nothing lost, no labelled item offered again.
        page.reload()
        fourth = shown(page)
        assert fourth not in (first, second, third) and len(lines(labels)) == 3
        for key in ["1", "1"]:  # half labelled when the server dies
            page.keyboard.press(key)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with labelling(judged, labels, port, "--overlap", "0.5") as (url, proc):
        page.reload()
        assert shown(page) == fourth  # the unsaved label is lost, and only that
        assert label_by_keyboard(page, ["2", "2", "2", "2"]) == fourth
        # u withdraws the last label: the item comes back, relabelled it wins.
        page.keyboard.press("u")
        page.wait_for_selector(f"#last:has-text('label on item {fourth} withdrawn')")
        assert shown(page) == fourth
        assert label_by_keyboard(page, ["3", "3", "3", "3"]) == fourth
        # s skips with a reason.
        skipped = shown(page)
        page.keyboard.press("s")
        page.keyboard.type("I cannot judge pest control")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "id => !document.getElementById('why').innerText.startsWith('item ' + id + ':')",
            arg=skipped,
        )
        # A second rater is routed to an item ana labelled (overlap), so the two can be compared.
        ben = browser.new_page(viewport={"width": 1280, "height": 900})
        ben.goto(f"{url}/?rater=ben")
        shared = shown(ben)
        assert shared in (first, second, third, fourth)
        assert "labelled by another rater too" in ben.inner_text("#why")
        # An off-scale value is refused on the page, naming the criterion; nothing is written.
        before = len(lines(labels))
        for key in ["9", "1", "1", "1", "Enter"]:
            ben.keyboard.press(key)
        ben.wait_for_selector("#error:visible")
        assert "labels.accuracy: 9 is not on the scale" in ben.inner_text("#error")
        assert len(lines(labels)) == before and shown(ben) == shared
        # Fixed with the arrows (4 -> 3) and saved.
        for key in ["ArrowUp", "ArrowUp", "ArrowUp", "4", "ArrowUp", "ArrowLeft"]:
            ben.keyboard.press(key)
        ben.keyboard.press("Enter")
        ben.wait_for_function(
            "id => document.getElementById('last').innerText.startsWith('item ' + id + '\\n')",
            arg=shared,
        )
        ben.screenshot(path=str(tmp_path / "labelling.png"), full_page=True)
        if os.environ.get("JURYBOX_SCREENSHOT"):  # how docs/labelling.png is made
            shutil.copy(tmp_path / "labelling.png", os.environ["JURYBOX_SCREENSHOT"])
        progress = httpx.get(f"{url}/api/progress").json()
    assert (tmp_path / "labelling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert progress["labels_by_rater"] == {"ana": 4, "ben": 1}
    # Every saved label is in the file once (the latest line per item and rater).
    from jurybox.calibration import load_human_labels

    read = load_human_labels(labels)
    pairs = sorted(zip(read.ids, read.raters))
    assert pairs == sorted(
        {(first, "ana"), (second, "ana"), (third, "ana"), (fourth, "ana"), (shared, "ben")}
    )
    ana_fourth = [i for i, r in enumerate(read.raters) if r == "ana" and read.ids[i] == fourth]
    assert read.values["accuracy"][ana_fourth[0]] == 3  # the relabel won
    # agree and calibrate read the file as it is.
    agree = subprocess.run(
        [JURYBOX, "agree", str(labels), str(judged)], capture_output=True, text=True, timeout=300
    )
    assert agree.returncode == 0, agree.stdout + agree.stderr
    assert "accuracy" in agree.stdout
    # (the tiny judges score almost every item alike: their logprob-expected scores vary)
    calibrate = subprocess.run(
        [
            JURYBOX,
            "calibrate",
            str(labels),
            str(judged),
            "-o",
            str(tmp_path / "map.yaml"),
            "--folds",
            "2",
            "--value",
            "expected",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert calibrate.returncode == 0, calibrate.stdout + calibrate.stderr
    assert (tmp_path / "map.yaml").exists()


def test_the_api_refuses_bad_labels_naming_the_field_and_writes_nothing(judged, tmp_path):
    labels = tmp_path / "human.jsonl"
    with labelling(judged, labels, free_port()) as (url, _):
        item = httpx.get(f"{url}/api/next", params={"rater": "ana"}).json()
        assert [c["name"] for c in item["criteria"]] == CRITERIA
        assert [p["value"] for p in item["criteria"][0]["points"]] == [0, 1, 2, 3, 4]
        ok = {"id": item["id"], "rater": "ana", "labels": {"accuracy": 2}}
        for body, status, field in [
            ({**ok, "labels": {"accuracy": 7}}, 422, "labels.accuracy"),
            ({**ok, "labels": {"acuracy": 2}}, 422, "labels.acuracy"),
            ({**ok, "labels": {}}, 422, "labels"),
            ({**ok, "id": "nope"}, 404, "id"),
            ({k: v for k, v in ok.items() if k != "rater"}, 422, "rater"),
            ({**ok, "rater": " "}, 422, "rater"),
        ]:
            r = httpx.post(f"{url}/api/labels", json=body)
            assert r.status_code == status and r.json()["error"]["field"] == field, r.text
        r = httpx.post(
            f"{url}/api/labels", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
        assert httpx.get(f"{url}/api/next").status_code == 422  # no rater
        assert not lines(labels)
        assert httpx.post(f"{url}/api/undo", json={"rater": "ana"}).status_code == 404
        saved = httpx.post(f"{url}/api/labels", json=ok).json()
        assert (
            saved["saved"]["accuracy"] == 2
            and "smollm2-135m" in saved["judges"]["accuracy"]["votes"]
        )
        assert len(lines(labels)) == 1
        # A second server on the same file is refused (one writer).
        second = subprocess.run(
            [
                JURYBOX,
                "label",
                str(EXAMPLES),
                str(judged),
                "--labels",
                str(labels),
                "--port",
                str(free_port()),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 2
        assert "being written by another labelling server" in second.stderr


def test_a_token_guards_the_api_and_another_host_needs_one(judged, tmp_path):
    labels = tmp_path / "human.jsonl"
    with labelling(
        judged, labels, free_port(), "--token-env", "LABEL_TOKEN", env={"LABEL_TOKEN": "s3cret"}
    ) as (url, _):
        assert httpx.get(f"{url}/api/progress").status_code == 401
        good = {"Authorization": "Bearer s3cret"}
        assert httpx.get(f"{url}/api/progress", headers=good).status_code == 200
        assert (
            httpx.get(f"{url}/api/progress", headers={"Authorization": "Bearer nope"}).status_code
            == 401
        )
        assert httpx.get(f"{url}/").status_code == 200  # the page asks for the token itself
    exposed = subprocess.run(
        [
            JURYBOX,
            "label",
            str(EXAMPLES),
            str(judged),
            "--labels",
            str(tmp_path / "other.jsonl"),
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert exposed.returncode == 2 and "protect it with --token-env" in exposed.stderr
