"""Checklists in the trainers' adapters: each row's own checklist, rubric dropout, the calls.

A checklist rubric (`jurybox.rubrics.checklist`) judges each item on its own checklist. The
adapters read it from the client's data: a dataset column (TRL, `JuryRewards.item`; by default
``checklist``), verl's ``extra_info["checklist"]`` or its ``ground_truth`` (a list of points, or
a dict holding ``checklist``), Inspect's ``Sample.metadata["checklist"]``; a list of points or
that list as a JSON string (HealthBench's ``{"criterion", "points", "tags"}`` read as it is).

Rubric dropout (`Dropout`): with the reward's ``dropout`` rate above 0, each step judges a seeded
random subset of each item's points (`jurybox.rubrics.checklist.dropout`, at least one positive
point kept), the step TRL's ``state.global_step`` or, elsewhere (verl), the adapter's own count
of the batches this process has judged. The subset is drawn per prompt, not per completion: from
the seed, the step and a hash of the prompt (its question, context and checklist) standing in for
the item's id, so the completions of one prompt judged at one step are judged on the same points
and their rewards stay comparable. With TRL that is a GRPO group; on verl, where the step is a
count of batches, the completions of one prompt judged in different batches (or by different
processes) may be judged on different subsets. Each step is logged (rate, seed, step, points kept
of points) and kept in `JuryRewards.stats` (``dropout``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from jurybox.rubrics import Item, Rubric
from jurybox.rubrics.checklist import checklist_calls, dropout
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.points import Point, read_points

logger = logging.getLogger("jurybox.integrations")

#: The column (verl: the ``extra_info`` key, Inspect: the metadata key) a checklist is read from.
COLUMN = "checklist"


def read_checklist(raw: Any, sample: str, where: str) -> list[Point]:
    """A row's checklist: a list of points, or that list as a JSON string.

    Args:
        raw: The value.
        sample: Names the row in errors.
        where: Where the client gives it (``column 'checklist'``), for errors.

    Raises:
        InputError: The value is no checklist, naming jurybox, the sample, where and the point.
    """
    try:
        return read_points(raw, where)
    except ValueError as exc:
        raise InputError(f"jurybox: {sample}: {exc}", field="checklist") from None


def checklist_from(
    rubric: Rubric, found: Mapping[str, Any], key: str, sample: str, where: str, hint: str = ""
) -> list[Point] | None:
    """The checklist ``found[key]`` holds when ``rubric`` judges checklists, else None.

    Args:
        rubric: The rubric the item is judged with.
        found: Where the client gives the checklist (a row, verl's ``extra_info``, a sample's
            metadata).
        key: Its key there.
        sample: Names the row in errors.
        where: Where the client gives it, in its terms (``column 'checklist'``), for errors.
        hint: How to name another place, said where the checklist is missing.

    Raises:
        InputError: The rubric judges checklists and the row has none or a bad one.
    """
    if rubric.checklist is None:
        return None
    value = found.get(key)
    if value is None:
        raise InputError(
            f"jurybox: {sample}: rubric {rubric.name} judges each item on its own checklist, "
            f"and it is missing: {where}{f' ({hint})' if hint else ''}: give a list of points, "
            'e.g. [{"criterion": "Names the dose", "points": 5}]',
            field="checklist",
        )
    return read_checklist(value, sample, where)


def score_names(rubric: Rubric) -> list[str]:
    """The scores of a rubric's verdicts a reward may read.

    Its criteria and formula; a checklist rubric scoring points, its item score (the rule's
    ``name``).
    """
    if rubric.checklist is not None and rubric.checklist.expands:
        return [rubric.checklist.name]
    names = [c.name for c in rubric.criteria]
    if rubric.formula is not None:
        names.append(rubric.formula.name)
    return names


def calls_per_item(rubric: Rubric, items: Sequence[Item]) -> list[int]:
    """Each item's judge calls per judge (`jurybox.rubrics.checklist.checklist_calls`)."""
    return [checklist_calls(rubric, [item]) for item in items]


def chunks(
    rubric: Rubric, items: Sequence[Item], max_items: int, max_calls: int
) -> list[tuple[int, int]]:
    """Consecutive slices of ``items`` (start, stop), each within a request's limits.

    At most ``max_items`` items and ``max_calls`` judge calls per judge each, a checklist's
    points counted (per_point: a call per point); an item over ``max_calls`` alone is a slice of
    its own (the service says why it refuses it, naming it).
    """
    out: list[tuple[int, int]] = []
    start = calls = 0
    for k, n in enumerate(calls_per_item(rubric, items)):
        if k > start and (k - start >= max_items or calls + n > max_calls):
            out.append((start, k))
            start, calls = k, 0
        calls += n
    if len(items) > start:
        out.append((start, len(items)))
    return out


@dataclass(frozen=True)
class DropoutStep:
    """One step of rubric dropout, as logged.

    Attributes:
        rate: The share of points left out.
        seed: The seed.
        step: The training step.
        kept: The points judged, over the step's items.
        of: The points the items' checklists hold.
    """

    rate: float
    seed: int
    step: int
    kept: int
    of: int

    def as_dict(self) -> dict[str, float | int]:
        """The step as a dict (``rate``, ``seed``, ``step``, ``kept``, ``of``)."""
        return asdict(self)


class Dropout:
    """Rubric dropout for one reward: each step's items with a seeded subset of their points.

    Args:
        rate: The share of each item's points left out (0: off: items pass unchanged).
        seed: The seed.
    """

    def __init__(self, rate: float, seed: int) -> None:
        self.rate, self.seed = rate, seed
        self._lock = threading.Lock()
        self._count = 0  # batches seen: the step when the client gives none
        #: The latest step's record (None before the first, or with dropout off); every step's
        #: is in the reward's ``stats.dropout``.
        self.last: DropoutStep | None = None

    def apply(
        self, items: Sequence[Item], step: int | None = None
    ) -> tuple[list[Item], DropoutStep | None]:
        """``items`` with their points for ``step`` (by default this reward's count of batches).

        The items are not changed (new ones are made). Logs the step (rate, seed, step, points
        kept of points) and keeps it as `last`.

        Returns:
            The items to judge, and the step's record (None with dropout off: the items as
            they are).
        """
        if not self.rate:
            return list(items), None
        with self._lock:
            if step is None:
                step = self._count
            self._count += 1
        out = [self._subset(item, step) for item in items]
        of = sum(len(item.checklist or ()) for item in items)
        kept = sum(len(item.checklist or ()) for item in out)
        record = DropoutStep(self.rate, self.seed, step, kept, of)
        with self._lock:
            self.last = record
        logger.info(
            "jurybox: rubric dropout at step %d (rate %g, seed %d): %d of %d checklist points "
            "judged",
            step,
            self.rate,
            self.seed,
            kept,
            of,
        )
        return out, record

    def _subset(self, item: Item, step: int) -> Item:
        """``item`` with the points of its prompt's subset at ``step`` (its id kept)."""
        if not item.checklist:
            return item
        prompt = json.dumps(
            [item.question, item.context, [p.shown() for p in item.checklist]], sort_keys=True
        )
        ident = hashlib.sha256(prompt.encode()).hexdigest()[:16]
        drawn = dropout(item.model_copy(update={"id": ident}), self.rate, self.seed, step)
        return (
            item if drawn.checklist == item.checklist else drawn.model_copy(update={"id": item.id})
        )
