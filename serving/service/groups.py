"""``POST /v1/groups``: group rewards judged by the service's jury.

Group rewards (`jurybox.judges.groups`) judged by the service's jury, each completion's reward
answered with the comparisons behind it.

The request passes what a score request passes (auth, the body's size, draining: the ingress's
checks) and its own bounds before any judge runs: its completions count against ``max_items``, and
every group's planned judge calls (`GroupSpec.cost`: a round robin of 8 is 56 per judge) against
``max_judge_calls``; beyond either, a 413 naming the limit. Then the job's asks go the way of
``/v1/score`` (prepared off the event loop, an inline rubric in a worker process; the verdict cache;
judged together with the other requests that wait for a slot; the same deadline), with one
exception: a listwise call is one item per judge (each judge its own order of the answers), sent to
each judge's deployment alone within a slot of the service's gate. Reading the verdicts
(Bradley-Terry fits, expected scores) runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from jurybox.judges.groups import Ask, AskEach, Group, GroupJob, GroupResult, Job
from jurybox.judges.spec import JurySpec
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec
from jurybox.serving.problems import HTTPProblem, problem_for
from jurybox.serving.service.admission import check_text, prepare
from jurybox.serving.service.config import Limits
from jurybox.serving.service.pace import check_pace
from jurybox.serving.service.protocol import GroupRequest, ScoreItem, ScoreRequest

logger = logging.getLogger("jurybox.serving")


class GroupScoring(Protocol):
    """What the group route uses of the scoring service.

    That is `jurybox.serving.service.scoring.ScoringService`, which calls it.
    """

    limits: Limits
    jury: JurySpec
    gate: Any

    async def _rubric(self, ref: str | dict[str, Any]) -> Rubric: ...

    async def _score(
        self, request: ScoreRequest, deadline: float, limit_items: bool = True
    ) -> list[dict[str, Any]]: ...

    def _provenance(self, rubric: Rubric) -> str: ...

    async def _votes_of(self, judge: str, requests: Any, deadline: float) -> Any: ...


def _groups_of(request: GroupRequest, max_nesting: int, max_chars: int) -> list[Group]:
    """The request's groups, each field checked as an item's is (text, nesting, length)."""
    groups: list[Group] = []
    seen: dict[str, int] = {}
    for g, given in enumerate(request.groups):
        raw = given.model_dump(exclude_none=True)
        check_text(raw, f"groups[{g}]", max_nesting)
        key = str(raw.pop("id"))
        if key in seen:
            raise HTTPProblem(
                422,
                "invalid_request",
                f"groups[{g}].id: duplicate id {key!r} (also groups[{seen[key]}])",
                f"groups[{g}].id",
            )
        seen[key] = g
        completions = raw.pop("completions")
        for c, text in enumerate(completions):
            if len(text) > max_chars:
                raise HTTPProblem(
                    422,
                    "invalid_request",
                    f"groups[{g}].completions[{c}]: "
                    f"{len(text):,} characters, more than this service's limit "
                    f"of {max_chars:,} (max_field_chars)",
                    f"groups[{g}].completions[{c}]",
                )
        groups.append(Group(key, raw, completions))
    return groups


def _planned(
    request: GroupRequest, rubric: Rubric, pointwise: Rubric | None, service: GroupScoring
) -> tuple[GroupJob, int, str]:
    """The job, its judge calls per judge in all and how they add up (in a thread)."""
    limits = service.limits
    groups = _groups_of(request, limits.max_nesting, limits.max_field_chars)
    reward = RewardSpec(score=request.score, scale=request.scale)
    try:
        job = GroupJob(request.design, rubric, service.jury, groups, pointwise, reward)
    except InputError as exc:
        raise problem_for(exc) from None
    costs = job.costs()
    total = sum(c.calls for c in costs)
    sizes = sorted({c.k for c in costs})
    shown = "; ".join(next(c.words for c in costs if c.k == k) for k in sizes[:3])
    return job, total, shown


async def score_groups(
    service: GroupScoring, request: GroupRequest, deadline: float
) -> list[dict[str, Any]]:
    """The groups' results, in order (see the module docstring)."""
    limits = service.limits
    completions = sum(len(g.completions) for g in request.groups)
    if completions > limits.max_items:
        raise HTTPProblem(
            413,
            "too_large",
            f"{completions} completions in {len(request.groups)} "
            f"groups; this service takes at most {limits.max_items} per request "
            "(max_items): send fewer groups",
            "groups",
        )
    if request.design.design == "listwise" and not isinstance(request.rubric, str):
        raise HTTPProblem(
            422,
            "invalid_request",
            "the listwise design asks a rubric the service "
            "knows, by name (an inline rubric's prompts are rendered in a worker; "
            "a listwise call's prompt is built here)",
            "rubric",
        )
    rubric = await service._rubric(request.rubric)
    pointwise = await service._rubric(request.pointwise) if request.pointwise is not None else None
    job, calls, words = await asyncio.to_thread(_planned, request, rubric, pointwise, service)
    if calls > limits.max_judge_calls:
        raise HTTPProblem(
            413,
            "too_large",
            f"the {request.design.design} design of these "
            f"{len(request.groups)} groups asks {calls} judge calls per judge "
            f"({words}); this service takes at most {limits.max_judge_calls} per "
            "request (max_judge_calls): send fewer groups, or a design with fewer "
            "calls (regular or swiss with a smaller per_completion, anchor, "
            "listwise)",
            "design",
        )
    check_pace(service, calls, deadline)  # within the deadline at the judges' measured rate
    refs = {id(rubric): request.rubric}
    if pointwise is not None and request.pointwise is not None:
        refs[id(pointwise)] = request.pointwise

    async def answer(ask: Ask | AskEach) -> Any:
        if isinstance(ask, AskEach):
            return await _each(service, ask, request.allow_empty, deadline)
        if not ask.items:
            return []
        score = await asyncio.to_thread(
            _score_request, refs[id(ask.rubric)], ask.items, request.allow_empty
        )
        return await service._score(score, deadline, limit_items=False)

    steps = job.run()
    asks, results = await asyncio.to_thread(_step, steps, None)
    while asks is not None:
        answers = await asyncio.gather(*(answer(ask) for ask in asks))
        asks, results = await asyncio.to_thread(_step, steps, list(answers))
    logger.info(
        "groups: %d groups, %d completions, %s design, %d judge calls per judge planned",
        len(results),
        completions,
        request.design.design,
        calls,
    )
    return await asyncio.to_thread(lambda: [r.model_dump(mode="json") for r in results])


