"""Synthetic judging data with known truth, for tests, examples and benchmarks.

Items have a latent quality; humans rate it with noise; each judge rates a *distorted* version
(bias, compression, noise) so that calibration has something real to correct.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def simulate_judging(
    n_items: int = 200,
    *,
    n_humans: int = 2,
    labelled: int | None = None,
    judges: Sequence[tuple[str, float, float, float]] = (
        ("harsh", -1.0, 1.0, 0.5),
        ("lenient", 0.8, 0.6, 0.7),
        ("noisy", 0.0, 1.0, 1.5),
    ),
    scale: Sequence[float] = (0, 1, 2, 3, 4),
    label_criterion: bool = True,
    unscored_rate: float = 0.0,
    provenance: str = "prov-test",
    seed: int = 0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Judge records and human label rows with known truth, for tests, examples and benchmarks.

    ``judges`` = (name, bias, slope, noise sd).

    Criterion ``accuracy`` is on ``scale``; ``supported`` (when ``label_criterion``) is yes/no
    on [0, 1].

    Args:
        n_items: Items judged.
        n_humans: Human rows per labelled item.
        labelled: The first ``labelled`` items get human rows (default: all).
        judges: Each judge's (name, bias, slope, noise sd) of its distortion of the latent
            quality.
        scale: The ``accuracy`` scale's values.
        label_criterion: Whether to add the yes/no criterion ``supported``.
        unscored_rate: The chance that a judge's ``accuracy`` vote fails (a timeout, unscored).
        provenance: The records' provenance.
        seed: The random generator's seed.

    Returns:
        The verdict records (as ``jurybox judge`` writes them) and the human label rows.
    """
    rng = np.random.default_rng(seed)
    scale_arr = np.asarray(scale, dtype=float)
    lo, hi = scale_arr.min(), scale_arr.max()
    truth = rng.uniform(lo, hi, size=n_items)
    truth_bin = rng.random(n_items) < 0.6

    def snap(v: np.ndarray) -> np.ndarray:
        return scale_arr[np.abs(np.clip(v, lo, hi)[..., None] - scale_arr).argmin(axis=-1)]

    records = []
    judge_scores = {}
    for name, bias, slope, noise in judges:
        mid = (lo + hi) / 2
        raw = mid + slope * (truth - mid) + bias + rng.normal(0, noise, n_items)
        judge_scores[name] = (snap(raw), np.clip(raw, lo, hi))
    judge_bins = {
        name: np.where(rng.random(n_items) < (0.9 if k == 0 else 0.7), truth_bin, ~truth_bin)
        for k, (name, *_rest) in enumerate(judges)
    }
    for i in range(n_items):
        votes = []
        acc = []
        for name, *_rest in judges:
            failed = rng.random() < unscored_rate
            s, e = judge_scores[name]
            votes.append(
                {
                    "judge": name,
                    "criterion": "accuracy",
                    "score": None if failed else float(s[i]),
                    "label": None,
                    "expected": None if failed else round(float(e[i]), 4),
                    "distribution": None,
                    "error": "timeout" if failed else None,
                }
            )
            if not failed:
                acc.append(float(s[i]))
            if label_criterion:
                yes = bool(judge_bins[name][i])
                votes.append(
                    {
                        "judge": name,
                        "criterion": "supported",
                        "score": float(yes),
                        "label": "yes" if yes else "no",
                        "expected": None,
                        "distribution": None,
                        "error": None,
                    }
                )
        scores: dict[str, Any] = {"accuracy": float(np.mean(acc)) if len(acc) >= 2 else None}
        if label_criterion:
            bins = [float(judge_bins[n][i]) for n, *_r in judges]
            scores["supported"] = float(np.mean(bins) >= 0.5)
        records.append(
            {
                "id": f"q{i}",
                "status": "scored",
                "rubric": "synthetic",
                "jury": "synthetic",
                "provenance": provenance,
                "scores": scores,
                "votes": votes,
                "disagreement": {},
            }
        )
    humans = []
    n_lab = n_items if labelled is None else labelled
    for i in range(n_lab):
        for r in range(n_humans):
            row: dict[str, Any] = {
                "id": f"q{i}",
                "rater": f"h{r}",
                "accuracy": float(snap(truth[i] + rng.normal(0, 0.4))),
            }
            if label_criterion:
                flip = rng.random() < 0.05
                row["supported"] = float(truth_bin[i] != flip)
            humans.append(row)
    return records, humans


