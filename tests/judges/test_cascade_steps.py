"""Cascaded juries: the stages in jury files, the walk through them (``Steps``), and what a
cascaded verdict records. Scripted backends stand in for judges here (the walk's bookkeeping);
the real tiny judges run a cascade end to end in ``test_cascade_tiny.py``."""

from __future__ import annotations

import math

import pytest
from judging_helpers import ACCURACY_PREFIX, one_criterion_rubric
from pydantic import ValidationError

from jurybox.judges import Jury, JurySpec, provenance
from jurybox.judges.backends.protocol import Generation, TokenStep
from jurybox.judges.cascade import Steps
from jurybox.judges.judging import decide, render_requests
from jurybox.rubrics import Item
from jurybox.rubrics.errors import InputError

RUBRIC = one_criterion_rubric()
PREFIX = ACCURACY_PREFIX


def answer(score: int, p: float) -> Generation:
    """A judge answering ``score`` with probability ``p`` (the rest on the next point)."""
    other = score + 1 if score < 5 else score - 1
    top = {str(score): math.log(p)}
    if p < 1:
        top[str(other)] = math.log(1 - p)
    steps = [
        TokenStep(0, PREFIX, {PREFIX: 0.0}),
        TokenStep(len(PREFIX), str(score), top),
        TokenStep(len(PREFIX) + 1, "}", {"}": 0.0}),
    ]
    return Generation(text=f"{PREFIX}{score}}}", steps=steps)


class Scripted:
    """Answers per item id; records which items it was asked about."""

    def __init__(self, answers: dict[str, Generation]) -> None:
        self.answers, self.asked = answers, []

    def generate(self, requests, cancelled=None):
        out = []
        for request in requests:
            item = request.messages[-1]["content"].split()[0]
            self.asked.append(item)
            out.append(self.answers[item])
        return out

    def close(self) -> None:
        pass


def cascade(threshold: float = 0.9, **extra) -> JurySpec:
    return JurySpec.model_validate(
        {
            "name": "cascade",
            "judges": [{"name": n, "model": "org/m"} for n in ("small", "big1", "big2")],
            "stages": [{"judges": ["small"], "threshold": threshold}, {"judges": ["big1", "big2"]}],
            **extra,
        }
    )


def items(*ids: str) -> list[Item]:
    return [Item(id=i, question=i, response="r") for i in ids]


def test_items_leave_at_the_first_confident_stage():
    small = Scripted({"sure": answer(4, 0.97), "unsure": answer(2, 0.6), "x": answer(3, 0.5)})
    big = {"sure": answer(1, 1.0), "unsure": answer(3, 0.8), "x": answer(5, 0.9)}
    backends = {"small": small, "big1": Scripted(big), "big2": Scripted(big)}
    spec = cascade()
    sure, unsure, _ = Jury(spec, backends).score(RUBRIC, items("sure", "unsure", "x"))
    assert small.asked == ["sure", "unsure", "x"]
    assert backends["big1"].asked == ["unsure", "x"]  # the confident item never reached them
    assert sure.scores == {"accuracy": 4.0}
    assert [v.judge for v in sure.votes] == ["small"]
    assert sure.stage.stage == 1 and sure.stage.of == 2
    assert sure.stage.confidence == pytest.approx(0.97) and sure.stage.threshold == 0.9
    assert "0.97 reached the stage's threshold 0.9" in sure.stage.reason
    # Escalated: the whole jury decides, as a jury without stages would.
    assert unsure.stage.stage == 2 and unsure.stage.confidence is None
    assert "their confidence: 0.6" in unsure.stage.reason
    plain = decide(RUBRIC, spec, unsure.provenance, "unsure", list(unsure.votes))
    assert unsure.scores == plain.scores == {"accuracy": (2 + 3 + 3) / 3}
    assert [v.judge for v in unsure.votes] == ["small", "big1", "big2"]
    record = unsure.to_record()
    assert record["stage"]["stage"] == 2 and record["provenance"] == provenance(RUBRIC, spec)


def test_a_cascade_everything_leaves_early_never_loads_the_later_judges():
    small = Scripted({"a": answer(5, 0.99), "b": answer(1, 0.95)})
    jury = Jury(cascade(), {"small": small})  # big1/big2 would have to be built: they are not
    verdicts = jury.score(RUBRIC, items("a", "b"))
    assert [v.stage.stage for v in verdicts] == [1, 1]
    assert set(jury._backends) == {"small"}


def test_confidence_zero_without_distributions_or_scores():
    # No logprobs (an API judge): the stage cannot measure itself, so it always escalates.
    blind = Generation(text=PREFIX + "4}")
    small = Scripted({"a": blind, "b": Generation(text="no answer")})
    big = Scripted({"a": answer(4, 1.0), "b": answer(2, 1.0)})
    a, b = Jury(cascade(threshold=0.0), {"small": small, "big1": big, "big2": big}).score(
        RUBRIC, items("a", "b")
    )
    # Threshold 0 trusts any measured confidence, even 0 from a vote without a distribution,
    assert a.stage.stage == 1 and a.stage.confidence == 0.0
    # but an unscored stage verdict never settles an item.
    assert b.stage.stage == 2 and b.status == "scored"
    a, b = Jury(
        cascade(threshold=0.01), {"small": Scripted(small.answers), "big1": big, "big2": big}
    ).score(RUBRIC, items("a", "b"))
    assert a.stage.stage == 2 and b.stage.stage == 2 and b.status == "scored"


