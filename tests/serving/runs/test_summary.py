import numpy as np
import pytest
from scipy import stats

from jurybox.rubrics import load_rubric
from jurybox.serving.runs.summary import mean_ci, summarize

PROVENANCE = {"rubric": "general", "jury": "t", "provenance": "p"}


def test_mean_ci_matches_scipy_t_interval():
    x = np.array([0.0, 1, 2, 2, 3, 4, 4, 4])
    mean, (lo, hi) = mean_ci(x)
    ref = stats.ttest_1samp(x, 0).confidence_interval(0.95)
    assert mean == pytest.approx(x.mean())
    assert (lo, hi) == pytest.approx((ref.low, ref.high))
    assert mean_ci([2.0]) == (2.0, None) and mean_ci([]) == (None, None)


def test_summary_counts_unscored_and_measures_judge_agreement():
    rubric = load_rubric("general")
    names = rubric.criterion_names
    records = []
    for i, (a, b) in enumerate([(0, 0), (2, 2), (4, 3), (1, None)]):
        votes = [{"judge": "a", "criterion": c, "score": a} for c in names]
        votes += [
            {
                "judge": "b",
                "criterion": c,
                "score": b,
                "error": None if b is not None else f"prompt is {900 + i} tokens: 'x{i}'",
            }
            for c in names
        ]
        scores = dict.fromkeys(names, (a + b) / 2 if b is not None else None)
        records.append(
            {
                "id": str(i),
                "status": "scored" if b is not None else "unscored",
                "scores": scores,
                "votes": votes,
                **PROVENANCE,
            }
        )
    s = summarize(records, rubric)
    assert (s.items, s.scored, s.unscored) == (4, 3, 1)
    acc = s.criteria[0]
    assert (
        acc.n_scored == 3
        and acc.n_unscored == 1
        and acc.mean == pytest.approx(np.mean([0, 2, 3.5]))
    )
    assert acc.judge_agreement["value"] == pytest.approx(
        __import__("krippendorff").alpha(
            np.array([[0, 2, 4, 1], [0, 2, 3, np.nan]]), level_of_measurement="interval"
        )
    )
    assert s.judges["b"]["unscored"] == 4 and s.judges["b"]["top_reasons"] == [
        "prompt is N tokens (4)"
    ]


def test_summary_adds_calibrated_rows_when_records_have_them():
    rubric = load_rubric("general")
    records = [
        {
            "id": str(i),
            "status": "scored",
            "scores": dict.fromkeys(rubric.criterion_names, 0.0),
            **PROVENANCE,
            "calibrated": {c: (v if c == "accuracy" else None) for c in rubric.criterion_names},
            "votes": [],
        }
        for i, v in enumerate([2.0, 3.0, 4.0])
    ]
    s = summarize(records, rubric)
    row = next(c for c in s.criteria if c.name == "accuracy (calibrated)")
    assert row.mean == pytest.approx(3.0) and row.n_scored == 3
    assert next(c for c in s.criteria if c.name == "parsimony (calibrated)").n_unscored == 3


def test_reason_groups_keep_judge_names_with_digits():
    from jurybox.judges.parsing import reason_kind as _reason_kind

    kind = _reason_kind(
        "prompt is 31000 tokens; it exceeds the 8192-token context of judge gemma3-270m"
    )
    assert kind == "prompt is N tokens; it exceeds the N-token context of judge gemma3-270m"
    assert _reason_kind("judge smollm2-135m failed: 'x1'") == "judge smollm2-135m failed"
