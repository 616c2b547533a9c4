"""``POST /v1/groups``: group rewards judged by the service's jury.

Group rewards (`jurybox.judges.groups`) judged by the service's jury, each completion's reward
answered with the comparisons behind it.

The request passes what a score request passes (auth, the body's size, draining: the ingress's
checks) and its own bounds before any judge runs: its completions count against ``max_items``,
every group's planned judge calls (`GroupSpec.cost`: a round robin of 8 is 56 per judge) against
``max_judge_calls``, and the prompt text all its rounds would render, estimated from the plan
(`planned_prompt_chars`), against ``max_request_prompt_chars``; beyond any, a 413 naming the limit.
Those are per-request bounds. A group over a per-group bound (its largest call over
``max_prompt_chars``, an image over an image limit) is answered unscored with the reason, and the
others are judged. Every error names the client's field (``groups[g]...``), never an item the job
built. A group's images are decoded once, here, and its items carry them by reference
(`jurybox.serving.service.admission.SHARED_IMAGES`, set for this request alone); a jury whose
judges see no images refuses them undecoded. Then the job's asks go the way of
``/v1/score`` (prepared off the event loop, an inline rubric in a worker process; the verdict cache;
judged together with the other requests that wait for a slot; the same deadline), with one
exception: a listwise call is one item per judge (each judge its own order of the answers), sent to
each judge's deployment alone within a slot of the service's gate. Reading the verdicts
(Bradley-Terry fits, expected scores) runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jurybox.judges.groups import (
    Ask,
    AskEach,
    CompletionReward,
    Group,
    GroupJob,
    GroupResult,
    Job,
)
from jurybox.judges.images import jury_sees_images, materialize_images
from jurybox.judges.judging import Requests
from jurybox.judges.spec import JurySpec
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.images import Image, ImageError
from jurybox.rubrics.reward import RewardSpec
from jurybox.serving.errors import Invalid, RequestProblem, TimedOut, TooLarge
from jurybox.serving.service.admission import (
    SHARED_IMAGES,
    check_text,
    image_policy,
    no_images_seen,
    prepare,
    shared_ref,
)
from jurybox.serving.service.checklists import group_calls
from jurybox.serving.service.config import Limits
from jurybox.serving.service.group_sizes import invalid
from jurybox.serving.service.group_sizes import sized as sized_groups
from jurybox.serving.service.groups_protocol import GroupRequest
from jurybox.serving.service.pace import check_pace

if TYPE_CHECKING:
    from jurybox.serving.service.scoring import ScoringService

logger = logging.getLogger("jurybox.serving")


@dataclass
class _Admitted:
    """A request's groups as the job takes them, the groups left unscored and why, their images."""

    groups: list[Group]
    unscored: dict[int, str] = field(default_factory=dict)
    shared: dict[str, Image] = field(default_factory=dict)


def _admitted(request: GroupRequest, limits: Limits, seen_by: str | None) -> _Admitted:
    """The request's groups, each field checked as an item's is (in a thread).

    Text, nesting, length, empty completions, duplicate ids: a 422 naming the group's field. Its
    images are refused undecoded when no judge sees images (``seen_by``: the jury's name), else
    decoded once here and carried by reference (`shared_ref`); a group with an image over an
    image limit is left unscored with the reason.
    """
    out = _Admitted([])
    seen: dict[str, int] = {}
    policy = image_policy(limits)
    image_bytes = 0
    for g, given in enumerate(request.groups):
        raw = given.model_dump(exclude_none=True)
        check_text(raw, f"groups[{g}]", limits.max_nesting)
        key = str(raw.pop("id"))
        if key in seen:
            raise invalid(f"groups[{g}].id", f"duplicate id {key!r} (also groups[{seen[key]}])")
        seen[key] = g
        completions = raw.pop("completions")
        _check_lengths(g, raw, completions, limits.max_field_chars, request.allow_empty)
        refs = raw.pop("images", None)
        if refs and seen_by is not None:
            raise no_images_seen(seen_by, f"groups[{g}].images")
        if refs:
            try:
                group = Item.model_construct(id=key, images=list(refs))  # (its id as given)
                images = materialize_images(group, policy).loaded_images
            except ImageError as exc:
                where = f"groups[{g}].{exc.field or 'images'}"
                if not exc.too_large:
                    raise invalid(where, str(exc)) from None
                out.unscored[g] = (
                    f"{where}: {exc} (the service's image limits: max_image_bytes, "
                    "max_image_pixels, max_images_per_item); the group was not judged"
                )
                images = ()
            image_bytes += sum(len(im.data) for im in images)
            if image_bytes > limits.max_request_image_bytes:
                raise TooLarge(
                    f"the groups' images have more than {image_bytes:,} bytes in all; this "
                    f"service takes at most {limits.max_request_image_bytes:,} "
                    "(max_request_image_bytes)",
                    f"groups[{g}].images",
                )
            out.shared.update((shared_ref(im), im) for im in images)
            if images:
                raw["images"] = [shared_ref(im) for im in images]
        out.groups.append(Group(key, raw, completions))
    return out


