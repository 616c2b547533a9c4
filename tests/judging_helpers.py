"""Items and checks shared by the tests that run real judges (transformers, vLLM, OpenAI)."""

import itertools
import math
from pathlib import Path
from typing import Any

from jurybox.judges.backends.protocol import TokenStep
from jurybox.rubrics import Item

QUESTION = "What causes brown rings on tomato leaves after rain?"
REFERENCE = (
    "Early blight (Alternaria). Remove infected leaves, mulch, and apply copper or chlorothalonil."
)
ITEMS = [
    Item(
        id="good",
        question=QUESTION,
        reference=REFERENCE,
        response="Early blight, a fungal disease; remove infected leaves and use a copper fungicide.",
    ),
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


# The vLLM backend's token pieces and steps as first written (decode through the tokenizer's
# Python wrapper, a closure per token): the reference the shared fast path must equal.
def reference_token_pieces(decode: Any, ids: list[int]) -> list[str]:
    """The text each token adds, such that the pieces join to ``decode(ids)``.

    Decodes each token with a few tokens of left context (linear, not quadratic, in the length);
    falls back to decoding every prefix when a tokenizer's merges defeat the window.
    """
    pieces = []
    for t in range(len(ids)):
        left = ids[max(0, t - 8) : t]
        pieces.append(decode(left + [ids[t]])[len(decode(left)) :] if left else decode([ids[t]]))
    if "".join(pieces) == decode(ids):
        return pieces
    pieces, prev = [], ""
    for t in range(len(ids)):
        text = decode(ids[: t + 1])
        pieces.append(text[len(prev) :])
        prev = text
    return pieces


def reference_steps_from_logprobs(
    decode: Any, ids: list[int], logprobs: Any
) -> tuple[str, list[TokenStep]]:
    """Answer text and TokenSteps from generated ids and vLLM's per-position logprobs
    (``{token_id: Logprob}``; tokens the grammar forbids carry -inf and are left out)."""
    pieces = reference_token_pieces(decode, ids)
    steps: list[TokenStep] = []
    offset = 0
    for t, piece in enumerate(pieces):
        prefix_ids = ids[:t]

        def top(t=t, prefix_ids=prefix_ids) -> dict[str, float]:
            prev = decode(prefix_ids)
            out: dict[str, float] = {}
            position = logprobs[t] if logprobs is not None and t < len(logprobs) else None
            for alt, lp in (position or {}).items():
                value = lp.logprob if hasattr(lp, "logprob") else float(lp)
                if value == -math.inf or math.isnan(value):
                    continue
                appended = decode(prefix_ids + [alt])[len(prev) :]
                out[appended] = (
                    math.log(math.exp(out[appended]) + math.exp(value))
                    if appended in out
                    else value
                )
            return out

        steps.append(TokenStep(offset, piece, top))
        offset += len(piece)
    return "".join(pieces), steps


def reference_distribution(criterion, steps, position):
    """score_distribution as first written (no caches)."""
    if position is None or not steps:
        return None
    step = next((s for s in steps if s.offset <= position < s.offset + len(s.text)), None)
    if step is None:
        return None
    prefix = step.text[: position - step.offset]
    answers = criterion.scale.answer_texts()
    lowered = {a.lower(): a for a in answers}
    mass, unattributed = {}, 0.0
    for alt, logprob in step.top.items():
        if not alt.startswith(prefix):
            continue
        p = math.exp(logprob)
        rest = alt[len(prefix) :].lower()
        matches = [
            a
            for a in lowered
            if rest and (a.startswith(rest) or (rest.startswith(a) and not rest[len(a)].isalnum()))
        ]
        if len(matches) == 1:
            mass[lowered[matches[0]]] = mass.get(lowered[matches[0]], 0.0) + p
        else:
            unattributed += p
    total = sum(mass.values())
    chosen = next((a for a in lowered if step.text[len(prefix) :].lower().startswith(a)), None)
    if total <= 0.0 or unattributed > 0.01 * (total + unattributed):
        return None
    if chosen is not None and mass.get(lowered[chosen], 0.0) == 0.0:
        return None
    return {a: mass.get(a, 0.0) / total for a in answers}


def tiny_cascade(threshold=None, base="tiny"):
    """The tiny jury (or the jury file ``base``, e.g. the replay jury) as a cascade: SmolLM2
    first, Gemma 3 for the items it is unsure about."""
    from jurybox.judges import JurySpec, load_jury_spec

    return JurySpec.model_validate(
        {
            **load_jury_spec(base).model_dump(),
            "stages": [
                {"judges": ["smollm2-135m"], "threshold": threshold},
                {"judges": ["gemma3-270m"]},
            ],
        }
    )


def stage_one_confidences(records, rubric, jury):
    """id -> the first stage's confidence, from verdict records holding every judge's votes."""
    from jurybox.judges.cascade import confidence
    from jurybox.judges.judging import decide
    from jurybox.rubrics import VerdictRecord

    stage = jury.unfitted().stage_jury(0)
    members = {j.name for j in stage.judges}
    scales = {c.name: c.scale for c in rubric.criteria}
    out = {}
    for raw in records:
        rec = VerdictRecord.from_record(raw)
        verdict = decide(
            rubric, stage, rec.provenance, rec.id, [v for v in rec.votes if v.judge in members]
        )
        out[rec.id] = (
            confidence(verdict, scales, list(scales)) if verdict.status == "scored" else -1.0
        )
    return out


def split_threshold(confidences):
    """A threshold in the widest gap between the confidences: some items leave at stage 1,
    some go on, and no item sits near the threshold (floating noise cannot move it across)."""
    values = sorted(set(confidences.values()))
    assert len(values) >= 2, f"every item has the same confidence {values}: nothing to split"
    gap, low = max((b - a, a) for a, b in itertools.pairwise(values))
    return low + gap / 2


def one_criterion_rubric(name: str = "one", top: int = 5):
    """A rubric with a single criterion, ``accuracy`` on 1..``top`` (scripted-judge tests)."""
    from jurybox.rubrics import Rubric

    return Rubric.model_validate(
        {
            "name": name,
            "inputs": ["question", "response"],
            "template": "{{ question }} {{ response }} {{ output_format }}",
            "criteria": [
                {"name": "accuracy", "description": "how accurate", "scale": {"min": 1, "max": top}}
            ],
        }
    )


#: What a judge writes before its ``accuracy`` score (scripted generations).
ACCURACY_PREFIX = '{"accuracy": '


# --------------------------------------------------------------------------- the replay jury
RECORDING = Path(__file__).resolve().parent / "data" / "tiny-recorded.json.gz"
BENCH_RECORDING = RECORDING.with_name("tiny-bench-recorded.json.gz")  # the packs' prompts
# The leaderboard's three systems (leaderboard_systems) under mirage-mg.
LEADERBOARD_RECORDING = RECORDING.with_name("tiny-leaderboard-recorded.json.gz")
# The shipped checklist rubrics' units on tests/data/record.py's checklist_items (#63): add it to
# write_replay_jury's recordings where a test judges a checklist rubric.
CHECKLISTS_RECORDING = RECORDING.with_name("tiny-checklists-recorded.json.gz")


def leaderboard_systems() -> dict[str, list[dict[str, Any]]]:
    """Three systems' predictions on the examples' items (examples/mirage_mg.jsonl): ``full``
    the examples' own answers, ``brief`` each answer's first sentence, ``swapped`` each item
    answered with the next item's answer (on the wrong question)."""
    import json

    path = Path(__file__).resolve().parents[1] / "examples" / "mirage_mg.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    brief = [{**r, "response": r["response"].split(". ")[0].rstrip(".") + "."} for r in rows]
    swapped = [{**r, "response": rows[(k + 1) % len(rows)]["response"]} for k, r in enumerate(rows)]
    return {"full": rows, "brief": brief, "swapped": swapped}


def write_replay_jury(
    path: Path,
    delay_s: float = 0.0,
    judges: tuple[str, ...] = (),
    recordings: tuple[Path, ...] = (RECORDING,),
    max_prompt_tokens: int | None = None,
) -> Path:
    """A jury file at ``path``: the tiny jury's judges (or those named in ``judges``) answering
    with their recorded real answers (``recordings``: tests/data/tiny-recorded.json.gz unless
    told) instead of running the models: the real judging path and the judges' real
    tokenizers, without a model's time. ``delay_s`` makes every generate take that long (for
    deadline and cancellation tests). ``max_prompt_tokens``: longer prompts get an unscored
    vote (a way to make an item unscored on purpose)."""
    import yaml

    from jurybox.judges import load_jury_spec

    spec = load_jury_spec("tiny").model_dump(mode="json", exclude_defaults=True)
    kwargs: dict[str, Any] = {"recording": [str(p) for p in recordings]}
    if delay_s:
        kwargs["delay_s"] = delay_s
    limit = {"max_prompt_tokens": max_prompt_tokens} if max_prompt_tokens else {}
    spec["judges"] = [
        {**j, "backend": "replay", "engine_kwargs": kwargs, **limit}
        for j in spec["judges"]
        if not judges or j["name"] in judges
    ]
    spec["description"] = "The tiny jury's recorded answers (tests/data/record.py), for tests."
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path
