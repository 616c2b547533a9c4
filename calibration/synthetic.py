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
