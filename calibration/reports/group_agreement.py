"""A jury's group rewards against human rankings of the same groups (``jurybox agree-groups``).

The jury's side is a JSONL file of group results, one per line, as ``POST /v1/groups`` answers
them and `jurybox.judges.groups.GroupResult` dumps them: at least ``{"id", "rewards"}``
(``rewards``: one per completion, in order, null when unscored). The humans' side is a JSONL
file whose lines give, for a group ``id``, either

* ``"ranking"``: the completions' positions, best first (a full order), or
* ``"ranks"``: each completion's rank (1 the best; equal ranks a tie; null: not ranked), or
* ``"a"``, ``"b"`` and ``"winner"`` (``"a"``, ``"b"`` or ``"tie"``): one pairwise preference
  (several lines per group, as many as were labelled).

A ranking gives both statistics (its tau, and every pair it orders); preferences give the pair
agreement only. `jurybox.calibration.stats.ranking.group_agreement` computes them, with
intervals over groups.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputDataError
from ..stats.ranking import group_agreement, kendall_tau_b, pair_agreement_counts
from ..stats.stat import Stat, jsonable

PREFERENCE = {"a": 1.0, "b": 0.0, "tie": 0.5}


@dataclass
class HumanGroup:
    """What the humans said of one group.

    Attributes:
        ranks: Ranks per completion (lower better, None unranked), or None without a ranking.
        pairs: Pairwise preferences ``(i, j, share)``.
    """

    ranks: list[float | None] | None = None
    pairs: list[tuple[int, int, float]] = field(default_factory=list)


def _lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputDataError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputDataError(f"{path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or "id" not in row:
            raise InputDataError(f"{path}:{n}: each line is an object with the group's id")
        out.append((n, row))
    return out


def read_group_results(path: Path) -> dict[str, list[float | None]]:
    """Each group's rewards, by id."""
    out: dict[str, list[float | None]] = {}
    for n, row in _lines(path):
        rewards = row.get("rewards")
        if not isinstance(rewards, list) or not all(
            r is None or isinstance(r, (int, float)) for r in rewards
        ):
            raise InputDataError(
                f"{path}:{n}: rewards: a list of numbers (null when "
                "unscored), one per completion, is expected"
            )
        key = str(row["id"])
        if key in out:
            raise InputDataError(f"{path}:{n}: group {key!r} again")
        out[key] = [None if r is None else float(r) for r in rewards]
    return out


def read_human_rankings(path: Path) -> dict[str, HumanGroup]:
    """What the humans said of each group, by id (see the module docstring)."""
    out: dict[str, HumanGroup] = {}
    for n, row in _lines(path):
        key = str(row["id"])
        group = out.setdefault(key, HumanGroup())
        where = f"{path}:{n}"
        if "ranking" in row or "ranks" in row:
            if group.ranks is not None:
                raise InputDataError(f"{where}: group {key!r} is ranked twice")
            group.ranks = _ranks(row, where)
        elif "winner" in row:
            winner = row["winner"]
            a, b = row.get("a"), row.get("b")
            if winner not in PREFERENCE:
                raise InputDataError(f"{where}: winner: a, b or tie, got {winner!r}")
            if not (isinstance(a, int) and isinstance(b, int)) or a == b or min(a, b) < 0:
                raise InputDataError(
                    f"{where}: a and b: two different completion positions (0 the first)"
                )
            group.pairs.append((a, b, PREFERENCE[winner]))
        else:
            raise InputDataError(f"{where}: give ranking, ranks, or a, b and winner")
    return out


def _ranks(row: dict[str, Any], where: str) -> list[float | None]:
    if "ranking" in row:
        order = row["ranking"]
        if (
            not isinstance(order, list)
            or not all(isinstance(c, int) for c in order)
            or sorted(order) != list(range(len(order)))
        ):
            raise InputDataError(
                f"{where}: ranking: every completion's position (0 the first) once, best first"
            )
        ranks: list[float | None] = [None] * len(order)
        for rank, c in enumerate(order, 1):
            ranks[c] = float(rank)
        return ranks
    given = row["ranks"]
    if not isinstance(given, list) or not all(
        r is None or isinstance(r, (int, float)) for r in given
    ):
        raise InputDataError(
            f"{where}: ranks: a rank per completion (1 the best; null: not ranked)"
        )
    return [None if r is None else float(r) for r in given]


