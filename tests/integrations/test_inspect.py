"""Inspect AI: an eval of a three-sample task, Inspect's mock model answering, scored by the
jurybox scorer against the session's live service (``user_service``). The eval log's scores
equal /v1/score's verdicts for the same items, on [0, 1] as every jurybox reward (#51: the
rubric's raw scale by default, unlike the RL adapters); each explanation says what the judges
gave, or the cause where they gave nothing (a prompt over their token limit, #51: "below
quorum"); the sample the jury cannot score is unscored in Inspect (NaN, left out of each
criterion's mean), not a 0."""

from __future__ import annotations

import math

import pytest
from service_helpers import LONG_QUESTION

pytestmark = pytest.mark.models

CRITERIA = ("accuracy", "relevance", "completeness", "parsimony", "weighted_sum")
SAMPLES = [
    (
        "What causes brown rings on tomato leaves after rain?",
        "Early blight (Alternaria).",
        "Early blight, a fungal disease; remove the infected leaves.",
    ),
    (
        "When should I plant garlic in Ohio?",
        "In mid-autumn, a few weeks before the ground freezes.",
        "Plant it in July.",
    ),
    (LONG_QUESTION, "Early blight.", "A fungus."),
]


def mock_output(text: str):
    from inspect_ai.model import ModelOutput, ModelUsage

    output = ModelOutput.from_content(model="mockllm/model", content=text)
    # With a usage, the mock model counts no tokens (its tokenizer would be downloaded).
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


def test_an_inspect_eval_scored_by_the_jury(user_service, token, v1_score, tmp_path):
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import get_model
    from inspect_ai.solver import generate

    from jurybox.integrations.inspect import jury_scorer
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.reward import RewardSpec

    task = Task(
        dataset=[Sample(input=q, target=ref, id=f"s{k}") for k, (q, ref, _) in enumerate(SAMPLES)],
        solver=generate(),
        scorer=jury_scorer(rubric="mirage-mg", url=user_service, token_env=token),
    )
    model = get_model(
        "mockllm/model", custom_outputs=[mock_output(a) for _, _, a in SAMPLES], memoize=False
    )
    (log,) = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none", max_samples=3)
    assert log.status == "success", log.error
    # The samples run at once: which answer each got is in the log.
    want = v1_score(
        "mirage-mg",
        [
            {
                "id": str(s.id),
                "question": s.input,
                "reference": s.target,
                "response": s.output.completion,
            }
            for s in log.samples
        ],
    )
    assert sorted(w["status"] for w in want) == ["scored", "scored", "unscored"]
    rubric = load_rubric("mirage-mg")
    unit = {c: RewardSpec(score=c, unscored="none").bind(rubric) for c in CRITERIA}
    by_id = {str(s.id): s for s in log.samples}
    for record in want:
        score = by_id[record["id"]].scores["jury"]
        assert set(score.value) == set(CRITERIA)
        for c in CRITERIA:
            got, expected = score.value[c], unit[c].value(record)
            assert math.isnan(got) if expected is None else math.isclose(got, expected), c
            assert math.isnan(got) or 0.0 <= got <= 1.0
        votes = score.metadata["verdict"]["votes"]
        assert {(v["judge"], v["criterion"]) for v in votes} == {
            (j, c) for j in ("smollm2-135m", "gemma3-270m") for c in CRITERIA[:4]
        }
        if record["status"] == "scored":
            assert score.explanation.startswith("smollm2-135m: accuracy ")
            assert "; gemma3-270m: accuracy " in score.explanation
        else:  # the cause before its consequence
            assert by_id[record["id"]].input == LONG_QUESTION
            assert score.explanation.startswith("not scored: smollm2-135m: prompt is ")
            assert score.explanation.index("prompt is") < score.explanation.index("below quorum")
    results = {s.name: s for s in log.results.scores}
    for c in CRITERIA:
        values = [v for v in (unit[c].value(r) for r in want) if v is not None]
        assert results[c].scorer == "jury"
        assert math.isclose(results[c].metrics["mean"].value, sum(values) / len(values))
        assert "stderr" in results[c].metrics
        assert results[c].scored_samples == 2 and results[c].unscored_samples == 1
