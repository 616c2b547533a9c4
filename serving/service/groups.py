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
import math
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from jurybox.judges.groups import (
    COMPARING,
    Ask,
    AskEach,
    CompletionReward,
    Group,
    GroupJob,
    GroupResult,
    Job,
    listwise_rubric,
)
from jurybox.judges.images import jury_sees_images, materialize_images
from jurybox.judges.spec import JurySpec
from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.images import Image, ImageError
from jurybox.rubrics.reward import RewardSpec
from jurybox.serving.problems import HTTPProblem, problem_for
from jurybox.serving.service.admission import (
    SHARED_IMAGES,
    check_text,
    image_policy,
    no_images_seen,
    prepare,
    prompt_sizes,
    shared_ref,
)
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
    workers: Any
    calls: Any

    def _named(self, name: str) -> Rubric: ...

    async def _rubric(self, ref: str | dict[str, Any]) -> Rubric: ...

    async def _score(
        self, request: ScoreRequest, deadline: float, limit_items: bool = True
    ) -> list[dict[str, Any]]: ...

    def _provenance(self, rubric: Rubric) -> str: ...


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
            raise _invalid(f"groups[{g}].id", f"duplicate id {key!r} (also groups[{seen[key]}])")
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
                    raise _invalid(where, str(exc)) from None
                out.unscored[g] = (
                    f"{where}: {exc} (the service's image limits: max_image_bytes, "
                    "max_image_pixels, max_images_per_item); the group was not judged"
                )
                images = ()
            image_bytes += sum(len(im.data) for im in images)
            if image_bytes > limits.max_request_image_bytes:
                raise HTTPProblem(
                    413,
                    "too_large",
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
            raise _invalid(
                f"groups[{g}].{name}",
                f"{len(value):,} characters, more than this service's limit of {max_chars:,} "
                "(max_field_chars)",
            )
    for c, text in enumerate(completions):
        where = f"groups[{g}].completions[{c}]"
        if len(text) > max_chars:
            raise _invalid(
                where,
                f"{len(text):,} characters, more than this service's limit "
                f"of {max_chars:,} (max_field_chars)",
            )
        if not allow_empty and not text.strip():
            raise _invalid(where, "empty (send allow_empty: true to judge empty completions)")


def _invalid(where: str, why: str) -> HTTPProblem:
    return HTTPProblem(422, "invalid_request", f"{where}: {why}", where)


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
        raise problem_for(exc) from None


@dataclass
class _Plan:
    """A request's job (its groups within the per-group bounds), its cost and its estimate."""

    admitted: _Admitted
    job: GroupJob
    calls: int  # judge calls per judge, every group's
    estimate: int  # characters of prompt its rounds render, the kept groups'
    kept: list[int]  # the groups judged (the others: admitted.unscored)


async def _plan(service: GroupScoring, request: GroupRequest) -> _Plan:
    limits = service.limits
    rubric = await service._rubric(request.rubric)
    pointwise = await service._rubric(request.pointwise) if request.pointwise is not None else None
    seen_by = None if jury_sees_images(service.jury) else service.jury.name
    admitted = await asyncio.to_thread(_admitted, request, limits, seen_by)
    job = await asyncio.to_thread(_job, request, rubric, pointwise, service.jury, admitted.groups)
    costs = job.costs()
    calls = sum(c.calls for c in costs)
    sizes = sorted({c.k for c in costs})
    words = "; ".join(next(c.words for c in costs if c.k == k) for k in sizes[:3])
    if calls > limits.max_judge_calls:  # before any probe is rendered
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
    token = SHARED_IMAGES.set(admitted.shared)
    try:
        sized = await _sized(service, request, job, admitted)
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
    return _Plan(admitted, job, calls, estimate, kept)


async def planned_prompt_chars(service: GroupScoring, request: GroupRequest) -> int:
    """About how many characters of prompt a group request's rounds render, in all.

    As `jurybox.serving.service.admission.check_prompts` counts them (an image as its estimated
    tokens), summed over every round, estimated from the plan before any judge runs (see
    `_sized`); the groups over a per-group bound left out. At least what the rounds render for a
    template that shows each completion a fixed number of times (the shipped rubrics' way).
    """
    return (await _plan(service, request)).estimate


# Probe texts: each variable field of a probe item is SHORT or LONG characters long.
SHORT, LONG = 1, 65
# What a listwise call adds to each answer beside its text ("Answer A:\n", and "\n\n" between).
LISTWISE_PER_ANSWER = 12


async def _sized(
    service: GroupScoring, request: GroupRequest, job: GroupJob, admitted: _Admitted
) -> dict[int, tuple[int, int]]:
    """Per group to judge: the prompt characters its calls render in all, and its largest call's.

    Estimated from the plan before rendering anything big: per kind of call the group makes
    (pairs, pointwise, listwise), two probe items of the group's own fields, the completions
    replaced by texts of SHORT and LONG characters, are rendered with the rubric (the operator's
    in a thread, a client's in a worker); a call's size is linear in its completions' characters
    (exact where a template shows each a fixed number of times), and the design says how many
    calls there are and how often each completion appears in them at most.
    """
    spec, groups = job.spec, admitted.groups
    todo = [g for g in range(len(groups)) if g not in admitted.unscored]
    needs_point = spec.design in ("pointwise", "anchor") or spec.weight is not None
    point_ref = request.pointwise if request.pointwise is not None else request.rubric
    kinds: list[tuple[Any, list[str], list[int]]] = []  # (rubric or ref, fields, groups)
    if spec.design in COMPARING:
        pairs = [g for g in todo if len(groups[g].completions) > 1]
        kinds.append((request.rubric, ["response_a", "response_b"], pairs))
    if job.scorer is not None:
        points = [g for g in todo if needs_point or len(groups[g].completions) == 1]
        kinds.append((point_ref, ["response"], points))
    if spec.design == "listwise":
        for k in sorted({len(groups[g].completions) for g in todo} - {1}):
            same = [g for g in todo if len(groups[g].completions) == k]
            kinds.append((listwise_rubric(job.rubric, k), ["answers"], same))
    out = dict.fromkeys(todo, (0, 0))
    for ref, names, members in kinds:
        if not members:
            continue
        probes = [
            {"id": f"{g}-{n}", **groups[g].fields, **dict.fromkeys(names, "x" * n)}
            for g in members
            for n in (SHORT, LONG)
        ]
        sizes = await _probe(service, ref, probes, members)
        for m, g in enumerate(members):
            total, largest = _estimated(job, groups[g], names, sizes[2 * m], sizes[2 * m + 1])
            before = out[g]
            out[g] = (before[0] + total, max(before[1], largest))
    return out


async def _probe(
    service: GroupScoring, ref: Any, probes: list[dict[str, Any]], members: list[int]
) -> list[tuple[int, int]]:
    limits = service.limits
    try:
        if isinstance(ref, dict):  # a client's rubric: its template is rendered in a worker
            sizes: list[tuple[int, int]] = await service.workers.run(
                limits.max_render_s, prompt_sizes, ref, probes, limits
            )
            return sizes
        rubric = service._named(ref) if isinstance(ref, str) else ref
        return await asyncio.to_thread(prompt_sizes, rubric, probes, limits)
    except InputError as exc:
        found = re.fullmatch(r"items\[(\d+)\]\.(\w+)", exc.field or "")
        if found is None:
            raise problem_for(exc) from None
        where = f"groups[{members[int(found[1]) // 2]}].{found[2]}"
        raise _invalid(where, str(exc)) from None


def _estimated(
    job: GroupJob,
    group: Group,
    names: list[str],
    short: tuple[int, int],
    long: tuple[int, int],
) -> tuple[int, int]:
    """A group's calls of one kind (``names``: the fields its completions fill): in all, largest."""
    spread = len(names) * (LONG - SHORT)

    def line(lo: int, hi: int, t: float) -> int:
        slope = max(0.0, (hi - lo) / spread)
        return math.ceil(max(lo, lo + slope * (t - len(names) * SHORT)))

    lengths = sorted((len(t) for t in group.completions), reverse=True)
    k, whole = len(lengths), sum(lengths)
    spec = job.spec
    if names == ["answers"]:
        text = whole + LISTWISE_PER_ANSWER * k
        return len(job.jury.judges) * line(short[0], long[0], text), line(short[1], long[1], text)
    if names == ["response"]:
        items = k
        total_text = whole
        widest = lengths[0]
    else:
        cost = spec.cost(k, job.rubric, job.pointwise_rubric)
        items = cost.pairs
        widest = lengths[0] + lengths[1]
        r = k - 1 if spec.design == "round_robin" else min(spec.per_completion, k - 1)
        appears = whole + (k - 2) * lengths[0] if spec.design == "anchor" else r * whole
        total_text = min(appears, items * widest)
    slope = max(0.0, (long[0] - short[0]) / spread)
    base = short[0] - slope * len(names) * SHORT
    total = math.ceil(max(items * short[0], items * base + slope * total_text))
    return total, line(short[1], long[1], widest)


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
    plan = await _plan(service, request)
    if plan.estimate > limits.max_request_prompt_chars:
        raise HTTPProblem(
            413,
            "too_large",
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
    service: GroupScoring, request: GroupRequest, plan: _Plan, deadline: float
) -> list[GroupResult]:
    """The kept groups' results: the job's asks judged round by round."""
    job = plan.job
    refs = {id(job.rubric): request.rubric}
    if job.pointwise_rubric is not None and request.pointwise is not None:
        refs[id(job.pointwise_rubric)] = request.pointwise
    kept = [plan.admitted.groups[g] for g in plan.kept]

    async def answer(ask: Ask | AskEach) -> Any:
        try:
            if isinstance(ask, AskEach):
                return await _each(service, ask, request.allow_empty, deadline)
            if not ask.items:
                return []
            score = await asyncio.to_thread(
                _score_request, refs[id(ask.rubric)], ask.items, request.allow_empty
            )
            return await service._score(score, deadline, limit_items=False)
        except HTTPProblem as exc:
            raise _placed(exc, ask.items, kept, plan.kept) from None

    steps = job.run()
    asks, results = await asyncio.to_thread(_step, steps, None)
    while asks is not None:
        answers = await asyncio.gather(*(answer(ask) for ask in asks))
        asks, results = await asyncio.to_thread(_step, steps, list(answers))
    return results


_ANSWERS = ("response", "response_a", "response_b", "answers")


def _placed(
    problem: HTTPProblem, items: list[Item], groups: list[Group], index: list[int]
) -> HTTPProblem:
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
    return HTTPProblem(problem.status, problem.kind, f"{where}: {message}", where, problem.headers)


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
    if item.images:  # the references themselves (fields() shows an inline one by its number)
        fields["images"] = list(item.images)
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
