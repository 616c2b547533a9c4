"""Conformal maps (#52 defect 3 and item 5), simulated on a 0-4 scale at alpha 0.1:

- labels chosen actively for the benchmark mean (inclusion probability growing with the square
  root of the jury's uncertainty, floor 0.1) against a uniform sample of the same size, where
  20% of items are ones the jury is confidently wrong about: coverage of new items by the
  threshold fitted on each (why `calibrate --conformal` refuses actively chosen labels);
- per route width W, the share of new items `--route-width W` keeps and their coverage, for a
  jury whose error grows with its uncertainty (the guarantee is marginal: what the report's
  cross-validated `cv_by_route_width` estimates);
- three raters per item who disagree: `--cover every-rater` (every rater's label) against
  `--cover one-rater` (a random rater's label), coverage and mean width.

Each row: the mean over the repetitions with its Monte Carlo standard error.

    python perf/conformal_routes.py [--repetitions 1000]
"""

from __future__ import annotations

import argparse

import numpy as np

from jurybox.calibration.maps.conformal import fit_criterion, intervals, level_scores

LEVELS = [0.0, 1.0, 2.0, 3.0, 4.0]
ALPHA = 0.1


def discretised(centre: np.ndarray, spread: np.ndarray) -> np.ndarray:
    z = (np.array(LEVELS)[None, :] - centre[:, None]) / spread[:, None]
    w = np.exp(-0.5 * z**2)
    return w / w.sum(axis=1, keepdims=True)


def draw(rng: np.random.Generator, p: np.ndarray) -> np.ndarray:
    return np.array(LEVELS)[(rng.random(p.shape[0])[:, None] > p.cumsum(axis=1)).sum(axis=1)]


def informative(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    p = discretised(rng.uniform(0, 4, n), rng.uniform(0.3, 1.5, n))
    return p, draw(rng, p)


def with_sure_errors(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The informative jury, confidently wrong (0.999 two levels off) on 20% of items; and each
    item's uncertainty as the page computes it (variance over the squared range)."""
    p, y = informative(rng, n)
    sure = rng.random(n) < 0.2
    own = np.where(y >= 2, y - 2, y + 2).astype(int)
    p[sure] = 0.001 / 4
    p[sure, own[sure]] = 0.999
    mean = p @ np.array(LEVELS)
    return p, y, (p @ np.square(LEVELS) - mean**2) / 16


def covered(p: np.ndarray, y: np.ndarray, cut: float) -> float:
    got = intervals(level_scores(p, LEVELS), LEVELS, cut)
    return float(np.mean((got[:, 0] <= y) & (y <= got[:, 1])))


def show(name: str, values: list[float]) -> str:
    v = np.asarray(values, dtype=float)
    return f"{name:<50} {v.mean():7.3f} +- {v.std(ddof=1) / np.sqrt(v.size):.3f}"


def active_labels(rng: np.random.Generator, reps: int) -> None:
    active, uniform = [], []
    for _ in range(reps):
        p, y, u = with_sure_errors(rng, 1000)
        a = np.sqrt(u)
        chosen = rng.random(1000) < np.minimum(1.0, 0.1 + 0.9 * a / np.quantile(a, 0.9))
        some = rng.choice(1000, int(chosen.sum()), replace=False)
        new_p, new_y, _ = with_sure_errors(rng, 1000)
        for picked, out in ((chosen, active), (some, uniform)):
            fitted = fit_criterion("q", p[picked], [[v] for v in y[picked]], LEVELS, ALPHA)
            out.append(covered(new_p, new_y, fitted.threshold))
    print(show("fitted on actively chosen labels: coverage", active))
    print(show("fitted on a uniform sample: coverage", uniform))


def route_widths(rng: np.random.Generator, reps: int) -> None:
    rows: dict[float, list[tuple[float, float]]] = {w: [] for w in LEVELS}
    for _ in range(reps):
        p, y = informative(rng, 200)
        fitted = fit_criterion("q", p, [[v] for v in y], LEVELS, ALPHA)
        new_p, new_y = informative(rng, 500)
        got = intervals(level_scores(new_p, LEVELS), LEVELS, fitted.threshold)
        for w in rows:
            kept = got[:, 1] - got[:, 0] <= w + 1e-12
            inside = (got[kept, 0] <= new_y[kept]) & (new_y[kept] <= got[kept, 1])
            rows[w].append((kept.mean(), inside.mean() if kept.any() else np.nan))
    for w, got_w in rows.items():
        kept = [k for k, _ in got_w]
        cover = [c for _, c in got_w if not np.isnan(c)]
        print(show(f"--route-width {w:g}: kept", kept) + "   " + show("covered", cover)[50:])


def raters(rng: np.random.Generator, reps: int) -> None:
    cover = {"every-rater": [], "one-rater": []}
    width = {"every-rater": [], "one-rater": []}
    for _ in range(reps):
        p = discretised(rng.uniform(0, 4, 200), rng.uniform(0.3, 1.5, 200))
        labels = np.stack([draw(rng, p) for _ in range(3)], axis=1)
        new_p = discretised(rng.uniform(0, 4, 500), rng.uniform(0.3, 1.5, 500))
        new = np.stack([draw(rng, new_p) for _ in range(3)], axis=1)
        scores = level_scores(new_p, LEVELS)
        for kind in cover:
            fitted = fit_criterion("q", p, labels.tolist(), LEVELS, ALPHA, cover=kind, rng=rng)
            iv = intervals(scores, LEVELS, fitted.threshold)
            inside = (iv[:, :1] <= new) & (new <= iv[:, 1:])
            cover[kind].append(
                inside.all(axis=1).mean() if kind == "every-rater" else inside.mean()
            )
            width[kind].append(float(np.mean(iv[:, 1] - iv[:, 0])))
    for kind in cover:
        whose = "all three labels" if kind == "every-rater" else "a random rater's label"
        print(
            show(f"--cover {kind}: holds {whose}", cover[kind])
            + "   "
            + show("mean width", width[kind])[50:]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.repetitions} repetitions per row; alpha {ALPHA}")
    active_labels(rng, args.repetitions)
    route_widths(rng, args.repetitions)
    raters(rng, args.repetitions)


if __name__ == "__main__":
    main()
