"""How much prompt a group request's rounds render, estimated before any judge runs.

Per kind of call a group makes (pairs, pointwise, listwise), two probe items of the group's own
fields, its completions replaced by texts of `SHORT` and `LONG` characters, are rendered with the
rubric; a call's size is linear in its completions' characters, and the design says how many calls
there are and how often each completion appears in them (`jurybox.serving.service.groups`).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Container
from typing import TYPE_CHECKING, Any

from jurybox.judges.groups import COMPARING, Group, GroupJob, listwise_rubric
from jurybox.rubrics.errors import InputError
from jurybox.serving.errors import Invalid
from jurybox.serving.service.admission import prompt_sizes
from jurybox.serving.service.groups_protocol import GroupRequest

if TYPE_CHECKING:
    from jurybox.serving.service.scoring import ScoringService

# Probe texts: each variable field of a probe item is SHORT or LONG characters long.
SHORT, LONG = 1, 65
# What a listwise call adds to each answer beside its text ("Answer A:\n", and "\n\n" between).
LISTWISE_PER_ANSWER = 12


async def sized(
    service: ScoringService,
    request: GroupRequest,
    job: GroupJob,
    groups: list[Group],
    unscored: Container[int],
) -> dict[int, tuple[int, int]]:
    """Per group to judge: the prompt characters its calls render in all, and its largest call's.

    Estimated from the plan before rendering anything big: per kind of call the group makes
    (pairs, pointwise, listwise), two probe items of the group's own fields, the completions
    replaced by texts of SHORT and LONG characters, are rendered with the rubric (the operator's
    in a thread, a client's in a worker); a call's size is linear in its completions' characters
    (exact where a template shows each a fixed number of times), and the design says how many
    calls there are and how often each completion appears in them at most.
    """
    spec = job.spec
    todo = [g for g in range(len(groups)) if g not in unscored]
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
    service: ScoringService, ref: Any, probes: list[dict[str, Any]], members: list[int]
) -> list[tuple[int, int]]:
    limits = service.limits
    try:
        if isinstance(ref, dict):  # a client's rubric: its template is rendered in a worker
            sizes: list[tuple[int, int]] = await service.workers.run(
                limits.max_render_s, prompt_sizes, ref, probes, limits
            )
            return sizes
        rubric = service.named_rubric(ref) if isinstance(ref, str) else ref
        return await asyncio.to_thread(prompt_sizes, rubric, probes, limits)
    except InputError as exc:
        found = re.fullmatch(r"items\[(\d+)\]\.(\w+)", exc.field or "")
        if found is None:
            raise Invalid(str(exc), exc.field) from None
        where = f"groups[{members[int(found[1]) // 2]}].{found[2]}"
        raise invalid(where, str(exc)) from None


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


def invalid(where: str, why: str) -> Invalid:
    """A 422 naming a group request's field ``where``."""
    return Invalid(f"{where}: {why}", where)
