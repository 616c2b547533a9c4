"""Dawid & Skene (1979) EM for categorical labels from several raters, vectorised with einsum.

Each rater r has a confusion matrix pi[r, k, l] = P(rater says l | true class k); the true
classes have priors p_k. EM alternates posteriors over true classes (E) and confusion/prior
estimates (M). Items whose truth is known (human labels) can be clamped, which turns the fit
into a semi-supervised one: with every item clamped it is the supervised estimate of each
judge's confusion matrix against humans.

Plain EM is slow here: with three raters it can need thousands of steps (the likelihood is
nearly flat along directions that trade rater accuracy against class priors), and stopping on
a small change in log-likelihood leaves posteriors far from the fixed point. So the EM map is
accelerated with SQUAREM (Varadhan & Roland 2008, scheme S3: two EM steps, a squared
extrapolation, one stabilising EM step; the plain steps are kept whenever the extrapolation
leaves the simplex or lowers the objective), and convergence is judged on the parameters (the
largest change of any prior or confusion entry in one EM step). A fit that runs out of steps
reports ``converged=False``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputDataError


@dataclass(frozen=True)
class DawidSkeneResult:
    """A Dawid-Skene fit: posteriors, per-rater confusion matrices, class priors, how the EM went.

    Attributes:
        posteriors: Items x classes: each item's posterior over the true classes.
        confusion: Raters x true class x given class: P(rater says l | true class k).
        priors: The class priors, one per class.
        n_iter: EM steps taken (a SQUAREM cycle takes three).
        converged: False when ``max_iter`` was reached while parameters still moved by more than
            ``tol``.
        log_likelihood: The marginal log-likelihood of all labels under the fit.
    """

    posteriors: np.ndarray  # items x classes
    confusion: np.ndarray  # raters x true class x given class
    priors: np.ndarray  # classes
    n_iter: int  # EM steps taken (a SQUAREM cycle takes three)
    converged: bool  # False: max_iter reached while parameters still moved by > tol
    log_likelihood: float

    @property
    def labels(self) -> np.ndarray:
        """The most probable class of each item."""
        return self.posteriors.argmax(axis=1)

    def accuracy(self) -> np.ndarray:
        """Per-rater probability of giving the true class (prior-weighted confusion diagonal).

        Returns:
            One probability per rater.
        """
        return np.einsum("k,rkk->r", self.priors, self.confusion)


def dawid_skene(
    labels: Any,
    n_classes: int,
    *,
    truth: Any = None,
    max_iter: int = 5000,
    tol: float = 1e-10,
    smoothing: float = 0.01,
) -> DawidSkeneResult:
    """Fit Dawid-Skene to ``labels`` (raters x items integer codes 0..K-1, -1 for missing).

    The fit has converged when one EM step moves no prior or confusion entry by more than
    ``tol``; reaching ``max_iter`` is reported as ``converged=False``, never silently.

    Args:
        labels: Raters x items class codes 0..K-1, -1 (or NaN) for missing.
        n_classes: K, the number of classes.
        truth: Items x K rows of class probabilities, NaN rows for unknown: clamps the posteriors
            of items with known truth.
        max_iter: The cap on EM steps.
        tol: The largest change of a prior or confusion entry in one EM step that counts as
            converged.
        smoothing: A Dirichlet pseudo-count that keeps confusion rows for rarely seen classes away
            from 0/1.

    Returns:
        The fit.

    Raises:
        InputDataError: ``labels`` are not a raters x items matrix of integer codes in
            0..K-1 (or -1), ``max_iter`` is below 1, or ``truth`` is not items x K.
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
    if max_iter < 1:
        raise InputDataError(f"max_iter must be at least 1; got {max_iter}")
    n_items = codes.shape[1]
    onehot = (codes[:, :, None] == np.arange(n_classes)[None, None, :]).astype(float)

    known = np.zeros(n_items, dtype=bool)
    clamp = None
    if truth is not None:
        clamp = np.asarray(truth, dtype=float)
        if clamp.shape != (n_items, n_classes):
            raise InputDataError(
                f"truth must be items x classes {(n_items, n_classes)}; got {clamp.shape}"
            )
        known = ~np.isnan(clamp).any(axis=1)
        clamp = np.where(known[:, None], clamp, 0.0)
        sums = clamp.sum(axis=1, keepdims=True)
        clamp = np.divide(clamp, sums, out=np.zeros_like(clamp), where=sums > 0)
    em = _EM(onehot, clamp, known, smoothing)

    # Initialise with (soft) majority vote; items nobody labelled start at uniform.
    votes = onehot.sum(axis=0)
    totals = votes.sum(axis=1, keepdims=True)
    post = np.where(totals > 0, votes / np.where(totals > 0, totals, 1), 1.0 / n_classes)
    if clamp is not None:
        post[known] = clamp[known]
    theta = em.m_step(post)

    steps, converged = 0, False
    step_max = 1.0  # SQUAREM's adaptive cap on the extrapolation length
    objective = em.objective(theta)
    while steps < max_iter:  # SQUAREM cycles; each EM step is vectorised over items
        theta1 = em.step(theta)
        steps += 1
        if _moved(theta1, theta) <= tol or steps == max_iter:
            converged, theta = _moved(theta1, theta) <= tol, theta1
            break
        theta2 = em.step(theta1)
        steps += 1
        if _moved(theta2, theta1) <= tol or steps == max_iter:
            converged, theta = _moved(theta2, theta1) <= tol, theta2
            break
        jump, length = _extrapolate(theta, theta1, theta2, step_max)
        accepted = length <= 1.0  # the plain two-step point: EM never lowers the objective
        if jump is not None:
            jump = em.step(jump)  # the stabilising EM step
            steps += 1
            jump_objective = em.objective(jump)
            accepted = jump_objective >= objective - _OBJECTIVE_SLACK
        if jump is not None and accepted:
            theta, objective = jump, jump_objective
        else:  # overshot (or left the simplex): keep the two plain EM steps
            theta, objective = theta2, em.objective(theta2)
        if length >= step_max:
            step_max = step_max * _STEP_FACTOR if accepted else max(1.0, step_max / _STEP_FACTOR)
    post, log_lik = em.e_step(theta)
    priors, confusion = theta
    return DawidSkeneResult(post, confusion, priors, steps, converged, log_lik)