def _check_lengths(
    g: int, raw: dict[str, Any], completions: list[str], max_chars: int, allow_empty: bool
) -> None:
    for name, value in raw.items():
        if isinstance(value, str) and len(value) > max_chars:
            raise invalid(
                f"groups[{g}].{name}",
                f"{len(value):,} characters, more than this service's limit of {max_chars:,} "
                "(max_field_chars)",
            )
    for c, text in enumerate(completions):
        where = f"groups[{g}].completions[{c}]"
        if len(text) > max_chars:
            raise invalid(
                where,
                f"{len(text):,} characters, more than this service's limit "
                f"of {max_chars:,} (max_field_chars)",
            )
        if not allow_empty and not text.strip():
            raise invalid(where, "empty (send allow_empty: true to judge empty completions)")


def _job(
    request: GroupRequest,
    rubric: Rubric,
    pointwise: Rubric | None,
    jury: JurySpec,
    groups: list[Group],
) -> GroupJob:
    reward = RewardSpec(score=request.score, scale=request.scale)
    try:
        return GroupJob(request.design, rubric, jury, groups, pointwise, reward)
    except InputError as exc:
        raise Invalid(str(exc), exc.field) from None


@dataclass
class _Plan:
    """A request's job (its groups within the per-group bounds), its cost and its estimate."""

    admitted: _Admitted
    job: GroupJob
    calls: int  # judge calls per judge, every group's
    estimate: int  # characters of prompt its rounds render, the kept groups'
    kept: list[int]  # the groups judged (the others: admitted.unscored)
    checklist: list[int] | None = None  # a checklist rubric's: each group's calls per judge


async def _plan(service: ScoringService, request: GroupRequest) -> _Plan:
    limits = service.limits
    rubric = await service.rubric_of(request.rubric)
    pointwise = (
        await service.rubric_of(request.pointwise) if request.pointwise is not None else None
    )
    seen_by = None if jury_sees_images(service.jury) else service.jury.name
    admitted = await asyncio.to_thread(_admitted, request, limits, seen_by)
    job = await asyncio.to_thread(_job, request, rubric, pointwise, service.jury, admitted.groups)
    costs = job.costs()
    calls = sum(c.calls for c in costs)
    sizes = sorted({c.k for c in costs})
    words = "; ".join(next(c.words for c in costs if c.k == k) for k in sizes[:3])
    each: list[int] = []
    if rubric.checklist is not None or (pointwise is not None and pointwise.checklist is not None):
        each = await asyncio.to_thread(group_calls, request, rubric, pointwise, limits)
        calls = sum(each)
        words = "each completion judged on its group's checklist"
    if calls > limits.max_judge_calls:  # before any probe is rendered
        fewer = (
            # a checklist rubric takes only pointwise: fewer groups or points, no other design
            "send fewer groups, or checklists with fewer points"
            if each
            else "send fewer groups, or a design with fewer calls (regular or swiss with a "
            "smaller per_completion, anchor, listwise)"
        )
        raise TooLarge(
            f"the {request.design.design} design of these "
            f"{len(request.groups)} groups asks {calls} judge calls per judge "
            f"({words}); this service takes at most {limits.max_judge_calls} per "
            f"request (max_judge_calls): {fewer}",
            "design",
        )
    token = SHARED_IMAGES.set(admitted.shared)
    try:
        sized = await sized_groups(service, request, job, admitted.groups, admitted.unscored)
    finally:
        SHARED_IMAGES.reset(token)
    for g, (_, largest) in sized.items():
        if largest > limits.max_prompt_chars:
            admitted.unscored[g] = (
                f"groups[{g}]: its largest judge call would render about {largest:,} "
                f"characters of prompt; this service takes at most {limits.max_prompt_chars:,} "
                "per judge call (max_prompt_chars); the group was not judged"
            )
    kept = [g for g in range(len(admitted.groups)) if g not in admitted.unscored]
    if len(kept) < len(admitted.groups):
        groups = [admitted.groups[g] for g in kept]
        job = await asyncio.to_thread(_job, request, rubric, pointwise, service.jury, groups)
    estimate = sum(sized[g][0] for g in kept)
    checklist = each if rubric.checklist is not None else None
    return _Plan(admitted, job, calls, estimate, kept, checklist)


