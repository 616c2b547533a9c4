"""`serve_session`: ``jurybox label``'s page served from Python; what it refuses before it
listens (a token that is not set, another machine's address without one), each with the labels
file closed, so that a new session may open it."""

from __future__ import annotations

import pytest
from test_label_start import _verdicts

from jurybox.rubrics.errors import InputError
from jurybox.serving.labelling.foreground import serve_session
from jurybox.serving.labelling.start import start_session
from jurybox.serving.runs.inputs import judged_items


@pytest.mark.parametrize(
    ("where", "refused"),
    [
        ({"token_env": "JURYBOX_TEST_UNSET_TOKEN"}, "the environment variable is not set"),
        ({"host": "0.0.0.0"}, "protect it with --token-env VAR"),
    ],
)
def test_what_the_page_refuses_before_it_listens_closes_the_labels_file(
    tmp_path, monkeypatch, where, refused
):
    monkeypatch.delenv("JURYBOX_TEST_UNSET_TOKEN", raising=False)
    judged = judged_items(*_verdicts(tmp_path))
    labels = tmp_path / "h.jsonl"
    said: list[str] = []
    session = start_session(judged.items, judged.verdicts, judged.rubric, labels)
    with pytest.raises(InputError, match=refused):
        serve_session(session, **where, say=said.append)
    assert said == []  # no address was offered
    again = start_session(judged.items, judged.verdicts, judged.rubric, labels)  # not locked
    again.store.close()
