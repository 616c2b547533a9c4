"""Human preference labels (a, b, tie) against pairwise verdicts: each judge's two orders count
as one vote, combined by the rubric's rule; labels read as A's share; agreement computed on
that (checked by hand); the judges' position labels ("1"/"2") never leak in as A or B."""

from __future__ import annotations

import json

import numpy as np
import pytest

from jurybox.calibration import agreement_report, judge_output_from_records
from jurybox.calibration.data.joined import join
from jurybox.rubrics import load_rubric

# Per item: the fair judge's A-share in both orders, the positional judge's (always the first
# answer), and the humans' label.
ITEMS = [("a", "a"), ("b", "b"), ("a", "tie"), ("b", "b"), ("a", "a"), ("tie", "tie")]
SHARE = {"a": 1.0, "b": 0.0, "tie": 0.5}


def _records():
    records = []
    for k, (fair, _) in enumerate(ITEMS):
        votes = []
        for order in ("ab", "ba"):
            for judge, share in (("fair", SHARE[fair]), ("first", 1.0 if order == "ab" else 0.0)):
                shown = share if order == "ab" else 1.0 - share
                label = {1.0: "1", 0.0: "2", 0.5: "tie"}[shown]
                votes.append(
                    {
                        "judge": judge,
                        "criterion": "better",
                        "score": share,
                        "label": label,
                        "order": order,
                    }
                )
        records.append(
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
    return records


@pytest.fixture
def human(tmp_path):
    path = tmp_path / "pref.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"p{k}", "rater": "h", "better": h}) + "\n"
            for k, (_, h) in enumerate(ITEMS)
        )
    )
    return path


def test_pairwise_votes_are_combined_and_labels_read_as_a_s_share(human):
    output = judge_output_from_records(_records())
    assert output.pairwise
    data = join(human, output, scales=load_rubric("pairwise")).criteria["better"]
    assert data.human_mean.tolist() == [SHARE[h] for _, h in ITEMS]
    assert data.judges["fair"].tolist() == [SHARE[f] for f, _ in ITEMS]
    assert data.judges["first"].tolist() == [0.5] * len(ITEMS)  # inconsistent: a tie
    strict = load_rubric("pairwise").model_copy(update={"inconsistent": "unscored"})
    assert np.isnan(join(human, output, scales=strict).criteria["better"].judges["first"]).all()
    # Without a rubric the labels are still a/b/tie (never the judges' "1"/"2").
    bare = join(human, output).criteria["better"]
    assert bare.judges["fair"].tolist() == data.judges["fair"].tolist()


def test_agreement_with_preference_labels_is_the_share_of_equal_answers(human):
    report = agreement_report(
        human, judge_output_from_records(_records()), scales=load_rubric("pairwise"), n_resamples=50
    )
    crit = report.criteria["better"]
    assert crit.categorical and crit.scale == [0.0, 0.5, 1.0]
    exact = {j: stats["exact"].value for j, stats in crit.judge_human.items()}
    assert exact["fair"] == pytest.approx(np.mean([f == h for f, h in ITEMS]))  # 5 of 6
    # The positional judge is a tie everywhere: it meets the humans only on their ties.
    assert exact["first"] == pytest.approx(np.mean([h == "tie" for _, h in ITEMS]))
