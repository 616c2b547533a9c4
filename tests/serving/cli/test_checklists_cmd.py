"""``jurybox checklists draft`` and ``import``: the files they write load as items with
checklists, a judge's bad answer is a row with an error (never an empty checklist), and import
errors name the line and the point.

The drafting judge here is a fake backend registered through the registry (as
tests/exploit_helpers.py registers its judges), answering by what the question asks for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from jurybox.judges.backends.protocol import Generation
from jurybox.rubrics import load_rubric
from jurybox.rubrics.points import read_points
from jurybox.serving.cli import app
from jurybox.serving.runs.checklist_draft import (
    DraftPrompt,
    load_draft_prompt,
    parse_draft,
    shipped_prompt_path,
)
from jurybox.serving.runs.predictions import read_predictions

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"

GOOD = {
    "checklist": [
        {"criterion": "Names the cause.", "points": 6, "tag": "essential"},
        {"criterion": "Gives a first step.", "points": 3, "tag": "important"},
        {"criterion": "Recommends something harmful.", "points": -5, "tag": "essential"},
    ]
}


class Drafter:
    """Answers a draft by its question: 'BAD' (no checklist), 'FAIL' (an error), else GOOD."""

    seen: ClassVar[list] = []

    def __init__(self, spec):
        self.name = spec.name
        self.max_tokens = spec.sampling.max_tokens

    def generate(self, requests, cancelled=None):
        out = []
        for request in requests:
            Drafter.seen.append((request, self.max_tokens))
            prompt = request.messages[-1]["content"]
            if "BAD" in prompt:
                out.append(Generation(text='Sure! {"checklist": []}'))
            elif "FAIL" in prompt:
                out.append(Generation(error="prompt too long for the model"))
            else:
                out.append(Generation(text="Here it is: " + json.dumps(GOOD)))
        return out

    def close(self):
        pass


@pytest.fixture
def drafter(monkeypatch, tmp_path):
    """A jury file whose one judge is the fake drafter (registered for this test only)."""
    from jurybox.judges.backends import registry

    monkeypatch.setattr(registry, "_registered", {})
    registry.register("drafter-for-tests", Drafter)
    Drafter.seen = []
    jury = tmp_path / "drafters.yaml"
    jury.write_text(
        "name: drafters\njudges:\n"
        "  - {name: drafter, model: none, backend: drafter-for-tests}\n"
        "  - {name: second, model: none, backend: drafter-for-tests}\n"
    )
    return jury


def run(*args):
    return CliRunner().invoke(app, ["checklists", *map(str, args)])


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_generated_checklist_file_loads(drafter, tmp_path):
    items = tmp_path / "items.jsonl"
    source = rows_of(EXAMPLES / "mirage_mg.jsonl")[:3]
    source[1]["question"] = "BAD " + source[1]["question"]
    source[2]["question"] = "FAIL " + source[2]["question"]
    source.append({"id": "no-question", "reference": "R."})
    items.write_text("".join(json.dumps(r) + "\n" for r in source) + "[1, 2]\n")
    out = tmp_path / "drafted.jsonl"
    result = run("draft", items, "--jury", drafter, "--out", out, "--judge", "second")
    assert result.exit_code == 0, result.output
    assert "1 of 5 item(s) drafted by second (3 points), 4 with an error" in result.output
    rows = rows_of(out)
    assert len(rows) == 5
    # the drafted row: the item as it was (every field kept) with its checklist, which loads
    drafted = rows[0]
    assert {k: v for k, v in drafted.items() if k != "checklist"} == source[0]
    points = read_points(drafted["checklist"], "drafted")
    assert [(p.text, p.points, p.tag) for p in points] == [
        (p["criterion"], p["points"], p["tag"]) for p in GOOD["checklist"]
    ]
    # and the file loads as `jurybox judge FILE --rubric checklist` reads it: the drafted item
    # with its points, each other row rejected by name (it has no checklist)
    read = read_predictions(out, load_rubric("checklist"))
    assert [it.id for it in read.items] == [source[0]["id"]]
    assert read.items[0].checklist == points
    assert [(e.row, e.field) for e in read.errors] == [(2, "checklist"), (3, "checklist"),
                                                       (4, "question"), (5, "id")]  # fmt: skip
    # a bad answer, a failed judge, a row missing the question and an unreadable row: each an
    # error saying why, never an empty checklist
    for row in rows[1:]:
        assert "checklist" not in row
        assert row["error"]
    assert "no checklist" in rows[1]["error"] and rows[1]["raw"] == 'Sure! {"checklist": []}'
    assert "the judge failed: prompt too long" in rows[2]["error"]
    assert "question: missing" in rows[3]["error"] and rows[3]["id"] == "no-question"
    assert "row 5" in rows[4]["error"]
    # the judge was asked three times (never for the rows without a question), under the
    # prompt's schema, with the drafting --max-tokens, and never shown the response
    assert len(Drafter.seen) == 3
    for request, max_tokens in Drafter.seen:
        assert request.schema == load_draft_prompt().answer_schema()
        assert max_tokens == 1024
        text = "".join(m["content"] for m in request.messages)
        assert source[0]["response"] not in text
        assert request.pieces is not None  # the item's text is marked as the item's
    assert source[0]["reference"] in "".join(m["content"] for m in Drafter.seen[0][0].messages)


def test_draft_does_not_overwrite_a_reviewed_file(drafter, tmp_path):
    out = tmp_path / "drafted.jsonl"
    out.write_text("my edits\n")
    result = run("draft", EXAMPLES / "mirage_mg.jsonl", "--jury", drafter, "--out", out)
    assert result.exit_code == 2
    assert "--overwrite" in result.output
    assert out.read_text() == "my edits\n"
    again = run("draft", EXAMPLES / "mirage_mg.jsonl", "--jury", drafter, "-o", out, "--overwrite")
    assert again.exit_code == 0, again.output
    assert len(rows_of(out)) == 6


def test_draft_names_an_unknown_judge(drafter, tmp_path):
    result = run(
        "draft", EXAMPLES / "mirage_mg.jsonl", "-j", drafter, "--judge", "nobody",
        "-o", tmp_path / "x.jsonl",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "no judge 'nobody' in jury drafters" in result.output


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("no json here", "no JSON object"),
        ('{"points": []}', 'no "checklist" list'),
        ('{"checklist": [{"criterion": "a", "points": 2, "tag": "essential"}]}', "1 point(s)"),
        (json.dumps({"checklist": [{**p, "points": -abs(p["points"])} for p in GOOD["checklist"]]}), "no positive point"),
        (json.dumps({"checklist": [*GOOD["checklist"][:2], {"criterion": "c", "points": 0, "tag": "optional"}]}), "checklist[2]"),
        (json.dumps({"checklist": [*GOOD["checklist"][:2], {"criterion": "c", "points": 11, "tag": "optional"}]}), "checklist[2]: points 11"),
        (json.dumps({"checklist": [*GOOD["checklist"][:2], {"criterion": "c", "points": 1}]}), "checklist[2]: no tag"),
        (json.dumps({"checklist": [*GOOD["checklist"][:2], {"criterion": "c", "points": 1, "tag": "vital"}]}), "checklist[2]"),
    ],
)  # fmt: skip
def test_a_draft_that_is_not_a_checklist_is_refused_saying_why(answer, why):
    with pytest.raises(ValueError, match=None) as caught:
        parse_draft(answer, load_draft_prompt())
    assert why in str(caught.value)


def test_the_last_checklist_object_is_read_after_words_around_it():
    text = 'Draft: {"checklist": "first"} then ' + json.dumps(GOOD) + " done {"
    assert len(parse_draft(text, load_draft_prompt())) == 3


def test_show_prompt_and_a_user_prompt_that_does_not_render(tmp_path):
    shown = run("draft", "unused.jsonl", "--show-prompt")
    assert shown.exit_code == 0
    assert shown.output == shipped_prompt_path().read_text()
    mine = tmp_path / "mine.yaml"
    mine.write_text("template: 'Checklist for {{ question }} by {{ answer }}'\n")
    bad = run("draft", "unused.jsonl", "--show-prompt", "--prompt", mine)
    assert bad.exit_code == 2
    assert "answer" in bad.output and "mine.yaml" in bad.output
    assert (
        DraftPrompt(template="{{ question }}").answer_schema()["properties"]["checklist"][
            "minItems"
        ]
        == 3
    )


def test_import_writes_items_that_carry_healthbench_s_points(tmp_path):
    out = tmp_path / "hb.items.jsonl"
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"id": "made-up-0001", "response": "Press on it."}) + "\n")
    result = run("import", EXAMPLES / "healthbench-mini.jsonl", "-o", out, "--responses", answers)
    assert result.exit_code == 0, result.output
    assert "2 item(s) have no response yet" in result.output
    rows = rows_of(out)
    source = rows_of(EXAMPLES / "healthbench-mini.jsonl")
    assert [r["id"] for r in rows] == [s["prompt_id"] for s in source]
    assert rows[0]["response"] == "Press on it."
    for row, hb in zip(rows, source, strict=True):
        assert read_points(row["checklist"], row["id"]) == read_points(hb["rubrics"], "hb")


def test_import_errors_name_the_line_and_point_and_write_nothing(tmp_path):
    source = rows_of(EXAMPLES / "healthbench-mini.jsonl")
    source[2]["rubrics"][3]["points"] = 0
    path = tmp_path / "hb.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in source))
    out = tmp_path / "out.jsonl"
    result = run("import", path, "-o", out)
    assert result.exit_code == 2
    assert "line 3: rubrics[3]" in result.output
    assert not out.exists()


@pytest.mark.models
def test_draft_with_the_tiny_jury_writes_a_file_that_loads(tmp_path):
    """SmolLM2 (the tiny jury's first judge) drafts for one item: its drafts may be poor (and
    160 tokens may cut one), so only what the file holds is checked: a checklist that loads,
    or an error saying why there is none."""
    from jurybox.judges import load_jury_spec
    from jurybox.serving.runs.checklist_draft import draft_file

    out = tmp_path / "drafted.jsonl"
    report = draft_file(
        EXAMPLES / "mirage_mg.jsonl", out, load_jury_spec("tiny"), limit=1, max_tokens=160
    )
    rows = rows_of(out)
    assert [r["id"] for r in rows] == ["mg-001"]
    assert report.rows == 1 and report.drafted + report.errors == 1
    prompt = load_draft_prompt()
    for row in rows:
        if "checklist" in row:
            points = read_points(row["checklist"], row["id"])
            assert prompt.min_points <= len(points) <= prompt.max_points
            assert any(p.points > 0 for p in points)
            assert "error" not in row
        else:
            assert row["error"] and "raw" in row


@pytest.mark.parametrize("field", ["response", "response_a", "response_b"])
def test_a_drafting_prompt_that_reads_the_response_is_refused(tmp_path, field):
    mine = tmp_path / "peeks.yaml"
    mine.write_text(
        f"inputs: [question]\noptional_inputs: [{field}]\n"
        f"template: 'Checklist for {{{{ question }}}} given {{{{ {field} }}}}'\n"
    )
    bad = run("draft", "unused.jsonl", "--show-prompt", "--prompt", mine)
    assert bad.exit_code == 2
    assert "peeks.yaml" in bad.output and field in bad.output
    assert "never sees the response" in bad.output
