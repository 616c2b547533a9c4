"""`jurybox agree` and `jurybox calibrate` (and `judge --calibration`) from the command line.

Fast tests run on synthetic verdicts from ``simulate_judging``; the ``models`` tests judge
examples/mirage_mg.jsonl once per session with the tiny jury's recorded real answers (the
replay jury: real tokenizers, prompts, distributions and files, no model's time) and use that
file.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jurybox.calibration import CalibrationMap, simulate_judging
from jurybox.serving.cli import app

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
HUMAN_EXAMPLE = EXAMPLES / "mirage_mg.human.jsonl"

SYNTHETIC_RUBRIC = """\
description: synthetic rubric matching jurybox.calibration.simulate_judging
inputs: [question, response]
template: "{{ question }} {{ response }} {{ output_format }}"
criteria:
  - name: accuracy
    description: how accurate
    scale: {min: 0, max: 4}
  - name: supported
    description: is it supported
    scale:
      labels: {"yes": 1, "no": 0}
"""


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def invoke(*args: Any) -> Any:
    """Run the CLI; a Python exception (a traceback for the user) fails the test."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert "Traceback" not in result.output
    return result


def strict_json(text: str) -> Any:
    """Parse JSON, refusing NaN/Infinity (which json.loads accepts by default)."""

    def no_constants(name: str) -> Any:
        raise AssertionError(f"JSON output contains {name}")

    return json.loads(text, parse_constant=no_constants)


@pytest.fixture
def synthetic(tmp_path: Path) -> dict[str, Any]:
    """30 synthetic verdicts (3 judges), 2 human raters, and a rubric file with their scales."""
    records, humans = simulate_judging(30, seed=3)
    rubric = tmp_path / "synthetic.yaml"
    rubric.write_text(SYNTHETIC_RUBRIC)
    return {
        "records": records,
        "humans": humans,
        "dir": tmp_path,
        "rubric": rubric,
        "judged": write_jsonl(tmp_path / "judged.jsonl", records),
        "human": write_jsonl(tmp_path / "human.jsonl", humans),
    }


def agree(
    s: dict[str, Any], *extra: Any, human: Path | None = None, judged: Path | None = None
) -> Any:
    return invoke(
        "agree",
        human or s["human"],
        judged or s["judged"],
        "--rubric",
        s["rubric"],
        "--resamples",
        100,
        *extra,
    )


# --------------------------------------------------------------------------- agree


def test_agree_prints_a_table_per_criterion(synthetic: dict[str, Any]) -> None:
    result = agree(synthetic)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in (
        "accuracy",
        "supported",
        "human-human",
        "judge-human",
        "judge-judge",
        "harsh",
        "lenient",
        "noisy",
        "jury",
        "30 items joined",
    ):
        assert text in out
    assert "nan" not in out.lower()


def test_agree_json_has_every_comparison_with_cis(synthetic: dict[str, Any]) -> None:
    result = agree(synthetic, "--json")
    assert result.exit_code == 0, result.output
    data = strict_json(result.stdout)
    assert {"criteria", "join", "value", "rubric", "provenance", "warnings"} <= set(data)
    assert data["rubric"] == "synthetic" and data["provenance"] == "prov-test"
    assert data["join"]["n_joined"] == 30
    acc = data["criteria"]["accuracy"]
    assert acc["scale"] == [0, 1, 2, 3, 4] and not acc["categorical"]
    assert set(acc["judge_human"]) == {"harsh", "lenient", "noisy", "jury"}
    alpha = acc["judge_human"]["jury"]["alpha"]
    assert alpha["defined"] and len(alpha["ci"]) == 2
    assert "alpha[interval]" in acc["human_human"]
    assert len(acc["judge_judge"]) == 3 and acc["judges_alpha"]["defined"]
    assert data["criteria"]["supported"]["categorical"]
    assert "kappa" in data["criteria"]["supported"]["judge_human"]["jury"]


def test_agree_level_applies_to_every_alpha(synthetic: dict[str, Any]) -> None:
    data = strict_json(agree(synthetic, "--json", "--level", "ordinal").stdout)
    acc = data["criteria"]["accuracy"]
    assert list(acc["human_human"]) == ["alpha[ordinal]"]
    assert acc["judge_human"]["harsh"]["alpha"]["name"] == "krippendorff_alpha[ordinal]"
    assert all(
        p["alpha"]["name"] == "krippendorff_alpha[ordinal]" for p in acc["judge_judge"].values()
    )
    assert acc["judges_alpha"]["name"] == "krippendorff_alpha[ordinal]"
    assert data["level"] == "ordinal"


def test_agree_writes_an_html_report(synthetic: dict[str, Any]) -> None:
    page = synthetic["dir"] / "report.html"
    result = agree(synthetic, "--html", page)
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "<svg" in html and "accuracy" in html and "nan" not in html.lower()


