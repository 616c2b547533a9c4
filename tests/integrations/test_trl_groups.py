"""TRL's group rewards without a trainer (``group_size=`` given): called as GRPOTrainer calls a
reward function, on an in-process jury (the replay jury: the tiny jury's recorded answers; or
simulated judges of known qualities, tests/group_helpers.py). The trainer itself, from a live
service and in process, is test_trl.py's."""

from __future__ import annotations

import logging

import pytest
from group_helpers import sim_jury
from judging_helpers import QUESTION, REFERENCE

from jurybox.integrations.core import MissingRewards
from jurybox.integrations.trl import jury_reward
from jurybox.judges.groups import Group, GroupJob, GroupSpec, judge_groups
from jurybox.judges.resolution import ResolvedReward
from jurybox.rubrics import load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec

OTHER = "When should I plant garlic in Ohio?"
COMPLETIONS = ["Early blight, a fungus.", "A virus.", "Plant in October.", "In spring."]
QUALITY = {"[best]": 1.0, "[good]": 0.3, "[poor]": -0.5, "[worst]": -1.2}


class Log:
    """TRL's log_metric and log_extra, recorded."""

    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}
        self.extra: dict[str, list] = {}

    def metric(self, name: str, value: float) -> None:
        self.metrics[name] = value

    def column(self, name: str, values: list) -> None:
        self.extra[name] = values


def batch(prompts, completions, log: Log | None = None):
    log = log or Log()
    return {
        "prompts": prompts,
        "completions": completions,
        "answer": [REFERENCE] * len(prompts),
        "log_metric": log.metric,
        "log_extra": log.column,
    }


def test_a_group_reward_ranks_each_prompt_s_completions_as_the_job_does(replay_tiny, capsys):
    reward = jury_reward(
        jury=replay_tiny,
        rubric="pairwise",
        group="round_robin",
        group_size=2,
        fields={"reference": "answer"},
    )
    printed = capsys.readouterr().out
    assert printed == (
        "jurybox: jury_pairwise_round_robin: 2 judge calls per judge per group "
        "of 2 (round robin: 1 pair x 2 calls (both orders)); 2 judges: 4 judge "
        "calls per group\n"
    )  # before the first step
    log = Log()
    prompts = [QUESTION, QUESTION, OTHER, OTHER]
    got = reward(**batch(prompts, COMPLETIONS, log))
    fields = [
        {"question": QUESTION, "reference": REFERENCE},
        {"question": OTHER, "reference": REFERENCE},
    ]
    want = judge_groups(
        replay_tiny,
        GroupJob(
            GroupSpec(),
            load_rubric("pairwise"),
            replay_tiny.spec,
            [Group("a", fields[0], COMPLETIONS[:2]), Group("b", fields[1], COMPLETIONS[2:])],
        ),
    )
    assert got == [r for result in want for r in result.rewards]
    # The tiny jury's judges contradict themselves when a pair's order is swapped: each pair
    # is a tie (issue 60, 7), its rewards tie, and the group has no signal.
    assert got == [0.5] * 4 and all(w.signal is False for w in want)
    name = "jury_pairwise_round_robin"
    assert log.metrics[f"jurybox/{name}/unscored"] == 0.0
    assert log.metrics[f"jurybox/{name}/zero_spread"] == 1.0
    assert log.metrics[f"jurybox/{name}/no_signal"] == 1.0
    assert log.metrics[f"jurybox/{name}/spread"] == 0.0
    assert log.metrics[f"jurybox/{name}/calls_per_group"] == 2.0
    (column,) = log.extra.values()
    assert (
        len(column) == 4
        and column[0].startswith("reward ")
        and "1 of 1 comparisons" in column[0]
        and "from expected scores" in column[0]
    )
    reward.rewards.close()  # type: ignore[attr-defined]


def test_a_completion_whose_comparisons_are_unscored_is_none_and_logged(caplog):
    jury = sim_jury(QUALITY, fail=("[worst]",))
    reward = jury_reward(jury=jury, rubric="pairwise", group="round_robin", group_size=4)
    log = Log()
    with caplog.at_level(logging.WARNING, logger="jurybox.integrations"):
        got = reward(**batch([QUESTION] * 4, list(QUALITY), log))
    assert got[3] is None and got[0] > got[1] > got[2]
    assert log.metrics["jurybox/jury_pairwise_round_robin/unscored"] == 1.0
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(
        "jurybox: 1 of 4 rewards (jury_pairwise_round_robin) unscored: "
        f"completion 3 of the batch (prompt {QUESTION!r}): all its "
        "comparisons unscored: "
    )
    strict = jury_reward(
        jury=jury, rubric="pairwise", group="round_robin", group_size=4, unscored="error"
    )
    with pytest.raises(
        MissingRewards,
        match=r"^jurybox: 1 sample\(s\) have no "
        r"jury_pairwise_round_robin reward: completion 3",
    ):
        strict(**batch([QUESTION] * 4, list(QUALITY)))
    valued = jury_reward(
        jury=jury, rubric="pairwise", group="round_robin", group_size=4, unscored=0.25
    )
    assert valued(**batch([QUESTION] * 4, list(QUALITY)))[3] == 0.25


