"""The judging path in three pieces, called by every way of running a jury.

1. :func:`render_requests`: the prompts a rubric asks about a batch of items (one request per
   item and judge call), or why an item's prompt could not be rendered.
2. :func:`judge_votes`: one judge's votes on those requests, from its backend. Answers are
   parsed and score distributions read here, where the judge runs: what leaves this step is
   votes (plain, picklable data), never a backend's raw generations, whose token steps hold
   closures over a tokenizer or an engine.
3. :func:`decide_verdicts`: the verdicts from every judge's votes (aggregation, quorum, formula).

``Jury.score`` is these three in a row, walked by :class:`jurybox.judges.cascade.Steps` (which
also runs a cascaded jury stage by stage, deciding each item with :func:`decide`); the bulk
runner, the HTTP service and the Ray stages call the same functions, so a verdict means the
same thing however it was produced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jurybox.rubrics import Criterion, Item, Rubric, Verdict, Vote, output_schema, render_messages
from jurybox.rubrics.errors import ExecutionError, InputError, JuryboxError

from .aggregate import aggregate_criterion
from .backends.base import AsyncBackend, Backend, Generation, Request
from .parsing import expected_score, parse_answers, score_distribution
from .spec import JudgeSpec, JurySpec


class MissingInputs(InputError):
    """Items that lack fields the rubric needs."""


class JudgeFailed(ExecutionError):
    """A judge could not judge a batch at all; nothing of the batch is recorded."""


@dataclass(frozen=True)
class Requests:
    """What every judge is asked about a batch of items.

    ``requests[i * n_calls + c]`` is call ``c`` (the criteria ``calls[c]``) about item ``i``;
    it is None where the prompt could not be rendered, and ``errors`` says why.
    """

    item_ids: tuple[str, ...]
    calls: tuple[tuple[Criterion, ...], ...]
    requests: tuple[Request | None, ...]
    errors: Mapping[int, str] = field(default_factory=dict)

    @property
    def runnable(self) -> list[int]:
        """The positions in ``requests`` whose prompt rendered (not None), ascending."""
        return [k for k, r in enumerate(self.requests) if r is not None]

    def subset(self, items: Sequence[int]) -> Requests:
        """The requests of the items at positions ``items`` (a cascade's open items)."""
        if len(items) == len(self.item_ids):
            return self
        n_calls = len(self.calls)
        requests: list[Request | None] = []
        errors: dict[int, str] = {}
        for i in items:
            for k in range(i * n_calls, (i + 1) * n_calls):
                if k in self.errors:
                    errors[len(requests)] = self.errors[k]
                requests.append(self.requests[k])
        return Requests(tuple(self.item_ids[i] for i in items), self.calls, tuple(requests),
                        errors)

    def split(self) -> list[Requests]:
        """One Requests per item (what a pipeline carries row by row); :meth:`join` undoes it."""
        return [self.subset([i]) for i in range(len(self.item_ids))]

    @classmethod
    def join(cls, parts: Sequence[Requests]) -> Requests:
        """The requests of ``parts`` (same rubric calls) as one batch, in order."""
        if not parts:
            raise ValueError("Requests.join needs at least one part")
        calls = parts[0].calls
        requests: list[Request | None] = []
        errors: dict[int, str] = {}
        for part in parts:
            if part.calls != calls:
                raise ValueError("Requests.join: the parts were rendered for different calls")
            errors.update({len(requests) + k: e for k, e in part.errors.items()})
            requests.extend(part.requests)
        return cls(tuple(i for part in parts for i in part.item_ids), calls, tuple(requests),
                   errors)


def render_requests(rubric: Rubric, items: Sequence[Item]) -> Requests:
    """Render every judge call of ``rubric`` for each item; raise MissingInputs for items that
    lack an input the rubric needs. A template that fails on one item's values makes that
    item's votes unscored with the reason, not the batch fail."""
    missing = {it.id: it.missing(rubric) for it in items}
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        shown = "; ".join(f"{k}: {', '.join(v)}" for k, v in list(missing.items())[:5])
        raise MissingInputs(
            f"{len(missing)} item(s) lack inputs the rubric {rubric.name} needs ({shown})"
        )
    calls = tuple(tuple(c) for c in rubric.calls())
    schemas = [output_schema(list(c)) for c in calls]
    requests: list[Request | None] = []
    errors: dict[int, str] = {}
    for item in items:
        for criteria, schema in zip(calls, schemas):
            try:
                requests.append(Request(render_messages(rubric, item, list(criteria)), schema))
            except Exception as exc:  # a template that fails on this item's values
                errors[len(requests)] = f"prompt could not be rendered: {exc}"
                requests.append(None)
    return Requests(tuple(it.id for it in items), calls, tuple(requests), errors)


def judge_votes(judge: JudgeSpec, backend: Backend, requests: Requests) -> list[list[Vote]]:
    """One judge's votes on every item of ``requests`` (a list of votes per item).

    A backend reports trouble with one prompt as that generation's error (an unscored vote). An
    exception means the judge as a whole failed (out of memory, server gone): writing that down
    as unscored votes would make a rerun skip these items, so it raises JudgeFailed instead.
    """
    batch = [r for r in requests.requests if r is not None]  # those of requests.runnable
    try:
        outputs = backend.generate(batch) if batch else []
    except JuryboxError:
        raise
    except Exception as exc:
        raise JudgeFailed(f"judge {judge.name} failed: {type(exc).__name__}: {exc}") from exc
    return _votes(judge, requests, outputs)


async def ajudge_votes(judge: JudgeSpec, backend: Backend, requests: Requests) -> list[list[Vote]]:
    """:func:`judge_votes` for an event loop: the backend's ``agenerate`` when it has one (the
    async vLLM engine, the OpenAI client), else its ``generate`` in a worker thread."""
    import asyncio

    batch = [r for r in requests.requests if r is not None]  # those of requests.runnable
    try:
        if not batch:
            outputs = []
        elif isinstance(backend, AsyncBackend):
            outputs = await backend.agenerate(batch)
        else:
            outputs = await asyncio.to_thread(backend.generate, batch)
    except JuryboxError:
        raise
    except Exception as exc:
        raise JudgeFailed(f"judge {judge.name} failed: {type(exc).__name__}: {exc}") from exc
    return _votes(judge, requests, outputs)


def _votes(judge: JudgeSpec, requests: Requests, outputs: Sequence[Generation]) -> list[list[Vote]]:
    runnable = requests.runnable
    if len(outputs) != len(runnable):
        raise JudgeFailed(
            f"judge {judge.name}: backend returned {len(outputs)} outputs for {len(runnable)} prompts"
        )
    generations: dict[int, Generation] = {k: Generation(error=e) for k, e in requests.errors.items()}
    generations.update(zip(runnable, outputs))
    n_calls = len(requests.calls)
    votes: list[list[Vote]] = [[] for _ in requests.item_ids]
    for k in range(len(requests.requests)):
        item, call = divmod(k, n_calls)
        votes[item].extend(votes_from_generation(
            judge.name, list(requests.calls[call]), generations[k], judge.reasoning.keep))
    return votes


def votes_from_generation(
    judge: str, criteria: list[Criterion], gen: Generation, keep_reasoning: bool = False
) -> list[Vote]:
    """One vote per criterion of a judge call: a score, or the reason there is none."""
    reasoning = gen.reasoning if keep_reasoning else None
    if gen.error is not None:
        return [
            Vote(judge=judge, criterion=c.name, error=gen.error, latency_s=gen.latency_s,
                 raw=gen.text or None, reasoning=reasoning)
            for c in criteria
        ]
    answers = parse_answers(gen.text, criteria, complete=gen.finish_reason != "length")
    votes = []
    for c in criteria:
        a = answers[c.name]
        if a.error is not None:
            error = a.error
            if gen.finish_reason == "length":
                error = f"output cut at max_tokens ({gen.output_tokens} tokens): {error}"
            votes.append(Vote(judge=judge, criterion=c.name, error=error, latency_s=gen.latency_s,
                              raw=gen.text, reasoning=reasoning))
            continue
        dist = score_distribution(c, gen.steps, a.position)
        votes.append(
            Vote(
                judge=judge,
                criterion=c.name,
                score=a.value,
                label=a.label,
                expected=expected_score(c, dist),
                distribution=dist,
                latency_s=gen.latency_s,
                raw=gen.text,
                reasoning=reasoning,
            )
        )
    return votes


def decide_verdicts(
    rubric: Rubric,
    jury: JurySpec,
    provenance: str,
    item_ids: Sequence[str],
    votes_by_judge: Sequence[Sequence[Sequence[Vote]]],
) -> list[Verdict]:
    """One verdict per item from every judge's votes (``votes_by_judge[j][i]``: judge j's
    votes on item i, in the jury's judge order)."""
    if len(votes_by_judge) != len(jury.judges):
        raise JudgeFailed(f"votes from {len(votes_by_judge)} judges for a jury of {len(jury.judges)}")
    for judge, per_item in zip(jury.judges, votes_by_judge):
        if len(per_item) != len(item_ids):
            raise JudgeFailed(f"judge {judge.name}: votes for {len(per_item)} items, "
                              f"expected {len(item_ids)}")
    return [
        decide(rubric, jury, provenance, item_id, [v for per_item in votes_by_judge for v in per_item[i]])
        for i, item_id in enumerate(item_ids)
    ]


def decide(rubric: Rubric, jury: JurySpec, prov: str, item_id: str, votes: list[Vote]) -> Verdict:
    """The verdict on one item from all its votes."""
    criteria = {}
    scores: dict[str, float | None] = {}
    reasons = []
    for c in rubric.criteria:
        result = aggregate_criterion(c.name, [v for v in votes if v.criterion == c.name], jury)
        criteria[c.name] = result
        scores[c.name] = result.score
        if result.score is None:
            reasons.append(f"{c.name}: {result.reason}")
    if rubric.formula is not None:
        value, why = rubric.formula.explain(scores)
        scores[rubric.formula.name] = value
        if value is None and not reasons:
            # Every criterion is scored, yet the formula has no value: say so, never a silent null.
            reasons.append(f"{rubric.formula.name}: undefined ({why})")
    return Verdict(
        id=item_id,
        status="scored" if not reasons else "unscored",
        rubric=rubric.name,
        jury=jury.name,
        provenance=prov,
        scores=scores,
        criteria=criteria,
        votes=votes,
        reasons=reasons,
    )
