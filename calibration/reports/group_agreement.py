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
agreement only. A group whose rewards all tie (of the completions the humans ranked) has no
tau-b (its denominator is zero): it is counted (``tied_groups``) and enters
``kendall_tau_ties_zero``, the mean over every ranked group with a tied group's tau at 0 (no
order agrees or disagrees), and the pair agreement, where each of its pairs counts half.

The intervals are over groups (groups independent): Student's t on the groups' taus, and on
the pair agreement's linearised per-group terms (a ratio of sums: ``(a_g - R n_g) / mean(n)``),
each with one pseudo-group at the statistic's midpoint (tau 0, half the pairs agreeing: as
Agresti and Coull add pseudo-observations to a proportion), so that groups that all agree near
the ceiling do not make a point of it (the plain t interval covered 0.65 at 20 groups there);
clipped to the statistic's range, and holding the estimate. Below `MIN_GROUPS` (20) groups no interval is given, and the
report says so: in perf/group_agreement_coverage.py's simulation (perf/RESULTS.md) the t
interval covered 0.905-0.940 at 5 and 10 groups of 4 (a group's tau takes few values, skewed
toward 1), 0.934-0.948 from 20; the percentile bootstrap it replaced 0.80-0.90 at 5 and 10.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputDataError
from ..stats.ranking import kendall_tau_b, pair_agreement_counts
from ..stats.stat import Stat, defined, jsonable, undefined

