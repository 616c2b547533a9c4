"""Checklists in the trainers' adapters (#63): TRL's reward from a checklist column, verl's from
``extra_info`` or the ground truth, Inspect's scorer from a sample's metadata, rubric dropout
(seeded, per step, logged, off by default) and requests chunked by points.

Two kinds of test. The plumbing ones look at what reaches the jury (`JuryRewards` hands its
in-process jury the items through ``score_records``: a spy records them and answers each with an
unscored record). The end-to-end ones judge with a fake judge registered through the backend
registry (``point-checker-for-tests``: a point is met when the answer holds every word of it but
"mentions"), through the in-process jury's checklist path (units, judges, assembly).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from exploit_helpers import fake_jury, fake_spec

from jurybox.integrations.checklists import chunks
from jurybox.integrations.core import JuryRewards
from jurybox.integrations.trl import jury_reward
from jurybox.judges.backends.protocol import Generation
from jurybox.rubrics import Item, load_rubric
from jurybox.rubrics.checklist import DROPPED, checklist_calls
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec

QUESTION = "How should I take ibuprofen for a headache?"
#: HealthBench's shape, read as it is: criterion, points (a pitfall negative), tags.
CHECKLIST = [
    {"criterion": "Mentions ibuprofen", "points": 5, "tags": ["axis:accuracy"]},
    {"criterion": "Mentions 400 mg", "points": 3, "tags": []},
    {"criterion": "Mentions food", "points": 2, "tags": []},
    {"criterion": "Mentions alcohol", "points": -4, "tags": ["axis:safety"]},
    {"criterion": "Mentions doctor", "points": 2, "tags": []},
    {"criterion": "Mentions water", "points": 1, "tags": []},
]
POSSIBLE = 5 + 3 + 2 + 2 + 1  # the positive points
GOOD = "Take 400 mg of ibuprofen with food."  # p1, p2, p3 met
RISKY = "Ibuprofen goes well with alcohol."  # p1 met, the pitfall p4 committed
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - {"mentions"}


class PointChecker:
    """A judge of one checklist point: "yes" when the answer holds every word of the point.

    Every point it was asked about is kept in ``SEEN`` (the class's, across the jury's copies).
    """

    SEEN: ClassVar[list[str]] = []

    def __init__(self, spec: Any) -> None:
        self.name = spec.name

    def generate(self, requests: Any, cancelled: Any = None) -> list[Generation]:
        out = []
        for request in requests:
            answer, point = "", ""
            for message in request.pieces or ():
                before = ""
                for text, is_item in message:
                    if not is_item:
                        before = text.lower()
                    elif "answer to check" in before:
                        answer = text
                    elif "checklist point" in before:
                        point = text
            PointChecker.SEEN.append(point)
            met = bool(point) and words(point) <= words(answer)
            out.append(Generation(text=json.dumps({"met": "yes" if met else "no"})))
        return out

    def close(self) -> None:
        pass


@pytest.fixture
def checker(monkeypatch: pytest.MonkeyPatch):
    """The point checker, registered for one test; ``SEEN`` emptied."""
    from jurybox.judges.backends import registry

    monkeypatch.setattr(registry, "_registered", {})
    registry.register("point-checker-for-tests", PointChecker)
    PointChecker.SEEN = []
    return PointChecker


@pytest.fixture
def wrap(checker):
    """The in-process jury on the point checker (it judges checklist rubrics: no skip)."""
    jury = fake_jury("point-checker-for-tests")
    item = Item(id="x", question=QUESTION, response=GOOD, checklist=CHECKLIST[:2])
    (verdict,) = jury.score(load_rubric("checklist"), [item])
    assert verdict.points is not None
    checker.SEEN = []
    return jury


def spy(rewards: JuryRewards) -> list[list[Item]]:
    """What the reward's in-process jury is handed, batch by batch (each answered unscored)."""
    seen: list[list[Item]] = []

    def score_records(rubric: Any, items: Any, *args: Any, **kwargs: Any) -> list[dict]:
        seen.append(list(items))
        return [rewards._unsent(item, "not judged: a spy") for item in items]

    rewards._jury.score_records = score_records
    return seen


def keys(item: Item) -> list[str]:
    return [p.key for p in item.checklist or ()]


def expected(response: str) -> float:
    """HealthBench's score of ``response`` on CHECKLIST, the points met by the checker's rule."""
    earned = sum(p["points"] for p in CHECKLIST if words(p["criterion"]) <= words(response))
    return min(1.0, max(0.0, earned / POSSIBLE))


