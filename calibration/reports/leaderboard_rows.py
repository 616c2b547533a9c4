"""The leaderboard's rows and its common ground: `System`, `Leaderboard`, `CommonGround`.

Re-exported by `jurybox.calibration.reports.leaderboard`, which builds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.verdicts import JudgeOutput
from ..stats.stat import jsonable


@dataclass
class System:
    """One system: its verdicts, or per-item values of other metrics; with labels and lengths.

    Its verdicts are ``output``; ``values`` are per-item values of other metrics (criterion -> item
    id -> value, None where the item has none, e.g. a benchmark pack's per-item results); with its
    human label lines (``label_rows``) and answer lengths (item id -> length in words) where given
    (verdicts only).
    """

    name: str
    output: JudgeOutput | None = None
    labels: Sequence[Mapping[str, Any]] | None = None
    lengths: Mapping[str, float] | None = None
    values: Mapping[str, Mapping[str, float | None]] | None = None
    source: str | None = None

    def scores(self, criterion: str) -> dict[str, float | None]:
        """Item id -> this system's value on ``criterion`` (None: unscored).

        For every item the criterion applies to here.
        """
        if self.values is not None:
            return dict(self.values.get(criterion, {}))
        assert self.output is not None
        return {r.id: r.scores.get(criterion) for r in self.output.records}

    def ids(self) -> list[str]:
        """Every item of this system."""
        if self.values is not None:
            return list(dict.fromkeys(i for by_item in self.values.values() for i in by_item))
        assert self.output is not None
        return self.output.ids


@dataclass
class Leaderboard:
    """The table as plain data (`to_dict` is ``jurybox leaderboard --json``).

    ``ranked_on``: per criterion, the common ground its ranks, groups and pairs are computed on
    (`CommonGround.to_dict`).
    """

    criteria: list[str]
    rank_by: str
    confidence: float
    items: int
    systems: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    length_control: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    ranked_on: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The leaderboard as plain JSON data (``jurybox leaderboard --json``)."""
        return jsonable(
            {
                "criteria": self.criteria,
                "rank_by": self.rank_by,
                "confidence": self.confidence,
                "items": self.items,
                "ranked_on": self.ranked_on,
                "systems": self.systems,
                "pairs": self.pairs,
                "length_control": self.length_control,
                "notes": self.notes,
            }
        )

    def system(self, name: str) -> dict[str, Any]:
        """The row of the system named ``name``."""
        return next(s for s in self.systems if s["name"] == name)


@dataclass(frozen=True)
class CommonGround:
    """The items a criterion's ranking stands on: those every ranked system scored.

    ``ranked``: per system, whether it scored any item (a system with none is not ranked and does
    not shrink the ground); ``items``: per item, whether every ranked system scored it;
    ``lacking``: per system, the items some ranked system scored that it did not (missing or
    unscored): why items were dropped.
    """

    names: tuple[str, ...]
    ranked: np.ndarray
    items: np.ndarray
    scored_by_any: int
    lacking: dict[str, int]
    left_out: dict[str, str] = field(default_factory=dict)
    sparse: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(
        cls, x: np.ndarray, names: Sequence[str], left_out: Mapping[str, str] | None = None
    ) -> CommonGround:
        """The common ground of ``x`` (systems x items, NaN where a system has no score).

        ``left_out``: system -> why it is left out of the ground (listed apart, not ranked).
        """
        left_out = {n: why for n, why in (left_out or {}).items() if n in names}
        scored = ~np.isnan(x)
        ranked = scored.any(axis=1) & np.array([n not in left_out for n in names], dtype=bool)
        anyone, items = _ground_of(scored, ranked)
        lacking = {
            n: int((anyone & ~scored[k]).sum())
            for k, n in enumerate(names)
            if ranked[k] and (anyone & ~scored[k]).any()
        }
        # A system that alone holds the ground to half of what the others share, or less.
        sparse = []
        if ranked.sum() > 2:
            for k in np.flatnonzero(ranked):
                others = ranked & (np.arange(len(names)) != k)
                without = int(_ground_of(scored, others)[1].sum())
                if without >= 2 * max(int(items.sum()), 1):
                    sparse.append(
                        {"system": names[k], "scored": int(scored[k].sum()), "without": without}
                    )
        return cls(tuple(names), ranked, items, int(anyone.sum()), lacking, left_out, sparse)

    @property
    def size(self) -> int:
        """The number of common items."""
        return int(self.items.sum())

    @property
    def dropped(self) -> int:
        """The items some ranked system scored that are not common (dropped from the ranking)."""
        return self.scored_by_any - self.size

    def to_dict(self) -> dict[str, Any]:
        """The common ground as plain data: the common items, and what was dropped and why.

        ``items`` (the common items), ``scored_by_any``, ``dropped``, ``lacking`` (system -> dropped
        items it lacks) and ``unranked`` (systems without a scored item or left out); where there
        are any, ``left_out`` (system -> why it was left out) and ``sparse`` (the systems that
        alone hold the ground to half of what the others share or less: ``system``, its
        ``scored`` items, the ground ``without`` it).
        """
        out: dict[str, Any] = {
            "items": self.size,
            "scored_by_any": self.scored_by_any,
            "dropped": self.dropped,
            "lacking": dict(self.lacking),
            "unranked": [n for n, r in zip(self.names, self.ranked) if not r],
        }
        if self.left_out:
            out["left_out"] = dict(self.left_out)
        if self.sparse:
            out["sparse"] = list(self.sparse)
        return out

    def words(self, criterion: str) -> str:
        """Where the ranking of ``criterion`` stands, in words (for the notes)."""
        if self.size == 0:
            return (
                f"{criterion}: no item was scored for every system, so no system is "
                "ranked on it; each pair is compared on the items both scored"
            )
        who = ", ".join(f"{n} lacks {k}" for n, k in self.lacking.items())
        return (
            f"{criterion}: ranks, rank intervals, groups and pairs are on the {self.size} "
            f"items every system scored; {self.dropped} of {self.scored_by_any} dropped "
            f"({who}); each system's mean over its own items is shown as `own`, not ranked"
        )

    def sparse_words(self, criterion: str) -> list[str]:
        """Each sparse system (one that alone halves the ground or worse), in words."""
        return [
            f"{criterion}: {s['system']} has {s['scored']} scored item(s) and alone holds "
            f"every system's ranking to {self.size} items (without it: {s['without']}); to "
            f"rank the others on theirs, leave it out with --exclude {s['system']} or "
            f"--min-items {s['scored'] + 1} (it is then listed apart, not ranked)"
            for s in self.sparse
        ]


def _ground_of(scored: np.ndarray, ranked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The items any ranked system scored, and those every ranked system scored."""
    if not ranked.any():
        nothing = np.zeros(scored.shape[1], bool)
        return nothing, nothing
    anyone = scored[ranked].any(axis=0)
    return anyone, anyone & scored[ranked].all(axis=0)
