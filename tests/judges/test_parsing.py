import math

import pytest

from jurybox.judges.backends.protocol import TokenStep
from jurybox.judges.parsing import expected_score, parse_answers, score_distribution
from jurybox.rubrics import Criterion, Scale

ACC = Criterion(name="accuracy", description="", scale=Scale(min=0, max=4))
SPUR = Criterion(name="spurious", description="", scale=Scale(labels={"yes": 1, "no": 0}))
WIDE = Criterion(name="overall", description="", scale=Scale(min=0, max=10))


def test_constrained_json():
    a = parse_answers('{"accuracy": 3, "spurious": "no"}', [ACC, SPUR])
    assert a["accuracy"].value == 3 and a["spurious"].value == 0 and a["spurious"].label == "no"


def test_fallback_takes_the_last_answer_not_the_first():
    text = 'First I thought {"accuracy": 1}. On reflection the final answer is {"accuracy": 4}.'
    assert parse_answers(text, [ACC])["accuracy"].value == 4
    loose = "Accuracy: 2 ... wait, re-reading it, Accuracy: 3"
    assert parse_answers(loose, [ACC])["accuracy"].value == 3


def test_missing_and_out_of_scale_answers_are_errors_not_numbers():
    a = parse_answers('{"accuracy": 7}', [ACC, SPUR])
    assert a["accuracy"].value is None and "outside the scale 0..4" in a["accuracy"].error
    assert a["spurious"].value is None and "no answer for 'spurious'" in a["spurious"].error
    assert parse_answers("", [ACC])["accuracy"].error.endswith("'(empty output)'")


def steps_for(pieces, tops):
    """TokenSteps for an answer split into token texts, with alternatives at chosen steps."""
    out, offset = [], 0
    for i, piece in enumerate(pieces):
        out.append(TokenStep(offset, piece, tops.get(i, {piece: 0.0})))
        offset += len(piece)
    return out


def test_distribution_over_scale_at_the_value_token():
    pieces = ['{"', "accuracy", '":', " 3", "}"]
    lp = {" 3": math.log(0.5), " 4": math.log(0.3), " 2": math.log(0.1), "\n": math.log(0.1)}
    text = "".join(pieces)
    answer = parse_answers(text, [ACC])["accuracy"]
    dist = score_distribution(ACC, steps_for(pieces, {3: lp}), answer.position)
    assert dist == pytest.approx({"0": 0, "1": 0, "2": 0.1 / 0.9, "3": 0.5 / 0.9, "4": 0.3 / 0.9})
    assert expected_score(ACC, dist) == pytest.approx((2 * 0.1 + 3 * 0.5 + 4 * 0.3) / 0.9)


def test_mass_that_stops_short_of_the_value_makes_the_distribution_unknown():
    # A bare space could still lead to any digit: with 5% of the mass on it, renormalising over
    # the rest would be a guess.
    pieces = ['{"accuracy":', " 3", "}"]
    lp = {" 3": math.log(0.5), " 4": math.log(0.45), " ": math.log(0.05)}
    position = parse_answers("".join(pieces), [ACC])["accuracy"].position
    assert score_distribution(ACC, steps_for(pieces, {1: lp}), position) is None
    lp[" "] = math.log(0.001)  # a trace is tolerated
    assert score_distribution(ACC, steps_for(pieces, {1: lp}), position) is not None


def test_label_distribution_ignores_case():
    pieces = ['{"spurious": "', "Yes", '"}']
    lp = {"Yes": math.log(0.9), "no": math.log(0.1)}
    answer = parse_answers("".join(pieces), [SPUR])["spurious"]
    assert answer.value == 1
    dist = score_distribution(SPUR, steps_for(pieces, {1: lp}), answer.position)
    assert dist == pytest.approx({"yes": 0.9, "no": 0.1})


def test_loose_fallback_needs_whole_names_and_whole_values():
    reasoning = Criterion(name="reasoning_accuracy", description="", scale=Scale(min=0, max=4))
    text = "accuracy: 4\nreasoning_accuracy: 1"
    got = parse_answers(text, [ACC, reasoning])
    assert got["accuracy"].value == 4 and got["reasoning_accuracy"].value == 1
    # Output cut at max_tokens: "1" may be the start of "10"; only whole JSON objects count.
    cut = parse_answers('{"overall": 1', [WIDE], complete=False)["overall"]
    assert cut.value is None
    assert (
        parse_answers('{"overall": 10} and then the text was cut', [WIDE], complete=False)[
            "overall"
        ].value
        == 10
    )


def test_distribution_for_labels_reads_the_first_letter_token():
    pieces = ['{"spurious": "', "no", '"}']
    lp = {"no": math.log(0.8), "yes": math.log(0.1), "y": math.log(0.1)}
    text = "".join(pieces)
    answer = parse_answers(text, [SPUR])["spurious"]
    dist = score_distribution(SPUR, steps_for(pieces, {1: lp}), answer.position)
    assert dist == pytest.approx({"yes": 0.2, "no": 0.8})
    assert expected_score(SPUR, dist) == pytest.approx(0.2)


def test_token_that_spells_value_and_punctuation_counts():
    pieces = ['{"accuracy":', "4}"]
    dist = score_distribution(
        ACC,
        steps_for(pieces, {1: {"4}": math.log(0.6), "3": math.log(0.4)}}),
        parse_answers("".join(pieces), [ACC])["accuracy"].position,
    )
    assert dist["4"] == pytest.approx(0.6) and dist["3"] == pytest.approx(0.4)


def test_ambiguous_first_token_gives_no_distribution_rather_than_a_guess():
    pieces = ['{"overall": ', "1", "0", "}"]
    text = "".join(pieces)
    dist = score_distribution(
        WIDE,
        steps_for(pieces, {1: {"1": -0.1, "9": -2.0}}),
        parse_answers(text, [WIDE])["overall"].position,
    )
    assert dist is None
