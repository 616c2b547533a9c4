"""Items and checks shared by the tests that run real judges (transformers, vLLM, OpenAI)."""

import math

from jurybox.rubrics import Item

QUESTION = "What causes brown rings on tomato leaves after rain?"
REFERENCE = "Early blight (Alternaria). Remove infected leaves, mulch, and apply copper or chlorothalonil."
ITEMS = [
    Item(id="good", question=QUESTION, reference=REFERENCE,
         response="Early blight, a fungal disease; remove infected leaves and use a copper fungicide."),
    Item(id="bad", question=QUESTION, reference=REFERENCE, response="Buy a new car."),
]


def check_scored_vote(vote, scale_values):
    assert vote.error is None, vote.error
    assert vote.score in scale_values
    assert vote.distribution is not None
    assert math.isclose(sum(vote.distribution.values()), 1.0, rel_tol=1e-6)
    assert min(scale_values) <= vote.expected <= max(scale_values)
    # The chosen answer had non-zero probability under the judge's own distribution.
    key = vote.label if vote.label is not None else str(int(vote.score))
    assert vote.distribution[key] > 0
