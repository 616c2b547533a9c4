"""`jurybox calibrate --conformal` and label lines routed to a second rater (``overlap``, #60):
a file of only such lines does not say which design chose their items (an active session's are
as unequally chosen as its own lines), so it is refused as active labels are, naming the row;
beside the session's own uniform choices they are accepted."""

from __future__ import annotations

import json

from test_conformal_cli import synthetic
from typer.testing import CliRunner

from jurybox.serving.cli import app

OVERLAP = {"strategy": "overlap", "probability": None}


def calibrate(tmp_path, human, verdicts):
    out = tmp_path / "c.yaml"
    args = ["calibrate", str(human), str(verdicts), "--conformal", "--out", str(out)]
    return CliRunner().invoke(app, args), out


def test_a_file_of_only_overlap_lines_is_refused_naming_the_row(tmp_path):
    verdicts, human = synthetic(tmp_path, n=60)
    rows = [json.loads(line) for line in human.read_text().splitlines()]
    # A second rater's lines from a benchmark-mean session: every item another rater's active
    # design chose, routed to this one (the active lines themselves are in another file).
    for row in rows:
        row.update(rater="ben", selection=OVERLAP)
    human.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got, out = calibrate(tmp_path, human, verdicts)
    assert got.exit_code == 2, got.output
    assert "60 labels (the first on row 1) routed to a second rater (overlap)" in got.output
    assert "benchmark-mean" in got.output and not out.exists()


def test_overlap_lines_beside_the_session_s_uniform_choices_are_accepted(tmp_path):
    verdicts, human = synthetic(tmp_path, n=60)
    rows = [json.loads(line) for line in human.read_text().splitlines()]
    for row in rows:
        row["selection"] = {"strategy": "uniform", "probability": None}
    shared = [dict(row, rater="ben", selection=OVERLAP) for row in rows[:10]]
    human.write_text("".join(json.dumps(r) + "\n" for r in rows + shared))
    got, out = calibrate(tmp_path, human, verdicts)
    assert got.exit_code == 0, got.output
    assert out.exists()