def trl_call(reward, completions, column="checklist", checklists=None, step=None, log=None):
    kwargs: dict[str, Any] = {
        column: checklists if checklists is not None else [CHECKLIST] * len(completions)
    }
    if step is not None:
        kwargs["trainer_state"] = SimpleNamespace(global_step=step)
    if log is not None:
        kwargs["log_metric"] = lambda name, value: log.setdefault(name, []).append(value)
    return reward(prompts=[QUESTION] * len(completions), completions=completions, **kwargs)


# -- the checklist's column -------------------------------------------------------------------


def test_checklist_column_reaches_the_jury_as_points(checker):
    reward = jury_reward(jury=fake_jury("point-checker-for-tests"), rubric="checklist")
    seen = spy(reward.rewards)
    # a list of HealthBench's points, and the same as a JSON string
    trl_call(reward, [GOOD, RISKY], checklists=[CHECKLIST, json.dumps(CHECKLIST)])
    (batch,) = seen
    for item in batch:
        assert [p.text for p in item.checklist] == [p["criterion"] for p in CHECKLIST]
        assert [p.points for p in item.checklist] == [p["points"] for p in CHECKLIST]
        assert keys(item) == [f"p{k + 1}" for k in range(len(CHECKLIST))]
    assert batch[0].checklist == batch[1].checklist
    # another column, by name
    other = jury_reward(
        jury=fake_jury("point-checker-for-tests"), rubric="checklist", checklist_column="rubrics"
    )
    seen = spy(other.rewards)
    trl_call(other, [GOOD], column="rubrics", checklists=[CHECKLIST[:2]])
    assert keys(seen[0][0]) == ["p1", "p2"]


def test_a_missing_or_bad_checklist_names_the_row_and_the_column(checker):
    reward = jury_reward(jury=fake_jury("point-checker-for-tests"), rubric="checklist")
    spy(reward.rewards)
    with pytest.raises(InputError, match=r"completion 0 .*it is missing: column 'checklist'"):
        reward(prompts=[QUESTION], completions=[GOOD])
    bad = [[*CHECKLIST[:1], {"criterion": "x", "points": 0}]]
    with pytest.raises(InputError, match=r"completion 0 .*column 'checklist'\[1\]: points"):
        trl_call(reward, [GOOD], checklists=bad)
    with pytest.raises(InputError, match="not a JSON list"):
        trl_call(reward, [GOOD], checklists=["[{oops"])
    # a rubric without a checklist reads no such column
    plain = JuryRewards("mirage-mg", jury=fake_jury("point-checker-for-tests"))
    row = {"prompt": QUESTION, "completion": GOOD, "reference": "r", "checklist": CHECKLIST}
    item = plain.item(0, row)
    assert item.checklist is None


def test_reward_of_a_checklist_rubric_is_its_item_score(checker):
    rubric = load_rubric("checklist")
    bound = RewardSpec().bind(rubric)
    assert (bound.score, bound.low, bound.high) == ("score", 0.0, 1.0)
    with pytest.raises(InputError, match="the reward's score is 'score'"):
        RewardSpec(score="met").bind(rubric)
    with pytest.raises(InputError, match="per_criterion does not apply"):
        jury_reward(
            jury=fake_jury("point-checker-for-tests"), rubric="checklist", per_criterion=True
        )


def test_trl_reward_from_checklist_column(wrap):
    reward = jury_reward(jury=wrap, rubric="checklist")
    log: dict[str, list[float]] = {}
    got = trl_call(reward, [GOOD, RISKY, "Drink water."], log=log)
    assert got == pytest.approx([expected(GOOD), expected(RISKY), expected("Drink water.")])
    assert got[0] == pytest.approx((5 + 3 + 2) / POSSIBLE)
    assert got[1] == pytest.approx((5 - 4) / POSSIBLE)
    # every point of every completion judged once (per_point: a call per point)
    assert len(PointChecker.SEEN) == 3 * len(CHECKLIST)
    assert set(PointChecker.SEEN) == {p["criterion"] for p in CHECKLIST}
    assert reward.rewards.stats.judge_calls == 3 * len(CHECKLIST)
    assert log["jurybox/jury_checklist_score/unscored"] == [0.0]
    assert "jurybox/jury_checklist_score/dropout_kept" not in log


# -- rubric dropout -----------------------------------------------------------------------------


