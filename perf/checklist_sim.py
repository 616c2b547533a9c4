"""Checklist scores from noisy per-point judges against a known expert score (#63), and a single
Likert judgment of the same noise beside them.

Simulated items, each with its own checklist of N points (N in 5, 10, 20), drawn as HealthBench's
rubrics look: each point is a pitfall with probability 0.2 (the first point never is, so every
item has a positive point), a positive point is worth 1..10 points and a pitfall -1..-10 (whole
numbers, uniform). An answer's quality is ``q ~ Beta(2, 2)`` per item; it meets each positive
point with probability ``q`` and commits each pitfall with probability ``(1 - q) / 2``. That
true met vector gives the **expert score** by HealthBench's rule, the one jurybox scores with
(``jurybox.rubrics.checklist.points_score``): the points earned (a committed pitfall's negative
points included) over the positive points possible, clipped to [0, 1].

The judges:

- **checklist, k judges**: each judge reads each point right with probability ``1 - eps`` and
  flips it with probability ``eps``, independently across points and judges (yes/no votes, no
  probabilities). A point's met is the votes' mean (jurybox's default aggregation, ``mean``:
  met 0, 1/3, 2/3 or 1 with three judges; 0, 0.5 or 1 with two) or, with three judges, their
  majority (``method: majority``; with two, jurybox's majority leaves a tie unscored, and the
  item with it, so two judges are shown with the mean only). The item's score is the same
  library rule on those met values.
- **Likert, same evidence** (the matching this script stands on): the first checklist judge's
  own eps-noisy reading of every point, combined by the same rule with the true weights, but
  reported as one whole number on 1..10 (``round(1 + 9 s)``, read back as ``(L - 1) / 9``).
  Same judge, same reading, same noise: only the answer's form differs (one number on a
  10-point scale instead of N yes/no). It is the best case for a holistic judge (it weighs the
  points exactly as the expert does, in its head; jurybox's ``score: implicit`` asks a judge
  for that), so the checklist's edge measured against it is a lower bound at matched noise.
  **Likert x3**: the mean of the three judges' numbers, each from its own readings.
- **Likert, Gaussian**: the expert score plus N(0, sd), clipped to [0, 1] and rounded to 1..10
  the same way, where sd is the root mean square error of the one-judge checklist score in the
  same cell (matched on the error's size, not its shape).

What is not modelled: a holistic judgment noisier than per-point ones, or a judge weighing the
points otherwise than the expert (whatever gives RaR, arXiv 2507.17746, its gain over Likert
judging on HealthBench): the matching takes it away on purpose; nor errors that go together
across an item's points, nor the judges' probabilities (``use: expected``).

Per (eps, N) cell: Pearson r, Spearman rho and the mean absolute error against the expert score,
each with a 95% percentile bootstrap interval over items; the paired differences of the mean
absolute errors (``GAPS``: Likert minus checklist, one judge each; three each, by majority and
by mean) with their intervals and z; the Gaussian Likert's sd; and the one-judge checklist
score's slope on the expert score (how far flipped readings shrink it towards the middle).

    python perf/checklist_sim.py [--items 2000] [--boot 1000] [--seed 63]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

EPS = (0.05, 0.1, 0.2, 0.3)
NS = (5, 10, 20)
PITFALL_SHARE = 0.2
METHODS = (
    "checklist, 1 judge",
    "checklist, 2, mean",
    "checklist, 3, majority",
    "checklist, 3, mean",
    "Likert, same evidence",
    "Likert x3, same evid.",
    "Likert, Gaussian",
)
#: (Likert, checklist) pairs whose MAE gap is reported per item: one judge each, three each.
GAPS = (
    ("Likert, same evidence", "checklist, 1 judge"),
    ("Likert x3, same evid.", "checklist, 3, majority"),
    ("Likert x3, same evid.", "checklist, 3, mean"),
)


#: Scores items: (weights (m, n), met arrays (m, n) each) -> one score array (m,) per met array.
Scorer = Callable[[np.ndarray, Sequence[np.ndarray]], list[np.ndarray]]


def library_scores(weights: np.ndarray, mets: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Item scores by jurybox's own rule, ``points_score``: one call per item and met array."""
    from jurybox.rubrics.checklist import points_score
    from jurybox.rubrics.points import Point

    out = [np.empty(len(weights)) for _ in mets]
    rows = [m.tolist() for m in mets]
    for i, w in enumerate(weights.tolist()):
        points = [Point(key=f"p{j + 1}", text=f"point {j + 1}", points=x) for j, x in enumerate(w)]
        for scores, met in zip(out, rows):
            value, why = points_score(points, {p.key: v for p, v in zip(points, met[i])})
            if value is None:
                raise AssertionError(f"item {i} unscored: {why}")
            scores[i] = value
    return out