@dataclass(frozen=True)
class ItemKind:
    """One kind of item in a `CascadeSimulation`, its share and how the judges do on it.

    Its share of the population, the cheap judge's confidence on it (Beta(``conf``)), how often
    the cheap judge is right (``confidence ** cheap_power``, or the fixed ``cheap_rate``) and the
    panel (``panel``).
    """

    share: float
    conf: tuple[float, float]
    panel: float
    cheap_power: float = 1.0
    cheap_rate: float | None = None

    def cheap_right(self, c: Any) -> Any:
        """Probability that the cheap judge is right at confidence ``c``."""
        return c**self.cheap_power if self.cheap_rate is None else c * 0.0 + self.cheap_rate


class CascadeSimulation:
    """Two-stage cascade with known truth: a cheap judge, then a stronger panel, on item kinds.

    The kinds are a mixture of `ItemKind`. The default: 70% easy and 30% hard items; the
    cheap judge is overconfident (right with probability confidence^2; confidence Beta(12, 1) on
    easy items, Beta(3, 2) on hard ones); the panel is right on 97% of easy and 85% of hard
    items. Its agreement curve falls steadily as the threshold drops. `with_dip` is a
    population whose curve dips below a target in one band of confidence and recovers below it.
    The population agreement of the cascade at any threshold is computed exactly (by
    quadrature), so a fitted threshold's true agreement is known.

    Args:
        kinds: The item kinds, their shares adding up to 1 (default: the easy and hard kinds
            above).

    Raises:
        ValueError: The kinds' shares do not add up to 1.
    """

    def __init__(self, kinds: Sequence[ItemKind] | None = None) -> None:
        self.kinds = (
            tuple(kinds)
            if kinds is not None
            else (
                ItemKind(0.7, (12.0, 1.0), panel=0.97, cheap_power=2.0),
                ItemKind(0.3, (3.0, 2.0), panel=0.85, cheap_power=2.0),
            )
        )
        total = sum(k.share for k in self.kinds)
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"the kinds' shares add up to {total}, not 1")

    @classmethod
    def with_dip(cls) -> CascadeSimulation:
        """A cheap judge confident and wrong on one kind of item, calibrated elsewhere.

        The kind is 8% of items, confidence about 0.975, right 10% of the time; elsewhere the cheap
        judge beats a weak panel: the agreement curve (0.858 for the panel on every item) rises to
        0.872 at threshold 0.99, dips to 0.833 at 0.96 and recovers to 0.865 at 0.85.

        Returns:
            The simulation.
        """
        return cls(
            [
                ItemKind(0.64, (12.0, 1.0), panel=0.8),
                ItemKind(0.08, (400.0, 10.0), panel=1.0, cheap_rate=0.1),
                ItemKind(0.28, (3.0, 2.0), panel=0.95),
            ]
        )

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(confidence, agrees), each 2 stages x ``n`` items.

        Args:
            n: Items to draw.
            rng: The random generator.

        Returns:
            The stages' confidences (the panel's 1) and whether each stage agrees with the humans,
            as `fit_threshold` takes them.
        """
        u = rng.random(n)
        kind = np.searchsorted(np.cumsum([k.share for k in self.kinds])[:-1], u, side="right")
        conf = np.choose(kind, [rng.beta(*k.conf, n) for k in self.kinds])
        right = np.choose(kind, [k.cheap_right(conf) for k in self.kinds])
        cheap_right = rng.random(n) < right
        panel_right = rng.random(n) < np.array([k.panel for k in self.kinds])[kind]
        return np.vstack([conf, np.ones(n)]), np.vstack([cheap_right, panel_right])

    def agreement(self, threshold: float) -> float:
        """Population agreement of the cascade that trusts the cheap judge at ``threshold``.

        Args:
            threshold: The cascade's threshold (inf: the panel on every item).

        Returns:
            The exact agreement over the population (by quadrature).
        """
        from scipy import integrate, stats

        total = 0.0
        for kind in self.kinds:
            a, b = kind.conf
            t = min(max(threshold, 0.0), 1.0) if np.isfinite(threshold) else 1.0
            exits = stats.beta.sf(t, a, b) if np.isfinite(threshold) else 0.0
            right_when_exiting = (
                integrate.quad(
                    lambda c, a=a, b=b, kind=kind: kind.cheap_right(c) * stats.beta.pdf(c, a, b),
                    t,
                    1.0,
                    epsabs=1e-12,
                    epsrel=1e-10,
                    limit=200,
                )[0]
                if exits > 0
                else 0.0
            )
            total += kind.share * (right_when_exiting + (1.0 - exits) * kind.panel)
        return float(total)

    def expected_calls(self, threshold: float, stage_calls: tuple[float, float] = (1, 3)) -> float:
        """Judge calls per item of the cascade: the cheap judge on all, the panel on the rest.

        The panel decides the items the cheap judge escalates; for ``threshold`` inf, which is no
        cascade, the panel alone (``stage_calls[1]``).

        Args:
            threshold: The cascade's threshold.
            stage_calls: The judge calls of the cheap judge and of the panel per item.

        Returns:
            The expected judge calls per item.
        """
        from scipy import stats

        if not np.isfinite(threshold):
            return float(stage_calls[1])
        exits = sum(k.share * stats.beta.sf(threshold, *k.conf) for k in self.kinds)
        return float(stage_calls[0] + (1.0 - exits) * stage_calls[1])


def simulate_cascade_verdicts(
    n_items: int = 300,
    *,
    provenance: str = "prov-test",
    sure_share: float = 0.6,
    panel_accuracy: float = 0.97,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(verdict records, human label rows) of a jury ``small`` + ``big1`` + ``big2``.

    On a 1-3 ``accuracy`` scale, every judge on every item (what a cascade is fitted on).

    ``small`` is sure (probability 0.995 on its answer) and right on ``sure_share`` of the
    items; elsewhere it is unsure (0.5) and right 40% of the time. ``big1`` and ``big2`` agree,
    sure, and are right with probability ``panel_accuracy``.
    """
    rng = np.random.default_rng(seed)
    records, humans = [], []
    for i, y in enumerate(rng.integers(1, 4, n_items)):
        y = int(y)
        sure = rng.random() < sure_share
        guess = y if (sure or rng.random() < 0.4) else y % 3 + 1
        p = 0.995 if sure else 0.5
        cheap = {str(v): (p if v == guess else (1 - p) / 2) for v in (1, 2, 3)}
        right = y if rng.random() < panel_accuracy else y % 3 + 1
        onehot = {str(v): float(v == right) for v in (1, 2, 3)}
        votes = [("small", guess, cheap), ("big1", right, onehot), ("big2", right, onehot)]
        records.append(
            {
                "id": f"i{i}",
                "status": "scored",
                "rubric": "cascade-test",
                "jury": "cascade",
                "provenance": provenance,
                "scores": {"accuracy": (guess + 2 * right) / 3},
                "votes": [
                    {"judge": j, "criterion": "accuracy", "score": s, "distribution": d}
                    for j, s, d in votes
                ],
            }
        )
        humans.append({"id": f"i{i}", "accuracy": y})
    return records, humans