def test_ids_that_do_not_join_are_counted_and_named(synthetic: dict[str, Any]) -> None:
    humans = synthetic["humans"] + [
        {"id": "extra-1", "rater": "h0", "accuracy": 2},
        {"id": "extra-2", "rater": "h0", "accuracy": 3},
    ]
    human = write_jsonl(synthetic["dir"] / "more.jsonl", humans)
    judged = write_jsonl(synthetic["dir"] / "fewer.jsonl", synthetic["records"][:-1])
    result = agree(synthetic, "--json", human=human, judged=judged)
    assert result.exit_code == 0, result.output
    assert "3 labelled ids have no verdict: q29, extra-1, extra-2" in result.stderr
    data = strict_json(result.stdout)
    assert data["join"]["human_only"] == {"count": 3, "first": ["q29", "extra-1", "extra-2"]}
    assert data["join"]["n_joined"] == 29
    assert any("no verdict" in w for w in data["warnings"])


def test_nothing_joins_is_an_error(synthetic: dict[str, Any]) -> None:
    humans = [dict(r, id="other-" + r["id"]) for r in synthetic["humans"]]
    result = agree(synthetic, human=write_jsonl(synthetic["dir"] / "other.jsonl", humans))
    assert result.exit_code == 2
    assert "no ids in common" in result.stderr and "other.jsonl" in result.stderr


def test_label_off_the_scale_names_file_row_and_field(synthetic: dict[str, Any]) -> None:
    humans = copy.deepcopy(synthetic["humans"])
    humans[2]["accuracy"] = 7
    result = agree(synthetic, human=write_jsonl(synthetic["dir"] / "bad.jsonl", humans))
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "bad.jsonl" in message and "row 3" in message and "'accuracy'" in message
    assert "not on the scale" in message


def test_label_that_is_not_a_label_of_the_scale(synthetic: dict[str, Any]) -> None:
    humans = copy.deepcopy(synthetic["humans"])
    humans[0]["supported"] = "maybe"
    humans[4]["accuracy"] = "good"
    result = agree(synthetic, human=write_jsonl(synthetic["dir"] / "bad.jsonl", humans))
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "2 bad values" in message and "'maybe' is not a label" in message
    assert "row 5" in message and "'good' is not a number" in message


def test_malformed_verdicts_name_the_line_and_field(synthetic: dict[str, Any]) -> None:
    records = copy.deepcopy(synthetic["records"])
    records[3]["votes"][0]["score"] = "high"
    judged = write_jsonl(synthetic["dir"] / "bad-judged.jsonl", records)
    result = agree(synthetic, judged=judged)
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "bad-judged.jsonl" in message and "line 4" in message
    assert "votes[0].score: 'high' is not a number" in message
    (synthetic["dir"] / "not-json.jsonl").write_text('{"id": 1}\nnot json\n')
    result = agree(synthetic, judged=synthetic["dir"] / "not-json.jsonl")
    assert result.exit_code == 2 and "line 2 is not JSON" in result.stderr


def test_single_rater_makes_human_agreement_undefined(synthetic: dict[str, Any]) -> None:
    _, humans = simulate_judging(30, n_humans=1, seed=3)
    human = write_jsonl(synthetic["dir"] / "one.jsonl", humans)
    result = agree(synthetic, human=human)
    assert result.exit_code == 0, result.output
    assert "human-human alpha[interval]: undefined (needs at least 2 human raters" in result.stdout
    data = strict_json(agree(synthetic, "--json", human=human).stdout)
    stat = data["criteria"]["accuracy"]["human_human"]["alpha[interval]"]
    assert stat["value"] is None and "h0" in stat["reason"]
    assert data["criteria"]["accuracy"]["judge_human"]["jury"]["alpha"]["defined"]


def test_counts_of_one_are_singular(synthetic: dict[str, Any]) -> None:
    _, humans = simulate_judging(30, n_humans=1, seed=3)
    humans.append({"id": "extra-1", "rater": "h0", "accuracy": 2})
    result = agree(
        synthetic, "--resamples", 1, human=write_jsonl(synthetic["dir"] / "one.jsonl", humans)
    )
    assert result.exit_code == 0, result.output
    assert "1 human rater)" in result.stdout and "1 human raters" not in result.stdout
    assert "1 resample)" in result.stdout
    assert "1 labelled id has no verdict: extra-1" in " ".join(result.stderr.split())


def test_constant_columns_are_undefined_with_a_reason(synthetic: dict[str, Any]) -> None:
    records = copy.deepcopy(synthetic["records"])
    for rec in records:
        rec["scores"]["accuracy"] = 2.0
        for vote in rec["votes"]:
            if vote["criterion"] == "accuracy":
                vote["score"] = 2.0
    humans = [dict(r, accuracy=3) for r in synthetic["humans"]]
    judged = write_jsonl(synthetic["dir"] / "const.jsonl", records)
    human = write_jsonl(synthetic["dir"] / "const-h.jsonl", humans)
    result = agree(synthetic, judged=judged, human=human)
    assert result.exit_code == 0, result.output
    assert "nan" not in result.stdout.lower()
    assert (
        "human-human alpha[interval]: undefined (all pairable values are identical" in result.stdout
    )
    assert "harsh | lenient alpha undefined: all pairable values are identical" in result.stdout
    data = strict_json(agree(synthetic, "--json", judged=judged, human=human).stdout)
    spearman = data["criteria"]["accuracy"]["judge_human"]["jury"]["spearman"]
    assert spearman["value"] is None and spearman["defined"] is False and spearman["reason"]


