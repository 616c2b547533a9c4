import textwrap
import time

import pytest

from jurybox.rubrics import (
    DefinitionError,
    Item,
    Scale,
    list_rubrics,
    load_rubric,
    output_schema,
    render_messages,
)
from jurybox.rubrics.formula import Formula


def write(tmp_path, text, name="r.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


GOOD = """
    inputs: [question, response]
    template: "{{ question }} {{ response }} {{ output_format }}"
    criteria:
      - name: accuracy
        description: right?
        scale: {min: 0, max: 4}
"""


def test_shipped_rubrics_load_with_mirage_scales():
    assert {"general", "mirage-mg", "mirage-id", "mirage-mmmt"} <= set(list_rubrics())
    mg = load_rubric("mirage-mg")
    assert mg.criterion_names == ["accuracy", "relevance", "completeness", "parsimony"]
    assert all(c.scale.values == [0, 1, 2, 3, 4] for c in mg.criteria)
    # MIRAGE's weighted sum: (2*accuracy + relevance + completeness + parsimony) / 20
    assert (
        mg.formula.evaluate({"accuracy": 4, "relevance": 3, "completeness": 2, "parsimony": 1})
        == 0.7
    )
    assert (
        mg.formula.evaluate({"accuracy": 4, "relevance": 4, "completeness": 4, "parsimony": 4})
        == 1.0
    )
    ident = load_rubric("mirage-id")
    assert ident.criterion("identification_accuracy").scale.values == [0, 1]
    assert ident.criterion("reasoning_accuracy").scale.values == [0, 1, 2, 3, 4]
    mmmt = load_rubric("mirage-mmmt")
    assert mmmt.criterion("spurious").scale.labels == {"yes": 1, "no": 0}
    assert mmmt.criterion("decision_accuracy").scale.values == [0, 1]


def test_formula_missing_criterion_gives_none_not_a_number():
    mg = load_rubric("mirage-mg")
    assert (
        mg.formula.evaluate({"accuracy": 4, "relevance": None, "completeness": 2, "parsimony": 1})
        is None
    )


@pytest.mark.parametrize(
    "expr", ["__import__('os').system('x')", "accuracy ** 2", "max(accuracy, 1)", "accuracy.real"]
)
def test_formula_rejects_anything_but_arithmetic(expr):
    with pytest.raises(ValueError):
        Formula(name="f", expression=expr)


def test_rubric_error_names_file_field_and_expectation(tmp_path):
    p = write(
        tmp_path,
        """
        inputs: [question, response]
        template: "{{ question }}"
        criteria:
          - name: accuracy
            description: right?
            scale: {min: 0, max: four}
    """,
        "broken.yaml",
    )
    with pytest.raises(DefinitionError) as info:
        load_rubric(p)
    msg = str(info.value)
    assert "broken.yaml" in msg
    assert "criteria[0].scale.max" in msg
    assert "integer" in msg and "four" in msg


def test_rubric_errors_for_scale_formula_template_and_yaml(tmp_path):
    cases = {
        "max (2) must be greater than min (4)": GOOD.replace(
            "{min: 0, max: 4}", "{min: 4, max: 2}"
        ),
        "names unknown criteria ['relevance']": GOOD
        + "    formula: {name: f, expression: accuracy + relevance}\n",
        "template uses 'entity_name', which is not an input of the rubric": GOOD.replace(
            "{{ response }}", "{{ entity_name }}"
        ),
        "must start with different letters": GOOD.replace(
            "{min: 0, max: 4}", '{labels: {"yes": 1, "yeah": 0}}'
        ),
        "quote yes/no/on/off labels": GOOD.replace("{min: 0, max: 4}", "{labels: {yes: 1, no: 0}}"),
        "template fails to render: ZeroDivisionError": GOOD.replace("{{ response }}", "{{ 1/0 }}"),
        "template does something the sandbox forbids": GOOD.replace(
            "{{ response }}", "{{ ''.__class__.__mro__ }}"
        ),
        "criteria have no weight: state weights in the rubric's formula": GOOD.replace(
            "description: right?", "description: right?\n        weight: -2"
        ),
        "invalid YAML": "criteria: [\n",
    }
    for expected, text in cases.items():
        with pytest.raises(DefinitionError, match=None) as info:
            load_rubric(write(tmp_path, text))
        assert expected in str(info.value), (expected, str(info.value))


def test_unknown_rubric_name_lists_shipped_ones():
    with pytest.raises(DefinitionError, match="unknown rubric 'nope'.*mirage-mg"):
        load_rubric("nope")


def test_output_schema_and_prompt():
    r = load_rubric("mirage-mmmt")
    schema = output_schema(r.criteria)
    assert schema["required"] == r.criterion_names
    assert schema["properties"]["spurious"] == {"type": "string", "enum": ["yes", "no"]}
    assert schema["properties"]["known_accuracy"] == {"type": "integer", "enum": [0, 1, 2, 3, 4]}
    item = Item(
        id="1",
        context="user: hi",
        response="Where?",
        reference="Where is it?",
        extra={"decision": "<Clarify>", "known_goal": ["plant: tomato"]},
    )
    msgs = render_messages(r, item, r.criteria)
    assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user"
    text = msgs[1]["content"]
    assert "plant: tomato" in text and "<Clarify>" in text and '"spurious": <"yes" or "no">' in text


def test_scale_maps_answers_and_refuses_out_of_scale():
    s = Scale(min=0, max=4)
    assert s.parse(3) == 3 and s.parse("2") == 2
    for bad in (5, -1, 2.5, True, "x", None):
        with pytest.raises(ValueError):
            s.parse(bad)
    labels = Scale(labels={"yes": 1, "no": 0})
    assert labels.parse("Yes") == 1 and labels.label_of(0) == "no"
    with pytest.raises(ValueError, match="not one of"):
        labels.parse("maybe")


def test_item_missing_inputs():
    r = load_rubric("mirage-id")
    assert Item(id="1", question="q", response="r").missing(r) == ["entity_name"]
    assert Item(id="1", question="q", response="r", extra={"entity_name": "x"}).missing(r) == []


def test_empty_response_and_empty_lists_are_values_not_missing():
    mmmt = load_rubric("mirage-mmmt")
    item = Item(
        id="1",
        context="user: hi",
        response="",
        reference="ok",
        extra={"decision": "<Respond>", "known_goal": ["plant: tomato"], "missing_goal": []},
    )
    assert item.missing(mmmt) == []
    assert Item(
        id="1",
        context="",
        response="x",
        reference="r",
        extra={"decision": "<Respond>", "known_goal": [], "missing_goal": []},
    ).missing(mmmt) == ["context"]


@pytest.mark.parametrize(
    "expr,words",
    [
        ("+".join(["accuracy"] * 2000), "characters"),  # 17 KB: a RecursionError (a 500) before
        ("-" * 5000 + "accuracy", "characters"),
        ("-" * 1500 + "accuracy", "deep"),  # within the characters, beyond the depth
        ("+".join(["a"] * 999), "too large"),
        ("(" * 300 + "a" + ")" * 300, "cannot parse"),  # the parser's own limit
        ("1e400 * a", "not finite"),
        ("9" * 400 + " * a", "not finite"),
    ],
)
def test_a_formula_is_bounded_before_anything_walks_it(expr, words):
    # An inline rubric's formula is a client's text: each is refused with a ValueError (a 422
    # at the service), quickly, never a RecursionError.
    began = time.process_time()  # CPU time: other processes' load does not count
    with pytest.raises(ValueError, match=words):
        Formula(name="f", expression=expr)
    assert time.process_time() - began < 0.5


def test_a_formula_over_every_criterion_a_rubric_may_have_is_accepted_and_exact():
    names = [f"c{k}" for k in range(32)]
    f = Formula(
        name="f",
        expression="(" + " + ".join(f"{k + 1}*{n}" for k, n in enumerate(names)) + ") / 528",
    )
    scores = dict.fromkeys(names, 2)
    assert f.evaluate(scores) == pytest.approx(2.0)
    # Integer constants compute in floats: no exact big-integer arithmetic from a client.
    assert (
        Formula(name="g", expression="123456789 * 987654321 * c0").evaluate({"c0": 1})
        == float(123456789) * 987654321
    )


def test_formula_dividing_by_zero_is_none():
    f = Formula(name="ratio", expression="accuracy / relevance")
    assert f.evaluate({"accuracy": 2, "relevance": 0}) is None
    assert f.evaluate({"accuracy": 2, "relevance": 4}) == 0.5


def test_labels_must_have_distinct_values():
    with pytest.raises(ValueError, match="distinct values"):
        Scale(labels={"good": 1, "fine": 1, "bad": 0})


def test_a_verdict_record_reads_back_exactly_as_written():
    from jurybox.rubrics import CriterionResult, Verdict, VerdictRecord, Vote
    from jurybox.rubrics.errors import InputError

    votes = [
        Vote(
            judge="a",
            criterion="accuracy",
            score=3,
            expected=2.8,
            distribution={"3": 0.8, "2": 0.2},
            raw='{"accuracy": 3}',
            latency_s=0.5,
        ),
        Vote(judge="b", criterion="accuracy", error="no answer", raw="blah"),
    ]
    verdict = Verdict(
        id="q1",
        status="scored",
        rubric="general",
        jury="tiny",
        provenance="p",
        scores={"accuracy": 3.0},
        votes=votes,
        criteria={
            "accuracy": CriterionResult(score=3.0, n_votes=2, n_scored=1, std=0.0, range=0.0)
        },
    )
    for keep_raw in (False, True):
        record = verdict.to_record(keep_raw=keep_raw)
        assert VerdictRecord.from_record(record).to_dict() == record
    record = verdict.to_record()
    assert "raw" not in record["votes"][0] and record["votes"][1]["raw"] == "blah"
    assert list(record) == [
        "id",
        "status",
        "rubric",
        "jury",
        "provenance",
        "scores",
        "reasons",
        "disagreement",
        "votes",
    ]
    broken = {**record, "votes": [{**record["votes"][0], "score": "high"}]}
    with pytest.raises(
        InputError,
        match=r"line 4 \(id 'q1'\): not a jurybox verdict: "
        r"votes\[0\].score: 'high' is not a number",
    ) as info:
        VerdictRecord.from_record(broken, "line 4")
    assert info.value.field == "votes[0].score"


def test_the_sandbox_s_kept_answers_are_jinja_s():
    """The sandbox keeps its answer per (type, attribute name): asked again, for safe and
    refused attributes of the objects a template sees, it answers as Jinja's own sandbox."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from jurybox.rubrics.prompts import _env

    r = load_rubric("mirage-mg")
    c = r.criteria[0]
    jinja = ImmutableSandboxedEnvironment()
    cases = [
        (c, "name"),
        (c, "scale"),
        (c.scale, "describe"),
        (c, "__class__"),
        (c, "_x"),
        ([1], "append"),
        ([1], "index"),
        ({}, "clear"),
        ({}, "keys"),
        ({1}, "add"),
        ("s", "upper"),
        ("s", "__mro__"),
        (str, "mro"),
        (len, "__self__"),
        (c.scale.describe, "__func__"),
        ((x for x in []), "gi_frame"),
    ]
    for _ in range(2):
        for obj, attr in cases:
            value = getattr(obj, attr, None)
            assert _env().is_safe_attribute(obj, attr, value) == jinja.is_safe_attribute(
                obj, attr, value
            ), (obj, attr)
    assert not _env().is_safe_attribute([1], "append", None)
    assert _env().is_safe_attribute(c, "name", c.name)