@dataclass(frozen=True)
class LabellingPool:
    """A benchmark's judged items with known human truth, for simulating a labelling session.

    On a 0-4 scale: ``dist`` each item's predictive distribution (the jury's, calibrated: the
    human label is drawn from it), ``score`` the jury's score (its mean), ``uncertainty`` what
    `jurybox.calibration.estimates.active.item_uncertainty` gives (its variance over the
    squared range), ``human`` the labels.
    """

    dist: np.ndarray
    score: np.ndarray
    uncertainty: np.ndarray
    human: np.ndarray

    VALUES = np.arange(5.0)

    @classmethod
    def draw(
        cls,
        rng: np.random.Generator,
        n_items: int = 1000,
        *,
        uncertain_share: float = 0.3,
        sure: float = 0.25,
        unsure: float = 1.2,
        stated: float = 1.0,
    ) -> LabellingPool:
        """Items around a uniformly drawn mode, most sharply peaked, ``uncertain_share`` broadly.

        ``sure`` is the spread of the distribution's exponential fall-off of the sharp ones,
        ``unsure`` that of the broad ones. ``stated``: the jury's stated variance over its
        distribution's (1: calibrated; above 1 an underconfident jury, its means as accurate).
        """
        mode = rng.integers(0, 5, n_items)
        spread = np.where(rng.random(n_items) < uncertain_share, unsure, sure)
        w = np.exp(-np.abs(cls.VALUES[None, :] - mode[:, None]) / spread[:, None])
        dist = w / w.sum(axis=1, keepdims=True)
        mean = dist @ cls.VALUES
        var = dist @ cls.VALUES**2 - mean**2
        cdf = np.cumsum(dist, axis=1)
        human = (rng.random(n_items)[:, None] > cdf).sum(axis=1).astype(float)
        return cls(dist, mean, stated * var / 16.0, np.minimum(human, 4.0))