@dataclass
class GroupAgreement:
    """The report: how many groups joined, the two statistics, and what was left out."""

    groups: int
    only_jury: int
    only_human: int
    kendall_tau_b: Stat
    pair_agreement: Stat
    human_ties: int
    unscored: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return jsonable(
            {
                "groups": self.groups,
                "only_jury": self.only_jury,
                "only_human": self.only_human,
                "kendall_tau_b": self.kendall_tau_b.to_dict(),
                "pair_agreement": self.pair_agreement.to_dict(),
                "human_ties": self.human_ties,
                "unscored": self.unscored,
                "notes": self.notes,
            }
        )

    def words(self) -> list[str]:
        """The report in lines."""

        def shown(stat: Stat, what: str) -> str:
            if stat.value is None:
                return f"{what}: undefined ({stat.reason})"
            ci = f" [{stat.ci[0]:.3f}, {stat.ci[1]:.3f}]" if stat.ci else " (no interval)"
            return f"{what}: {stat.value:.3f}{ci} over {stat.n}"

        return [
            f"{self.groups} groups with both rewards and human labels",
            shown(self.kendall_tau_b, "Kendall's tau-b, mean over ranked groups"),
            shown(
                self.pair_agreement,
                "agreement with human preferences (a jury tie half), over preferences",
            ),
            *self.notes,
        ]


def agreement_of(
    human: Path,
    judged: Path,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> GroupAgreement:
    """The jury's group rewards in ``judged`` against the human labels in ``human``."""
    jury = read_group_results(judged)
    people = read_human_rankings(human)
    keys = [k for k in jury if k in people]
    if not keys:
        raise InputDataError(
            f"no group id is in both {judged} and {human}: the human labels "
            "name groups by the id the jury's results carry"
        )
    taus: list[float | None] = []
    agree: list[float] = []
    counts: list[int] = []
    ties = unscored = 0
    for key in keys:
        rewards, said = jury[key], people[key]
        for i, j, _ in said.pairs:
            if max(i, j) >= len(rewards):
                raise InputDataError(
                    f"{human}: group {key!r}: a preference names completion "
                    f"{max(i, j)}, and the group has {len(rewards)}"
                )
        pairs = list(said.pairs)
        tau: float | None = None
        if said.ranks is not None:
            if len(said.ranks) != len(rewards):
                raise InputDataError(
                    f"{human}: group {key!r} ranks {len(said.ranks)} "
                    f"completions, and the jury rewarded {len(rewards)}"
                )
            both = [(r, -h) for r, h in zip(rewards, said.ranks) if r is not None and h is not None]
            tau = kendall_tau_b([r for r, _ in both], [h for _, h in both])
            ranked = [(c, h) for c, h in enumerate(said.ranks) if h is not None]
            for (i, hi), (j, hj) in ((p, q) for k, p in enumerate(ranked) for q in ranked[k + 1 :]):
                pairs.append((i, j, 1.0 if hi < hj else 0.0 if hi > hj else 0.5))
        unscored += sum(r is None for r in rewards)
        got, n, tied = pair_agreement_counts(rewards, pairs)
        taus.append(tau)
        agree.append(got)
        counts.append(n)
        ties += tied
    stats = group_agreement(taus, agree, counts, n_resamples, confidence, seed)
    notes = []
    if ties:
        notes.append(f"{ties} human ties left out of the pair agreement")
    if unscored:
        notes.append(f"{unscored} completions without a reward left out")
    return GroupAgreement(
        len(keys),
        len(jury) - len(keys),
        len(people) - len(keys),
        stats["kendall_tau_b"],
        stats["pair_agreement"],
        ties,
        unscored,
        notes,
    )