async def planned_prompt_chars(service: ScoringService, request: GroupRequest) -> int:
    """About how many characters of prompt a group request's rounds render, in all.

    As `jurybox.serving.service.admission.check_prompts` counts them (an image as its estimated
    tokens), summed over every round, estimated from the plan before any judge runs (see
    `jurybox.serving.service.group_sizes`); the groups over a per-group bound left out. At least
    what the rounds render for a template that shows each completion a fixed number of times (the
    shipped rubrics' way).
    """
    return (await _plan(service, request)).estimate


async def answer_groups(service: ScoringService, request: GroupRequest) -> list[dict[str, Any]]:
    """POST /v1/groups: ``{"groups": [...]}``, each group's rewards.

    With the comparisons behind them (`score_groups`); counted in flight (a drain waits for it),
    504 past ``request_timeout_s``.
    """
    timeout = service.limits.request_timeout_s
    with service.replica.flight():
        try:
            return await asyncio.wait_for(
                score_groups(service, request, time.monotonic() + timeout), timeout
            )
        except TimeoutError:
            raise TimedOut(
                f"the request took longer than the service's "
                f"deadline of {timeout:g} s (request_timeout_s); retry with fewer "
                "groups or a design with fewer calls",
            ) from None


async def score_groups(
    service: ScoringService, request: GroupRequest, deadline: float
) -> list[dict[str, Any]]:
    """The groups' results, in order (see the module docstring)."""
    limits = service.limits
    completions = sum(len(g.completions) for g in request.groups)
    if completions > limits.max_items:
        raise TooLarge(
            f"{completions} completions in {len(request.groups)} "
            f"groups; this service takes at most {limits.max_items} per request "
            "(max_items): send fewer groups",
            "groups",
        )
    if request.design.design == "listwise" and not isinstance(request.rubric, str):
        raise Invalid(
            "the listwise design asks a rubric the service "
            "knows, by name (an inline rubric's prompts are rendered in a worker; "
            "a listwise call's prompt is built here)",
            "rubric",
        )
    plan = await _plan(service, request)
    if plan.estimate > limits.max_request_prompt_chars:
        raise TooLarge(
            f"the {request.design.design} design of these {len(request.groups)} groups "
            f"would render about {plan.estimate:,} characters of prompt in all its rounds; "
            f"this service takes at most {limits.max_request_prompt_chars:,} per request "
            "(max_request_prompt_chars): send fewer or shorter completions, or a design with "
            "fewer calls",
            "groups",
        )
    check_pace(service, plan.calls, deadline)  # within the deadline at the measured rate
    token = SHARED_IMAGES.set(plan.admitted.shared)
    try:
        results = await _run(service, request, plan, deadline)
    finally:
        SHARED_IMAGES.reset(token)
    logger.info(
        "groups: %d groups, %d completions, %s design, %d judge calls per judge planned",
        len(request.groups),
        completions,
        request.design.design,
        plan.calls,
    )
    done = iter(results)
    out = [
        _unscored(plan.job, plan.admitted.groups[g], plan.admitted.unscored[g])
        if g in plan.admitted.unscored
        else next(done)
        for g in range(len(request.groups))
    ]
    if plan.checklist is not None:  # (the design's count is one call per completion)
        out = [r.model_copy(update={"calls": c}) for r, c in zip(out, plan.checklist)]
    return await asyncio.to_thread(lambda: [r.model_dump(mode="json") for r in out])