def weighted_mean_path(
    f_pool: Any, f: Any, y: Any, pi: Any, visited: Any, *, model: tuple[Any, Any, Any] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """`jurybox.calibration.estimates.active.weighted_mean` after each label of a session.

    All at once: the estimate and standard error with the first ``n`` labelled items for n = 1,
    2, ... (NaN at n = 1). ``f``, ``y``, ``pi``: the labelled items' score, label and inclusion
    probability in labelling order; ``visited[n - 1]``: the items visited by the n-th label. The
    same formulas written as running sums (each of weighted_mean's sums over the visited items is
    a running sum over the labelled ones: the others' terms are 0), so a simulated session costs
    one pass instead of one estimate per label; tests check it against weighted_mean at every n.
    """
    fp, f_, y_, p = (np.asarray(a, dtype=float) for a in (f_pool, f, y, pi))
    m = np.asarray(visited, dtype=float)
    big_n = fp.size
    a, b, c = y_ / p, f_ / p, (1.0 - p) / p**2
    sa, sb, saa, sbb, sab, cyy, cyf, cff = np.cumsum(
        [a, b, a * a, b * b, a * b, c * y_ * y_, c * y_ * f_, c * f_ * f_], axis=1
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        var_b = (sbb - sb**2 / m) / (m - 1)
        cov = (sab - sa * sb / m) / (m - 1)
        lam = np.where(var_b > 0, np.clip(cov / var_b, 0.0, 1.0), 0.0)
        total = sa - lam * sb
        estimate = lam * fp.mean() + total / m
        s2 = (saa - 2 * lam * sab + lam**2 * sbb - total**2 / m) / (m - 1)
        coins = (cyy - 2 * lam * cyf + lam**2 * cff) / m
        if model is not None:
            mean, var, pi_pool = (np.asarray(v, dtype=float) for v in model)

            def avg(v: np.ndarray) -> float:
                return float(np.mean(v))

            # bias = mean - lam * fp; second = var + bias^2: their means are quadratics in lam
            w, u = 1.0 / pi_pool, (1.0 - pi_pool) / pi_pool
            floor_s2 = (
                avg(w * (var + mean**2))
                - 2 * lam * avg(w * mean * fp)
                + lam**2 * avg(w * fp**2)
                - (avg(mean) - lam * avg(fp)) ** 2
            )
            floor_coins = (
                avg(u * (var + mean**2)) - 2 * lam * avg(u * mean * fp) + lam**2 * avg(u * fp**2)
            )
            s2, coins = np.maximum(s2, floor_s2), np.maximum(coins, floor_coins)
        variance = (1.0 - m / big_n) * s2 / m + coins / big_n
        se = np.sqrt(np.maximum(variance, 0.0))
    se[0] = estimate[0] = np.nan
    return estimate, se


def simulate_mean_labelling(
    pool: LabellingPool,
    width: float,
    rng: np.random.Generator,
    *,
    active: bool = True,
    min_labels: int = 30,
    step: int = 1,
    stop_after: int | None = None,
    floor: bool = True,
) -> dict[str, Any]:
    """One labelling session for the benchmark mean, as the labelling page runs it.

    As ``jurybox label --goal benchmark-mean`` runs it with ``active``; otherwise every item of the
    uniform order is labelled: labels in the session's order until the 95% half-width is at most
    ``width`` (checked every ``step`` labels from ``min_labels`` on, as the page's progress does) or
    ``stop_after`` labels; ``floor``: the variance floored by the jury's own distributions, as
    jurybox estimates it. Returns the labels used, the estimate, its half-width and whether the CI
    covers the pool's true mean. The estimates are `weighted_mean_path`'s (weighted_mean's,
    after each label).
    """
    from .active import OVERSTATED_Z, Design, inclusion_probabilities, overstatement, z_of

    pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
    model = (pool.score, pool.uncertainty * 16.0, pi) if floor else None
    design = Design.draw(pi, rng)
    at = np.flatnonzero(design.chosen)
    items = design.order[at]
    z = z_of(0.95)
    last = len(at) if stop_after is None else min(len(at), stop_after)
    got = items[:last]
    path = (pool.score, pool.score[got], pool.human[got], design.pi[at[:last]], at[:last] + 1)
    estimates, ses = weighted_mean_path(*path, model=model)
    if model is not None:  # as mean_estimates: no floor once the labels show it overstated
        _, bare = weighted_mean_path(*path)
        over = overstatement(
            pool.human[got], pool.score[got], pool.uncertainty[got] * 16.0, 0.0, 4.0
        )
        ses = np.where(over < -OVERSTATED_Z, bare, ses)
    checks = np.arange(min(min_labels, last), last + 1, step)
    n = int(checks[-1]) if checks.size else 0
    if stop_after is None and checks.size:
        met = np.flatnonzero(z * ses[checks - 1] <= width)
        n = int(checks[met[0]]) if met.size else n
    estimate, se = (
        (float(estimates[n - 1]), float(ses[n - 1])) if n else (float("nan"), float("inf"))
    )
    truth = float(pool.human.mean())
    return {
        "labels": n,
        "estimate": estimate,
        "half_width": z * se,
        "covered": abs(estimate - truth) <= z * se,
        "truth": truth,
    }


def overconfident_pool(
    rng: np.random.Generator, n_items: int = 2000, *, wrong: float = 0.03, sure: float = 0.999
) -> LabellingPool:
    """A jury as LLM log-probabilities often make it (#41): sure, right on most, confidently wrong.

    It is ``sure`` of its own score on every item, right on most, confidently wrong on a ``wrong``
    share of them, and wrong the lenient way, as LLM judges tend to be: its scores are 2 to 4, and
    where it is wrong the human's label is two levels lower, so its mean is ``2 * wrong`` too
    high.
    """
    values = LabellingPool.VALUES
    score = rng.integers(2, 5, n_items)
    dist = np.full((n_items, 5), (1.0 - sure) / 4.0)
    dist[np.arange(n_items), score] = sure
    human = score.astype(float)
    off = np.flatnonzero(rng.random(n_items) < wrong)
    human[off] = score[off] - 2
    mean = dist @ values
    var = dist @ values**2 - mean**2
    return LabellingPool(dist, mean, var / 16.0, human)


def sure_errors_pool(
    rng: np.random.Generator, n_items: int = 2000, *, wrong: float = 0.02, sure: float = 0.999
) -> LabellingPool:
    """A jury calibrated on most items and ``sure`` of the top level where the label is 0 (#60).

    The calibrated part is `LabellingPool.draw`'s (within a level on most items, 30% of them
    uncertain); on a ``wrong`` share of the items the jury gives the top level probability
    ``sure`` (the rest spread evenly) and the human's label is the bottom one: rare sure errors
    behind the ordinary one-level noise.
    """
    pool = LabellingPool.draw(rng, n_items)
    values = LabellingPool.VALUES
    dist, human = pool.dist.copy(), pool.human.copy()
    off = np.flatnonzero(rng.random(n_items) < wrong)
    dist[off] = (1.0 - sure) / 4.0
    dist[off, -1] = sure
    human[off] = values[0]
    mean = dist @ values
    var = dist @ values**2 - mean**2
    return LabellingPool(dist, mean, var / 16.0, human)


def sequence_session(
    pool: LabellingPool,
    rng: np.random.Generator,
    *,
    active: bool = True,
    alpha: float = 0.05,
    width: float | None = None,
    grid: int = 400,
    horizon: float | None = None,
    method: str = "betting",
    allowance: bool = True,
) -> dict[str, Any]:
    """One labelling session for the benchmark mean with the page's confidence sequence.

    The sequence is `jurybox.calibration.estimates.active.mean_sequences`: the sequence of
    the terms ``f + xi / pi (Y - f)`` over the visiting order. ``covered``: the pool's true mean
    stays inside the sequence over the whole visiting order (time-uniform, so covered at whatever
    label a labeller stops). With ``width``, also the labels at which the sequence first has
    half-width at most ``width`` (None when it never does; the betting sequence on a grid of
    ``grid`` candidate means). ``method``: ``betting`` (the truth's wealth never reaches
    1/alpha), or ``asymptotic`` (the betting sequence until NORMAL_DEPARTURES labels depart from
    the jury's score, then the asymptotic sequence tuned for ``horizon`` visits, its variance
    floored by the jury's distributions unless the labels show them overstated, and with the
    rare-error allowance for the items the jury is sure of, as mean_sequences shows it;
    ``allowance`` False: without it, as before #60).
    """
    from ..stats.sequences import asymptotic_cs, betting_cs, log_wealth
    from .active import OVERSTATED_Z, Design, inclusion_probabilities, overstatement
    from .rectified import NORMAL_DEPARTURES, rectifier_range, term_variance

    pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
    design = Design.draw(pi, rng)
    f, y = pool.score[design.order], pool.human[design.order]
    d = np.where(design.chosen, (y - f) / design.pi, 0.0)
    low, high = rectifier_range(pool.score, pi, 0.0, 4.0)
    x = (d - low) / (high - low)
    uniform = bool(np.all(pi == 1.0))
    population = pool.score.size if uniform else None
    truth = float(np.mean(pool.human - pool.score))  # the mean rectifier
    bet_horizon = horizon if method == "betting" else None
    wealth = log_wealth(
        x, np.array([(truth - low) / (high - low)]), alpha, population, bet_horizon
    )[0]
    inside = wealth < np.log(1.0 / alpha)
    gate = d.size  # the visit from which the asymptotic sequence is shown
    if method == "asymptotic":
        departed = np.cumsum(design.chosen & (np.abs(y - f) >= 0.5 - 1e-12))
        gate = (
            int(np.argmax(departed >= NORMAL_DEPARTURES))
            if departed[-1] >= NORMAL_DEPARTURES
            else d.size
        )
        labelled = np.flatnonzero(design.chosen)
        over = overstatement(
            y[labelled], f[labelled], pool.uncertainty[design.order][labelled] * 16.0, 0.0, 4.0
        )
        so_far = np.cumsum(design.chosen)  # the floor as the labels so far decide it
        dropped = np.where(so_far > 0, (over < -OVERSTATED_Z)[np.maximum(so_far - 1, 0)], False)
        floor = term_variance(pool.score, pool.uncertainty * 16.0, pool.score, pi)
        a_lo, a_hi = _asymptotic_path(
            d, alpha, horizon or max(30.0, d.size / 10), floor, dropped, asymptotic_cs
        )
        if allowance:
            down, up = sure_path(pool, design.order, design.chosen, alpha)
            a_lo, a_hi = a_lo - down, a_hi + up
        inside[gate:] = (a_lo[gate:] <= truth) & (truth <= a_hi[gate:])
    out: dict[str, Any] = {"covered": bool(np.all(inside)), "truth": float(pool.human.mean())}
    if width is not None:
        labelled = np.flatnonzero(design.chosen)  # the page looks after each label
        lo, hi = betting_cs(x, alpha, population, bet_horizon, grid=grid)
        half = (hi - lo) * (high - low) / 2.0
        if gate < d.size:
            half[gate:] = (a_hi[gate:] - a_lo[gate:]) / 2.0
        met = np.flatnonzero(half[labelled] <= width)
        out["labels"] = int(met[0]) + 1 if met.size else None
    return out


def sure_path(
    pool: LabellingPool, order: np.ndarray, chosen: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """The rare-error allowance (`jurybox.calibration.estimates.rectified.sure_allowance`).

    After each visit of ``order`` (the items labelled where ``chosen``), on the pool's 0-4
    scale.
    """
    from .rectified import SURE_SD, sure_allowance

    var = pool.uncertainty * 16.0
    sure = (var <= SURE_SD**2 + 1e-15)[order] & chosen
    away = np.abs(pool.human[order] - pool.score[order]) >= 0.5 - 1e-12
    return sure_allowance(
        pool.score, var, np.cumsum(sure), np.cumsum(sure & away), (0.0, 4.0), 1.0, alpha
    )


def _asymptotic_path(
    d: np.ndarray,
    alpha: float,
    horizon: float,
    floor: float,
    dropped: np.ndarray,
    asymptotic_cs: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """The asymptotic sequence's bounds on the mean rectifier after each visit.

    Its variance is floored at ``floor`` where the floor is not ``dropped``.
    """
    lo, hi = asymptotic_cs(d, alpha, horizon, floor)
    if dropped.any():
        bare_lo, bare_hi = asymptotic_cs(d, alpha, horizon, 0.0)
        lo, hi = np.where(dropped, bare_lo, lo), np.where(dropped, bare_hi, hi)
    return lo, hi


def fixed_sample_session(
    pool: LabellingPool,
    rng: np.random.Generator,
    counts: Any,
    *,
    active: bool = True,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """One labelling session for the benchmark mean, looked at once after each of ``counts`` labels.

    Each count is fixed in advance. The interval ``jurybox agree --ppi`` shows there
    (`jurybox.calibration.estimates.active.mean_estimates`: the normal interval, with
    Student's quantile and widened on its skewed side, once ``NORMAL_DEPARTURES`` labels depart
    from the jury's score, else the betting interval at that count;
    `jurybox.calibration.estimates.rectified`) beside the normal interval alone (what it
    showed before #52: the normal quantile, symmetric), and the interval of #52 without #60's
    rare-error allowance for the items the jury is sure of. Per count: ``covered`` and
    ``half_width`` of each (``normal_*`` the one before #52, ``today_*`` before #60) and
    ``interval`` (which was shown). The
    estimate is `weighted_mean`'s with the floor and the overstatement test as
    mean_estimates takes them; tests check the whole against mean_estimates on the same labels.
    """
    from .active import (
        OVERSTATED_Z,
        Design,
        inclusion_probabilities,
        overstatement,
        t_of,
        weighted_mean,
        z_of,
    )
    from .rectified import NORMAL_DEPARTURES, Terms, betting_bounds, skew_allowance

    pi = inclusion_probabilities(pool.uncertainty) if active else np.ones(pool.score.size)
    design = Design.draw(pi, rng)
    at = np.flatnonzero(design.chosen)
    truth = float(pool.human.mean())
    out = []
    for n in (int(c) for c in counts if int(c) <= at.size):
        items, visits = design.order[at[:n]], int(at[n - 1]) + 1
        f, y, p = pool.score[items], pool.human[items], design.pi[at[:n]]
        over = overstatement(y, f, pool.uncertainty[items] * 16.0, 0.0, 4.0)[-1]
        model = None if over < -OVERSTATED_Z else (pool.score, pool.uncertainty * 16.0, pi)
        estimate, se, lam, *_ = weighted_mean(pool.score, f, y, p, visits, model=model)
        q = t_of(confidence, n - 1)
        terms = np.zeros(visits)
        terms[:n] = (y - lam * f) / p
        down, up = skew_allowance(terms, q)
        lo, hi = estimate - (q + down) * se, estimate + (q + up) * se
        before = z_of(confidence) * se
        row = {
            "labels": n,
            "normal_covered": abs(estimate - truth) <= before,
            "normal_half_width": before,
            "interval": "normal",
            "today_covered": lo <= truth <= hi,
            "today_half_width": (hi - lo) / 2,
        }
        sure_down, sure_up = sure_path(pool, design.order[at[:n]], np.ones(n, bool), 1 - confidence)
        lo, hi = lo - float(sure_down[-1]), hi + float(sure_up[-1])
        if np.sum(np.abs(y - f) >= 0.5 - 1e-12) < NORMAL_DEPARTURES:
            order = design.order[:visits]
            d = np.where(
                design.chosen[:visits],
                (pool.human[order] - pool.score[order]) / design.pi[:visits],
                0.0,
            )
            lo, hi = betting_bounds(Terms(d, pool.score, pi, 0.0, 4.0), 1.0 - confidence, visits)
            lo, hi = min(lo, estimate), max(hi, estimate)
            row.update(interval="betting", today_covered=lo <= truth <= hi)
            row["today_half_width"] = (hi - lo) / 2
        row.update(covered=lo <= truth <= hi, half_width=(hi - lo) / 2)
        out.append(row)
    return out