def _score_request(ref: str | dict[str, Any], items: list[Item], allow_empty: bool) -> ScoreRequest:
    """An ask's items as a score request.

    In a thread: a round holds up to max_judge_calls items.
    """
    return ScoreRequest(
        rubric=ref,
        items=[ScoreItem.model_validate(_raw(it)) for it in items],
        allow_empty=allow_empty,
    )


def _step(
    steps: Job, answers: list[Any] | None
) -> tuple[list[Ask | AskEach] | None, list[GroupResult]]:
    """The job's next asks (its first ones when ``answers`` is None), or None and its results.

    Run in a thread, so the job's end is returned, not raised: a thread's StopIteration cannot
    cross into a future.
    """
    try:
        return (next(steps) if answers is None else steps.send(answers)), []
    except StopIteration as done:
        return None, list(done.value)


def _raw(item: Item) -> dict[str, Any]:
    fields = {k: v for k, v in item.fields().items() if v is not None and v != []}
    return {"id": item.id, **fields}


async def _each(
    service: GroupScoring, ask: AskEach, allow_empty: bool, deadline: float
) -> tuple[str, list[Any]]:
    """A listwise ask: each judge its own items (one per group), within one slot of the gate."""
    limits = service.limits
    # The answers of a group are one field: each may take max_field_chars.
    widened = limits.model_copy(update={"max_field_chars": limits.max_field_chars * 26})
    _, _, requests = await asyncio.to_thread(
        lambda: prepare(ask.rubric, [_raw(it) for it in ask.items], widened, allow_empty)
    )
    prov = service._provenance(ask.rubric)
    judges = service.jury.judges
    n = len(ask.items) // ask.judges
    gate = service.gate
    gate.admit()
    waiting = True
    try:
        async with gate.slot():
            gate.left()
            waiting = False
            # Every judge at once; when one fails the request, the others' calls are
            # cancelled, at the judges too (as the scoring path's calls are).
            tasks = [
                asyncio.ensure_future(
                    service._votes_of(
                        judge.name,
                        requests.subset([g * ask.judges + j for g in range(n)]),
                        deadline,
                    )
                )
                for j, judge in enumerate(judges)
            ]
            try:
                votes = list(await asyncio.gather(*tasks))
            except BaseException:
                for task in tasks:
                    task.cancel()
                raise
    finally:
        if waiting:
            gate.left()
    return prov, votes
