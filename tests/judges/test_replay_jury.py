"""The replay backend named in a jury file (``backend: replay``): the tiny jury's recorded real
answers (tests/data/tiny-recorded.json.gz) through the whole judging path, which the plumbing
tests of the CLI, the Ray engine and the service run on instead of the models. It tokenizes with
the judges' own tokenizers and runs no model (a fast test: only the one comparing the recording
with the real models is marked ``models``)."""

from __future__ import annotations

import threading
import time

import pytest
from judging_helpers import CHECKLISTS_RECORDING, ITEMS, RECORDING, write_replay_jury

from jurybox.judges import Jury, load_jury_spec
from jurybox.judges.backends.protocol import GenerationCancelled, JudgeConfigError
from jurybox.judges.backends.replay import Recording, schema_digest
from jurybox.judges.judging import render_requests
from jurybox.judges.jury import make_backend
from jurybox.rubrics import Item, load_rubric


@pytest.fixture(scope="module")
def recording():
    return Recording.load(RECORDING)


@pytest.mark.parametrize("rubric", ["mirage-mg", "general", "pairwise"])
def test_every_recorded_prompt_is_the_prompt_judging_renders_today(replay_tiny, recording, rubric):
    """The recording still matches the rubrics, templates and tokenizers: each recorded item
    renders to exactly the recorded prompt (else rerun tests/data/record.py)."""
    items = [
        Item.model_validate(d)
        for d in recording.items
        if ("response_a" in d.get("extra", {})) == (rubric == "pairwise")
    ]
    requests = render_requests(load_rubric(rubric), items)
    for judge in replay_tiny.spec.judges:
        backend = replay_tiny.backend(judge)
        before = backend.replayed
        backend.generate(list(requests.requests))
        assert backend.replayed - before == len(requests.requests), judge.name


def test_recording_matches_checklist_prompts(tmp_path):
    """The checklist recording (tests/data/record.py checklists) still matches the shipped
    checklist rubrics' units: each unit renders to exactly the recorded prompt, for every
    schema (the yes/no one and each all-points one)."""
    import importlib.util

    from jurybox.rubrics.checklist import units

    spec = importlib.util.spec_from_file_location("record", RECORDING.parent / "record.py")
    assert spec is not None and spec.loader is not None
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)
    jury = Jury.load(write_replay_jury(tmp_path / "ck.yaml", recordings=(CHECKLISTS_RECORDING,)))
    schemas = set()
    for name in ("checklist", "checklist-all", "checklist-implicit"):
        for group in units(load_rubric(name), record.checklist_items()):
            requests = render_requests(group.rubric, list(group.items))
            schemas |= {schema_digest(r.schema) for r in requests.requests}
            for judge in jury.spec.judges:
                backend = jury.backend(judge)
                before = backend.replayed
                backend.generate(list(requests.requests))
                assert backend.replayed - before == len(requests.requests), (judge.name, name)
    assert len(schemas) == 5  # met; p1..p3, p1..p4, p1..p5; score


def test_the_replay_jury_gives_the_recorded_answers_as_verdicts(replay_tiny, recording):
    verdicts = replay_tiny.score(load_rubric("mirage-mg"), ITEMS)
    by_item = {g.item: g for g in recording.judges["smollm2-135m"] if g.item in ("good", "bad")}
    for verdict in verdicts:
        vote = next(v for v in verdict.votes if v.judge == "smollm2-135m")
        assert vote.error is None and vote.raw == by_item[verdict.id].text
    assert replay_tiny.spec.judges[0].backend == "replay"
    # A replay jury is its own configuration: never mistaken for the real one's verdicts.
    rubric = load_rubric("mirage-mg")
    assert replay_tiny.provenance(rubric) != Jury.load("tiny").provenance(rubric)


def test_an_unrecorded_prompt_gets_a_recorded_answer_of_its_own_rubric_every_time(replay_tiny):
    """Any process, any order: the answer is a function of the prompt (the service's replicas and
    the Ray engine's actors give the local engine's verdicts)."""
    rubric = load_rubric("general")
    items = [
        Item(
            id=f"new-{k}",
            question=f"Question {k}?",
            response=f"Answer {k}.",
            reference="A reference.",
        )
        for k in range(6)
    ]
    first = replay_tiny.score(rubric, items)
    again = replay_tiny.score(rubric, items[::-1])[::-1]
    assert [v.scores for v in first] == [v.scores for v in again]
    assert all(v.status == "scored" for v in first)  # answers of the general rubric's schema
    backend = replay_tiny.backend(replay_tiny.spec.judges[0])
    requests = render_requests(rubric, items[:1]).requests
    digests = {g.schema for g in backend._by_schema[schema_digest(requests[0].schema)]}
    assert digests == {schema_digest(requests[0].schema)}


def test_a_delay_stands_in_for_the_model_s_time_and_a_cancel_ends_it(tmp_path):
    spec = load_jury_spec(
        write_replay_jury(tmp_path / "slow.yaml", delay_s=0.5, judges=("smollm2-135m",))
    )
    backend = make_backend(spec.judges[0])
    requests = list(render_requests(load_rubric("general"), ITEMS[:1]).requests)
    began = time.monotonic()
    assert backend.generate(requests)[0].error is None
    assert time.monotonic() - began >= 0.5
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()
    began = time.monotonic()
    with pytest.raises(GenerationCancelled):
        backend.generate(requests, cancelled=stop.is_set)
    assert time.monotonic() - began < 0.4


def test_a_replay_judge_without_a_recording_is_refused_with_its_name(tmp_path):
    spec = load_jury_spec(write_replay_jury(tmp_path / "j.yaml")).judges[0]
    with pytest.raises(JudgeConfigError, match="smollm2-135m: backend replay needs"):
        make_backend(spec.model_copy(update={"engine_kwargs": {}}))
    with pytest.raises(JudgeConfigError, match="no recording at /nowhere.json.gz"):
        make_backend(spec.model_copy(update={"engine_kwargs": {"recording": "/nowhere.json.gz"}}))
    with pytest.raises(JudgeConfigError, match="delay_s must be seconds"):
        make_backend(
            spec.model_copy(update={"engine_kwargs": {"recording": str(RECORDING), "delay_s": -1}})
        )


@pytest.mark.models
def test_the_recorded_answers_are_the_real_tiny_jury_s(tiny_judged_first, replay_tiny):
    """The recording is what the real models answer (one item, ``tiny_judged_first``: the real
    tiny jury's verdict of it; rerun tests/data/record.py when the models or their backend
    change)."""
    rubric = load_rubric("mirage-mg")
    real = tiny_judged_first
    replayed = replay_tiny.score(rubric, ITEMS[:1])[0]
    assert [(v.judge, v.criterion, v.score, v.raw) for v in real.votes] == [
        (v.judge, v.criterion, v.score, v.raw) for v in replayed.votes
    ]
    for a, b in zip(real.votes, replayed.votes):
        assert a.expected == pytest.approx(b.expected, abs=1e-3)