def test_without_a_loadable_rubric_scales_are_inferred_with_a_warning(
    synthetic: dict[str, Any],
) -> None:
    result = invoke("agree", synthetic["human"], synthetic["judged"], "--resamples", 50)
    assert result.exit_code == 0, result.output
    assert "rubric 'synthetic'" in result.stderr and "--rubric" in result.stderr


def test_unknown_rubric_and_missing_file_are_errors(synthetic: dict[str, Any]) -> None:
    result = invoke("agree", synthetic["human"], synthetic["judged"], "--rubric", "no-such")
    assert result.exit_code == 2 and "unknown rubric 'no-such'" in result.stderr
    result = invoke("agree", synthetic["dir"] / "missing.jsonl", synthetic["judged"])
    assert result.exit_code == 2 and "does not exist" in result.output
    binary = synthetic["dir"] / "binary.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    result = invoke("agree", synthetic["human"], binary)
    assert result.exit_code == 2 and "binary.jsonl: not UTF-8 text" in result.stderr
    result = invoke("calibrate", binary, synthetic["judged"], "-o", synthetic["dir"] / "m.json")
    assert result.exit_code == 2 and "binary.jsonl: not UTF-8 text" in result.stderr


def test_a_rubric_that_does_not_match_is_reported(synthetic: dict[str, Any]) -> None:
    result = invoke(
        "agree", synthetic["human"], synthetic["judged"], "--rubric", "mirage-mg", "--resamples", 50
    )
    assert result.exit_code == 0, result.output
    assert "differs from the rubric the verdicts name (synthetic)" in result.stderr
    assert "not in rubric mirage-mg" in result.stderr


def test_mixed_configurations_need_a_provenance(synthetic: dict[str, Any]) -> None:
    records = copy.deepcopy(synthetic["records"])
    for rec in records[:5]:
        rec["provenance"] = "other"
    judged = write_jsonl(synthetic["dir"] / "mixed.jsonl", records)
    result = agree(synthetic, judged=judged)
    assert result.exit_code == 2 and "--provenance" in result.stderr
    result = agree(synthetic, "--provenance", "prov-test", "--json", judged=judged)
    assert result.exit_code == 0, result.output
    assert strict_json(result.stdout)["join"]["n_joined"] == 25


# --------------------------------------------------------------------------- calibrate


def test_calibrate_writes_a_map_with_the_provenance(synthetic: dict[str, Any]) -> None:
    path = synthetic["dir"] / "map.yaml"
    result = invoke(
        "calibrate",
        synthetic["human"],
        synthetic["judged"],
        "--rubric",
        synthetic["rubric"],
        "--out",
        path,
    )
    assert result.exit_code == 0, result.output
    assert "5-fold CV on 30 items" in result.stdout and "MAE" in result.stdout
    assert "helps" in result.stdout or "no clear improvement" in result.stdout
    assert f"wrote {path}" in " ".join(result.stderr.split())
    cmap = CalibrationMap.load(path)
    assert cmap.provenance_ == "prov-test"
    assert set(cmap.criteria) == {"accuracy", "supported"}
    assert cmap.fitted_on_["judge_output"] == str(synthetic["judged"])
    assert cmap.fitted_on_["rubric"] == "synthetic"
    calibrated = cmap.apply_to_record(synthetic["records"][0])["calibrated"]
    assert 0 <= calibrated["accuracy"] <= 4


