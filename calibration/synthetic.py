"""Synthetic judging data with known truth, for tests, examples and benchmarks.

Items have a latent quality; humans rate it with noise; each judge rates a *distorted* version
(bias, compression, noise) so that calibration has something real to correct.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def simulate_judging(n_items: int = 200, *, n_humans: int = 2, labelled: int | None = None,
                     judges: Sequence[tuple[str, float, float, float]] = (
                         ("harsh", -1.0, 1.0, 0.5), ("lenient", 0.8, 0.6, 0.7),
                         ("noisy", 0.0, 1.0, 1.5)),
                     scale: Sequence[float] = (0, 1, 2, 3, 4), label_criterion: bool = True,
                     unscored_rate: float = 0.0, provenance: str = "prov-test",
                     seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(judge records, human label rows). ``judges`` = (name, bias, slope, noise sd).

    Criterion ``accuracy`` is on ``scale``; ``supported`` (when ``label_criterion``) is yes/no
    on [0, 1]. The first ``labelled`` items (default: all) get ``n_humans`` human rows each.
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
    judge_bins = {name: np.where(rng.random(n_items) < (0.9 if k == 0 else 0.7), truth_bin,
                                 ~truth_bin)
                  for k, (name, *_rest) in enumerate(judges)}
    for i in range(n_items):
        votes = []
        acc = []
        for name, *_rest in judges:
            failed = rng.random() < unscored_rate
            s, e = judge_scores[name]
            votes.append({"judge": name, "criterion": "accuracy",
                          "score": None if failed else float(s[i]),
                          "label": None, "expected": None if failed else round(float(e[i]), 4),
                          "distribution": None, "error": "timeout" if failed else None})
            if not failed:
                acc.append(float(s[i]))
            if label_criterion:
                yes = bool(judge_bins[name][i])
                votes.append({"judge": name, "criterion": "supported", "score": float(yes),
                              "label": "yes" if yes else "no", "expected": None,
                              "distribution": None, "error": None})
        scores: dict[str, Any] = {"accuracy": float(np.mean(acc)) if len(acc) >= 2 else None}
        if label_criterion:
            bins = [float(judge_bins[n][i]) for n, *_r in judges]
            scores["supported"] = float(np.mean(bins) >= 0.5)
        records.append({"id": f"q{i}", "status": "scored", "rubric": "synthetic",
                        "jury": "synthetic", "provenance": provenance, "scores": scores,
                        "votes": votes, "disagreement": {}})
    humans = []
    n_lab = n_items if labelled is None else labelled
    for i in range(n_lab):
        for r in range(n_humans):
            row: dict[str, Any] = {"id": f"q{i}", "rater": f"h{r}",
                                   "accuracy": float(snap(truth[i] + rng.normal(0, 0.4)))}
            if label_criterion:
                flip = rng.random() < 0.05
                row["supported"] = float(truth_bin[i] != flip)
            humans.append(row)
    return records, humans


class CascadeSimulation:
    """Two-stage cascade with known truth: a cheap, overconfident judge, then a stronger panel.

    Items are easy (share ``easy_share``) or hard. The cheap judge's confidence is
    Beta(``easy_conf``) on easy items and Beta(``hard_conf``) on hard ones, and it is right with
    probability ``confidence ** overconfidence`` (above 1: it is surer than it should be). The
    panel is right with probability ``panel_easy`` / ``panel_hard``, independently. The
    population agreement of the cascade at any threshold is computed exactly (by quadrature), so
    a fitted threshold's true agreement is known.
    """

    def __init__(self, *, easy_share: float = 0.7, easy_conf: tuple[float, float] = (12.0, 1.0),
                 hard_conf: tuple[float, float] = (3.0, 2.0), overconfidence: float = 2.0,
                 panel_easy: float = 0.97, panel_hard: float = 0.85) -> None:
        self.easy_share = easy_share
        self.conf = {"easy": easy_conf, "hard": hard_conf}
        self.overconfidence = overconfidence
        self.panel = {"easy": panel_easy, "hard": panel_hard}

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(confidence, agrees), each 2 stages x ``n`` items."""
        easy = rng.random(n) < self.easy_share
        conf = np.where(easy, rng.beta(*self.conf["easy"], n), rng.beta(*self.conf["hard"], n))
        cheap_right = rng.random(n) < conf ** self.overconfidence
        panel_right = rng.random(n) < np.where(easy, self.panel["easy"], self.panel["hard"])
        return np.vstack([conf, np.ones(n)]), np.vstack([cheap_right, panel_right])

    def agreement(self, threshold: float) -> float:
        """Population agreement of the cascade that trusts the cheap judge at ``threshold``."""
        from scipy import integrate, stats

        total = 0.0
        for kind, share in (("easy", self.easy_share), ("hard", 1.0 - self.easy_share)):
            a, b = self.conf[kind]
            t = min(max(threshold, 0.0), 1.0) if np.isfinite(threshold) else 1.0
            exits = stats.beta.sf(t, a, b) if np.isfinite(threshold) else 0.0
            right_when_exiting = integrate.quad(
                lambda c, a=a, b=b: c ** self.overconfidence * stats.beta.pdf(c, a, b), t, 1.0,
                epsabs=1e-12, epsrel=1e-10)[0] if exits > 0 else 0.0
            total += share * (right_when_exiting + (1.0 - exits) * self.panel[kind])
        return float(total)

    def expected_calls(self, threshold: float, stage_calls: tuple[float, float] = (1, 3)) -> float:
        """Judge calls per item of the cascade (the cheap judge on every item, the panel on the
        items it escalates)."""
        from scipy import stats

        if not np.isfinite(threshold):
            return float(sum(stage_calls))
        exits = sum(share * stats.beta.sf(threshold, *self.conf[kind]) for kind, share in
                    (("easy", self.easy_share), ("hard", 1.0 - self.easy_share)))
        return float(stage_calls[0] + (1.0 - exits) * stage_calls[1])


def simulate_cascade_verdicts(n_items: int = 300, *, provenance: str = "prov-test",
                              sure_share: float = 0.6, panel_accuracy: float = 0.97,
                              seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(verdict records, human label rows) of a jury ``small`` + ``big1`` + ``big2`` on a 1-3
    ``accuracy`` scale, every judge on every item (what a cascade is fitted on).

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
        records.append({
            "id": f"i{i}", "status": "scored", "rubric": "cascade-test", "jury": "cascade",
            "provenance": provenance, "scores": {"accuracy": (guess + 2 * right) / 3},
            "votes": [{"judge": j, "criterion": "accuracy", "score": s, "distribution": d}
                      for j, s, d in votes]})
        humans.append({"id": f"i{i}", "accuracy": y})
    return records, humans
