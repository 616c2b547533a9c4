"""The judging path in three pieces, called by every way of running a jury.

1. `render_requests`: the prompts a rubric asks about a batch of items (one request per
   item and judge call), or why an item's prompt could not be rendered.
2. `judge_votes`: one judge's votes on those requests, from its backend. Answers are
   parsed and score distributions read here, where the judge runs: what leaves this step is
   votes (plain, picklable data), never a backend's raw generations, whose token steps hold
   closures over a tokenizer or an engine.
3. `decide_verdicts`: the verdicts from every judge's votes (aggregation, quorum, formula).

``Jury.score`` is these three in a row, walked by `jurybox.judges.cascade.Steps` (which
also runs a cascaded jury stage by stage, deciding each item with `decide`); the bulk
runner, the HTTP service and the Ray stages call the same functions, so a verdict means the
same thing however it was produced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jurybox.rubrics import (
    Criterion,
    Item,
    Order,
    Rubric,
    Verdict,
    Vote,
    output_schema,
)
from jurybox.rubrics.errors import ExecutionError, InputError, JuryboxError
from jurybox.rubrics.pairwise import a_share, combine_orders, jury_p_a, winner_of
from jurybox.rubrics.prompts import render_prompt

from .aggregate import aggregate_criterion
from .backends.protocol import AsyncBackend, Backend, Generation, Request
from .parsing import expected_score, parse_answers, score_distribution
from .spec import JudgeSpec, JurySpec


class MissingInputs(InputError):
    """Items that lack fields the rubric needs."""


class JudgeFailed(ExecutionError):
    """A judge could not judge a batch at all; nothing of the batch is recorded."""


@dataclass(frozen=True)
class Requests:
    """What every judge is asked about a batch of items.

    ``requests[i * n_calls + c]`` is call ``c`` (the criteria ``calls[c]``, the answers shown
    in ``orders[c]`` for a pairwise rubric) about item ``i``; it is None where the prompt could
    not be rendered, and ``errors`` says why.
    """

    item_ids: tuple[str, ...]
    calls: tuple[tuple[Criterion, ...], ...]
    requests: tuple[Request | None, ...]
    errors: Mapping[int, str] = field(default_factory=dict)
    orders: tuple[Order | None, ...] = ()

    def order(self, call: int) -> Order | None:
        """The order of the answers in call ``call`` (None unless the rubric is pairwise)."""
        return self.orders[call] if self.orders else None

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
        return Requests(
            tuple(self.item_ids[i] for i in items), self.calls, tuple(requests), errors, self.orders
        )

    def split(self) -> list[Requests]:
        """One Requests per item (what a pipeline carries row by row); `join` undoes it."""
        return [self.subset([i]) for i in range(len(self.item_ids))]

    @classmethod
    def join(cls, parts: Sequence[Requests]) -> Requests:
        """The requests of ``parts`` (same rubric calls) as one batch, in order."""
        if not parts:
            raise ValueError("Requests.join needs at least one part")
        calls, orders = parts[0].calls, parts[0].orders
        requests: list[Request | None] = []
        errors: dict[int, str] = {}
        for part in parts:
            if part.calls != calls or part.orders != orders:
                raise ValueError("Requests.join: the parts were rendered for different calls")
            errors.update({len(requests) + k: e for k, e in part.errors.items()})
            requests.extend(part.requests)
        return cls(
            tuple(i for part in parts for i in part.item_ids),
            calls,
            tuple(requests),
            errors,
            orders,
        )


def render_requests(rubric: Rubric, items: Sequence[Item]) -> Requests:
    """Render every judge call of ``rubric`` for each item.

    A template that fails on one item's values makes that item's votes unscored with the reason,
    not the batch fail. An item holding its loaded images (`Item.with_images`) gives every
    request of it those images, placed where the template says (``{{ images_here }}``), for the
    judges that see images.

    Raises:
        MissingInputs: Some item lacks an input the rubric needs.
    """
    missing = {it.id: it.missing(rubric) for it in items}
    missing = {k: v for k, v in missing.items() if v}
    if missing:
        shown = "; ".join(f"{k}: {', '.join(v)}" for k, v in list(missing.items())[:5])
        raise MissingInputs(
            f"{len(missing)} item(s) lack inputs the rubric {rubric.name} needs ({shown})"
        )
    # A pairwise rubric asks every call twice: answers in the order A, B, then B, A.
    pairs = [(tuple(c), o) for o in rubric.orders for c in rubric.calls()]
    calls = tuple(c for c, _ in pairs)
    schemas = [output_schema(list(c)) for c in calls]
    requests: list[Request | None] = []
    errors: dict[int, str] = {}
    for item in items:
        images = item.loaded_images
        for (criteria, order), schema in zip(pairs, schemas):
            try:
                messages, place, pieces = render_prompt(rubric, item, list(criteria), order)
                requests.append(Request(messages, schema, pieces, images, place))
            except Exception as exc:  # a template that fails on this item's values
                errors[len(requests)] = f"prompt could not be rendered: {exc}"
                requests.append(None)
    orders = tuple(o for _, o in pairs) if rubric.pairwise else ()
    return Requests(tuple(it.id for it in items), calls, tuple(requests), errors, orders)


def judge_votes(judge: JudgeSpec, backend: Backend, requests: Requests) -> list[list[Vote]]:
    """One judge's votes on every item of ``requests`` (a list of votes per item).

    A backend reports trouble with one prompt as that generation's error (an unscored vote). An
    exception means the judge as a whole failed (out of memory, server gone): writing that down
    as unscored votes would make a rerun skip these items, so it raises JudgeFailed instead.
    """
    from .images import shown

    # (those of requests.runnable; their images only for a judge that sees them)
    batch = shown(judge, [r for r in requests.requests if r is not None])
    try:
        outputs = backend.generate(batch) if batch else []
    except JuryboxError:
        raise
    except Exception as exc:
        raise JudgeFailed(f"judge {judge.name} failed: {type(exc).__name__}: {exc}") from exc
    return _votes(judge, requests, outputs)


def _seen(judge: JudgeSpec, requests: Requests) -> dict[int, list[str]]:
    """The digests of the images each request showed ``judge``.

    They are by position; none for a text-only judge.
    """
    from .images import sees_images

    if not any(r is not None and r.images for r in requests.requests) or not sees_images(judge):
        return {}
    return {
        k: [im.digest for im in r.images]
        for k, r in enumerate(requests.requests)
        if r is not None and r.images
    }


async def ajudge_votes(judge: JudgeSpec, backend: Backend, requests: Requests) -> list[list[Vote]]:
    """`judge_votes` for an event loop.

    It awaits the backend's ``agenerate`` when it has one (the async vLLM engine, the OpenAI
    client), else runs its ``generate`` in a worker thread.
    """
    import asyncio

    from .images import shown

    # (those of requests.runnable; their images only for a judge that sees them)
    batch = shown(judge, [r for r in requests.requests if r is not None])
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
    generations: dict[int, Generation] = {
        k: Generation(error=e) for k, e in requests.errors.items()
    }
    generations.update(zip(runnable, outputs))
    n_calls = len(requests.calls)
    seen = _seen(judge, requests)
    votes: list[list[Vote]] = [[] for _ in requests.item_ids]
    for k in range(len(requests.requests)):
        item, call = divmod(k, n_calls)
        votes[item].extend(
            votes_from_generation(
                judge.name,
                list(requests.calls[call]),
                generations[k],
                judge.reasoning.keep,
                requests.order(call),
                seen.get(k),
            )
        )
    return votes


def votes_from_generation(
    judge: str,
    criteria: list[Criterion],
    gen: Generation,
    keep_reasoning: bool = False,
    order: Order | None = None,
    images: list[str] | None = None,
) -> list[Vote]:
    """One vote per criterion of a judge call: a score, or the reason there is none.

    In a pairwise call (``order`` given) the score and expected score are A's share (1: A is better)
    whatever position A was shown in; the label and distribution are the judge's own answer.
    ``images``: the digests of the images the judge was shown in the call.
    """
    reasoning = gen.reasoning if keep_reasoning else None
    if gen.error is not None:
        return [
            Vote(
                judge=judge,
                criterion=c.name,
                error=gen.error,
                latency_s=gen.latency_s,
                raw=gen.text or None,
                reasoning=reasoning,
                order=order,
                images=images,
            )
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
            votes.append(
                Vote(
                    judge=judge,
                    criterion=c.name,
                    error=error,
                    latency_s=gen.latency_s,
                    raw=gen.text,
                    reasoning=reasoning,
                    order=order,
                    images=images,
                )
            )
            continue
        dist = score_distribution(c, gen.steps, a.position)
        score, expected = a.value, expected_score(c, dist)
        if order == "ba":  # the judge saw B first: its "first" is B
            assert score is not None  # a parsed answer without an error has a value
            score, expected = a_share(c, score), None if expected is None else 1.0 - expected
        votes.append(
            Vote(
                judge=judge,
                criterion=c.name,
                score=score,
                label=a.label,
                expected=expected,
                distribution=dist,
                latency_s=gen.latency_s,
                raw=gen.text,
                reasoning=reasoning,
                order=order,
                images=images,
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
    """One verdict per item from every judge's votes.

    ``votes_by_judge[j][i]`` is judge j's votes on item i, in the jury's judge order.

    Raises:
        JudgeFailed: The votes are not one list per judge of the jury and item.
    """
    if len(votes_by_judge) != len(jury.judges):
        raise JudgeFailed(
            f"votes from {len(votes_by_judge)} judges for a jury of {len(jury.judges)}"
        )
    for judge, per_item in zip(jury.judges, votes_by_judge):
        if len(per_item) != len(item_ids):
            raise JudgeFailed(
                f"judge {judge.name}: votes for {len(per_item)} items, expected {len(item_ids)}"
            )
    return [
        decide(
            rubric,
            jury,
            provenance,
            item_id,
            [v for per_item in votes_by_judge for v in per_item[i]],
        )
        for i, item_id in enumerate(item_ids)
    ]


def decide(rubric: Rubric, jury: JurySpec, prov: str, item_id: str, votes: list[Vote]) -> Verdict:
    """The verdict on one item from all its votes."""
    criteria = {}
    scores: dict[str, float | None] = {}
    reasons = []
    flips = []
    for c in rubric.criteria:
        mine = [v for v in votes if v.criterion == c.name]
        if rubric.pairwise:  # one vote per judge: its two orders, combined
            mine = combine_orders(c.name, mine, rubric.inconsistent)
            flips += [
                f"{v.judge} on {c.name}: {v.raw or v.error}"
                for v in mine
                if "inconsistent under order swap" in (v.raw or v.error or "")
            ]
        result = aggregate_criterion(c.name, mine, jury)
        criteria[c.name] = result
        scores[c.name] = result.score
        if result.score is None:
            unscored = "; ".join(f"{v.judge}: {v.error}" for v in mine if not v.scored)
            reasons.append(
                f"{c.name}: {result.reason}"
                + (f" ({unscored})" if rubric.pairwise and unscored else "")
            )
    if rubric.formula is not None:
        value, why = rubric.formula.explain(scores)
        scores[rubric.formula.name] = value
        if value is None and not reasons:
            # Every criterion is scored, yet the formula has no value: say so, never a silent null.
            reasons.append(f"{rubric.formula.name}: undefined ({why})")
    pair: dict[str, Any] = {}
    if rubric.pairwise:
        overall = rubric.formula.name if rubric.formula is not None else rubric.criteria[0].name
        pair = {
            "pairwise": True,
            "winner": winner_of(scores[overall]),
            "p_a": jury_p_a(rubric, votes) if rubric.formula is None else None,
            "inconsistent": flips,
        }
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
        **pair,
    )