def draw_items(rng: np.random.Generator, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Weights (m, n) and the true met values (m, n) of m items with n points each."""
    pitfall = rng.random((m, n)) < PITFALL_SHARE
    pitfall[:, 0] = False
    size = rng.integers(1, 11, (m, n)).astype(float)
    weights = np.where(pitfall, -size, size)
    q = rng.beta(2.0, 2.0, (m, 1))
    met = np.where(pitfall, rng.random((m, n)) < (1 - q) / 2, rng.random((m, n)) < q)
    return weights, met.astype(float)


def readings(rng: np.random.Generator, met: np.ndarray, eps: float, k: int) -> np.ndarray:
    """k judges' readings of every point, shape (k, m, n): each flipped with probability eps."""
    flips = rng.random((k, *met.shape)) < eps
    return np.where(flips, 1.0 - met, met)


def majority(votes: np.ndarray) -> np.ndarray:
    """Per point, the majority of the first axis's votes (a tie, of two: 0.5, their mean)."""
    share = votes.mean(axis=0)
    return np.where(share > 0.5, 1.0, np.where(share < 0.5, 0.0, 0.5))


def likert(score: np.ndarray) -> np.ndarray:
    """A score in [0, 1] reported as a whole number 1..10 and read back onto [0, 1]."""
    return (np.rint(1 + 9 * np.clip(score, 0.0, 1.0)) - 1) / 9


@dataclass(frozen=True)
class Cell:
    """One (eps, N) cell: the expert score and each method's scores over the same items."""

    eps: float
    n: int
    expert: np.ndarray
    scores: dict[str, np.ndarray]
    likert_sd: float


def simulate(
    rng: np.random.Generator,
    eps: float,
    n: int,
    items: int,
    score: Scorer,
) -> Cell:
    """Draw one cell's items and judge them every way."""
    weights, met = draw_items(rng, items, n)
    votes = readings(rng, met, eps, 3)
    mets = [met, votes[0], majority(votes[:2]), majority(votes), votes.mean(axis=0)]
    expert, *judged, second, third = score(weights, [*mets, votes[1], votes[2]])
    scores = dict(zip(METHODS[:4], judged))
    scores["Likert, same evidence"] = likert(scores["checklist, 1 judge"])
    scores["Likert x3, same evid."] = (
        scores["Likert, same evidence"] + likert(second) + likert(third)
    ) / 3
    sd = float(np.sqrt(np.mean((scores["checklist, 1 judge"] - expert) ** 2)))
    scores["Likert, Gaussian"] = likert(expert + rng.normal(0.0, sd, items))
    return Cell(eps, n, expert, scores, sd)


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r along the last axis."""
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    return (x * y).sum(axis=-1) / np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))


def metrics(expert: np.ndarray, judged: np.ndarray, expert_ranks: np.ndarray) -> np.ndarray:
    """Pearson r, Spearman rho and the MAE along the last axis: shape (3, ...)."""
    rho = _pearson(expert_ranks, rankdata(judged, axis=-1))
    mae = np.abs(judged - expert).mean(axis=-1)
    return np.stack([_pearson(expert, judged), rho, mae])


@dataclass(frozen=True)
class Row:
    """A method's metrics in a cell, each with its 95% bootstrap interval: (value, low, high)."""

    method: str
    pearson: tuple[float, float, float]
    spearman: tuple[float, float, float]
    mae: tuple[float, float, float]


Gap = tuple[float, float, float, float]


def summarise(cell: Cell, rng: np.random.Generator, boot: int) -> tuple[list[Row], list[Gap]]:
    """Each method's row, and per pair of ``GAPS`` the paired MAE difference Likert minus
    checklist: (mean, low, high, its standard error)."""
    m = len(cell.expert)
    idx = rng.integers(0, m, (boot, m))
    expert, ranks = cell.expert[idx], rankdata(cell.expert[idx], axis=-1)
    rows = []
    for method in METHODS:
        judged = cell.scores[method]
        point = metrics(cell.expert, judged, rankdata(cell.expert))
        draws = metrics(expert, judged[idx], ranks)
        low, high = np.percentile(draws, [2.5, 97.5], axis=1)
        rows.append(
            Row(method, *((float(point[j]), float(low[j]), float(high[j])) for j in range(3)))
        )
    gaps = []
    for pair in GAPS:
        gap = mae_gap(cell, *pair)
        low, high = np.percentile(gap[idx].mean(axis=1), [2.5, 97.5])
        gaps.append(
            (float(gap.mean()), float(low), float(high), float(gap.std(ddof=1) / np.sqrt(m)))
        )
    return rows, gaps


def mae_gap(cell: Cell, likert_method: str, checklist_method: str) -> np.ndarray:
    """Per item: the Likert judgment's absolute error minus the checklist score's."""
    return np.abs(cell.scores[likert_method] - cell.expert) - np.abs(
        cell.scores[checklist_method] - cell.expert
    )


def run(
    items: int,
    boot: int,
    seed: int,
    eps: Sequence[float] = EPS,
    ns: Sequence[int] = NS,
    score: Scorer = library_scores,
) -> list[tuple[Cell, list[Row], list[Gap]]]:
    """Every (eps, N) cell, each from its own seeded stream (``seed``, the cell's index)."""
    out = []
    for i, (e, n) in enumerate((e, n) for e in eps for n in ns):
        rng = np.random.default_rng([seed, i])
        cell = simulate(rng, e, n, items, score)
        rows, gap = summarise(cell, rng, boot)
        out.append((cell, rows, gap))
    return out


def _ci(v: tuple[float, float, float], digits: int = 3) -> str:
    return f"{v[0]:.{digits}f} [{v[1]:.{digits}f}, {v[2]:.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000, help="items per (eps, N) cell")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples of the items")
    parser.add_argument("--seed", type=int, default=63)
    args = parser.parse_args()
    began = time.perf_counter()
    results = run(args.items, args.boot, args.seed)
    print(
        f"{args.items} items per cell, {args.boot} bootstrap resamples, seed {args.seed}; "
        "95% percentile intervals over items"
    )
    head = f"{'eps':>5} {'N':>3}  {'judge':<22} {'Pearson r':<22} {'Spearman rho':<22} {'MAE':<22}"
    print(head)
    print("-" * len(head))
    for cell, rows, _ in results:
        for row in rows:
            print(
                f"{cell.eps:>5} {cell.n:>3}  {row.method:<22} {_ci(row.pearson):<22} "
                f"{_ci(row.spearman):<22} {_ci(row.mae):<22}"
            )
    print()
    print(
        "MAE gaps, Likert minus checklist, paired by item: mean [95% interval], z = mean / SE;"
        " sd: the Gaussian Likert's; slope: the one-judge checklist score's on the expert score"
    )
    print(
        f"{'eps':>5} {'N':>3}  {'1 judge each':<34} {'3 each, majority':<34} {'3 each, mean':<34} {'sd':>5} {'slope':>6}"
    )
    for cell, _, gaps in results:
        line = "".join(f"{_ci(g[:3], 4) + f'  z {g[0] / g[3]:.1f}':<35}" for g in gaps)
        slope = np.polyfit(cell.expert, cell.scores["checklist, 1 judge"], 1)[0]
        print(f"{cell.eps:>5} {cell.n:>3}  {line}{cell.likert_sd:.3f} {slope:6.3f}")
    print(f"\n{time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