PREFERENCE = {"a": 1.0, "b": 0.0, "tie": 0.5}
#: Fewest groups an interval is given over (see the module docstring).
MIN_GROUPS = 20
CI_METHOD = "Student t over groups, one pseudo-group at the midpoint"


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
    kendall_tau_ties_zero: Stat
    tied_groups: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return jsonable(
            {
                "groups": self.groups,
                "only_jury": self.only_jury,
                "only_human": self.only_human,
                "kendall_tau_b": self.kendall_tau_b.to_dict(),
                "kendall_tau_ties_zero": self.kendall_tau_ties_zero.to_dict(),
                "tied_groups": self.tied_groups,
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
            why = stat.details.get("no_interval")
            ci = (
                f" [{stat.ci[0]:.3f}, {stat.ci[1]:.3f}]"
                if stat.ci
                else f" (no interval: {why})"
                if why
                else " (no interval)"
            )
            return f"{what}: {stat.value:.3f}{ci} over {stat.n}"

        return [
            f"{self.groups} groups with both rewards and human labels",
            shown(self.kendall_tau_b, "Kendall's tau-b, mean over ranked groups"),
            shown(
                self.kendall_tau_ties_zero,
                "Kendall's tau, mean over ranked groups, those whose rewards all tie at 0",
            ),
            shown(
                self.pair_agreement,
                "agreement with human preferences (a jury tie half), over preferences",
            ),
            *self.notes,
        ]


def agreement_of(human: Path, judged: Path, confidence: float = 0.95) -> GroupAgreement:
    """The jury's group rewards in ``judged`` against the human labels in ``human``."""
    jury = read_group_results(judged)
    people = read_human_rankings(human)
    keys = [k for k in jury if k in people]
    if not keys:
        raise InputDataError(
            f"no group id is in both {judged} and {human}: the human labels "
            "name groups by the id the jury's results carry"
        )
    taus: list[float] = []
    zeroed: list[float] = []
    agree: list[float] = []
    counts: list[int] = []
    ties = unscored = tied_groups = 0
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
            if tau is None and len({r for r, _ in both}) == 1 and len({h for _, h in both}) > 1:
                zeroed.append(0.0)  # the rewards all tie: no order, tau 0
            elif tau is not None:
                zeroed.append(tau)
            ranked = [(c, h) for c, h in enumerate(said.ranks) if h is not None]
            for (i, hi), (j, hj) in ((p, q) for k, p in enumerate(ranked) for q in ranked[k + 1 :]):
                pairs.append((i, j, 1.0 if hi < hj else 0.0 if hi > hj else 0.5))
        unscored += sum(r is None for r in rewards)
        scored = {r for r in rewards if r is not None}
        tied_groups += len(scored) == 1 and len(rewards) - rewards.count(None) > 1
        got, n, tied = pair_agreement_counts(rewards, pairs)
        if tau is not None:
            taus.append(tau)
        agree.append(got)
        counts.append(n)
        ties += tied
    notes = []
    if tied_groups:
        notes.append(
            f"{tied_groups} of {len(keys)} groups have rewards that all tie: no tau-b (left "
            "out of its mean), tau 0 in the mean over every ranked group, each pair half in the "
            "pair agreement"
        )
    if ties:
        notes.append(f"{ties} human ties left out of the pair agreement")
    if unscored:
        notes.append(f"{unscored} completions without a reward left out")
    return GroupAgreement(
        len(keys),
        len(jury) - len(keys),
        len(people) - len(keys),
        group_mean("kendall_tau_b", taus, confidence),
        group_ratio("pair_agreement", agree, counts, confidence),
        ties,
        unscored,
        group_mean("kendall_tau_ties_zero", zeroed, confidence),
        tied_groups,
        notes,
    )


def _interval(
    stat: Stat, groups: int, ci: tuple[float, float] | None, confidence: float, least: int
) -> Stat:
    if groups < least:
        return stat.with_ci(
            None,
            ci_method=CI_METHOD,
            confidence=confidence,
            no_interval=f"{groups} group{'s' * (groups != 1)}; an interval needs {least} or more",
        )
    return stat.with_ci(ci, ci_method=CI_METHOD, confidence=confidence)


def group_mean(
    name: str,
    values: list[float],
    confidence: float,
    bounds: tuple[float, float] = (-1.0, 1.0),
    least: int = MIN_GROUPS,
) -> Stat:
    """The mean of per-group values with a Student t interval over groups, clipped to ``bounds``.

    No interval over fewer than ``least`` groups (its details say why).

    >>> [round(x, 3) for x in group_mean("tau", [0.2, 0.4, 0.6, 0.8, 1.0], 0.95, least=2).ci]
    [0.076, 0.924]
    >>> [round(x, 3) for x in group_mean("tau", [0.4, 0.8, 1.0, 1.0, 1.0], 0.95, least=2).ci]
    [0.23, 1.0]
    >>> group_mean("tau", [0.4, 0.8, 1.0, 1.0, 1.0], 0.95).details["no_interval"]
    '5 groups; an interval needs 20 or more'
    """
    if not values:
        return undefined(name, 0, "no group has two ranked completions that the humans order")
    mean = float(np.mean(values))
    stat = defined(name, mean, len(values))
    ci = _t_with_pseudo_group(np.append(values, (bounds[0] + bounds[1]) / 2), confidence)
    clipped = (
        None if ci is None else (max(bounds[0], min(ci[0], mean)), min(bounds[1], max(ci[1], mean)))
    )
    return _interval(stat, len(values), clipped, confidence, least)


def group_ratio(
    name: str, agree: list[float], counts: list[int], confidence: float, least: int = MIN_GROUPS
) -> Stat:
    """``sum(agree) / sum(counts)`` with a Student t interval over groups (linearised), on [0, 1].

    Each group with a count enters as ``(a_g - R n_g) / mean(n)``, whose mean is 0 and whose
    standard error is the ratio's (the delta method for a ratio of sums); with equal counts it
    is the t interval of the groups' own shares. No interval over fewer than ``least`` groups.
    """
    a, n = np.asarray(agree, dtype=float), np.asarray(counts, dtype=float)
    a, n = a[n > 0], n[n > 0]
    if not n.size:
        return undefined(name, 0, "no human preference between two completions with rewards")
    ratio = float(a.sum() / n.sum())
    stat = defined(name, ratio, int(n.sum()), groups=int(n.size))
    # One pseudo-group of the mean count, half its pairs agreeing (module text).
    a_, n_ = np.append(a, 0.5 * n.mean()), np.append(n, n.mean())
    shrunk = float(a_.sum() / n_.sum())
    ci = _t_with_pseudo_group((a_ - shrunk * n_) / n_.mean(), confidence)
    clipped = (
        None
        if ci is None
        else (max(0.0, min(shrunk + ci[0], ratio)), min(1.0, max(shrunk + ci[1], ratio)))
    )
    return _interval(stat, int(n.size), clipped, confidence, least)


def _t_with_pseudo_group(aug: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """Student's t interval of ``aug``, the groups' values and one pseudo-group last.

    On the real groups' degrees of freedom (``aug.size - 2``); None from fewer than two groups.
    """
    if aug.size < 3:
        return None
    from scipy import stats

    q = float(stats.t.ppf(0.5 + confidence / 2, aug.size - 2))
    half = q * float(aug.std(ddof=1)) / math.sqrt(aug.size)
    centre = float(aug.mean())
    return centre - half, centre + half
