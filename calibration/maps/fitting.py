"""Fitting a calibration map's per-criterion parts.

A calibrator per judge onto the human scale with jury weights from each judge's out-of-fold
error (numeric scales), or a Dawid-Skene model with human labels clamped as truth (labelled
scales).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from jurybox.rubrics import Scale

from ..data._rows import count as _plural
from ..data.joined import CriterionData
from ..errors import InputDataError
from .calibrators import CALIBRATORS, calibrator_from_dict


@dataclass
class CriterionMap:
    """The learned map for one criterion (see module docstring)."""

    criterion: str
    scale: Scale
    kind: Literal["numeric", "categorical"]
    calibrators: dict[str, Any] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    priors: np.ndarray | None = None
    confusion: dict[str, np.ndarray] = field(default_factory=dict)
    n_items: int = 0
    notes: list[str] = field(default_factory=list)  # fit warnings (e.g. EM not converged)

    def predict(self, values: dict[str, np.ndarray], output: str) -> np.ndarray:
        """Calibrated jury value per item from each judge's raw values (NaN = no vote)."""
        if self.kind == "categorical":
            return self._predict_categorical(values, output)
        num = den = None
        for judge, cal in self.calibrators.items():
            if judge not in values:
                continue
            pred = cal.predict(values[judge])
            w = np.where(np.isnan(pred), 0.0, self.weights[judge])
            term = np.where(np.isnan(pred), 0.0, pred) * w
            num = term if num is None else num + term
            den = w if den is None else den + w
        if num is None or den is None:
            length = len(next(iter(values.values()))) if values else 0
            return np.full(length, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        if output == "round":
            out = self.scale.snap(out)
        return out

    def _predict_categorical(self, values: dict[str, np.ndarray], output: str) -> np.ndarray:
        assert self.priors is not None
        scale = np.asarray(self.scale.values)
        length = len(next(iter(values.values()))) if values else 0
        log_post = np.tile(np.log(self.priors), (length, 1))
        any_vote = np.zeros(length, dtype=bool)
        for judge, conf in self.confusion.items():
            if judge not in values:
                continue
            x = np.asarray(values[judge], dtype=float)
            code, voted = _scale_codes(x, scale, judge, self.criterion)
            log_post += np.where(voted[:, None], np.log(conf[:, code].T), 0.0)
            any_vote |= voted
        log_post -= log_post.max(axis=1, keepdims=True)
        post = np.exp(log_post)
        post /= post.sum(axis=1, keepdims=True)
        out = scale[post.argmax(axis=1)] if output == "round" else post @ scale
        return np.where(any_vote, out, np.nan)

    def to_dict(self) -> dict[str, Any]:
        """The map as plain data: kind, scale and item count, then the fitted model.

        The model is the weights and per-judge calibrators (numeric) or the Dawid-Skene priors and
        confusion matrices (categorical).
        """
        out: dict[str, Any] = {
            "kind": self.kind,
            "scale": self.scale.compact(),
            "n_items": self.n_items,
        }
        if self.kind == "numeric":
            out["weights"] = dict(self.weights)
            out["judges"] = {j: c.to_dict() for j, c in self.calibrators.items()}
        else:
            assert self.priors is not None
            out["model"] = "dawid_skene"
            out["priors"] = self.priors.tolist()
            out["confusion"] = {j: m.tolist() for j, m in self.confusion.items()}
        return out

    @classmethod
    def from_dict(cls, criterion: str, d: dict[str, Any]) -> CriterionMap:
        """The map for ``criterion`` from `to_dict`'s data.

        InputDataError for an unknown kind or weights that do not match the judges.
        """
        scale = Scale.coerce(d["scale"])
        if d["kind"] == "numeric":
            cals = {j: calibrator_from_dict(c) for j, c in d["judges"].items()}
            weights = {j: float(w) for j, w in d["weights"].items()}
            if set(weights) != set(cals):
                raise InputDataError(f"{criterion}: weights and judges do not match")
            return cls(criterion, scale, "numeric", cals, weights, n_items=d.get("n_items", 0))
        if d["kind"] == "categorical":
            conf = {j: np.asarray(m, dtype=float) for j, m in d["confusion"].items()}
            return cls(
                criterion,
                scale,
                "categorical",
                priors=np.asarray(d["priors"], float),
                confusion=conf,
                n_items=d.get("n_items", 0),
            )
        raise InputDataError(f"{criterion}: unknown map kind {d['kind']!r}")


def _scale_codes(
    x: np.ndarray, scale: np.ndarray, judge: str, criterion: str
) -> tuple[np.ndarray, np.ndarray]:
    """Index of each judge value on the scale, and which items the judge voted on.

    A value off the scale is an error, never snapped to the nearest point.
    """
    voted = ~np.isnan(x)
    code = np.abs(np.nan_to_num(x)[:, None] - scale).argmin(axis=1)
    off = voted & ~np.isclose(scale[code], np.nan_to_num(x))
    if off.any():
        raise InputDataError(
            f"judge {judge!r} gave values {np.unique(x[off]).tolist()} on "
            f"{criterion!r}, not on the scale {scale.tolist()}"
        )
    return code, voted


def _pairs(judge: np.ndarray, human: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(judge value, human rating) for every human rating of an item the judge scored."""
    x = np.broadcast_to(judge, human.shape)
    keep = ~(np.isnan(x) | np.isnan(human))
    return x[keep], human[keep]


def folds(n: int, k: int, seed: int) -> np.ndarray:
    """Fold number per item, balanced and shuffled."""
    rng = np.random.default_rng(seed)
    return rng.permutation(np.arange(n) % k)


def _check_human_variation(data: CriterionData) -> None:
    """Refuse human labels that are all the same value.

    Every calibrator fitted on them maps any judge score to that value, which scores perfectly
    against those same labels in cross-validation ("MAE 3.0 -> 0.0, calibration helps") while
    carrying no information, and human-human agreement is undefined. Nothing to calibrate to.
    """
    labels = data.human[~np.isnan(data.human)]
    if labels.size == 0 or np.ptp(labels) > 0:
        return
    value = float(labels[0])
    names = [k for k, v in data.scale.labels.items() if v == value]
    shown = f"{names[0]!r}" if names else f"{value:g}"
    which = (
        f"the only human label on {data.criterion!r} is {shown}"
        if labels.size == 1
        else f"all {labels.size} human labels on {data.criterion!r} are {shown}"
    )
    raise InputDataError(
        f"{which}: with no variation to learn from, a map would give every "
        f"item {shown} (and human-human agreement is undefined); label items "
        f"that differ, or leave this criterion out"
    )


def fit_criterion(data: CriterionData, params: dict[str, Any]) -> CriterionMap:
    """The map for one criterion: Dawid-Skene for a categorical one, else a calibrator per judge.

    The calibrators (``params["method"]``) are weighted by inverse out-of-fold squared error.
    InputDataError when the human labels do not vary or no judge has two distinct scores paired
    with them.
    """
    _check_human_variation(data)
    if data.categorical:
        return _fit_categorical(data)
    scale = list(data.scale.values)
    human_mean = data.human_mean
    cals: dict[str, Any] = {}
    mse: dict[str, float] = {}
    for judge, x in data.judges.items():
        xs, ys = _pairs(x, data.human)
        if xs.size < 2 or np.unique(xs).size < 2:
            continue  # too little to learn from; reported when no judge is left
        # Judges' maps stay continuous; rounding (output="round") happens once, on the jury value.
        cals[judge] = CALIBRATORS[params["method"]](scale, output="clip").fit(xs, ys)
        mse[judge] = _oof_mse(x, data.human, human_mean, scale, params)
    if not cals:
        hint = (
            "; the judges give (nearly) constant scores, so try their logprob-expected "
            "scores (value 'expected', --value expected) if the verdicts have them"
            if params.get("value") == "score"
            else ""
        )
        raise InputDataError(
            f"no judge has two distinct scores paired with human labels on {data.criterion!r}{hint}"
        )
    inv = {j: 1.0 / max(m, 1e-6) for j, m in mse.items()}
    total = sum(inv.values())
    weights = {j: v / total for j, v in inv.items()}
    n_items = int((~np.isnan(human_mean)).sum())
    return CriterionMap(data.criterion, data.scale, "numeric", cals, weights, n_items=n_items)


def _oof_mse(
    x: np.ndarray,
    human: np.ndarray,
    human_mean: np.ndarray,
    scale: list[float],
    params: dict[str, Any],
) -> float:
    """Out-of-fold squared error of one judge's calibrated score against the human mean.

    In-sample error flatters isotonic maps (they can fit noise), which would over-weight the
    judges with the most erratic scores; cross-fitting avoids that.
    """
    usable = ~(np.isnan(x) | np.isnan(human_mean))
    idx = np.nonzero(usable)[0]
    k = min(params["cv_folds"], idx.size)
    errors = []
    if k >= 2:
        fold = folds(idx.size, k, params["seed"] + 1)
        for f in range(k):
            train, test = idx[fold != f], idx[fold == f]
            xs, ys = _pairs(x[train], human[:, train])
            if xs.size < 2 or np.unique(xs).size < 2:
                continue
            cal = CALIBRATORS[params["method"]](scale, output="clip").fit(xs, ys)
            errors.append((cal.predict(x[test]) - human_mean[test]) ** 2)
    if errors:
        return float(np.mean(np.concatenate(errors)))
    resid = x[usable] - human_mean[usable]
    return float(np.mean(resid**2)) if resid.size else 1.0


def _fit_categorical(data: CriterionData) -> CriterionMap:
    from ..stats.dawid_skene import dawid_skene

    scale = np.asarray(data.scale.values)
    k = scale.size
    judges = list(data.judges)
    codes = np.full((len(judges), len(data.ids)), -1)
    for r, judge in enumerate(judges):
        code, voted = _scale_codes(data.judges[judge], scale, judge, data.criterion)
        codes[r, voted] = code[voted]
    # Human truth as class proportions per item (several humans -> a soft label).
    human_codes = np.abs(np.nan_to_num(data.human)[..., None] - scale).argmin(axis=-1)
    present = ~np.isnan(data.human)
    truth = np.zeros((len(data.ids), k))
    for c in range(k):
        truth[:, c] = np.sum(present & (human_codes == c), axis=0)
    truth[truth.sum(axis=1) == 0] = np.nan
    fit = dawid_skene(codes, k, truth=truth)
    confusion = {j: fit.confusion[r] for r, j in enumerate(judges)}
    n_items = int((~np.isnan(truth).any(axis=1)).sum())
    notes = (
        []
        if fit.converged
        else [
            f"Dawid-Skene EM did not converge in {_plural(fit.n_iter, 'step')} (its parameters "
            f"were still moving), so the judges' confusion matrices and calibrated labels may be off"
        ]
    )
    return CriterionMap(
        data.criterion,
        data.scale,
        "categorical",
        priors=fit.priors,
        confusion=confusion,
        n_items=n_items,
        notes=notes,
    )


def subset(data: CriterionData, idx: np.ndarray) -> CriterionData:
    """``data`` restricted to the items at positions ``idx``."""
    return CriterionData(
        data.criterion,
        [data.ids[i] for i in idx],
        data.human[:, idx],
        data.human_raters,
        {j: v[idx] for j, v in data.judges.items()},
        data.jury[idx],
        data.scale,
        data.categorical,
    )
