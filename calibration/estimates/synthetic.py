"""Synthetic judging data with known truth, for tests, examples and benchmarks.

Items have a latent quality; humans rate it with noise; each judge rates a *distorted* version
(bias, compression, noise) so that calibration has something real to correct.

The labelling sessions' simulations (`LabellingPool`, `simulate_mean_labelling`, ...) are
`jurybox.calibration.estimates.synthetic_labelling`'s, re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .synthetic_labelling import (
    LabellingPool,
    fixed_sample_session,
    overconfident_pool,
    sequence_session,
    simulate_mean_labelling,
    sure_errors_pool,
    sure_path,
    weighted_mean_path,
)

__all__ = [
    "CascadeSimulation",
    "ItemKind",
    "LabellingPool",
    "fixed_sample_session",
    "overconfident_pool",
    "sequence_session",
    "simulate_cascade_verdicts",
    "simulate_judging",
    "simulate_mean_labelling",
    "sure_errors_pool",
    "sure_path",
    "weighted_mean_path",
]


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
