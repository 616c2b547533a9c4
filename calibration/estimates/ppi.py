"""Prediction-powered estimate of a benchmark mean (PPI++, Angelopoulos, Duchi & Zrnic 2023).

Many items have a judge score f(X); a small random subset also has a human label Y. The
estimate  theta = lam * mean(f(X_unlabelled)) + mean(Y - lam * f(X_labelled))  is unbiased for
E[Y] for any lam, whatever the judge's bias: the labelled term measures and removes it. PPI++
picks the lam that minimises the variance (clipped to [0, 1] as in ``ppi-python``):

    lam = Cov(Y, f) / ((1 + n/N) * Var(f))

and the CLT interval uses  sigma^2 = lam^2 Var(f_unlabelled)/N + Var(Y - lam f_labelled)/n.
lam = 0 is the classical human-only interval; lam = 1 is plain PPI.

The labelled subset must be a random sample of the items (the design assumption of PPI).

Given the label scale's ends (``bounds``) and step, the interval follows the rule of
`jurybox.calibration.estimates.rectified`: the normal interval once at least
``NORMAL_DEPARTURES`` labelled items depart from the jury's score by half a step or more;
before, the betting interval of the rectifiers ``Y - f`` at the labels' count (finite-sample,
the labelled items a simple random sample of the pool of labelled and unlabelled items), which
the normal approximation cannot replace while the labels have seen few of the jury's errors;
after, the normal interval widened on the rectifiers' skewed side
(`jurybox.calibration.estimates.rectified.skew_allowance`). Where the labelled terms
``Y - lam f`` all take one value (every label the same, #60: PPI++'s lam is then 0 and the
variance 0), the normal interval is at least the bounded score interval of that many terms on
their range (`jurybox.calibration.estimates.rectified.wilson_bounds`): no label set makes the
interval narrower than n bounded labels support; without ``bounds`` such labels give no
interval at all (infinite ends, a note saying to give them). (Without the jury's distributions this
function cannot tell the items it is sure of: the allowance for their rare errors is
`jurybox.calibration.estimates.active.mean_estimates`', #60.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from ..errors import InputDataError
from ..stats._arrays import as_float_vector
from .rectified import (
    NORMAL_DEPARTURES,
    Terms,
    betting_bounds,
    no_spread,
    skew_allowance,
    step_of,
    wilson_bounds,
)


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered mean with its CI, next to the human-only and judge-only means.

    Attributes:
        estimate: The PPI++ estimate of the mean human label.
        ci: Its confidence interval ``(low, high)``.
        lam: The lambda used (0: human-only; 1: plain PPI).
        n_labeled: Labelled items (with a human label and a judge score).
        n_unlabeled: Unlabelled items (a judge score only).
        confidence: The interval's coverage.
        classical_estimate: The human-only mean of the labelled items.
        classical_ci: The human-only (classical) normal interval.
        judge_only_mean: The judges' mean over every item, labelled and unlabelled.
        notes: What the caller should know (items excluded, the interval's kind, few labels).
        interval: ``normal`` (the CLT interval) or ``betting`` (module text).
    """

    estimate: float
    ci: tuple[float, float]
    lam: float
    n_labeled: int
    n_unlabeled: int
    confidence: float
    classical_estimate: float
    classical_ci: tuple[float, float]
    judge_only_mean: float
    notes: tuple[str, ...] = ()
    #: ``normal`` (the CLT interval) or ``betting`` (module text).
    interval: str = "normal"

    @property
    def width_ratio(self) -> float:
        """CI width relative to the human-only CI (< 1 means the judge scores helped)."""
        classical = self.classical_ci[1] - self.classical_ci[0]
        return (self.ci[1] - self.ci[0]) / classical if classical > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        """The estimate as plain data, with the CI width against the human-only CI.

        That width ratio is None when undefined.

        Returns:
            A JSON-ready dict of the fields (``lam`` as ``lambda``) and ``ci_width_vs_classical``.
        """
        ratio = self.width_ratio
        return {
            "estimate": self.estimate,
            "ci": list(self.ci),
            "lambda": self.lam,
            "confidence": self.confidence,
            "n_labeled": self.n_labeled,
            "n_unlabeled": self.n_unlabeled,
            "classical_estimate": self.classical_estimate,
            "classical_ci": list(self.classical_ci),
            "judge_only_mean": self.judge_only_mean,
            "ci_width_vs_classical": None if math.isnan(ratio) else ratio,
            "interval": self.interval,
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        c = round(self.confidence * 100)
        return (
            f"PPI++ mean {self.estimate:.4f} [{self.ci[0]:.4f}, {self.ci[1]:.4f}] ({c}% CI, "
            f"lambda={self.lam:.3f}, n={self.n_labeled} labelled, N={self.n_unlabeled} "
            f"unlabelled); human-only {self.classical_estimate:.4f} "
            f"[{self.classical_ci[0]:.4f}, {self.classical_ci[1]:.4f}]; judge-only "
            f"{self.judge_only_mean:.4f}"
        )


def ppi_lambda(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray) -> float:
    """Power-tuning lam = Cov(Y, f) / ((1 + n/N) Var(f)), clipped to [0, 1]."""
    n, big_n = y.size, yhat_unlabeled.size
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    # Var(f) from all predictions, labelled and unlabelled (ppi-python does the same).
    var_f = float(np.var(np.concatenate([yhat, yhat_unlabeled]), ddof=1))
    if var_f <= 0:
        return 0.0  # constant judge scores carry no information: fall back to human-only
    return float(np.clip(cov / ((1.0 + n / big_n) * var_f), 0.0, 1.0))


def ppi_mean(
    y: Any,
    yhat: Any,
    yhat_unlabeled: Any,
    *,
    confidence: float = 0.95,
    lam: float | None = None,
    bounds: tuple[float, float] | None = None,
    step: float = 1.0,
) -> PPIEstimate:
    """PPI++ mean of the human label from labelled pairs (y, yhat) and unlabelled judge scores.

    Inputs must be complete: drop unscored items explicitly (and report them) before calling.

    Args:
        y: The human labels of the labelled items.
        yhat: The judge's scores of the same items, aligned with ``y``.
        yhat_unlabeled: The judge's scores of the unlabelled items.
        confidence: The interval's coverage, in (0, 1).
        lam: ``None`` tunes lambda (PPI++); 1.0 gives plain PPI, 0.0 the classical interval.
        bounds: The least and greatest value a label or score can take; with ``step``, the
            interval then follows the small-sample rule (module text); without them it is the
            normal interval.
        step: The scale's step (what departing from the judge's score by half a step means).

    Returns:
        The estimate, its interval, and the human-only and judge-only means beside it.

    Raises:
        InputDataError: ``y`` and ``yhat`` differ in length, a value is missing or not a number,
            fewer than 2 labelled or no unlabelled items, ``confidence`` outside (0, 1), or a
            label or score outside ``bounds``.
    """
    y_ = as_float_vector(y, "y")
    f = as_float_vector(yhat, "yhat")
    fu = as_float_vector(yhat_unlabeled, "yhat_unlabeled")
    if y_.size != f.size:
        raise InputDataError(f"y and yhat differ in length ({y_.size} vs {f.size})")
    for what, arr in (("y", y_), ("yhat", f), ("yhat_unlabeled", fu)):
        if np.isnan(arr).any():
            raise InputDataError(
                f"{what} has {int(np.isnan(arr).sum())} missing values; "
                "exclude unscored/unlabelled items explicitly first"
            )
    if y_.size < 2:
        raise InputDataError(f"need at least 2 labelled items; got {y_.size}")
    if fu.size < 1:
        raise InputDataError("need at least 1 unlabelled item")
    if not 0 < confidence < 1:
        raise InputDataError(f"confidence must be in (0, 1); got {confidence}")
    n, big_n = y_.size, fu.size
    lam_ = ppi_lambda(y_, f, fu) if lam is None else float(lam)
    estimate = lam_ * float(fu.mean()) + float(np.mean(y_ - lam_ * f))
    # ddof=0 variances, as in the ppi-python reference implementation.
    sigma = math.sqrt(lam_**2 * float(np.var(fu)) / big_n + float(np.var(y_ - lam_ * f)) / n)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    classical = float(y_.mean())
    classical_sigma = math.sqrt(float(np.var(y_)) / n)
    notes = []
    ci, kind = (estimate - z * sigma, estimate + z * sigma), "normal"
    departed = int(np.sum(np.abs(y_ - f) >= step / 2 - 1e-12))
    if bounds is not None and departed < NORMAL_DEPARTURES:
        low, high = (float(b) for b in bounds)
        f_pool = np.concatenate([f, fu])
        if any(np.any((v < low) | (v > high)) for v in (y_, f_pool)):
            raise InputDataError(f"labels and scores must lie within {[low, high]}")
        lo, hi = betting_bounds(
            Terms(y_ - f, f_pool, np.ones(f_pool.size), low, high), 1.0 - confidence, n
        )
        ci, kind = (min(lo, estimate), max(hi, estimate)), "betting"
        notes.append(
            f"{departed} of {n} labelled items depart from the judge's score: fewer "
            f"than {NORMAL_DEPARTURES}, so the interval is the betting interval at this "
            "count (valid for any judge), not the normal one"
        )
    elif bounds is not None:  # the normal interval, widened on the rectifiers' skewed side
        down, up = skew_allowance(y_ - lam_ * f, z)
        ci = (estimate - (z + down) * sigma, estimate + (z + up) * sigma)
    elif bounds is None and n < 30:
        notes.append(f"only {n} labelled items: the normal-approximation CI may undercover")
    flat = kind == "normal" and no_spread(y_ - lam_ * f)
    if flat and bounds is None:
        # Nothing says how far a label could lie from the ones seen: the data's own range
        # would make a point of it (#60).
        ci = (-math.inf, math.inf)
        notes.append(
            "the labelled terms take one value (their variance estimates nothing) and no "
            "bounds were given: no interval can be had from these labels; give bounds= (the "
            "scale's least and greatest value) for the bounded score interval of that many labels"
        )
    elif flat and bounds is not None:
        ci = _one_value_floor(ci, y_, f, fu, lam_, z, bounds)
        notes.append(
            "the labelled terms take one value (their variance estimates nothing): the interval "
            "is at least the bounded score interval of that many labels"
        )
    return PPIEstimate(
        estimate=estimate,
        ci=ci,
        lam=lam_,
        n_labeled=n,
        n_unlabeled=big_n,
        confidence=confidence,
        classical_estimate=classical,
        classical_ci=(classical - z * classical_sigma, classical + z * classical_sigma),
        judge_only_mean=float(np.concatenate([f, fu]).mean()),
        notes=tuple(notes),
        interval=kind,
    )


def _one_value_floor(
    ci: tuple[float, float],
    y: np.ndarray,
    f: np.ndarray,
    fu: np.ndarray,
    lam: float,
    z: float,
    bounds: tuple[float, float],
) -> tuple[float, float]:
    """``ci`` widened to the bounded score interval of the terms ``y - lam f`` (module text).

    Their range is the labels' ``bounds`` less ``lam`` times the scores'; the interval is
    shifted by ``lam`` times the unlabelled scores' mean, as the estimate is.
    """
    low, high = bounds
    f_all = np.concatenate([f, fu])
    t_low, t_high = low - lam * float(f_all.max()), high - lam * float(f_all.min())
    if t_high <= t_low:
        return ci
    lo, hi = wilson_bounds(float(np.mean(y - lam * f)), y.size, t_low, t_high, z)
    shift = lam * float(fu.mean())
    return min(ci[0], float(lo) + shift), max(ci[1], float(hi) + shift)


def prediction_powered_mean(
    human_labels: Any,
    judge_output: Any,
    criterion: str,
    *,
    calibration: Any = None,
    scales: Any = None,
    confidence: float = 0.95,
    force: bool = False,
) -> PPIEstimate:
    """PPI++ estimate of a criterion's benchmark mean from a judge file and human labels.

    Items the jury left unscored are excluded and counted in ``notes`` (no zero-filling); humans'
    per-item mean is the label.

    Args:
        human_labels: Human labels, or the path of a labels file.
        judge_output: Judge output, or the path of a ``jurybox judge`` output file.
        criterion: The criterion whose mean is estimated.
        calibration: A `CalibrationMap`: the judge-side value is then the calibrated score
            instead of the jury's aggregated score.
        scales: A rubric or {criterion: scale} to validate the human labels with.
        confidence: The interval's coverage, in (0, 1).
        force: Apply ``calibration`` even to records of another configuration.

    Returns:
        The estimate, with the excluded items counted in its ``notes``.

    Raises:
        InputDataError: No human labels for ``criterion``, a file cannot be read, or the
            estimate's own input errors (`ppi_mean`).
        JoinError: Labels and verdicts have no id or criterion in common.
        ProvenanceMismatchError: ``calibration`` was fitted for another configuration and
            ``force`` is not set.
    """
    from ..data.joined import join
    from ..data.verdicts import JudgeOutput, load_judge_output

    judged = (
        judge_output if isinstance(judge_output, JudgeOutput) else load_judge_output(judge_output)
    )
    joined = join(human_labels, judged, scales=scales, criteria=[criterion])
    if criterion not in joined.criteria:
        raise InputDataError(f"no human labels for criterion {criterion!r}")
    if calibration is not None:
        recs = [calibration.apply_to_record(r, force=force) for r in judged.records]
        system = np.array(
            [
                np.nan if r["calibrated"].get(criterion) is None else r["calibrated"][criterion]
                for r in recs
            ],
            dtype=float,
        )
    else:
        system = judged.jury_values(criterion)
    data = joined.criteria[criterion]
    human = dict(zip(data.ids, data.human_mean))
    ids = judged.ids
    labelled = np.array([i in human and not np.isnan(human[i]) for i in ids])
    y = np.array([human[i] for i, lab in zip(ids, labelled) if lab])
    scored = ~np.isnan(system)
    notes = []
    lab_unscored = int((labelled & ~scored).sum())
    unl_unscored = int((~labelled & ~scored).sum())
    if lab_unscored:
        notes.append(f"{lab_unscored} labelled items excluded: the jury left them unscored")
    if unl_unscored:
        notes.append(f"{unl_unscored} unlabelled items excluded: the jury left them unscored")
    keep_lab = scored[labelled]
    scale = data.scale
    est = ppi_mean(
        y[keep_lab],
        system[labelled & scored],
        system[~labelled & scored],
        confidence=confidence,
        bounds=(float(scale.low), float(scale.high)),
        step=step_of(scale),
    )
    return PPIEstimate(**{**est.__dict__, "notes": est.notes + tuple(notes)})