def items(n: int = 3, response: str = GOOD) -> list[Item]:
    return [
        Item(id=str(k), question=f"{QUESTION} ({k})", response=response, checklist=CHECKLIST)
        for k in range(n)
    ]


def test_dropout_changes_judged_points_and_is_seeded(checker):
    def judged(rate: float, seed: int, step: int, batch: list[Item]) -> list[list[str]]:
        rewards = JuryRewards(
            "checklist",
            jury=fake_jury("point-checker-for-tests"),
            dropout=rate,
            dropout_seed=seed,
            unscored="none",
        )
        seen = spy(rewards)
        rewards.records(batch, step=step)
        return [keys(item) for item in seen[-1]]

    batch = items(4)
    before = [item.model_copy(deep=True) for item in batch]
    every = [keys(item) for item in batch]
    first = judged(0.5, 7, 3, batch)
    assert first != every  # points left out
    assert first == judged(0.5, 7, 3, batch)  # the same seed and step: the same points
    assert all(set(k) <= set(e) for k, e in zip(first, every))  # keys kept, never renamed
    others = [judged(0.5, 7, step, batch) for step in (4, 5, 6)]
    assert any(other != first for other in others)  # another step, other points
    assert judged(0.5, 8, 3, batch) != first or judged(0.5, 9, 3, batch) != first  # other seeds
    assert judged(0.0, 7, 3, batch) == every  # rate 0: every point
    # every item keeps a positive point at any rate
    for step in range(20):
        for got in judged(0.95, 1, step, batch):
            assert any(CHECKLIST[int(k[1:]) - 1]["points"] > 0 for k in got)
    assert batch == before  # the items are not changed


def test_dropout_draws_one_subset_per_prompt(checker):
    # the completions of one prompt (a GRPO group) are judged on the same points at a step
    reward = jury_reward(
        jury=fake_jury("point-checker-for-tests"), rubric="checklist", dropout=0.5, dropout_seed=3
    )
    seen = spy(reward.rewards)
    for step in range(6):
        trl_call(reward, [GOOD, RISKY, "Drink water."], step=step)
    groups = [{tuple(keys(item)) for item in batch} for batch in seen]
    assert all(len(g) == 1 for g in groups)
    assert len({g.pop() for g in groups}) > 1  # while the steps draw other subsets
    # and the verdict's dropped keys are the ones left out
    for batch in seen:
        for item in batch:
            assert sorted(item.extra.get(DROPPED, []) + keys(item)) == sorted(
                f"p{k + 1}" for k in range(len(CHECKLIST))
            )


def test_dropout_subset_hashes_the_prompt_not_the_id(checker):
    # the subset is drawn from a hash of question, context and checklist, whatever the ids
    from jurybox.integrations.checklists import Dropout

    def kept(batch: list[Item], step: int = 2) -> list[list[str]]:
        return [keys(item) for item in Dropout(0.5, 5).apply(batch, step)[0]]

    one = Item(id="a", question=QUESTION, response=GOOD, checklist=CHECKLIST)
    ids = [one.model_copy(update={"id": f"row-{k}"}) for k in range(8)]
    assert len({tuple(k) for k in kept(ids)}) == 1  # other ids, one prompt: one subset
    contexts = [one.model_copy(update={"context": f"c{k}"}) for k in range(8)]
    assert len({tuple(k) for k in kept(contexts)}) > 1  # another context, another prompt
    # with no step given, each batch is the next step (verl's): one prompt in two batches
    counted = Dropout(0.5, 5)
    drawn = [keys(counted.apply([one])[0][0]) for _ in range(8)]
    assert [keys(Dropout(0.5, 5).apply([one], s)[0][0]) for s in range(8)] == drawn
    assert len({tuple(k) for k in drawn}) > 1