def _unscored(job: GroupJob, group: Group, why: str) -> GroupResult:
    """The answer for a group not judged: every completion unscored, with ``why``."""
    k = len(group.completions)
    return GroupResult(
        id=group.key,
        design="pointwise" if k == 1 else job.spec.design,
        rewards=[None] * k,
        completions=[CompletionReward(reward=None, reason=why) for _ in range(k)],
        calls=job.spec.cost(k, job.rubric, job.pointwise_rubric).calls,
        asked=0,
    )


async def _run(
    service: ScoringService, request: GroupRequest, plan: _Plan, deadline: float
) -> list[GroupResult]:
    """The kept groups' results: the job's asks judged round by round."""
    job = plan.job
    kept = [plan.admitted.groups[g] for g in plan.kept]

    async def answer(ask: Ask | AskEach) -> Any:
        try:
            if isinstance(ask, AskEach):
                return await _each(service, ask, request.allow_empty, deadline)
            if not ask.items:
                return []
            return await service.judge(
                ask.rubric, ask.items, deadline, allow_empty=request.allow_empty, limit_items=False
            )
        except RequestProblem as exc:
            raise _placed(exc, ask.items, kept, plan.kept) from None

    steps = job.run()
    asks, results = await asyncio.to_thread(_step, steps, None)
    while asks is not None:
        answers = await asyncio.gather(*(answer(ask) for ask in asks))
        asks, results = await asyncio.to_thread(_step, steps, list(answers))
    return results


_ANSWERS = ("response", "response_a", "response_b", "answers")


def _placed(
    problem: RequestProblem, items: list[Item], groups: list[Group], index: list[int]
) -> RequestProblem:
    """``problem`` of a round's item, naming the client's field instead.

    The checks before the job make this rare: a client's template that renders otherwise than its
    probes did.
    """
    found = re.match(r"items\[(\d+)\](?:\.(\w+))?", problem.field or "")
    if found is None:
        if problem.field == "items":
            problem.field = "groups"
        return problem
    item = items[int(found[1])] if int(found[1]) < len(items) else None
    where = "groups"
    for g, group in enumerate(groups):
        if item is None or group.fields.get("question") != item.question:
            continue
        texts = [item.response, item.extra.get("response_a"), item.extra.get("response_b")]
        shown = [t for t in texts if isinstance(t, str)]
        if not all(t in group.completions for t in shown):
            continue
        where = f"groups[{index[g]}]"
        if found[2] in _ANSWERS and shown:
            where += f".completions[{list(group.completions).index(shown[0])}]"
        elif found[2]:
            where += f".{found[2]}"
        break
    message = re.sub(r"^(items\[\d+\](\.\w+)?|item '[^']*'): ", "", problem.message)
    return problem.moved(f"{where}: {message}", where)


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


async def _each(
    service: ScoringService, ask: AskEach, allow_empty: bool, deadline: float
) -> tuple[str, list[Any]]:
    """A listwise ask: each judge its own items (one per group), within one slot of the gate."""
    limits = service.limits
    # The answers of a group are one field: each may take max_field_chars.
    widened = limits.model_copy(update={"max_field_chars": limits.max_field_chars * 26})
    _, _, requests = await asyncio.to_thread(
        lambda: prepare(ask.rubric, ask.items, widened, allow_empty)
    )
    assert isinstance(requests, Requests)  # (a checklist rubric is refused listwise: _plan)
    prov = service.provenance_for(ask.rubric)
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
                    service.calls.votes(
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
