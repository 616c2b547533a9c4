"""Dawid & Skene (1979) EM for categorical labels from several raters, vectorised with einsum.

Each rater r has a confusion matrix pi[r, k, l] = P(rater says l | true class k); the true
classes have priors p_k. EM alternates posteriors over true classes (E) and confusion/prior
estimates (M). Items whose truth is known (human labels) can be clamped, which turns the fit
into a semi-supervised one: with every item clamped it is the supervised estimate of each
judge's confusion matrix against humans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InputDataError


@dataclass(frozen=True)
class DawidSkeneResult:
    posteriors: np.ndarray   # items x classes
    confusion: np.ndarray    # raters x true class x given class
    priors: np.ndarray       # classes
    n_iter: int
    converged: bool
    log_likelihood: float

    @property
    def labels(self) -> np.ndarray:
        return self.posteriors.argmax(axis=1)

    def accuracy(self) -> np.ndarray:
        """Per-rater probability of giving the true class (prior-weighted confusion diagonal)."""
        return np.einsum("k,rkk->r", self.priors, self.confusion)


def dawid_skene(labels: Any, n_classes: int, *, truth: Any = None, max_iter: int = 200,
                tol: float = 1e-8, smoothing: float = 0.01) -> DawidSkeneResult:
    """Fit Dawid-Skene to ``labels`` (raters x items integer codes 0..K-1, -1 for missing).

    ``truth`` (items x K rows of class probabilities, NaN rows for unknown) clamps the
    posteriors of items with known truth. ``smoothing`` is a Dirichlet pseudo-count that keeps
    confusion rows for rarely seen classes away from 0/1.
    """
    codes = np.asarray(labels)
    if codes.ndim != 2:
        raise InputDataError(f"labels must be raters x items; got shape {codes.shape}")
    if codes.dtype.kind == "f":
        if np.any(np.isnan(codes)):
            codes = np.where(np.isnan(codes), -1, codes)
        if not np.all(codes == np.round(codes)):
            raise InputDataError("labels must be integer class codes (0..K-1, -1 missing)")
    codes = codes.astype(np.int64)
    if ((codes < -1) | (codes >= n_classes)).any():
        raise InputDataError(f"labels must lie in 0..{n_classes - 1} (or -1 for missing)")
    n_raters, n_items = codes.shape
    onehot = (codes[:, :, None] == np.arange(n_classes)[None, None, :]).astype(float)

    known = np.zeros(n_items, dtype=bool)
    clamp = None
    if truth is not None:
        clamp = np.asarray(truth, dtype=float)
        if clamp.shape != (n_items, n_classes):
            raise InputDataError(f"truth must be items x classes {(n_items, n_classes)}; "
                                 f"got {clamp.shape}")
        known = ~np.isnan(clamp).any(axis=1)
        clamp = np.where(known[:, None], clamp, 0.0)
        sums = clamp.sum(axis=1, keepdims=True)
        clamp = np.divide(clamp, sums, out=np.zeros_like(clamp), where=sums > 0)

    # Initialise with (soft) majority vote; items nobody labelled start at uniform.
    votes = onehot.sum(axis=0)
    totals = votes.sum(axis=1, keepdims=True)
    post = np.where(totals > 0, votes / np.where(totals > 0, totals, 1), 1.0 / n_classes)
    if clamp is not None:
        post[known] = clamp[known]

    log_lik = -np.inf
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - `it` is reported as n_iter  # EM iterations; each step is vectorised over items
        priors = (post.sum(axis=0) + smoothing) / (n_items + smoothing * n_classes)
        counts = np.einsum("ik,ril->rkl", post, onehot) + smoothing
        confusion = counts / counts.sum(axis=2, keepdims=True)
        log_joint = np.log(priors)[None, :] + np.einsum("ril,rkl->ik", onehot, np.log(confusion))
        top = log_joint.max(axis=1, keepdims=True)
        norm = top + np.log(np.exp(log_joint - top).sum(axis=1, keepdims=True))
        post = np.exp(log_joint - norm)
        if clamp is not None:
            post[known] = clamp[known]
        new_ll = float(norm.sum())
        if abs(new_ll - log_lik) <= tol * max(1.0, abs(new_ll)):
            log_lik = new_ll
            converged = True
            break
        log_lik = new_ll
    return DawidSkeneResult(post, confusion, priors, it, converged, log_lik)


def posterior_from_votes(confusion: np.ndarray, priors: np.ndarray,
                         codes: np.ndarray) -> np.ndarray:
    """Posterior over true classes for one item given each rater's code (-1 = no vote)."""
    log_p = np.log(priors).copy()
    voted = codes >= 0
    if voted.any():
        log_p += np.log(confusion[np.nonzero(voted)[0], :, codes[voted]]).sum(axis=0)
    log_p -= log_p.max()
    p = np.exp(log_p)
    return p / p.sum()