def test_dropout_logged_per_step(checker, caplog):
    reward = jury_reward(
        jury=fake_jury("point-checker-for-tests"), rubric="checklist", dropout=0.5, dropout_seed=11
    )
    seen = spy(reward.rewards)
    log: dict[str, list[float]] = {}
    with caplog.at_level(logging.INFO, logger="jurybox.integrations"):
        for step in (3, 4):
            trl_call(reward, [GOOD, RISKY], step=step, log=log)
    steps = reward.rewards.stats.dropout
    assert [s["step"] for s in steps] == [3, 4]  # TRL's global_step
    for record, batch in zip(steps, seen):
        assert (record["rate"], record["seed"]) == (0.5, 11)
        assert record["of"] == 2 * len(CHECKLIST)
        assert record["kept"] == sum(len(item.checklist) for item in batch)
    kept = log["jurybox/jury_checklist_score/dropout_kept"]
    assert kept == [s["kept"] / s["of"] for s in steps]
    lines = [r.getMessage() for r in caplog.records if "rubric dropout" in r.getMessage()]
    assert len(lines) == 2
    assert lines[0].startswith("jurybox: rubric dropout at step 3 (rate 0.5, seed 11): ")
    assert f"{steps[0]['kept']} of {steps[0]['of']} checklist points" in lines[0]
    # without TRL's state the step is the reward's own count of batches
    rewards = JuryRewards(
        "checklist", jury=fake_jury("point-checker-for-tests"), dropout=0.5, unscored="none"
    )
    spy(rewards)
    rewards.records(items(2))
    rewards.records(items(2))
    assert [s["step"] for s in rewards.stats.dropout] == [0, 1]


def test_dropout_off_by_default(checker):
    assert RewardSpec().dropout == 0.0
    reward = jury_reward(jury=fake_jury("point-checker-for-tests"), rubric="checklist")
    seen = spy(reward.rewards)
    log: dict[str, list[float]] = {}
    for step in range(3):
        trl_call(reward, [GOOD, RISKY], step=step, log=log)
    assert all(keys(item) == keys(items(1)[0]) for batch in seen for item in batch)
    assert all(DROPPED not in item.extra for batch in seen for item in batch)
    assert reward.rewards.stats.dropout == []
    assert not any("dropout" in name for name in log)
    # dropout asks for a checklist rubric, and a rate in [0, 1)
    with pytest.raises(InputError, match="judges no checklist"):
        JuryRewards("mirage-mg", jury=fake_jury("point-checker-for-tests"), dropout=0.3)
    with pytest.raises(InputError, match="dropout"):
        RewardSpec(dropout=1.0)


def test_dropout_judges_only_the_points_kept(wrap):
    reward = jury_reward(jury=wrap, rubric="checklist", dropout=0.5, dropout_seed=5)
    spy_items: list[list[Item]] = []
    original = reward.rewards._jury.score_records

    def recording(rubric: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        spy_items.append(list(batch))
        return original(rubric, batch, *args, **kwargs)

    reward.rewards._jury.score_records = recording
    got = trl_call(reward, [GOOD], step=2)
    (item,) = spy_items[0]
    texts = {p.text for p in item.checklist}
    assert set(PointChecker.SEEN) == texts and len(texts) < len(CHECKLIST)
    kept = [p for p in CHECKLIST if p["criterion"] in texts]
    earned = sum(p["points"] for p in kept if words(p["criterion"]) <= words(GOOD))
    possible = sum(p["points"] for p in kept if p["points"] > 0)
    assert got == [pytest.approx(min(1.0, max(0.0, earned / possible)))]


# -- requests to a service, chunked by points --------------------------------------------------


class FakeRemote:
    """A service's jury as the reward sees it: its limits, and the requests it is sent."""

    def __init__(self, rewards: JuryRewards, max_items: int, max_judge_calls: int) -> None:
        self.spec = rewards._jury.spec
        self.max_items, self.max_judge_calls = max_items, max_judge_calls
        self.max_field_chars = None
        self.requests: list[list[Item]] = []
        self.rewards = rewards

    def score_records(self, rubric: Any, items: Any) -> list[dict]:
        self.requests.append(list(items))
        return [self.rewards._unsent(item, "not judged: a fake service") for item in items]


def test_chunking_counts_points(checker):
    sizes = [3, 4, 2, 6, 1]
    batch = [
        Item(id=str(k), question=QUESTION, response=GOOD, checklist=CHECKLIST[:n])
        for k, n in enumerate(sizes)
    ]
    per_point, all_points = load_rubric("checklist"), load_rubric("checklist-all")
    assert checklist_calls(per_point, batch) == sum(sizes)
    assert checklist_calls(all_points, batch) == len(sizes)
    # within 6 calls and 4 items a request: 3 | 4+2 | 6 | 1 points
    assert chunks(per_point, batch, 4, 6) == [(0, 1), (1, 3), (3, 4), (4, 5)]
    assert chunks(all_points, batch, 4, 6) == [(0, 4), (4, 5)]
    assert chunks(per_point, batch, 2, 100) == [(0, 2), (2, 4), (4, 5)]
    # an item over the calls alone goes alone (the service names it when it refuses)
    assert chunks(per_point, batch, 4, 2) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    # the reward sends those requests, and counts the points as its judge calls
    rewards = JuryRewards(
        "checklist",
        jury=fake_jury("point-checker-for-tests", "point-checker-for-tests"),
        unscored="none",
        concurrency=1,
    )
    remote = FakeRemote(rewards, max_items=4, max_judge_calls=6)
    rewards._jury, rewards._client = remote, object()
    records = rewards.records(batch)
    assert [len(r) for r in remote.requests] == [1, 2, 1, 1]
    assert [r["id"] for r in records] == [str(k) for k in range(len(sizes))]
    assert rewards.stats.requests == 4
    assert rewards.stats.judge_calls == 2 * sum(sizes)  # two judges, a call per point each


# -- verl -----------------------------------------------------------------------------------------


@pytest.fixture
def verl_jury(tmp_path, checker):
    """A jury file of the point checker (verl names its jury by file)."""
    import yaml

    from jurybox.integrations import verl

    path = tmp_path / "checker-jury.yaml"
    spec = fake_spec("point-checker-for-tests", name="checker")
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True)))
    yield str(path)
    verl._REWARDS.clear()