def test_tolerance_counts_neighbouring_scores():
    small = Scripted({"a": answer(3, 0.6)})  # 0.6 on 3, 0.4 on 4
    spec = cascade(threshold=0.9, confidence={"tolerance": 1})
    (a,) = Jury(spec, {"small": small}).score(RUBRIC, items("a"))
    assert a.stage.stage == 1 and a.stage.confidence == pytest.approx(1.0)


def test_steps_walk_and_refuse_missing_votes():
    spec = cascade()
    steps = Steps(RUBRIC, spec, "p", render_requests(RUBRIC, items("a", "b")))
    judges, requests = steps.next()
    assert [j.name for j in judges] == ["small"] and requests.item_ids == ("a", "b")
    with pytest.raises(Exception, match="votes from 2 judges for a stage of 1"):
        steps.add([[], []])
    with pytest.raises(Exception, match="no verdict yet"):
        steps.verdicts()


def test_a_jury_without_stages_is_one_step_and_records_no_stage():
    spec = JurySpec.model_validate({"name": "plain", "judges": [{"name": "j", "model": "org/m"}]})
    steps = Steps(RUBRIC, spec, "p", render_requests(RUBRIC, items("a")))
    judges, _ = steps.next()
    assert [j.name for j in judges] == ["j"]
    (verdict,) = Jury(spec, {"j": Scripted({"a": answer(2, 0.5)})}).score(RUBRIC, items("a"))
    assert verdict.stage is None and "stage" not in verdict.to_record()


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        ([{"judges": ["small", "big1", "big2"]}], "at least two stages"),
        (
            [{"judges": ["small"], "threshold": 0.9}, {"judges": ["big1", "ghost"]}],
            r"judges the jury does not have: \['ghost'\]",
        ),
        (
            [{"judges": ["small"], "threshold": 0.9}, {"judges": ["big1", "small"]}],
            r"\['small'\] are in more than one stage",
        ),
        (
            [{"judges": ["small"], "threshold": 0.9}, {"judges": ["big1"]}],
            r"\['big2'\] are in no stage",
        ),
        (
            [{"judges": ["small"]}, {"judges": ["big1"], "threshold": 0.5}, {"judges": ["big2"]}],
            "stage 1 needs a threshold",
        ),
        (
            [
                {"judges": ["small"], "threshold": 0.9},
                {"judges": ["big1", "big2"], "threshold": 0.5},
            ],
            "the last stage takes no threshold",
        ),
        (
            [{"judges": ["small"], "threshold": 1.5}, {"judges": ["big1", "big2"]}],
            "less than or equal to 1",
        ),
    ],
)
def test_bad_stages_are_refused(stages, message):
    with pytest.raises(ValidationError, match=message):
        JurySpec.model_validate(
            {
                "name": "c",
                "judges": [{"name": n, "model": "org/m"} for n in ("small", "big1", "big2")],
                "stages": stages,
            }
        )


def test_stages_without_thresholds_judge_every_item_with_every_judge():
    spec = JurySpec.model_validate(
        {**cascade().model_dump(), "stages": [{"judges": ["small"]}, {"judges": ["big1", "big2"]}]}
    )
    assert not spec.cascaded and spec.unfitted() == spec
    assert cascade().unfitted() == spec
    big = {"a": answer(4, 1.0)}
    backends = {
        "small": Scripted({"a": answer(4, 1.0)}),
        "big1": Scripted(big),
        "big2": Scripted(big),
    }
    (a,) = Jury(spec, backends).score(RUBRIC, items("a"))
    assert a.stage is None and [v.judge for v in a.votes] == ["small", "big1", "big2"]


def test_stages_and_thresholds_are_part_of_the_provenance():
    plain = JurySpec.model_validate(
        {"name": "c", "judges": [{"name": n, "model": "org/m"} for n in ("small", "big1", "big2")]}
    )
    assert provenance(RUBRIC, cascade(0.9)) != provenance(RUBRIC, plain)
    assert provenance(RUBRIC, cascade(0.9)) != provenance(RUBRIC, cascade(0.8))
    assert provenance(RUBRIC, cascade(0.9, confidence={"tolerance": 1})) != provenance(
        RUBRIC, cascade(0.9)
    )


def test_confidence_criteria_must_be_the_rubrics():
    spec = cascade(confidence={"criteria": ["nope"]})
    with pytest.raises(InputError, match=r"confidence.criteria names \['nope'\]"):
        spec.check_rubric(RUBRIC)


def test_the_example_cascade_is_the_tiny_jury_in_two_stages():
    from pathlib import Path

    from jurybox.judges import load_jury_spec

    example = load_jury_spec(Path(__file__).resolve().parents[2] / "examples" / "tiny-cascade.yaml")
    tiny = load_jury_spec("tiny")
    assert example.judges == tiny.judges and example.aggregation == tiny.aggregation
    assert [s.judges for s in example.stages] == [["smollm2-135m"], ["gemma3-270m"]]
    assert not example.cascaded  # thresholds are to be fitted