Params = tuple[np.ndarray, np.ndarray]  # (priors, confusion)

# SQUAREM's defaults (Varadhan & Roland 2008; R package SQUAREM): the step cap grows or shrinks
# by this factor, and a cycle may lower the objective by this much (log-likelihood units) before
# it is undone, which lets the extrapolation cross flat ridges.
_STEP_FACTOR = 4.0
_OBJECTIVE_SLACK = 1.0


class _EM:
    """The E and M steps for fixed data; the objective is the (Dirichlet-smoothed) posterior."""

    def __init__(
        self, onehot: np.ndarray, clamp: np.ndarray | None, known: np.ndarray, smoothing: float
    ) -> None:
        self.onehot, self.clamp, self.known, self.smoothing = onehot, clamp, known, smoothing

    def m_step(self, post: np.ndarray) -> Params:
        n_items, k = post.shape
        s = self.smoothing
        priors = (post.sum(axis=0) + s) / (n_items + s * k)
        counts = np.einsum("ik,ril->rkl", post, self.onehot) + s
        return priors, counts / counts.sum(axis=2, keepdims=True)

    def e_step(self, theta: Params) -> tuple[np.ndarray, float]:
        """Posteriors over true classes, and the log-likelihood of all labels under ``theta``.

        The posteriors are clamped where truth is known; the log-likelihood is the marginal one.
        """
        post, _, norm = self._joint(theta)
        return post, float(norm.sum())

    def _joint(self, theta: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        priors, confusion = theta
        with np.errstate(divide="ignore"):  # smoothing=0 allows exact zeros: log 0 = -inf
            log_joint = np.log(priors)[None, :] + np.einsum(
                "ril,rkl->ik", self.onehot, np.log(confusion)
            )
        top = log_joint.max(axis=1, keepdims=True)
        norm = top + np.log(np.exp(log_joint - top).sum(axis=1, keepdims=True))
        post = np.exp(log_joint - norm)
        if self.clamp is not None:
            post[self.known] = self.clamp[self.known]
        return post, log_joint, norm

    def step(self, theta: Params) -> Params:
        """One EM step from ``theta``."""
        return self.m_step(self._joint(theta)[0])

    def objective(self, theta: Params) -> float:
        """What EM climbs: the log-likelihood of the labels, plus the smoothing's log-prior.

        The log-likelihood takes the known classes of clamped items; the log-prior is the Dirichlet
        smoothing's.
        """
        _, log_joint, norm = self._joint(theta)
        value = float(norm[~self.known].sum())
        if self.clamp is not None and self.known.any():
            w = self.clamp[self.known]
            with np.errstate(invalid="ignore"):  # 0 * log 0 where smoothing=0: counts as 0
                value += float(np.sum(np.where(w > 0, w * log_joint[self.known], 0.0)))
        if self.smoothing > 0:
            value += self.smoothing * float(np.log(theta[0]).sum() + np.log(theta[1]).sum())
        return value


def _moved(a: Params, b: Params) -> float:
    return float(max(np.abs(a[0] - b[0]).max(), np.abs(a[1] - b[1]).max()))


def _extrapolate(
    theta: Params, theta1: Params, theta2: Params, step_max: float
) -> tuple[Params | None, float]:
    """The SQUAREM S3 point theta + 2 a r + a^2 v (a = |r|/|v| capped at ``step_max``), and a.

    a = 1 gives the plain two-step point theta2; the step is halved towards it until every
    prior and confusion entry the plain steps keep positive stays positive (their logs are
    taken). None when no longer step than the plain one fits.
    """
    x0, x1, x2 = (np.concatenate([t[0].ravel(), t[1].ravel()]) for t in (theta, theta1, theta2))
    r, v = x1 - x0, x2 - 2.0 * x1 + x0
    v_norm = float(np.linalg.norm(v))
    if v_norm == 0:
        return None, 1.0
    length = alpha = max(1.0, min(step_max, float(np.linalg.norm(r)) / v_norm))
    while alpha > 1.0 + 1e-3:
        jump = x0 + 2.0 * alpha * r + alpha * alpha * v
        if np.all(jump >= 0) and np.all(jump[x2 > 0] > 0):
            k = theta[0].size
            priors, confusion = jump[:k], jump[k:].reshape(theta[1].shape)
            # r and v sum to 0 over each distribution; renormalise away the rounding.
            return (
                priors / priors.sum(),
                confusion / confusion.sum(axis=-1, keepdims=True),
            ), length
        alpha = (alpha + 1.0) / 2.0
    return None, length


def posterior_from_votes(
    confusion: np.ndarray, priors: np.ndarray, codes: np.ndarray
) -> np.ndarray:
    """Posterior over true classes for one item given each rater's code (-1 = no vote)."""
    log_p = np.log(priors).copy()
    voted = codes >= 0
    if voted.any():
        log_p += np.log(confusion[np.nonzero(voted)[0], :, codes[voted]]).sum(axis=0)
    log_p -= log_p.max()
    p = np.exp(log_p)
    return p / p.sum()
