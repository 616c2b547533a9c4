"""`audit_verdicts`: the bias audit of ``jurybox audit``, called from Python."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_audit_report import _pairwise, _scored

from jurybox.rubrics.errors import InputError
from jurybox.serving.runs.audit import audit_verdicts


def test_scored_verdicts_get_every_audit_their_files_allow(tmp_path):
    _scored(tmp_path)
    audit = audit_verdicts(
        tmp_path / "v.jsonl",
        predictions=tmp_path / "p.jsonl",
        human=tmp_path / "h.jsonl",
        families={"qwen": "qwen", "llama": "llama", "phi": "phi"},
        resamples=200,
    )
    assert not audit.pairwise and audit.position == []
    assert {f.judge for f in audit.length} == {"qwen", "llama", "phi"}
    assert any(f.flagged for f in audit.self_preference if f.judge == "qwen")
    assert audit.dependence and audit.families["qwen"] == "qwen"
    assert audit.to_dict()["length_unit"] == audit.length_unit
    assert "<html" in audit.html().lower()


def test_pairwise_verdicts_get_the_position_audit_only(tmp_path):
    _pairwise(tmp_path)
    audit = audit_verdicts(tmp_path / "pw.jsonl", human=tmp_path / "pw.jsonl", resamples=200)
    assert audit.pairwise and audit.position and audit.length == []
    assert "only the position audit" in audit.notes[0]


def test_families_of_judges_the_verdicts_lack_are_an_input_error(tmp_path):
    _scored(tmp_path)
    with pytest.raises(InputError, match="names judges the verdicts do not have"):
        audit_verdicts(tmp_path / "v.jsonl", families={"nobody": "x"})
