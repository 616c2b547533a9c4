"""Answer extraction on real-looking responses: the last explicit answer wins, labels of one or
two digits or letters in any case, answers by option text, and no answer read from prose. The
public evaluators' rules are run beside ours on the cases they get wrong."""

import pytest
from bench_helpers import public_microvqa, public_mir

from jurybox.benchmarks.extraction import (
    extract_choice,
    letter_labels,
    number_labels,
    parse_label,
)

CELL_OPTIONS = [
    "Mitochondrial fusion",
    "Mitochondrial fission",
    "Increased mitochondrial biogenesis",
    "Mitophagy inhibition",
    "Loss of the nuclear envelope",
]
FIVE = number_labels(5)
TWELVE = number_labels(12)


# (response, labels, expected 0-based index or None, expected status)
NUMBERED = [
    ("Fragmented puncta indicate fission. The answer is (2)", FIVE, 1, "answered"),
    ("The network is broken up, typical of DRP1 activity.\n\nAnswer: 2", FIVE, 1, "answered"),
    ("Reasoning... **(2)**", FIVE, 1, "answered"),
    ("Final answer: 2", FIVE, 1, "answered"),
    ("so the answer is 2.", FIVE, 1, "answered"),
    ("The answer is **(2)**", FIVE, 1, "answered"),
    ("The answer is: 2", FIVE, 1, "answered"),
    ("Answer is (2)", FIVE, 1, "answered"),
    ("**Final Answer:** (2) Mitochondrial fission", FIVE, 1, "answered"),
    ("The answer is Mitochondrial fission.", FIVE, 1, "answered"),
    ("Therefore, the correct answer is option 2: Mitochondrial fission.", FIVE, 1, "answered"),
    (
        "At first the answer is (1) seemed right, but the puncta mean fission: the answer is (2).",
        FIVE,
        1,
        "answered",
    ),
    ("The answer is (2) Loss of the nuclear envelope", FIVE, 1, "answered"),  # the label decides
    ("<answer>2</answer>", FIVE, 1, "answered"),
    ("$\\boxed{2}$", FIVE, 1, "answered"),
    ("2", FIVE, 1, "answered"),
    ("(2).", FIVE, 1, "answered"),
    ("Mitochondrial fission", FIVE, 1, "answered"),
    ("The answer is (10)", TWELVE, 9, "answered"),
    ("Answer: 12", TWELVE, 11, "answered"),
    ("Options: **(1)** fusion, **(2)** fission ... The answer is (2)", FIVE, 1, "answered"),
    # no explicit answer, or one naming no option
    (
        "The image shows fragmented mitochondria, which could indicate several processes.",
        FIVE,
        None,
        "none",
    ),
    ("I would lean towards the second option, but I am not certain.", FIVE, None, "none"),
    ("The answer is 3.5 micrometres wide.", FIVE, None, "none"),
    ("The answer is not (1).", FIVE, None, "none"),
    ("The answer is (7)", FIVE, None, "invalid"),
    ("**(1)** fusion or **(2)** fission are both possible here.", FIVE, None, "none"),
    ("", FIVE, None, "none"),
]


@pytest.mark.parametrize("response,labels,index,status", NUMBERED)
def test_numbered_options(response, labels, index, status):
    options = CELL_OPTIONS if len(labels) == 5 else [f"option text {i}" for i in labels]
    choice = extract_choice(response, labels, options)
    assert (choice.index, choice.status) == (index, status), choice


@pytest.mark.parametrize(
    "response,labels,right",
    [
        ("The network is broken up.\n\nAnswer: 2", FIVE, 1),  # no "answer is"
        ("The answer is: 2", FIVE, 1),  # the colon
        ("Answer is (2)", FIVE, 1),  # capital A
        ("**Final Answer:** (2)", FIVE, 1),
        ("The answer is (10)", TWELVE, 9),  # one digit: reads option 1
        (
            "At first the answer is (1) seemed right, but ... the answer is (2).",
            FIVE,
            1,
        ),  # first wins
    ],
)
def test_the_public_microvqa_rule_gets_these_wrong_and_jurybox_right(response, labels, right):
    assert public_microvqa(response) != right
    assert extract_choice(response, labels).index == right


LETTERS = letter_labels(4)
SHAPES = ["the red cube", "the blue ball", "the green cone", "none of them"]


@pytest.mark.parametrize(
    "response,index,status",
    [
        ("Option A is wrong; option C is correct.", 2, "answered"),
        ("Option A is wrong because the cube is hidden. Option C is correct.", 2, "answered"),
        ("the answer is (c)", 2, "answered"),
        ("answer: c", 2, "answered"),
        ("The answer is C because the cone is in front.", 2, "answered"),
        ("**Answer:** C) the green cone", 2, "answered"),
        ("The answer is the green cone.", 2, "answered"),
        ("The correct option is C.", 2, "answered"),
        ("I choose (C).", 2, "answered"),
        ("C", 2, "answered"),
        ("The answer is a bird sitting on the cone.", None, "none"),  # "a" is a word here
        ("The answer is I think (C)", None, "none"),
        ("Option b", None, "none"),  # a bare mention is not an answer
        ("The answer is (F)", None, "invalid"),
    ],
)
def test_letter_options(response, index, status):
    choice = extract_choice(response, LETTERS, SHAPES)
    assert (choice.index, choice.status) == (index, status), choice


@pytest.mark.parametrize(
    "response,right",
    [
        ("Option A is wrong; option C is correct.", 2),  # first "Option" letter
        ("the answer is (c)", 2),  # lowercase
        ("The answer is the green cone.", 2),  # by text
    ],
)
def test_the_public_mir_rule_gets_these_wrong_and_jurybox_right(response, right):
    assert public_mir(response) != right
    assert extract_choice(response, LETTERS, SHAPES).index == right


def test_gold_labels_parse_as_labels_or_option_text():
    assert parse_label("B", LETTERS) == 1
    assert parse_label("(b).", LETTERS) == 1
    assert parse_label("the blue ball", LETTERS, SHAPES) == 1
    assert parse_label("3", FIVE) == 2
    assert parse_label("because of X", LETTERS, SHAPES) is None