def test_groups_that_are_not_whole_or_not_one_prompt_s_are_refused():
    reward = jury_reward(
        jury=sim_jury(QUALITY), rubric="pairwise", group="round_robin", group_size=2
    )
    with pytest.raises(
        InputError,
        match=r"^jurybox: the batch has 3 completions, not a whole "
        r"number of groups of 2",
    ) as caught:
        reward(**batch([QUESTION] * 3, list(QUALITY)[:3]))
    assert caught.value.field == "group_size"
    with pytest.raises(
        InputError,
        match=r"^jurybox: completions 0-1 of the batch should be one "
        r"prompt's group of 2 .*but completion 1 has another "
        r"question",
    ):
        reward(**batch([QUESTION, OTHER], list(QUALITY)[:2]))


def test_a_group_of_one_is_rewarded_pointwise():
    reward = jury_reward(
        jury=sim_jury(QUALITY),
        rubric="pairwise",
        group="round_robin",
        pointwise="mirage-mg",
        group_size=1,
    )
    with pytest.raises(
        InputError,
        match=r"^jurybox: completion 0 of the batch \(prompt .*\): "
        r"rubric mirage-mg needs the reference, and it is "
        r"missing: column 'reference'",
    ):
        reward(**batch([QUESTION, OTHER], ["[best]", "[worst]"]))  # (the reference: "answer")
    reward = jury_reward(
        jury=sim_jury(QUALITY),
        rubric="pairwise",
        group="round_robin",
        pointwise="mirage-mg",
        group_size=1,
        fields={"reference": "answer"},
    )
    log = Log()
    got = reward(**batch([QUESTION, OTHER], ["[best]", "[worst]"], log))
    assert got[0] > got[1]
    (column,) = log.extra.values()
    assert "a group of one completion is rewarded pointwise (mirage-mg)" in column[0]


@pytest.mark.parametrize(
    "kwargs,field,words",
    [
        (
            {"rubric": "mirage-mg", "group": "round_robin"},
            "rubric",
            "jurybox: the round_robin design compares completions in pairs: it needs a pairwise rubric",
        ),
        (
            {"rubric": "pairwise", "group": "tournament"},
            "group",
            "jurybox: group='tournament' is no design",
        ),
        ({"rubric": "pairwise", "group": "anchor"}, "pointwise", "jurybox: the anchor design"),
        (
            {"rubric": "pairwise", "group": "round_robin", "per_criterion": True},
            "per_criterion",
            "a group reward is one function",
        ),
        ({"rubric": "mirage-mg", "pointwise": "mirage-mg"}, "group", "give group= too"),
        ({"rubric": "mirage-mg", "name": "mine"}, "group", "give group= too"),
    ],
)
def test_group_options_that_do_not_fit_are_refused_naming_the_field(kwargs, field, words):
    with pytest.raises(InputError, match=words) as caught:
        jury_reward(jury=sim_jury(QUALITY), **kwargs)
    assert caught.value.field == field


def test_a_pointwise_reward_from_expected_scores_says_so(replay_tiny):
    reward = jury_reward(
        jury=replay_tiny, rubric="mirage-mg", use="expected", fields={"reference": "answer"}
    )
    log = Log()
    got = reward(**batch([QUESTION, QUESTION], COMPLETIONS[:2], log))
    chosen = jury_reward(jury=replay_tiny, rubric="mirage-mg", fields={"reference": "answer"})
    assert chosen(**batch([QUESTION, QUESTION], COMPLETIONS[:2])) == [0.075, 0.075]
    records = replay_tiny.score_records(
        load_rubric("mirage-mg"),
        [
            reward.rewards.item(k, {"prompt": QUESTION, "completion": c, "answer": REFERENCE})
            for k, c in enumerate(COMPLETIONS[:2])
        ],
    )
    resolved = ResolvedReward.bind(
        RewardSpec(), load_rubric("mirage-mg"), replay_tiny.spec, "expected"
    )
    assert got == [resolved.read(r).value for r in records] and got[0] != got[1]
    assert log.metrics["jurybox/jury_mirage_mg_weighted_sum/expected"] == 1.0
    (column,) = log.extra.values()
    assert all(line.endswith("[reward from expected scores]") for line in column)


def test_other_callers_group_rows_by_a_key_column():
    """JuryRewards.group_rewards: a group per value of a column, its rows anywhere in the
    batch; the rewards come back in the rows' order."""
    from jurybox.integrations.core import JuryRewards

    rewards = JuryRewards("pairwise", jury=sim_jury(QUALITY), reward=RewardSpec(scale="raw"))
    rows = [
        {"prompt_id": 1, "prompt": QUESTION, "completion": "[poor]"},
        {"prompt_id": 2, "prompt": OTHER, "completion": "[best]"},
        {"prompt_id": 1, "prompt": QUESTION, "completion": "[best]"},
        {"prompt_id": 2, "prompt": OTHER, "completion": "[worst]"},
    ]
    got, results = rewards.group_rewards(rows, "prompt_id", GroupSpec(), size=2)
    assert [r.id for r in results] == ["prompt_id=1", "prompt_id=2"]
    assert got[2] > got[0] and got[1] > got[3]
    assert got == [
        results[0].rewards[0],
        results[1].rewards[0],
        results[0].rewards[1],
        results[1].rewards[1],
    ]
    with pytest.raises(
        InputError, match="group prompt_id=1 has 2 rows; every group should have 3"
    ) as caught:
        rewards.group_rewards(rows, "prompt_id", GroupSpec(), size=3)
    assert caught.value.field == "size"
    with pytest.raises(
        InputError, match="row 2 is in group prompt_id=1 with row 0 but has another question"
    ):
        rewards.group_rewards(
            [rows[0], rows[1], {**rows[2], "prompt": OTHER}], "prompt_id", GroupSpec()
        )
