"""Length-controlled scores: a jury's score with the part explained by the answer's length removed.

In the spirit of AlpacaEval's length-controlled win rate (Dubois et al. 2024).

With ``x = log(1 + length)``, a criterion's jury score ``s`` and the human mean ``h``, the
judges' length bias is the least-squares slope ``b`` of the error ``s - h`` on ``x`` (what the
humans do not reward about length); the controlled score is ``s - b (x - c)``: the score the
answer would get at the length ``c`` (the median length of the reference answers when the items
have them, so systems compared on the same items are controlled to the same length; else the
run's own mean, which keeps the mean). Without human labels the
slope is that of ``s`` itself on ``x``, which assumes quality does not grow with length: said so
in the result (``fitted_on``).

Whether it helps is measured, not assumed: with human labels, k-fold cross-validation fits the
slope on the other folds and compares each held-out item's absolute error against the humans,
raw and controlled; the mean reduction has a percentile bootstrap CI over items, and the
correction is said to raise agreement only when that CI lies above zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputDataError

MIN_ITEMS = 10


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    xc = x - x.mean()
    denom = float(xc @ xc)
    return float(xc @ (y - y.mean()) / denom) if denom > 0 else 0.0


@dataclass(frozen=True)
class LengthControl:
    """A criterion's length correction and what it did."""

    criterion: str
    n: int
    slope_per_log_length: float
    fitted_on: str
    raw_mean: float
    controlled_mean: float
    cv_raw_mae: float | None = None
    cv_controlled_mae: float | None = None
    cv_gain: float | None = None
    cv_gain_ci: list[float] | None = None
    folds: int = 0
    centre_length: float | None = None  # the length controlled to (None: the items' mean)
    #: With human labels on some of the items: the means over those items alone (the slope is
    #: fitted on them; ``raw_mean``/``controlled_mean`` are over every item of the run).
    labelled: int | None = None
    labelled_raw_mean: float | None = None
    labelled_controlled_mean: float | None = None

    @property
    def raises_agreement(self) -> bool | None:
        """Whether the correction lowers the held-out error against the humans (CI above 0).

        None without human labels.
        """
        if self.cv_gain_ci is None:
            return None
        return self.cv_gain_ci[0] > 0

    def words(self) -> str:
        """The result in plain words."""
        at = (
            f"at the reference answers' median length {self.centre_length:g}"
            if self.centre_length is not None
            else "at the answers' mean length"
        )
        head = (
            f"{self.criterion}: mean over the {self.n} items {self.raw_mean:.3f} raw, "
            f"{self.controlled_mean:.3f} length-controlled ({at}; slope "
            f"{self.slope_per_log_length:+.3f} per unit of log(1 + length), fitted on "
            f"{self.fitted_on})"
        )
        if self.labelled is not None and self.labelled < self.n:
            head += (
                f"; over the {self.labelled} labelled items alone {self.labelled_raw_mean:.3f} "
                f"raw, {self.labelled_controlled_mean:.3f} controlled"
            )
        if self.cv_gain is None or self.cv_gain_ci is None:
            return head + "; no human labels, so whether it helps is not known"
        lo, hi = self.cv_gain_ci
        verdict = (
            "raises agreement with the humans"
            if self.raises_agreement
            else "does not clearly raise agreement with the humans"
        )
        return (
            head + f"; {self.folds}-fold CV: mean absolute error against the humans "
            f"{self.cv_raw_mae:.3f} raw, {self.cv_controlled_mae:.3f} controlled (gain "
            f"{self.cv_gain:+.3f} [{lo:+.3f}, {hi:+.3f}]): the correction {verdict}"
        )

    def to_dict(self) -> dict[str, Any]:
        """As plain data."""
        return {**self.__dict__, "raises_agreement": self.raises_agreement, "finding": self.words()}


def length_control(
    criterion: str,
    score: Any,
    length: Any,
    human: Any = None,
    *,
    centre_length: float | None = None,
    folds: int = 5,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> LengthControl:
    """Fit the length correction on the items, and with labels cross-validate it (module text).

    The correction is fitted on every item with a score and a length (and a human label, when
    ``human`` is given). The means are over every item with a score and a length, labelled or not
    (the run's items); with labels on some of them, the labelled items' own means beside them.
    """
    s, n = np.asarray(score, dtype=float), np.asarray(length, dtype=float)
    h = None if human is None else np.asarray(human, dtype=float)
    if s.shape != n.shape or (h is not None and h.shape != s.shape):
        raise InputDataError("score, length and human must have one value per item")
    pool = ~np.isnan(s) & ~np.isnan(n)
    keep = pool & (True if h is None else ~np.isnan(h))
    s_pool, x_pool = s[pool], np.log1p(n[pool])
    s, x = s[keep], np.log1p(n[keep])
    centre = float(np.log1p(centre_length)) if centre_length is not None else x_pool.mean()
    if s.size < MIN_ITEMS:
        raise InputDataError(
            f"{criterion}: {s.size} item(s) with a score and a length"
            + (" and a human label" if h is not None else "")
            + f"; length control needs {MIN_ITEMS}"
        )
    if h is None:
        slope, fitted_on = (
            _slope(x, s),
            "the scores themselves (no human labels: assumes quality does not grow with length)",
        )
        return LengthControl(
            criterion,
            int(s.size),
            slope,
            fitted_on,
            float(s.mean()),
            float((s - slope * (x - centre)).mean()),
            centre_length=centre_length,
        )
    hk = h[keep]
    slope = _slope(x, s - hk)
    fitted_on = f"the jury's errors against {s.size} human-labelled items"
    rng = np.random.default_rng(seed)
    order = rng.permutation(s.size)
    k = max(2, min(folds, s.size))
    raw_err = np.abs(s - hk)
    cv_err = np.empty(s.size)
    for fold in np.array_split(order, k):
        train = np.setdiff1d(order, fold)
        b = _slope(x[train], s[train] - hk[train])
        adjusted = s[fold] - b * (x[fold] - x[train].mean())
        cv_err[fold] = np.abs(adjusted - hk[fold])
    gain = raw_err - cv_err
    draws = np.array(
        [gain[rng.integers(0, gain.size, gain.size)].mean() for _ in range(n_resamples)]
    )
    lo, hi = np.quantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2])
    return LengthControl(
        criterion,
        int(s_pool.size),
        slope,
        fitted_on,
        float(s_pool.mean()),
        float((s_pool - slope * (x_pool - centre)).mean()),
        float(raw_err.mean()),
        float(cv_err.mean()),
        float(gain.mean()),
        [float(lo), float(hi)],
        k,
        centre_length=centre_length,
        labelled=int(s.size),
        labelled_raw_mean=float(s.mean()),
        labelled_controlled_mean=float((s - slope * (x - centre)).mean()),
    )
