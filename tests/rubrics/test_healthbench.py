"""HealthBench's JSONL read as items with checklists, its errors naming the line and the point,
and the shipped example checklists (examples/checklists.jsonl) against the examples they are
for (examples/mirage_mg.jsonl)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jurybox.rubrics import load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.healthbench import (
    HealthBenchError,
    healthbench_item,
    join_responses,
    read_healthbench,
)
from jurybox.rubrics.item_fields import to_item
from jurybox.rubrics.points import read_points

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_import_healthbench_rows_as_is():
    source = rows_of(EXAMPLES / "healthbench-mini.jsonl")
    items = read_healthbench(EXAMPLES / "healthbench-mini.jsonl")
    assert [it["id"] for it in items] == [r["prompt_id"] for r in source]
    for row, item in zip(source, items, strict=True):
        *before, last = row["prompt"]
        assert item["question"] == last["content"]
        if before:
            for message in before:
                assert f"{message['role']}: {message['content']}" in item["context"]
        else:
            assert "context" not in item
        ideal = row["ideal_completions_data"]
        assert item.get("reference") == (ideal["ideal_completion"] if ideal else None)
        # the rubric's points as they are: text, points (pitfalls negative) and tags
        assert [(p["criterion"], p["points"], p["tags"]) for p in item["checklist"]] == [
            (p["criterion"], p["points"], p["tags"]) for p in row["rubrics"]
        ]
        assert read_points(item["checklist"], "x") == read_points(row["rubrics"], "x")
        assert item["example_tags"] == row["example_tags"]
    assert any(p["points"] < 0 for it in items for p in it["checklist"])


def _row(**change):
    row = rows_of(EXAMPLES / "healthbench-mini.jsonl")[1]
    row.update(change)
    return row


def test_import_errors_name_row_and_point(tmp_path):
    good = _row()
    bad_point = _row(prompt_id="b")
    bad_point["rubrics"][1]["points"] = "five"
    assistant_last = _row(prompt_id="c", prompt=good["prompt"][:2])
    lines = [
        json.dumps(good),
        json.dumps(bad_point),
        "",
        json.dumps(assistant_last),
        "{not json",
        json.dumps(_row()),  # good's id again
    ]
    path = tmp_path / "hb.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(HealthBenchError) as caught:
        read_healthbench(path)
    problems = caught.value.problems
    assert len(problems) == 4
    assert problems[0].startswith("line 2: rubrics[1]")
    assert problems[1].startswith("line 4: prompt[1]: the last message must be the user's")
    assert problems[2].startswith("line 5: not JSON")
    assert problems[3].startswith("line 6: prompt_id 'made-up-0002' is line 1's too")
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"prompt": []}, "prompt"),
        ({"prompt": [{"role": "user", "content": ""}]}, "prompt[0].content"),
        ({"prompt": [{"role": "doctor", "content": "hi"}]}, "prompt[0].role"),
        ({"ideal_completions_data": "text"}, "ideal_completions_data"),
        ({"rubrics": [{"criterion": "x", "points": 0}]}, "rubrics[0]"),
        ({"rubrics": [{"points": 3}]}, "rubrics[0]"),
    ],
)
def test_each_bad_field_is_named(change, field):
    with pytest.raises(InputError, match="^line 7: " + re.escape(field)):
        healthbench_item(_row(**change), "line 7", 7)


def test_a_row_without_rubrics_is_an_error_not_an_empty_checklist():
    row = _row()
    del row["rubrics"]
    with pytest.raises(InputError, match="line 1: rubrics: missing"):
        healthbench_item(row, "line 1", 1)


def test_responses_join_by_id_and_unknown_ids_are_errors():
    items = read_healthbench(EXAMPLES / "healthbench-mini.jsonl")
    joined, missing = join_responses(items, [{"id": items[0]["id"], "response": "Press."}], "r")
    assert joined[0]["response"] == "Press." and "response" not in joined[1]
    assert missing == len(items) - 1
    assert "response" not in items[0]  # the rows given are not changed
    with pytest.raises(InputError, match="not in the file"):
        join_responses(items, [{"id": "nobody", "response": "x"}], "r")


def test_examples_checklists_match_example_ids():
    examples = rows_of(EXAMPLES / "mirage_mg.jsonl")
    checklists = rows_of(EXAMPLES / "checklists.jsonl")
    assert [r["id"] for r in checklists] == [r["id"] for r in examples]
    for example, row in zip(examples, checklists, strict=True):
        # the same rows, a checklist added
        assert {k: v for k, v in row.items() if k != "checklist"} == example
        points = read_points(row["checklist"], row["id"])
        assert 3 <= len(points) <= 6
        assert any(p.points > 0 for p in points)
        assert any(p.points < 0 for p in points)  # one pitfall each
        assert all(p.tag is not None for p in points if p.points > 0)
        # and each row is an item of every shipped checklist rubric, as the row reader makes it
        for name in ("checklist", "checklist-all", "checklist-implicit"):
            item = to_item(row, {}, load_rubric(name))
            assert item.checklist == points and item.response == example["response"]
    # the point counts the replay recording covers for all_points (3, 4 and 5)
    assert {len(r["checklist"]) for r in checklists} == {3, 4, 5}
