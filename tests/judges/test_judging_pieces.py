"""The judging path in pieces: render, one judge's votes, decide. Run by hand, with votes crossing
a process boundary, it gives the verdicts ``Jury.score`` gives. The judges are the tiny jury's
recorded real answers (the replay jury: real tokenizers and distributions): the pieces and the
process boundary are the subject, not the models (tested in test_tiny_models.py)."""

from __future__ import annotations

import multiprocessing
import pickle

from judging_helpers import ITEMS

from jurybox.judges.judging import decide_verdicts, judge_votes, render_requests
from jurybox.rubrics import load_rubric


def _votes_in_a_fresh_process(judge_spec, requests):
    """Load the judge's backend in this (spawned) process and return its votes."""
    from jurybox.judges import Jury, JurySpec

    jury = Jury(JurySpec(name="one", judges=[judge_spec]))
    try:
        return judge_votes(judge_spec, jury.backend(judge_spec), requests)
    finally:
        jury.close()


def comparable(verdict):
    record = verdict.to_record()
    for vote in record["votes"]:
        vote.pop("latency_s")
        expected = vote.pop("expected")
        vote["expected"] = None if expected is None else round(expected, 4)
        vote.pop("distribution")
    return record


def test_pieces_by_hand_across_processes_give_the_jury_s_verdicts(replay_tiny):
    tiny_jury = replay_tiny
    rubric = load_rubric("mirage-mg")
    whole = tiny_jury.score(rubric, ITEMS)

    requests = pickle.loads(pickle.dumps(render_requests(rubric, ITEMS)))
    first, second = tiny_jury.spec.judges
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        first_votes = pool.apply(_votes_in_a_fresh_process, (first, requests))
    second_votes = pickle.loads(
        pickle.dumps(judge_votes(second, tiny_jury.backend(second), requests))
    )
    pieces = decide_verdicts(
        rubric,
        tiny_jury.spec,
        tiny_jury.provenance(rubric),
        requests.item_ids,
        [first_votes, second_votes],
    )

    assert [v.id for v in pieces] == [it.id for it in ITEMS]
    assert [comparable(v) for v in pieces] == [comparable(v) for v in whole]