def test_calibrate_options_and_json(synthetic: dict[str, Any]) -> None:
    path = synthetic["dir"] / "map.json"
    result = invoke(
        "calibrate",
        synthetic["human"],
        synthetic["judged"],
        "-r",
        synthetic["rubric"],
        "-o",
        path,
        "--method",
        "ordinal",
        "--value",
        "expected",
        "--output",
        "round",
        "--folds",
        3,
        "-c",
        "accuracy",
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = strict_json(result.stdout)
    assert data["provenance"] == "prov-test" and data["criteria"] == ["accuracy"]
    assert data["params"] == {
        "method": "ordinal",
        "output": "round",
        "value": "expected",
        "cv_folds": 3,
        "seed": 0,
    }
    cv = data["cross_validation"]["accuracy"]
    assert cv["folds"] == 3 and {"before", "after", "improvement", "helps"} <= set(cv)
    cmap = CalibrationMap.load(path)
    assert cmap.method == "ordinal" and cmap.value == "expected"
    value = cmap.apply_to_record(synthetic["records"][1])["calibrated"]["accuracy"]
    assert value in (0, 1, 2, 3, 4)


def test_calibrate_with_constant_judges_suggests_expected(synthetic: dict[str, Any]) -> None:
    records = copy.deepcopy(synthetic["records"])
    for rec in records:
        for vote in rec["votes"]:
            if vote["criterion"] == "accuracy":
                vote["score"] = 0.0
    judged = write_jsonl(synthetic["dir"] / "const.jsonl", records)
    path = synthetic["dir"] / "map.yaml"
    result = invoke(
        "calibrate",
        synthetic["human"],
        judged,
        "-r",
        synthetic["rubric"],
        "-c",
        "accuracy",
        "-o",
        path,
    )
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "no judge has two distinct scores" in message and "--value expected" in message
    assert not path.exists()
    result = invoke(
        "calibrate",
        synthetic["human"],
        judged,
        "-r",
        synthetic["rubric"],
        "-c",
        "accuracy",
        "-o",
        path,
        "--value",
        "expected",
    )
    assert result.exit_code == 0, result.output


def test_calibrate_refuses_constant_human_labels(synthetic: dict[str, Any]) -> None:
    # Every human says 3: a map fitted on that is the constant 3, which cross-validates to
    # "MAE 3.000 -> 0.000, calibration helps" while human-human agreement is undefined.
    humans = [dict(r, accuracy=3) for r in synthetic["humans"]]
    human = write_jsonl(synthetic["dir"] / "const-h.jsonl", humans)
    path = synthetic["dir"] / "map.yaml"
    result = invoke(
        "calibrate",
        human,
        synthetic["judged"],
        "-r",
        synthetic["rubric"],
        "-c",
        "accuracy",
        "-o",
        path,
    )
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "all 60 human labels on 'accuracy' are 3" in message
    assert "no variation" in message and "helps" not in result.output
    assert not path.exists()
    # With another criterion to calibrate, the map is written without the constant one, loudly.
    result = invoke("calibrate", human, synthetic["judged"], "-r", synthetic["rubric"], "-o", path)
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert "accuracy: not calibrated (all 60 human labels on 'accuracy' are 3" in message
    assert CalibrationMap.load(path).criteria == ["supported"]


def test_calibrate_says_when_calibration_hurts(synthetic: dict[str, Any]) -> None:
    # The jury's scores equal the (single) human's labels, so any map fitted on the individual
    # judges' noisy votes can only move the jury away from the humans.
    records, humans = simulate_judging(30, n_humans=1, seed=3)
    label = {h["id"]: h["accuracy"] for h in humans}
    for rec in records:
        rec["scores"]["accuracy"] = label[rec["id"]]
    judged = write_jsonl(synthetic["dir"] / "exact-jury.jsonl", records)
    human = write_jsonl(synthetic["dir"] / "one-h.jsonl", humans)
    path = synthetic["dir"] / "map.yaml"
    result = invoke(
        "calibrate", human, judged, "-r", synthetic["rubric"], "-c", "accuracy", "-o", path
    )
    assert result.exit_code == 0, result.output
    assert "calibration hurts" in result.stdout and "helps" not in result.stdout
    assert "no clear improvement" not in result.stdout
    message = " ".join(result.stderr.split())
    assert "accuracy: calibration hurts: the cross-validated MAE reduction is -" in message
    assert "do not apply the map to accuracy" in message
    assert "applying it is not recommended" in message and "apply it with" not in message
    cv = strict_json(
        invoke(
            "calibrate",
            human,
            judged,
            "-r",
            synthetic["rubric"],
            "-c",
            "accuracy",
            "-o",
            path,
            "--json",
        ).stdout
    )["cross_validation"]
    assert cv["accuracy"]["hurts"] and not cv["accuracy"]["helps"]
    assert cv["accuracy"]["improvement"]["ci"][1] < 0


def test_calibrate_bad_labels_exit_2(synthetic: dict[str, Any]) -> None:
    humans = copy.deepcopy(synthetic["humans"])
    humans[0]["accuracy"] = -1
    human = write_jsonl(synthetic["dir"] / "bad.jsonl", humans)
    result = invoke(
        "calibrate",
        human,
        synthetic["judged"],
        "-r",
        synthetic["rubric"],
        "-o",
        synthetic["dir"] / "m.yaml",
    )
    assert result.exit_code == 2 and "row 1" in result.stderr


def test_judge_refuses_a_map_fitted_for_another_configuration(synthetic: dict[str, Any]) -> None:
    path = synthetic["dir"] / "map.yaml"
    assert (
        invoke(
            "calibrate",
            synthetic["human"],
            synthetic["judged"],
            "-r",
            synthetic["rubric"],
            "-o",
            path,
        ).exit_code
        == 0
    )
    # The check runs before any model loads, so this is fast.
    result = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "--rubric",
        "mirage-mg",
        "--jury",
        "tiny",
        "--out",
        synthetic["dir"] / "out.jsonl",
        "--calibration",
        path,
    )
    assert result.exit_code == 2
    message = " ".join(result.stderr.split())
    assert "fitted for provenance prov-test" in message and "--force-calibration" in message
    assert not (synthetic["dir"] / "out.jsonl").exists()
    (synthetic["dir"] / "junk.yaml").write_text("format: something-else\n")
    result = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "--rubric",
        "mirage-mg",
        "--jury",
        "tiny",
        "--out",
        synthetic["dir"] / "out.jsonl",
        "--calibration",
        synthetic["dir"] / "junk.yaml",
    )
    assert result.exit_code == 2 and "not a jurybox calibration map" in result.stderr


