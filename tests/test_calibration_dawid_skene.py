"""Dawid-Skene EM: recovers known confusion matrices and beats majority vote."""

from __future__ import annotations

import numpy as np
import pytest
from jurybox.calibration import InputDataError, dawid_skene
from jurybox.calibration.dawid_skene import posterior_from_votes


def _simulate(n_items: int, accuracies: list[float], k: int = 2, seed: int = 0,
              missing: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, size=n_items)
    labels = np.empty((len(accuracies), n_items), dtype=int)
    for r, acc in enumerate(accuracies):
        correct = rng.random(n_items) < acc
        wrong = (truth + rng.integers(1, k, size=n_items)) % k
        labels[r] = np.where(correct, truth, wrong)
    labels[rng.random(labels.shape) < missing] = -1
    return labels, truth


def test_recovers_rater_accuracies_unsupervised() -> None:
    accuracies = [0.95, 0.8, 0.65, 0.6, 0.55]
    labels, truth = _simulate(3000, accuracies, seed=1, missing=0.1)
    fit = dawid_skene(labels, 2)
    assert fit.converged
    assert fit.accuracy() == pytest.approx(accuracies, abs=0.04)
    majority = (np.where(labels == 1, 1, 0).sum(0) > np.where(labels == 0, 1, 0).sum(0))
    ds_acc = np.mean(fit.labels == truth)
    assert ds_acc > np.mean(majority == truth) + 0.02  # weighting good raters beats voting


def test_clamped_truth_gives_supervised_confusions() -> None:
    labels, truth = _simulate(400, [0.9, 0.6], k=3, seed=2)
    onehot = np.eye(3)[truth]
    fit = dawid_skene(labels, 3, truth=onehot, smoothing=0.0)
    for r in range(2):
        for c in range(3):
            rows = truth == c
            expected = np.bincount(labels[r, rows], minlength=3) / rows.sum()
            assert fit.confusion[r, c] == pytest.approx(expected, abs=1e-12)
    assert np.allclose(fit.posteriors, onehot)


def test_posterior_from_votes_matches_bayes_by_hand() -> None:
    conf = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.6, 0.4], [0.3, 0.7]]])
    priors = np.array([0.3, 0.7])
    post = posterior_from_votes(conf, priors, np.array([0, 1]))
    unnorm = priors * np.array([0.9 * 0.4, 0.2 * 0.7])
    assert post == pytest.approx(unnorm / unnorm.sum())
    assert posterior_from_votes(conf, priors, np.array([-1, -1])) == pytest.approx(priors)


def test_bad_codes_rejected() -> None:
    with pytest.raises(InputDataError, match="0..1"):
        dawid_skene(np.array([[0, 2]]), 2)
    with pytest.raises(InputDataError, match="raters x items"):
        dawid_skene(np.array([0, 1]), 2)
