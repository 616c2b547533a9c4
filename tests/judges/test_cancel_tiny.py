"""A transformers generate that nobody waits for any more stops (the real SmolLM2): its cancel
check is asked before each sub-batch and phase and after every new token, and once it says True
the generate raises GenerationCancelled instead of returning answers cut short. Steps are
counted as the model's forward passes, never timed."""

import pytest
from judging_helpers import ITEMS

from jurybox.judges.backends.protocol import GenerationCancelled
from jurybox.judges.judging import render_requests
from jurybox.rubrics import load_rubric

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def smol(tiny_jury):
    """The session's tiny jury's SmolLM2 (a TransformersBackend: no second load of the model;
    what a test changes of it, monkeypatch puts back)."""
    from jurybox.judges.backends.transformers import TransformersBackend

    backend = tiny_jury.backend(tiny_jury.spec.judges[0])
    assert isinstance(backend, TransformersBackend) and backend.name == "smollm2-135m"
    return backend


@pytest.fixture
def forwards(smol):
    """How many forward passes the model has run (one per generated token, plus the prefill)."""
    count = [0]
    hook = smol.model.register_forward_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    yield count
    hook.remove()


@pytest.fixture(scope="module")
def plain(smol):
    """The first prompt generated without a check, and the forward passes it took: what the
    checked generates below are compared with (one full generate for the module, not one
    per test)."""
    count = [0]
    hook = smol.model.register_forward_hook(lambda *_: count.__setitem__(0, count[0] + 1))
    try:
        generated = smol.generate(requests())
    finally:
        hook.remove()
    return generated, count[0]


def requests(n=1):
    """The first ``n`` prompts of the shared items (one per item with this rubric)."""
    prompts = list(render_requests(load_rubric("general"), ITEMS).requests[:n])
    assert len(prompts) == n
    return prompts


class Check:
    """A cancel check that says True from its ``after``-th call on, counting its calls."""

    def __init__(self, after=None):
        self.after, self.calls = after, 0

    def __call__(self):
        self.calls += 1
        return self.after is not None and self.calls >= self.after


def test_a_check_that_stays_false_changes_nothing(smol, plain, forwards):
    plain, full_forwards = plain
    check = Check()
    checked = smol.generate(requests(), cancelled=check)
    assert [g.text for g in checked] == [g.text for g in plain]
    assert plain[0].error is None and plain[0].output_tokens > 8
    assert plain[0].finish_reason == "stop"
    # Asked once before the generate and once after every token (the answer's, then its end).
    assert check.calls == 1 + plain[0].output_tokens + 1
    assert forwards[0] == full_forwards  # the checked generate's own: as many as the plain's


def test_a_check_that_turns_true_stops_within_a_step(smol, plain, forwards):
    (full,), full_forwards = plain
    check = Check(after=3)  # before the generate, after token 1, after token 2: stop
    with pytest.raises(GenerationCancelled):
        smol.generate(requests(), cancelled=check)
    assert check.calls == 3
    assert forwards[0] <= 3 < full_forwards  # the prefill and a token or two, not the answer
    assert full.output_tokens > 8


def test_a_check_already_true_generates_nothing(smol, forwards):
    with pytest.raises(GenerationCancelled):
        smol.generate(requests(), cancelled=Check(after=1))
    assert forwards[0] == 0


def with_spec(monkeypatch, backend, **fields):
    """``backend`` judging with its spec's ``fields`` replaced (each a dict of settings)."""
    spec = backend.spec
    update = {
        k: type(getattr(spec, k)).model_validate({**getattr(spec, k).model_dump(), **v})
        for k, v in fields.items()
    }
    monkeypatch.setattr(backend, "spec", spec.model_copy(update=update))


def test_the_check_is_asked_between_sub_batches(smol, monkeypatch):
    with_spec(monkeypatch, smol, execution={"batch_size": 1})
    gone = [False]
    answered = []
    answer = smol._answer

    def first_then_leave(*args, **kwargs):
        answered.append(answer(*args, **kwargs))
        gone[0] = True  # every client left while the first sub-batch was generated
        return answered[-1]

    monkeypatch.setattr(smol, "_answer", first_then_leave)
    with pytest.raises(GenerationCancelled):
        smol.generate(requests(2), cancelled=lambda: gone[0])
    assert len(answered) == 1  # the second sub-batch never started


def test_the_check_is_asked_between_thinking_and_answering(smol, monkeypatch):
    # SmolLM2 does not think in tags; a period closes its first sentence of "reasoning".
    with_spec(
        monkeypatch, smol, reasoning={"mode": "think", "start": "", "end": ".", "budget_tokens": 64}
    )
    judge = smol
    gone = [False]
    think, answered = judge._think, []

    def think_then_leave(*args, **kwargs):
        thoughts = think(*args, **kwargs)
        assert all(error is None for _, error, _ in thoughts)  # an answer phase would follow
        gone[0] = True
        return thoughts

    monkeypatch.setattr(judge, "_think", think_then_leave)
    monkeypatch.setattr(judge, "_answer", lambda *a, **k: answered.append(1))
    with pytest.raises(GenerationCancelled):
        judge.generate(requests(), cancelled=lambda: gone[0])
    assert answered == []
