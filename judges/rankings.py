"""The arithmetic of group rewards, without judges.

It says which pairs of a group's completions are compared (the designs), each completion's
strength from the comparisons' shares, and rewards on a stated range.

A comparison is ``(i, j, share)``: completion i against completion j, ``share`` i's share of
the win (1: i is better, 0: j is, 0.5: a tie; a jury's graded or expected share lies between).
Ties count as half a win for each side, as in `jurybox.calibration.audits.preference`.

* **Designs** (`round_robin`, `regular`, `swiss_round`, `star`): every
  pair; a random r-regular design (each completion in exactly r comparisons, r - 1 for one
  when k x r is odd); one round of a Swiss-style tournament (completions of similar standing
  meet, no pair twice); every completion against one anchor.
* **Strengths** (`strengths`): Bradley-Terry, P(i beats j) = p_i / (p_i + p_j), fitted by
  Hunter's (2004) minorization-maximization iteration with ``prior`` virtual tie games per
  completion spread over its groupmates (so the estimate exists for any outcome, e.g. a
  completion that won every comparison, and a group the judges cannot separate gets equal
  strengths). With ``prior=0`` it is the maximum-likelihood fit of
  `jurybox.calibration.audits.preference.bradley_terry` (tested equal).
* **Relative rewards** (`relative`): a completion's Bradley-Terry probability of beating
  a groupmate drawn at random (``bradley_terry``), or the mean of its own shares
  (``win_share``); both on [0, 1], then `scaled` to ``[low, high]`` and centred (minus the
  group's mean) when asked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

Pair = tuple[int, int]
Relative = Literal["bradley_terry", "win_share"]


def round_robin(k: int) -> list[Pair]:
    """Every pair of ``k`` completions once: k (k - 1) / 2 pairs."""
    return [(i, j) for i in range(k) for j in range(i + 1, k)]


def regular(k: int, r: int, rng: np.random.Generator) -> list[Pair]:
    """A random design where each of ``k`` completions meets exactly ``r`` others.

    One meets r - 1 when k x r is odd. The design is a circulant graph (each completion meets the
    next r // 2 on a circle, and the one opposite when r is odd) over a random order of the
    completions, so it is connected for r >= 2 and no pair repeats. ``r >= k - 1`` is the round
    robin.
    """
    if r >= k - 1:
        return round_robin(k)
    if r < 1:
        raise ValueError(f"a regular design needs at least one comparison per completion, got {r}")
    order = rng.permutation(k)
    pairs: set[Pair] = set()
    for d in range(1, r // 2 + 1):
        for t in range(k):
            pairs.add(_pair(order[t], order[(t + d) % k]))
    if r % 2:
        half = k // 2  # the opposite completion; with k odd the last one is left at r - 1
        for t in range(half):
            pairs.add(_pair(order[t], order[t + half]))
    return sorted(pairs)


def star(k: int, anchor: int) -> list[Pair]:
    """Every completion against ``anchor``: k - 1 pairs."""
    return [_pair(anchor, i) for i in range(k) if i != anchor]


def swiss_round(
    k: int, standing: Sequence[float], played: set[Pair], rng: np.random.Generator
) -> list[Pair]:
    """One round of a Swiss-style tournament.

    Completions sorted by ``standing`` (best first, ties in random order) meet the next one below
    them they have not met yet; a completion with no such opponent left sits the round out (as
    does the last one of an odd count).
    """
    keys = rng.random(k)
    order = sorted(range(k), key=lambda x: (-standing[x], keys[x]))
    free = list(order)
    pairs: list[Pair] = []
    while len(free) > 1:
        top = free.pop(0)
        match = next((x for x in free if _pair(top, x) not in played), None)
        if match is not None:
            free.remove(match)
            pairs.append(_pair(top, match))
    return sorted(pairs)


def _pair(i: int | np.integer, j: int | np.integer) -> Pair:
    a, b = int(i), int(j)
    return (a, b) if a < b else (b, a)


def strengths(
    k: int,
    i: Sequence[int],
    j: Sequence[int],
    share: Sequence[float],
    prior: float = 1.0,
    tol: float = 1e-10,
    max_iter: int = 10_000,
) -> np.ndarray:
    """Bradley-Terry log-strengths of ``k`` completions from comparisons.

    The comparisons are ``(i[t], j[t], share[t])``. The strengths have mean 0 over those
    compared; NaN for a completion in no comparison. The fit is Hunter's MM iteration with
    ``prior`` virtual tie games per compared completion, spread evenly over the pairs among them
    (each pair ``prior / (m - 1)`` games, half won by each side, m the compared completions).
    ``prior=0`` is the plain maximum-likelihood fit, which exists only when every split of the
    completions has a win each way across it.

    Raises:
        ValueError: ``prior=0`` and the maximum-likelihood fit does not exist.
    """
    ii, jj = np.asarray(i, dtype=int), np.asarray(j, dtype=int)
    s = np.asarray(share, dtype=float)
    wins = np.zeros((k, k))
    np.add.at(wins, (ii, jj), s)
    np.add.at(wins, (jj, ii), 1.0 - s)
    games = wins + wins.T
    seen = np.zeros(k, dtype=bool)
    seen[ii] = True
    seen[jj] = True
    out = np.full(k, np.nan)
    m = int(seen.sum())
    if m == 0:
        return out
    if m == 1:
        out[seen] = 0.0
        return out
    w, g = wins[np.ix_(seen, seen)], games[np.ix_(seen, seen)]
    if prior > 0:
        virtual = (prior / (m - 1)) * (1.0 - np.eye(m))
        w, g = w + virtual / 2, g + virtual
    elif not _beats_connected(w):
        raise ValueError(
            "the maximum-likelihood strengths do not exist: some group of "
            "completions never lost to the rest (give a prior)"
        )
    total = w.sum(axis=1)
    p = np.ones(m)
    for _ in range(max_iter):
        new = total / (g / (p[:, None] + p[None, :])).sum(axis=1)
        new /= math.exp(float(np.log(new).mean()))
        done = float(np.abs(np.log(new) - np.log(p)).max()) < tol
        p = new
        if done:
            break
    out[seen] = np.log(p) - np.log(p).mean()
    return out


def _beats_connected(wins: np.ndarray) -> bool:
    """Whether every completion reaches every other along "won some share against" edges."""
    m = len(wins)
    reach = (wins > 0) | np.eye(m, dtype=bool)
    for _ in range(max(1, math.ceil(math.log2(m)))):
        reach = (reach.astype(float) @ reach.astype(float)) > 0
    return bool(reach.all())


def win_shares(k: int, i: Sequence[int], j: Sequence[int], share: Sequence[float]) -> np.ndarray:
    """Each completion's mean share over its comparisons (ties half); NaN without one."""
    ii, jj = np.asarray(i, dtype=int), np.asarray(j, dtype=int)
    s = np.asarray(share, dtype=float)
    won = np.bincount(ii, s, k) + np.bincount(jj, 1.0 - s, k)
    n = np.bincount(ii, minlength=k) + np.bincount(jj, minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, won / np.maximum(n, 1), np.nan)


def expected_wins(theta: np.ndarray) -> np.ndarray:
    """Each completion's Bradley-Terry probability of beating a groupmate drawn at random.

    The groupmates are those with a strength; NaN where it has none, 0.5 alone.
    """
    ok = ~np.isnan(theta)
    out = np.full(len(theta), np.nan)
    m = int(ok.sum())
    if m == 1:
        out[ok] = 0.5
    elif m > 1:
        t = theta[ok]
        p = 1.0 / (1.0 + np.exp(-(t[:, None] - t[None, :])))
        out[ok] = (p.sum(axis=1) - 0.5) / (m - 1)  # without itself (p_ii = 0.5)
    return out


def relative(
    k: int,
    i: Sequence[int],
    j: Sequence[int],
    share: Sequence[float],
    kind: Relative = "bradley_terry",
    prior: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per completion: its relative value on [0, 1] (``kind``), log-strength and win share.

    The log-strength is Bradley-Terry's; NaN for a completion in no comparison.
    """
    theta = strengths(k, i, j, share, prior)
    shares = win_shares(k, i, j, share)
    value = expected_wins(theta) if kind == "bradley_terry" else shares
    return value, theta, shares


def scaled(
    values: np.ndarray, low: float = 0.0, high: float = 1.0, centred: bool = False
) -> np.ndarray:
    """``values`` on [0, 1] mapped onto [low, high]; centred: minus their mean (NaN left out)."""
    out = low + (high - low) * np.asarray(values, dtype=float)
    if centred and np.any(~np.isnan(out)):
        out = out - np.nanmean(out)
    return out
