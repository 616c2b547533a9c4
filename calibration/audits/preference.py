"""Pairwise preferences: win rates, Bradley-Terry ratings and position bias, with CIs.

A comparison is (system a, system b, A's share): 1 when a won, 0 when b won, 0.5 for a tie (a
graded pairwise scale gives shares between). Ties count as half a win for each side, as in
Chatbot Arena's ratings.

* `win_rates`: per pair of systems, the mean share of the first with a Clopper-Pearson
  interval on the shares' sum (`share_interval`): inside [0, 1], never zero-width, and
  conservative with ties, whose half shares vary less than a win or a loss (a Student-t
  interval on 0 / 0.5 / 1 shares left [0, 1] and undercovered at small n).
* `bradley_terry`: strengths p with P(i beats j) = p_i / (p_i + p_j), fitted by maximum
  likelihood with Hunter's (2004) minorization-maximization iteration; reported on the Elo scale
  (1000 + 400 log10 p, geometric mean of p = 1, so the ratings average 1000) with percentile
  bootstrap CIs over comparisons. The estimate exists only when every split of the systems into
  two groups has a win (or tie) each way across it (Ford 1957: the "beats" graph is strongly
  connected); otherwise the ratings are undefined, with the reason.
* `position_bias`: a judge's probability of choosing the answer shown first (ties left
  out; 0.5 when unbiased) with a Wilson interval that counts a pair's votes as one cluster
  (`clustered_wilson`), and its flip rate: the share of pairs whose two
  orders point to different answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special, stats

from ..stats.bootstrap import resample_indices

SCALE, BASE, INIT = 400.0, 10.0, 1000.0


def wilson(successes: float, n: float, level: float = 0.95) -> list[float] | None:
    """Wilson score interval of a proportion; None from no trials.

    ``n`` may be an effective, fractional count.
    """
    if n <= 0:
        return None
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


@dataclass
class WinRate:
    """How often ``a`` beat ``b`` (ties half) over ``n`` comparisons."""

    a: str
    b: str
    n: int
    rate: float | None
    ci: list[float] | None
    wins: int
    losses: int
    ties: int

    def to_dict(self) -> dict[str, Any]:
        """The win rate as plain data."""
        return dict(self.__dict__)

    def words(self) -> str:
        """The win rate in plain words."""
        if self.rate is None:
            return f"{self.a} vs {self.b}: no comparison"
        ci = f" [{self.ci[0]:.3f}, {self.ci[1]:.3f}]" if self.ci else ""
        return (
            f"{self.a} beats {self.b} {self.rate:.3f}{ci} of the time (ties half): "
            f"{self.wins} wins, {self.ties} ties, {self.losses} losses in {self.n}"
        )


def share_interval(shares: Sequence[float] | np.ndarray, level: float = 0.95) -> list[float] | None:
    """Clopper-Pearson interval of the mean of shares in [0, 1]; None from no shares.

    A win is 1, a tie 0.5, a loss 0, or graded shares: the exact binomial interval at
    ``sum(shares)`` successes of ``n``, read from the beta quantiles, which take a fractional
    count. Shares vary at most as wins and losses do (the binomial is the widest law on [0, 1]
    with a given mean), so ties make it conservative.
    """
    v = np.asarray(shares, dtype=float)
    n = v.size
    if n == 0:
        return None
    x, alpha = float(v.sum()), 1.0 - level
    low = 0.0 if x <= 0 else float(special.betaincinv(x, n - x + 1, alpha / 2))  # beta.ppf
    high = 1.0 if x >= n else float(special.betaincinv(x + 1, n - x, 1 - alpha / 2))
    return [low, high]


def win_rates(a: Sequence[str], b: Sequence[str], share: Sequence[float]) -> list[WinRate]:
    """Per unordered pair of systems (in order of first appearance), the first's win rate."""
    groups: dict[tuple[str, str], list[float]] = {}
    for x, y, s in zip(a, b, share):
        if (y, x) in groups:
            groups[y, x].append(1.0 - s)
        else:
            groups.setdefault((x, y), []).append(float(s))
    out = []
    for (x, y), shares in groups.items():
        v = np.array(shares)
        out.append(
            WinRate(
                x,
                y,
                int(v.size),
                float(v.mean()),
                share_interval(v),
                int((v > 0.5).sum()),
                int((v < 0.5).sum()),
                int((v == 0.5).sum()),
            )
        )
    return out