def verl_rewards(jury: str, **options: Any) -> JuryRewards:
    from jurybox.integrations.verl import jury_rewards

    return jury_rewards(rubric="checklist", jury=jury, unscored=0.0, **options)


def test_verl_checklist_from_extra_info(verl_jury):
    from jurybox.integrations.verl import compute_score_sync

    options = {"rubric": "checklist", "jury": verl_jury, "unscored": 0.0}
    seen = spy(verl_rewards(verl_jury))
    info = {"question": QUESTION, "index": 7}
    compute_score_sync(
        solution_str=GOOD,
        ground_truth="A reference.",
        extra_info={**info, "checklist": json.dumps(CHECKLIST)},
        **options,
    )
    compute_score_sync(solution_str=GOOD, ground_truth=CHECKLIST[:2], extra_info=info, **options)
    compute_score_sync(
        solution_str=GOOD,
        ground_truth={"checklist": CHECKLIST[:3], "reference": "Take it with food."},
        extra_info=info,
        **options,
    )
    (a,), (b,), (c,) = seen
    assert keys(a) == keys(items(1)[0]) and a.reference == "A reference."
    assert keys(b) == ["p1", "p2"] and b.reference is None  # the ground truth is the checklist
    assert keys(c) == ["p1", "p2", "p3"] and c.reference == "Take it with food."
    with pytest.raises(InputError, match=r"index=7: .*it is missing: extra_info\['checklist'\]"):
        compute_score_sync(
            solution_str=GOOD, ground_truth="A reference.", extra_info=info, **options
        )


def test_verl_reward_of_a_checklist(verl_jury, wrap):
    from jurybox.integrations.verl import compute_score_sync

    options = {"rubric": "checklist", "jury": verl_jury, "unscored": 0.0}
    out = compute_score_sync(
        solution_str=RISKY,
        extra_info={"question": QUESTION, "index": 1, "checklist": CHECKLIST},
        **options,
    )
    assert out["score"] == pytest.approx(expected(RISKY))
    assert out["jurybox/score"] == pytest.approx(expected(RISKY))
    assert "jurybox/dropout_kept" not in out
    dropped = compute_score_sync(
        solution_str=RISKY,
        extra_info={"question": QUESTION, "index": 1, "checklist": CHECKLIST},
        dropout=0.5,
        dropout_seed=2,
        **options,
    )
    assert 0.0 < dropped["jurybox/dropout_kept"] <= 1.0


# -- Inspect ------------------------------------------------------------------------------------


def inspect_state(completion: str, metadata: dict[str, Any], sample_id: str = "s1") -> Any:
    return SimpleNamespace(
        input_text=QUESTION,
        output=SimpleNamespace(completion=completion),
        metadata=metadata,
        sample_id=sample_id,
    )


def test_inspect_scorer_reads_the_checklist_from_the_metadata(checker):
    from inspect_ai.scorer import Target

    from jurybox.integrations import inspect as adapter

    made: list[JuryRewards] = []
    real = adapter.JuryRewards

    def keeping(*args: Any, **kwargs: Any) -> JuryRewards:
        made.append(real(*args, **kwargs))
        return made[-1]

    adapter.JuryRewards = keeping  # type: ignore[misc]
    try:
        scorer = adapter.jury_scorer(
            rubric="checklist", jury=fake_jury("point-checker-for-tests"), checklist_key="rubric"
        )
    finally:
        adapter.JuryRewards = real  # type: ignore[misc]
    seen = spy(made[0])
    score = asyncio.run(scorer(inspect_state(GOOD, {"rubric": CHECKLIST[:4]}), Target("")))
    assert keys(seen[0][0]) == ["p1", "p2", "p3", "p4"]
    assert set(score.value) == {"score"} and math.isnan(score.value["score"])  # (the spy's)
    with pytest.raises(
        InputError, match=r"Inspect sample s2: .*it is missing: the sample's metadata\['rubric'\]"
    ):
        asyncio.run(scorer(inspect_state(GOOD, {}, "s2"), Target("")))