def test_example_human_labels_are_on_the_mirage_mg_scale() -> None:
    from jurybox.calibration import load_human_labels
    from jurybox.rubrics import load_rubric

    labels = load_human_labels(HUMAN_EXAMPLE, scales=load_rubric("mirage-mg"))
    examples = [json.loads(line)["id"] for line in (EXAMPLES / "mirage_mg.jsonl").open()]
    assert sorted(set(labels.ids)) == sorted(examples)
    assert sorted(set(labels.raters)) == ["expert_a", "expert_b"]
    assert labels.criteria == ["accuracy", "relevance", "completeness", "parsimony"]


# --------------------------------------------------------------------------- real judging


@pytest.fixture(scope="session")
def real_judged(replay_tiny: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/mirage_mg.jsonl judged once by the tiny jury's recorded real answers."""
    from jurybox.rubrics import load_rubric
    from jurybox.serving.runs.local import judge_file

    out = tmp_path_factory.mktemp("real") / "mirage_mg.judged.jsonl"
    report = judge_file(EXAMPLES / "mirage_mg.jsonl", load_rubric("mirage-mg"), replay_tiny, out)
    assert report.judged == 6
    return out


@pytest.mark.models
def test_agree_on_real_verdicts(real_judged: Path, replay_tiny: Any) -> None:
    tiny_jury = replay_tiny
    result = invoke("agree", HUMAN_EXAMPLE, real_judged, "--resamples", 200)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "6 items joined" in out and "nan" not in out.lower()
    for name in (
        "accuracy",
        "relevance",
        "completeness",
        "parsimony",
        "jury",
        *(j.name for j in tiny_jury.spec.judges),
    ):
        assert name in out
    data = strict_json(
        invoke(
            "agree", HUMAN_EXAMPLE, real_judged, "--json", "--value", "expected", "--resamples", 200
        ).stdout
    )
    from jurybox.rubrics import load_rubric

    assert data["provenance"] == tiny_jury.provenance(load_rubric("mirage-mg"))
    assert data["rubric"] == "mirage-mg" and data["value"] == "expected"
    hh = data["criteria"]["accuracy"]["human_human"]["alpha[interval]"]
    assert hh["value"] > 0.8  # the two example raters mostly agree


@pytest.mark.models
def test_calibrate_then_judge_with_the_map(
    real_judged: Path,
    replay_tiny: Any,
    replay_jury: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tiny_jury = replay_tiny
    path = tmp_path / "map.yaml"
    # The tiny judges' scores barely vary; their logprob-expected scores do.
    result = invoke("calibrate", HUMAN_EXAMPLE, real_judged, "--value", "expected", "-o", path)
    assert result.exit_code == 0, result.output
    prov = json.loads(real_judged.read_text().splitlines()[0])["provenance"]
    cmap = CalibrationMap.load(path)
    assert cmap.provenance_ == prov
    assert cmap.criteria == ["accuracy", "relevance", "completeness", "parsimony"]

    import jurybox.judges

    monkeypatch.setattr(jurybox.judges, "Jury", lambda spec, **_: tiny_jury)  # the loaded models
    # The command closes the jury it made when it ends; the session's stays open for the others.
    monkeypatch.setattr(tiny_jury, "close", lambda: None)
    out = tmp_path / "calibrated.jsonl"
    result = invoke(
        "judge",
        EXAMPLES / "mirage_mg.jsonl",
        "--rubric",
        "mirage-mg",
        "--jury",
        replay_jury,
        "--limit",
        2,
        "--out",
        out,
        "--calibration",
        path,
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2
    for rec in records:
        assert rec["provenance"] == prov
        # Every calibrated criterion, and MIRAGE's weighted sum computed on the calibrated values.
        assert set(rec["calibrated"]) == set(cmap.criteria) | {"weighted_sum"}
        for name in cmap.criteria:
            value = rec["calibrated"][name]
            if rec["scores"][name] is not None:
                assert value is not None and 0 <= value <= 4
        calibrated = rec["calibrated"]
        if all(calibrated[c] is not None for c in cmap.criteria):
            expected = (
                2 * calibrated["accuracy"]
                + calibrated["relevance"]
                + calibrated["completeness"]
                + calibrated["parsimony"]
            ) / 20
            assert calibrated["weighted_sum"] == pytest.approx(round(expected, 4))


# --------------------------------------------------------------------------- calibrate --cascade


CASCADE_RUBRIC = """\
description: one criterion on 1-3 (the cascade tests' synthetic verdicts)
inputs: [question, response]
template: "{{ question }} {{ response }} {{ output_format }}"
criteria:
  - name: accuracy
    description: how accurate
    scale: {min: 1, max: 3}
"""


CASCADE_JURY = """\
description: a cheap judge first, two big ones for the rest
judges:
  - {name: small, model: org/small}
  - {name: big1, model: org/big1}
  - {name: big2, model: org/big2}
stages:
  - judges: [small]
  - judges: [big1, big2]
"""


@pytest.fixture
def cascade_files(tmp_path: Path) -> dict[str, Path]:
    from jurybox.calibration.estimates.synthetic import simulate_cascade_verdicts
    from jurybox.judges import load_jury_spec, provenance
    from jurybox.rubrics import load_rubric

    rubric = tmp_path / "cascade-test.yaml"
    rubric.write_text(CASCADE_RUBRIC)
    jury = tmp_path / "cascade.yaml"
    jury.write_text(CASCADE_JURY)
    prov = provenance(load_rubric(rubric), load_jury_spec(jury))
    records, humans = simulate_cascade_verdicts(300, provenance=prov, seed=3)
    return {
        "judged": write_jsonl(tmp_path / "judged.jsonl", records),
        "human": write_jsonl(tmp_path / "human.jsonl", humans),
        "rubric": rubric,
        "jury": jury,
    }


def test_calibrate_cascade_writes_the_fitted_jury(cascade_files, tmp_path):
    from jurybox.judges import load_jury_spec

    out = tmp_path / "fitted.yaml"
    f = cascade_files
    result = invoke(
        "calibrate",
        f["human"],
        f["judged"],
        "--cascade",
        "--jury",
        f["jury"],
        "--target-agreement",
        "0.85",
        "--risk",
        "0.1",
        "-r",
        f["rubric"],
        "-o",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "stage 1 (adds small): decides" in result.output
    assert "saved" in result.output and "judge with it: jurybox judge" in result.output
    fitted = load_jury_spec(out)
    original = load_jury_spec(f["jury"])
    assert fitted.cascaded and 0.5 < fitted.stages[0].threshold <= 0.995
    assert fitted.unfitted().judges == original.judges
    assert "agreement >= 0.85 with probability >= 0.9" in fitted.description
    result = invoke(
        "calibrate",
        f["human"],
        f["judged"],
        "--cascade",
        "-j",
        f["jury"],
        "--target-agreement",
        "0.85",
        "-r",
        f["rubric"],
        "-o",
        out,
        "--json",
    )
    doc = strict_json(result.stdout)
    assert doc["threshold"] == fitted.stages[0].threshold and doc["risk"] == 0.1
    assert doc["path"][0]["threshold"] is None  # the walk starts with the whole jury


def test_calibrate_cascade_refuses_a_target_the_labels_cannot_support(cascade_files, tmp_path):
    f = cascade_files
    out = tmp_path / "fitted.yaml"
    result = invoke(
        "calibrate",
        f["human"],
        f["judged"],
        "--cascade",
        "-j",
        f["jury"],
        "--target-agreement",
        "0.99",
        "-r",
        f["rubric"],
        "-o",
        out,
    )
    assert result.exit_code == 2
    assert "cannot support agreement 0.99 at risk 0.1" in result.output
    assert not out.exists()


def test_calibrate_cascade_options_belong_together(cascade_files, tmp_path):
    f = cascade_files
    out = tmp_path / "x.yaml"
    result = invoke("calibrate", f["human"], f["judged"], "--cascade", "-o", out)
    assert result.exit_code == 2 and "--cascade needs --jury" in result.output
    result = invoke("calibrate", f["human"], f["judged"], "--target-agreement", "0.9", "-o", out)
    assert result.exit_code == 2 and "are for --cascade" in result.output


@pytest.fixture
def grouped_cascade_files(cascade_files, tmp_path):
    """The cascade files with a ``task`` column: ``trap`` (every 10th item, where the small
    judge is sure and wrong) and ``plain``."""
    import json

    records = [json.loads(line) for line in cascade_files["judged"].read_text().splitlines()]
    humans = [json.loads(line) for line in cascade_files["human"].read_text().splitlines()]
    for i, (record, human) in enumerate(zip(records, humans)):
        if i % 10 == 0:
            wrong = human["accuracy"] % 3 + 1
            record["votes"][0] = {
                "judge": "small",
                "criterion": "accuracy",
                "score": wrong,
                "distribution": {str(v): 0.995 if v == wrong else 0.0025 for v in (1, 2, 3)},
            }
        human["task"] = "trap" if i % 10 == 0 else "plain"
    return {
        **cascade_files,
        "judged": write_jsonl(tmp_path / "judged-g.jsonl", records),
        "human": write_jsonl(tmp_path / "human-g.jsonl", humans),
    }


def calibrate_grouped(f, out, *options):
    """``calibrate --cascade`` on the grouped files at target 0.75, with ``options``."""
    return invoke(
        "calibrate",
        f["human"],
        f["judged"],
        "--cascade",
        "-j",
        f["jury"],
        "--target-agreement",
        "0.75",
        "-r",
        f["rubric"],
        "-o",
        out,
        *options,
    )


def test_calibrate_cascade_reports_each_group_and_warns_of_one_below_the_target(
    grouped_cascade_files, tmp_path
):
    f, out = grouped_cascade_files, tmp_path / "fitted.yaml"
    result = calibrate_grouped(f, out, "--group", "task")
    assert result.exit_code == 0, result.output
    assert "certified: agreement >= 0.75 with probability >= 0.9" in result.output
    assert "in-sample" in result.output and "trap: 0.000 on 30 items" in result.output
    assert "warning: group trap" in result.output and "--by-group task" in result.output
    assert out.exists()
    doc = strict_json(calibrate_grouped(f, out, "--group", "task", "--json").stdout)
    assert {g["group"]: g["below_target"] for g in doc["groups"]} == {"plain": False, "trap": True}
    assert "agreement_lower_bound" not in doc and doc["in_sample_agreement"] >= 0.75


def test_calibrate_cascade_by_group_writes_one_jury_per_certified_group(
    grouped_cascade_files, tmp_path
):
    from jurybox.judges import load_jury_spec

    f, out = grouped_cascade_files, tmp_path / "fitted.yaml"
    result = calibrate_grouped(f, out, "--by-group", "task")
    assert result.exit_code == 0, result.output
    assert "each fitted on its own items at risk 0.1 / 2 = 0.05" in result.output
    assert "group trap (30 labelled items): refused" in result.output
    plain = load_jury_spec(tmp_path / "fitted.plain.yaml")
    assert plain.cascaded and "for group plain of task" in plain.description
    assert not (tmp_path / "fitted.trap.yaml").exists() and not out.exists()
    result = calibrate_grouped(f, out, "--by-group", "task", "--group", "task")
    assert result.exit_code == 2 and "give one of them" in result.output
    result = calibrate_grouped(f, out, "--by-group", "domain")
    assert result.exit_code == 2 and "no 'domain' column to group by" in result.output


# --------------------------------------------------------------------------- labels plan


def test_labels_plan_before_and_after_labels(synthetic, tmp_path):
    from jurybox.calibration.data.label_store import LabelStore
    from jurybox.calibration.estimates.selection import _sequence_needed

    s = synthetic
    human = tmp_path / "labelled.jsonl"
    before = strict_json(
        invoke(
            "labels",
            "plan",
            human,
            s["judged"],
            "--rubric",
            s["rubric"],
            "--target-width",
            "0.05",
            "--json",
        ).stdout
    )
    assert before["items"] == 30 and not human.exists()
    accuracy = before["criteria"]["accuracy"]
    assert accuracy["labelled"] == 0 and "no label yet" in accuracy["basis"]
    assert accuracy["range"][1] == _sequence_needed(0.5, 0.05, 30)  # the worst case
    store = LabelStore(human)
    for row in s["humans"][:20]:  # 10 items, 2 raters each
        store.append({"id": row["id"], "rater": row["rater"], "accuracy": row["accuracy"]})
    # Asked while a labelling server still writes the file (holds its lock) and a label is
    # half-written: the plan reads what is on disk and leaves the file as it is (#36).
    with open(human, "ab") as f:
        f.write(b'{"id": "x", "ra')
    on_disk = human.read_bytes()
    result = invoke(
        "labels", "plan", human, s["judged"], "--rubric", s["rubric"], "--target-width", "0.05"
    )
    store.close()
    assert human.read_bytes() == on_disk
    assert result.exit_code == 0, result.output
    assert "accuracy: " in result.output and "10 labelled item(s) so far" in result.output
    assert "a fixed-sample interval would need" in result.output


def test_agree_ppi_gives_a_sharp_jury_the_betting_interval_while_few_labels_depart(
    tmp_path: Path,
) -> None:
    """#52 defect 2 through `agree --ppi`: a jury 0.999 sure of its score on every item and
    wrong by two levels on 5% of 300 items, none among the 30 labelled ones. The normal interval
    was the jury's own mean with zero width (the labels show no error and the jury claims none),
    missing the mean label; with fewer than 5 labels departing from the jury, the interval is
    now the betting interval at 30 labels, which holds it, and the output says why."""
    rubric, judged, labels, human = _sharp_jury(tmp_path)
    got = invoke("agree", labels, judged, "--rubric", rubric, "--ppi", "--json")
    assert got.exit_code == 0, got.output
    e = strict_json(got.stdout)["criteria"]["accuracy"]
    truth = float(sum(human) / len(human))
    assert e["ci"][0] <= truth <= e["ci"][1] and e["ci"][1] - e["ci"][0] > 0.2, (e, truth)
    assert e["interval"] == "betting" and e["departures"] == 0
    text = invoke("agree", labels, judged, "--rubric", rubric, "--ppi")
    assert "betting interval" in text.stdout and "depart from the jury's score" in text.stdout


def _sharp_jury(tmp_path: Path) -> tuple[Path, Path, Path, list[float]]:
    """(rubric, verdicts, labels, every item's human label) of a jury 0.999 sure of its score
    on each of 300 items and two levels too high on 15 of them, none among the 30 labelled."""
    import numpy as np

    rng = np.random.default_rng(3)
    score = rng.integers(2, 5, 300)
    human = score.astype(float)
    human[30 + rng.choice(270, 15, replace=False)] -= 2
    rubric = tmp_path / "synthetic.yaml"
    rubric.write_text(SYNTHETIC_RUBRIC)
    records = [
        {
            "id": f"i{k}",
            "status": "scored",
            "rubric": "synthetic",
            "jury": "j",
            "provenance": "p",
            "scores": {"accuracy": float(s)},
            "votes": [
                {
                    "judge": "a",
                    "criterion": "accuracy",
                    "score": float(s),
                    "distribution": {str(v): 0.999 if v == s else 0.00025 for v in range(5)},
                }
            ],
        }
        for k, s in enumerate(score)
    ]
    judged = write_jsonl(tmp_path / "judged.jsonl", records)
    labels = write_jsonl(
        tmp_path / "human.jsonl",
        [{"id": f"i{k}", "rater": "h", "accuracy": int(human[k])} for k in range(30)],
    )
    return rubric, judged, labels, [float(h) for h in human]


def test_labels_plan_counts_the_interval_shown_and_picks_the_design(tmp_path: Path) -> None:
    """#52: `labels plan --goal benchmark-mean` for a jury that claims to be sure of every item:
    the headline is what the interval `agree --ppi` shows needs (the betting one: no label is
    expected to depart from the jury's score), not the normal approximation's count; before
    any label it compares the active choice with a uniform order under the page's sequence and
    names the one it picks (what `jurybox label --design auto` uses)."""
    rubric, judged, _, _ = _sharp_jury(tmp_path)
    got = invoke(
        "labels",
        "plan",
        tmp_path / "none.jsonl",
        judged,
        "--rubric",
        rubric,
        "--goal",
        "benchmark-mean",
        "--target-width",
        "0.3",
        "--json",
    )
    assert got.exit_code == 0, got.output
    row = strict_json(got.stdout)["criteria"]["accuracy"]
    assert row["interval"] == "betting" and row["needed"] > row["normal"], row
    assert row["sequence"]["method"] == "asymptotic"
    designs = row["designs"]
    assert designs["pick"] in ("active", "uniform") and "sequence" in designs["why"]
    args = (
        "labels",
        "plan",
        tmp_path / "none.jsonl",
        judged,
        "--rubric",
        rubric,
        "--goal",
        "benchmark-mean",
        "--target-width",
        "0.3",
        "--sequence",
        "betting",
    )
    pick = strict_json(invoke(*args, "--json").stdout)["criteria"]["accuracy"]["designs"]["pick"]
    text = invoke(*args)
    assert text.exit_code == 0, text.output
    flat = " ".join(text.stdout.split())
    assert "with the betting interval" in flat and "page's betting sequence" in flat
    assert f"design: {pick}, as under the page's betting sequence" in flat, flat


def test_label_design_auto_takes_the_plan_s_pick_and_a_labelled_file_keeps_its_own(
    tmp_path: Path,
) -> None:
    """#52 item 4, `jurybox label --goal benchmark-mean --design auto`: the design the plan
    finds needs fewer labels under the page's sequence (on 200 items of a calibrated jury at
    half-width 0.5: a uniform order under the betting sequence, the active choice under the
    asymptotic one), the active choice without a target width, and the design of the labels a
    file already holds (a session mixing two cannot be estimated)."""
    import numpy as np

    from jurybox.calibration.data.label_store import LabelStore
    from jurybox.calibration.estimates.synthetic import LabellingPool
    from jurybox.rubrics import VerdictRecord, load_rubric
    from jurybox.serving.labelling.start import pick_design

    rng = np.random.default_rng(8)
    criteria = ["accuracy", "relevance", "completeness", "parsimony"]
    pools = {c: LabellingPool.draw(rng, 200) for c in criteria}
    records = [
        VerdictRecord.model_validate(
            {
                "id": f"q{k}",
                "status": "scored",
                "rubric": "mirage-mg",
                "jury": "sim",
                "provenance": "sim",
                "scores": {c: float(pool.score[k]) for c, pool in pools.items()},
                "votes": [
                    {
                        "judge": j,
                        "criterion": c,
                        "score": float(np.argmax(pool.dist[k])),
                        "distribution": {str(v): float(p) for v, p in enumerate(pool.dist[k])},
                    }
                    for c, pool in pools.items()
                    for j in ("a", "b")
                ],
            }
        )
        for k in range(200)
    ]
    rubric = load_rubric("mirage-mg")
    store = LabelStore(tmp_path / "l.jsonl")
    try:
        assert pick_design("auto", records, rubric, 0.5, "betting", store) == "uniform"
        assert pick_design("auto", records, rubric, 0.5, "asymptotic", store) == "active"
        assert pick_design("auto", records, rubric, None, "betting", store) == "active"
        assert pick_design("active", records, rubric, 0.5, "betting", store) == "active"
        store.append(
            {
                "id": "q1",
                "rater": "r",
                "accuracy": 2,
                "selection": {"strategy": "uniform", "probability": None},
            }
        )
        assert pick_design("active", records, rubric, 0.5, "betting", store) == "uniform"
    finally:
        store.close()
