"""``agree-groups``' report (jurybox.calibration.reports.group_agreement): groups whose rewards
all tie are counted and enter a tau defined for them (issue 60, item 4), and the intervals over
groups are Student t intervals that hold at few groups, checked against scipy and by a seeded
coverage simulation (item 5; the full table is perf/group_agreement_coverage.py's)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from jurybox.calibration.reports.group_agreement import MIN_GROUPS, agreement_of


def write(tmp_path, rewards, rankings):
    """The jury's results and the humans' rankings (best first) as the two JSONL files."""
    judged, human = tmp_path / "judged.jsonl", tmp_path / "human.jsonl"
    judged.write_text("".join(json.dumps({"id": g, "rewards": r}) + "\n" for g, r in rewards))
    human.write_text("".join(json.dumps({"id": g, "ranking": o}) + "\n" for g, o in rankings))
    return human, judged


def test_a_jury_that_ties_99_of_100_groups_says_so_and_reports_a_tau_for_them(tmp_path):
    """The issue's jury: tau-b over the one untied group reads 1.000 [1.000, 1.000]; the
    report now counts the 99 tied groups and gives the mean tau with theirs at 0, equal to
    scipy's kendalltau per group (NaN, a constant input, read as 0)."""
    rng = np.random.default_rng(1)
    rewards = [("g0", [0.9, 0.6, 0.3, 0.1])] + [(f"g{g}", [0.5] * 4) for g in range(1, 100)]
    rankings = [("g0", [0, 1, 2, 3])] + [
        (f"g{g}", [int(c) for c in rng.permutation(4)]) for g in range(1, 100)
    ]
    report = agreement_of(*write(tmp_path, rewards, rankings))
    assert report.tied_groups == 99
    assert report.kendall_tau_b.value == 1.0 and report.kendall_tau_b.n == 1
    assert report.kendall_tau_b.ci is None  # one group: no interval, and it says why
    want = []
    for (_, r), (_, order) in zip(rewards, rankings):
        human = [-order.index(c) for c in range(4)]
        with np.errstate(invalid="ignore"):
            tau = stats.kendalltau(r, human).statistic
        want.append(0.0 if math.isnan(tau) else tau)
    tau0 = report.kendall_tau_ties_zero
    assert tau0.value == pytest.approx(np.mean(want)) == pytest.approx(0.01) and tau0.n == 100
    assert tau0.ci is not None and tau0.ci[0] < 0.01 < tau0.ci[1]
    assert report.pair_agreement.value == pytest.approx((6 + 99 * 3) / 600)  # 0.505
    words = "\n".join(report.words())
    assert "99 of 100 groups have rewards that all tie" in words
    assert "tie at 0: 0.010 [" in words
    assert "ranked groups: 1.000 (no interval: 1 group; an interval needs" in words
    assert report.to_dict()["tied_groups"] == 99


def test_the_intervals_are_scipy_s_student_t_over_groups_with_a_pseudo_group(tmp_path):
    """Tau's interval is scipy's one-sample t interval on the groups' taus; the pair
    agreement's, with every group the same number of pairs, the t interval of the groups'
    own agreement shares (the linearised ratio reduces to it)."""
    rng = np.random.default_rng(2)
    g = MIN_GROUPS
    rewards = [(f"g{x}", list(rng.normal(size=5))) for x in range(g)]
    rankings = [(f"g{x}", [int(c) for c in rng.permutation(5)]) for x in range(g)]
    report = agreement_of(*write(tmp_path, rewards, rankings))
    taus, shares = [], []
    for (_, r), (_, order) in zip(rewards, rankings):
        human = [-order.index(c) for c in range(5)]
        taus.append(stats.kendalltau(r, human).statistic)
        shares.append(
            np.mean(
                [
                    (r[a] - r[b]) * (human[a] - human[b]) > 0
                    for a in range(5)
                    for b in range(a + 1, 5)
                ]
            )
        )
    for stat, values, bounds in (
        (report.kendall_tau_b, taus, (-1, 1)),
        (report.pair_agreement, shares, (0, 1)),
    ):
        # scipy's t interval of the groups' values and one pseudo-group at the midpoint, on the
        # real groups' degrees of freedom (equal counts: the pair agreement is the shares').
        aug = np.append(values, (bounds[0] + bounds[1]) / 2)
        sem = stats.sem(aug)
        low, high = stats.t.interval(0.95, len(values) - 1, loc=aug.mean(), scale=sem)
        assert stat.value == pytest.approx(np.mean(values))
        assert stat.ci == pytest.approx((max(bounds[0], low), min(bounds[1], high)))


def test_groups_that_all_agree_at_the_ceiling_get_an_interval_not_a_point(tmp_path):
    """Found in review (#60 item 5): 20 groups whose rankings all agree gave tau and pair
    agreement (1.0, 1.0), and near the ceiling the plain t interval covered 0.65 at 20 groups
    (perf/group_agreement_coverage.py's ``ceiling`` jury)."""
    g = MIN_GROUPS
    rewards = [(f"g{x}", [4.0, 3.0, 2.0, 1.0]) for x in range(g)]
    rankings = [(f"g{x}", [0, 1, 2, 3]) for x in range(g)]
    report = agreement_of(*write(tmp_path, rewards, rankings))
    for stat in (report.kendall_tau_b, report.pair_agreement):
        assert stat.value == pytest.approx(1.0)
        assert stat.ci[1] == pytest.approx(1.0) and stat.ci[0] < 0.95


@pytest.mark.parametrize("groups", [5, 10, MIN_GROUPS - 1])
def test_few_groups_get_no_interval_and_the_report_says_why(tmp_path, groups):
    """Issue 60 (5): the percentile bootstrap gave 5 groups an interval that covered 0.81
    (perf/group_agreement_coverage.py); no interval over fewer than MIN_GROUPS groups holds
    (Student's t: 0.905-0.940 at 5 and 10), so none is given, and the report says why."""
    assert MIN_GROUPS == 20
    rng = np.random.default_rng(groups)
    rewards = [(f"g{x}", list(rng.normal(size=4))) for x in range(groups)]
    rankings = [(f"g{x}", [int(c) for c in rng.permutation(4)]) for x in range(groups)]
    report = agreement_of(*write(tmp_path, rewards, rankings))
    for name in ("kendall_tau_b", "pair_agreement", "kendall_tau_ties_zero"):
        stat = getattr(report, name)
        assert stat.value is not None and stat.ci is None
        assert stat.details["no_interval"] == (
            f"{groups} groups; an interval needs {MIN_GROUPS} or more"
        )
    assert f"(no interval: {groups} groups; an interval needs 20 or more)" in report.words()[1]