def test_inspect_scorer_checklist(wrap):
    from inspect_ai.scorer import Target

    from jurybox.integrations.inspect import jury_scorer

    scorer = jury_scorer(rubric="checklist", jury=wrap)
    score = asyncio.run(scorer(inspect_state(RISKY, {"checklist": CHECKLIST}), Target("")))
    assert score.value == {"score": pytest.approx(expected(RISKY))}
    points = score.metadata["points"]
    assert list(points) == [f"p{k + 1}" for k in range(len(CHECKLIST))]
    assert [points[k]["met"] for k in points] == [
        float(words(p["criterion"]) <= words(RISKY)) for p in CHECKLIST
    ]
    assert points["p4"]["points"] == -4 and score.metadata["dropped"] == []
    assert score.metadata["verdict"]["scores"]["score"] == pytest.approx(expected(RISKY))


# -- group rewards ------------------------------------------------------------------------------


def test_group_reward_pointwise_judges_each_completions_points(wrap):
    # GRPO's group reward, design pointwise: each completion judged on its prompt's checklist,
    # the same reward as the pointwise reward's (jury_reward without group)
    answers = [GOOD, RISKY, "Drink water.", "Take ibuprofen."]
    alone = trl_call(jury_reward(jury=wrap, rubric="checklist"), answers)
    PointChecker.SEEN = []
    group = jury_reward(jury=wrap, rubric="checklist", group="pointwise", group_size=2)
    got = trl_call(group, answers)
    assert got == pytest.approx(alone)
    assert got == pytest.approx([expected(a) for a in answers])
    assert len(PointChecker.SEEN) == len(answers) * len(CHECKLIST)  # every point judged
    # another design, or the checklist rubric as pointwise=, is refused before any judging
    for kwargs in (
        {"rubric": "checklist", "group": "listwise"},
        {"rubric": "pairwise", "group": "round_robin", "pointwise": "checklist"},
        {"rubric": "mirage-mg", "group": "pointwise", "pointwise": "checklist"},
    ):
        with pytest.raises(InputError, match="rubric checklist judges each prompt's own"):
            jury_reward(jury=wrap, group_size=2, **kwargs)


def test_group_reward_to_a_service_chunks_groups_by_points(checker):
    # a checklist rubric's groups cost a call per point of each completion: whole groups per
    # request within the service's max_judge_calls, counting points (not one call a completion)
    from jurybox.judges.groups import CompletionReward, GroupResult

    reward = jury_reward(
        jury=fake_jury("point-checker-for-tests"),
        rubric="checklist",
        group="pointwise",
        group_size=2,
        unscored="none",
    )
    rewards = reward.rewards
    remote = FakeRemote(rewards, max_items=100, max_judge_calls=2 * 4)
    remote._ref = lambda rubric: rubric.name  # type: ignore[attr-defined]
    sent: list[list[dict]] = []

    def groups(payload: dict) -> list[dict]:
        sent.append(payload["groups"])
        return [
            GroupResult(
                id=g["id"],
                design="pointwise",
                rewards=[None] * len(g["completions"]),
                completions=[CompletionReward(reward=None, reason="a fake service")]
                * len(g["completions"]),
                calls=0,
                asked=0,
            ).model_dump(mode="json")
            for g in payload["groups"]
        ]

    rewards._jury, rewards._client = remote, SimpleNamespace(groups=groups)
    sizes = [4, 2, 2, 3]  # points per prompt: 8 | 4+4 | 6 calls a request
    checklists = [CHECKLIST[:n] for n in sizes for _ in range(2)]
    prompts = [f"{QUESTION} ({k // 2})" for k in range(8)]
    reward(prompts=prompts, completions=[GOOD, RISKY] * 4, checklist=checklists)
    assert [[len(g["checklist"]) for g in chunk] for chunk in sent] == [[4], [2, 2], [3]]
    assert rewards.stats.requests == 3