def _counts(i: np.ndarray, j: np.ndarray, s: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Wins and games of comparisons ``(i, j, s)``.

    ``wins[x, y]`` is x's share summed over its comparisons with y. With a leading axis of
    resamples (one row each), one pair of matrices per resample.
    """
    rows = i.shape[0] if i.ndim == 2 else 1
    base = (np.arange(rows) * k * k)[:, None] if i.ndim == 2 else 0
    size = rows * k * k
    wins = np.bincount(np.ravel(base + i * k + j), np.ravel(s), size) + np.bincount(
        np.ravel(base + j * k + i), np.ravel(1.0 - s), size
    )
    wins = wins.reshape(*i.shape[:-1], k, k)
    return wins, wins + np.swapaxes(wins, -1, -2)


def _reach(edges: np.ndarray) -> np.ndarray:
    """Which system reaches which along ``edges``, itself included.

    ``edges`` is boolean, k x k, with any leading axes: the reachability matrix squared until it
    covers every path.
    """
    k = edges.shape[-1]
    reach = (edges | np.eye(k, dtype=bool)).astype(float)
    for _ in range(max(1, math.ceil(math.log2(k)))):
        reach = (reach @ reach > 0).astype(float)
    return reach > 0


def _connected(wins: np.ndarray) -> np.ndarray:
    """Whether the graph of wins is strongly connected, for each wins matrix along the leading axes.

    The graph has an edge x -> y when x won some share against y; strongly connected: every
    system reaches every other along wins, and back.
    """
    return np.asarray(_reach(wins > 0).all(axis=(-1, -2)))


def _groups(games: np.ndarray) -> list[list[int]]:
    """The groups of systems connected by comparisons (``games`` symmetric), in order."""
    reach = _reach(games > 0)
    groups: list[list[int]] = []
    for x in range(len(games)):
        if not any(x in g for g in groups):
            groups.append([int(y) for y in np.flatnonzero(reach[x])])
    return groups


def _fit(
    wins: np.ndarray,
    games: np.ndarray,
    tol: float = 1e-10,
    max_iter: int = 10_000,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Hunter's MM iteration for the strengths (geometric mean 1).

    From ``start`` (default all 1; the bootstrap starts at the full data's strengths). With a
    leading axis of resamples, each row's strengths, each row stopping when it converges.
    """
    batch = wins.ndim == 3
    w, g = (wins, games) if batch else (wins[None], games[None])
    p = np.ones(w.shape[:2]) if start is None else np.broadcast_to(start, w.shape[:2]).copy()
    total = w.sum(axis=2)
    todo = np.arange(len(w))
    for _ in range(max_iter):
        q = p[todo]
        new = total[todo] / (g[todo] / (q[:, :, None] + q[:, None, :])).sum(axis=2)
        new /= np.exp(np.log(new).mean(axis=1, keepdims=True))
        p[todo] = new
        todo = todo[np.abs(np.log(new) - np.log(q)).max(axis=1) >= tol]
        if not todo.size:
            break
    return p if batch else p[0]


@dataclass
class Ratings:
    """Bradley-Terry ratings of ``systems`` on the Elo scale, each with its CI.

    ``rating`` is None (and ``reason`` says why) when the maximum-likelihood estimate does not
    exist.
    """

    systems: list[str]
    n: int
    rating: dict[str, float] | None
    ci: dict[str, list[float] | None] = field(default_factory=dict)
    strength: dict[str, float] | None = None
    reason: str | None = None
    resamples: int = 0
    #: Why the ratings have no CI, where they have none.
    ci_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ratings as plain data."""
        return dict(self.__dict__)


def bradley_terry(
    a: Sequence[str],
    b: Sequence[str],
    share: Sequence[float],
    *,
    n_resamples: int = 1000,
    seed: int | None = 0,
    level: float = 0.95,
) -> Ratings:
    """Bradley-Terry ratings from comparisons, with percentile bootstrap CIs.

    Comparisons are resampled with replacement; resamples whose estimate does not exist are left
    out and counted, and no CI is given when more than half are.
    """
    systems = list(dict.fromkeys([*a, *b]))
    index = {name: k for k, name in enumerate(systems)}
    i = np.array([index[x] for x in a], dtype=int)
    j = np.array([index[y] for y in b], dtype=int)
    s = np.asarray(share, dtype=float)
    k, n = len(systems), len(s)
    if k < 2:
        return Ratings(systems, n, None, reason="fewer than two systems compared")
    wins, games = _counts(i, j, s, k)
    if not _connected(wins):
        groups = _groups(games)
        never = [systems[x] for x in range(k) if wins[:, x].sum() == 0]
        why = (
            "the systems fall into groups never compared with each other ("
            + "; ".join(", ".join(systems[x] for x in g) for g in groups)
            + "): compare pairs across them"
            if len(groups) > 1
            else f"{', '.join(never)} never lost"
            if never
            else "some group of systems never lost to the rest"
        )
        return Ratings(
            systems,
            n,
            None,
            reason=f"undefined: {why} (the maximum-likelihood "
            "ratings do not exist; compare more pairs)",
        )
    p = _fit(wins, games)
    rating = INIT + SCALE * np.log(p) / math.log(BASE)
    rng = np.random.default_rng(seed)
    draws: list[np.ndarray] = []
    chunk = max(1, 2_000_000 // max(n, k * k))  # resamples held at once
    for first in range(0, n_resamples, chunk):
        pick = resample_indices(rng, n, min(chunk, n_resamples - first))
        w, g = _counts(i[pick], j[pick], s[pick], k)
        ok = _connected(w)
        if ok.any():
            fitted = _fit(w[ok], g[ok], tol=1e-8, start=p)
            draws.extend(INIT + SCALE * np.log(fitted) / math.log(BASE))
    ci: dict[str, list[float] | None] = dict.fromkeys(systems)
    no_ci: str | None = None
    if not n_resamples:
        no_ci = "no bootstrap resamples asked for"
    elif len(draws) < n_resamples / 2:
        no_ci = (
            f"{n_resamples - len(draws)} of {n_resamples} resamples had no estimate (some "
            "system never lost in them): compare more pairs"
        )
    else:
        lo, hi = np.quantile(np.array(draws), [(1 - level) / 2, (1 + level) / 2], axis=0)
        if np.all(hi - lo <= 1e-9):
            no_ci = (
                "every resample gives the same ratings (every comparison a tie): the "
                "bootstrap cannot show their uncertainty"
            )
        else:
            ci = {name: [float(lo[x]), float(hi[x])] for x, name in enumerate(systems)}
    return Ratings(
        systems,
        n,
        {name: float(rating[x]) for x, name in enumerate(systems)},
        ci,
        {name: float(math.log(p[x])) for x, name in enumerate(systems)},
        resamples=len(draws),
        ci_reason=no_ci,
    )


@dataclass
class PositionBias:
    """One judge's position bias on one criterion: P(it chose the answer shown first), and flips.

    Ties are left out; flips are the share of pairs whose two orders disagreed.
    """

    judge: str
    criterion: str
    n_votes: int
    first: float | None
    first_ci: list[float] | None
    n_pairs: int
    flip_rate: float | None
    flip_ci: list[float] | None

    @property
    def flagged(self) -> bool:
        """Whether the CI of P(first) excludes 0.5."""
        return self.first_ci is not None and not self.first_ci[0] <= 0.5 <= self.first_ci[1]

    def to_dict(self) -> dict[str, Any]:
        """The position bias as plain data, with whether it is flagged."""
        return {**self.__dict__, "flagged": self.flagged}

    def words(self) -> str:
        """The position bias in plain words."""
        if self.first is None or self.first_ci is None:
            return f"{self.judge} ({self.criterion}): no vote chose an answer (all ties or none)"
        lo, hi = self.first_ci
        lean = (
            "prefers the answer shown first"
            if lo > 0.5
            else "prefers the answer shown second"
            if hi < 0.5
            else "shows no position preference"
        )
        flips = (
            f"; its two orders disagree on {self.flip_rate:.1%} of {self.n_pairs} pairs"
            if self.flip_rate is not None
            else ""
        )
        return (
            f"{self.judge} {lean} ({self.criterion}): P(first) {self.first:.3f} "
            f"[{lo:.3f}, {hi:.3f}] over {self.n_votes} votes{flips}"
        )


def clustered_wilson(hits: Any, clusters: Any, level: float = 0.95) -> list[float] | None:
    """Wilson interval of a share of 0/1 ``hits`` that come in ``clusters``; None from no hits.

    A cluster is the votes on one pair: the count shrunk by the design effect, the clusters'
    variance of the share (a ratio estimate) over the binomial's, never below 1 (votes of one pair
    that lean alike are worth less than independent ones; the interval is never narrower than
    independent votes' would give).
    """
    y = np.asarray(hits, dtype=float)
    n = y.size
    if n == 0:
        return None
    _, group = np.unique(np.asarray(clusters), return_inverse=True)
    k = int(group.max()) + 1
    p = float(y.mean())
    per, size = np.bincount(group, y, k), np.bincount(group, minlength=k)
    binomial = p * (1 - p) / n
    clustered = (k / (k - 1) * float(np.sum((per - p * size) ** 2)) / n**2) if k > 1 else 0.0
    deff = max(1.0, clustered / binomial) if binomial > 0 else 1.0
    return wilson(p * n / deff, n / deff, level)


def position_bias(
    judge: str,
    criterion: str,
    chose_first: Sequence[int],
    pairs_flipped: Sequence[bool],
    pairs: Sequence[str] | None = None,
) -> PositionBias:
    """A judge's position bias on a criterion, from its votes and the pairs judged in both orders.

    ``chose_first``: per scored vote, 1 if the judge chose the first answer, 0 the second,
    -1 a tie (left out); ``pairs_flipped``: per pair judged in both orders, whether they
    disagreed; ``pairs``: per vote, the pair it judged (the interval then counts a pair's
    votes as one cluster, `clustered_wilson`; None: every vote its own).
    """
    c = np.asarray(chose_first, dtype=int)
    keep = c >= 0
    decided = c[keep]
    firsts = int(decided.sum())
    flips = int(np.sum(pairs_flipped))
    n_pairs = len(pairs_flipped)
    cluster = np.arange(c.size) if pairs is None else np.asarray(pairs)
    return PositionBias(
        judge,
        criterion,
        int(decided.size),
        firsts / decided.size if decided.size else None,
        clustered_wilson(decided, cluster[keep]),
        n_pairs,
        flips / n_pairs if n_pairs else None,
        wilson(flips, n_pairs),
    )
