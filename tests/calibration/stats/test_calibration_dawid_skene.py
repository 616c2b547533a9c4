"""Dawid-Skene EM: recovers known confusion matrices and beats majority vote."""

from __future__ import annotations

import numpy as np
import pytest

from jurybox.calibration import InputDataError, dawid_skene
from jurybox.calibration.stats.dawid_skene import posterior_from_votes


def _simulate(
    n_items: int, accuracies: list[float], k: int = 2, seed: int = 0, missing: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
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
    majority = np.where(labels == 1, 1, 0).sum(0) > np.where(labels == 0, 1, 0).sum(0)
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


def _plain_em(labels: np.ndarray, k: int, steps: int, smoothing: float = 0.01) -> np.ndarray:
    """Posteriors after ``steps`` unaccelerated EM steps from the majority vote (reference)."""
    onehot = (labels[:, :, None] == np.arange(k)).astype(float)
    votes = onehot.sum(axis=0) + 1e-12  # items nobody labelled start uniform
    post = votes / votes.sum(axis=1, keepdims=True)
    for _ in range(steps):
        priors = (post.sum(axis=0) + smoothing) / (post.shape[0] + smoothing * k)
        counts = np.einsum("ik,ril->rkl", post, onehot) + smoothing
        log_conf = np.log(counts / counts.sum(axis=2, keepdims=True))
        log_joint = np.log(priors) + np.einsum("ril,rkl->ik", onehot, log_conf)
        post = np.exp(log_joint - log_joint.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
    return post


@pytest.mark.parametrize("k, seed", [(2, 1), (3, 5)])
def test_three_raters_converge_to_the_fixed_point(k: int, seed: int) -> None:
    # Three raters, a few hundred items: plain EM needs 1,000-4,500 steps here (the old
    # default of 200 stopped with posteriors 0.02-0.06 away). The default fit must converge
    # and match a 6,000-step plain EM run.
    labels, _ = _simulate(300, [0.8, 0.7, 0.6], k=k, seed=seed, missing=0.1)
    fit = dawid_skene(labels, k)
    assert fit.converged
    assert fit.n_iter < 1000
    assert fit.posteriors == pytest.approx(_plain_em(labels, k, 6_000), abs=1e-6)


def test_running_out_of_steps_is_reported() -> None:
    labels, _ = _simulate(300, [0.8, 0.7, 0.6], k=2, seed=1, missing=0.1)
    fit = dawid_skene(labels, 2, max_iter=5)
    assert not fit.converged and fit.n_iter == 5
