"""Per-judge calibrators: judge score -> human scale. scikit-learn conventions throughout.

Hyperparameters live in ``__init__``; ``fit(x, y)`` learns state ending in ``_`` and returns
self; ``predict`` is pure. Learned state is plain numbers (no pickles), so ``to_dict`` /
``from_dict`` give a readable, version-stable file and ``predict`` never needs scikit-learn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..errors import InputDataError, NotFittedError

Output = Literal["clip", "round"]


def _xy(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    x_ = np.asarray(x, dtype=float).ravel()
    y_ = np.asarray(y, dtype=float).ravel()
    if x_.size != y_.size:
        raise InputDataError(f"x and y differ in length ({x_.size} vs {y_.size})")
    keep = ~(np.isnan(x_) | np.isnan(y_))
    if keep.sum() < 2:
        raise InputDataError(f"need at least 2 (judge, human) pairs to fit; got {int(keep.sum())}")
    return x_[keep], y_[keep]


def _finish(pred: np.ndarray, scale: np.ndarray, output: str) -> np.ndarray:
    pred = np.clip(pred, scale.min(), scale.max())
    if output == "round":
        idx = np.abs(pred[..., None] - scale).argmin(axis=-1)
        pred = scale[idx]
    return pred


class IsotonicCalibrator:
    """Monotone map from judge score to human scale (scikit-learn ``IsotonicRegression``).

    Judge scores outside the training range map to the end values.

    Args:
        scale: The human scale's values (output is clipped to its range).
        output: ``"clip"`` to clip to the scale's range, or ``"round"`` to snap to its nearest
            value.
        increasing: Whether the map increases (``True``), decreases (``False``), or the direction
            is chosen from the data (``"auto"``, as scikit-learn's).
    """

    kind = "isotonic"

    def __init__(
        self,
        scale: Sequence[float],
        output: Output = "clip",
        increasing: bool | Literal["auto"] = True,
    ) -> None:
        self.scale = scale
        self.output = output
        self.increasing = increasing

    def fit(self, x: Any, y: Any) -> IsotonicCalibrator:
        """Fit on judge scores ``x`` and human values ``y`` (pairs with a NaN left out).

        Args:
            x: The judge's scores.
            y: The human values, aligned with ``x``.

        Returns:
            This calibrator, fitted.

        Raises:
            InputDataError: A bad ``output``, unequal lengths or fewer than 2 pairs.
        """
        from sklearn.isotonic import IsotonicRegression  # lazy: sklearn import is ~1 s

        if self.output not in ("clip", "round"):
            raise InputDataError(f"output must be 'clip' or 'round'; got {self.output!r}")
        x_, y_ = _xy(x, y)
        scale = np.asarray(sorted(self.scale), dtype=float)
        model = IsotonicRegression(
            y_min=scale.min(), y_max=scale.max(), increasing=self.increasing, out_of_bounds="clip"
        ).fit(x_, y_)
        self.x_thresholds_ = np.asarray(model.X_thresholds_, dtype=float)
        self.y_thresholds_ = np.asarray(model.y_thresholds_, dtype=float)
        self.n_fit_ = int(x_.size)
        return self

    def predict(self, x: Any) -> np.ndarray:
        """The calibrated values of ``x`` on the human scale (NaN stays NaN).

        Args:
            x: Judge scores, any shape.

        Returns:
            The calibrated values, in the shape of ``x``.

        Raises:
            NotFittedError: Before ``fit``.
        """
        if not hasattr(self, "x_thresholds_"):
            raise NotFittedError("IsotonicCalibrator is not fitted; call fit(x, y) first")
        x_ = np.asarray(x, dtype=float)
        # np.interp clamps outside the thresholds: the same as out_of_bounds="clip".
        if self.x_thresholds_.size == 1:
            pred = np.full(x_.shape, self.y_thresholds_[0])
        else:
            pred = np.interp(x_, self.x_thresholds_, self.y_thresholds_)
        pred = _finish(pred, np.asarray(sorted(self.scale), dtype=float), self.output)
        return np.where(np.isnan(x_), np.nan, pred)

    def to_dict(self) -> dict[str, Any]:
        """The fitted calibrator as plain data: its parameters and the isotonic thresholds.

        Returns:
            The data `from_dict` reads.
        """
        return {
            "kind": self.kind,
            "scale": [float(v) for v in self.scale],
            "output": self.output,
            "increasing": self.increasing,
            "x": self.x_thresholds_.tolist(),
            "y": self.y_thresholds_.tolist(),
            "n_fit": self.n_fit_,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> IsotonicCalibrator:
        """A fitted calibrator from `to_dict`'s data.

        Args:
            d: The data `to_dict` wrote.

        Returns:
            The calibrator, fitted.

        Raises:
            InputDataError: ``x`` and ``y`` are empty or differ in length.
        """
        self = cls(d["scale"], d.get("output", "clip"), d.get("increasing", True))
        self.x_thresholds_ = np.asarray(d["x"], dtype=float)
        self.y_thresholds_ = np.asarray(d["y"], dtype=float)
        self.n_fit_ = int(d.get("n_fit", 0))
        if self.x_thresholds_.size != self.y_thresholds_.size or self.x_thresholds_.size == 0:
            raise InputDataError("isotonic map needs equal-length, non-empty x and y")
        return self


class OrdinalCalibrator:
    """Cumulative-logit (proportional odds) model: P(human <= k | s) = sigmoid(theta_k - beta*s).

    Fitted by maximum likelihood with a small ridge penalty (``l2``) that keeps thresholds
    finite when a scale point is never used or the judge separates classes perfectly.

    Args:
        scale: The human scale's values.
        output: ``"clip"`` for the expected human value, or ``"round"`` for the most probable
            scale value.
        l2: The ridge penalty's weight.
    """

    kind = "ordinal"

    def __init__(self, scale: Sequence[float], output: Output = "clip", l2: float = 1e-3) -> None:
        self.scale = scale
        self.output = output
        self.l2 = l2

    def fit(self, x: Any, y: Any) -> OrdinalCalibrator:
        """Fit on judge scores ``x`` and human values ``y`` (pairs with a NaN left out).

        Args:
            x: The judge's scores.
            y: The human values, aligned with ``x``, each a value of the scale.

        Returns:
            This calibrator, fitted.

        Raises:
            InputDataError: A bad ``output``, unequal lengths, fewer than 2 pairs or a human value
                off the scale.
        """
        from scipy.optimize import minimize  # lazy

        if self.output not in ("clip", "round"):
            raise InputDataError(f"output must be 'clip' or 'round'; got {self.output!r}")
        x_, y_ = _xy(x, y)
        scale = np.asarray(sorted(self.scale), dtype=float)
        k = scale.size
        cls = np.abs(y_[:, None] - scale).argmin(axis=1)
        if not np.allclose(scale[cls], y_):
            raise InputDataError(
                f"ordinal calibration needs human values on the scale {scale.tolist()}"
            )
        center = float(x_.mean())
        spread = float(x_.std()) or 1.0
        z = (x_ - center) / spread

        def unpack(p: np.ndarray) -> tuple[np.ndarray, float]:
            theta = p[0] + np.concatenate([[0.0], np.cumsum(np.exp(p[1 : k - 1]))])
            return theta, p[k - 1]

        def nll_and_grad(p: np.ndarray) -> tuple[float, np.ndarray]:
            theta, beta = unpack(p)
            cdf = 1.0 / (1.0 + np.exp(-(theta[None, :] - beta * z[:, None])))  # n x (K-1)
            dens = cdf * (1.0 - cdf)
            pad = np.zeros((z.size, 1))
            cdf_p = np.concatenate([pad, cdf, pad + 1.0], axis=1)
            dens_p = np.concatenate([pad, dens, pad], axis=1)
            rows = np.arange(z.size)
            prob = np.maximum(cdf_p[rows, cls + 1] - cdf_p[rows, cls], 1e-300)
            f_up, f_low = dens_p[rows, cls + 1], dens_p[rows, cls]
            # d log P / d theta_k: +f_up/P at the upper threshold, -f_low/P at the lower one.
            g_theta = np.bincount(
                cls[cls <= k - 2], weights=(f_up / prob)[cls <= k - 2], minlength=k - 1
            ) - np.bincount(cls[cls >= 1] - 1, weights=(f_low / prob)[cls >= 1], minlength=k - 1)
            g_beta = float(np.sum(-z * (f_up - f_low) / prob))
            # Chain rule through theta_k = p0 + sum_{j=1..k} exp(p_j).
            tail = np.cumsum(g_theta[::-1])[::-1]
            grad = np.concatenate([[g_theta.sum()], np.exp(p[1 : k - 1]) * tail[1:], [g_beta]])
            value = -float(np.sum(np.log(prob))) + self.l2 * float(np.sum(p * p))
            return value, -grad + 2.0 * self.l2 * p

        # Start from the empirical cumulative proportions and a positive slope.
        cum = np.clip(np.cumsum(np.bincount(cls, minlength=k))[:-1] / z.size, 0.02, 0.98)
        start_theta = np.log(cum / (1 - cum))
        start_theta = np.maximum.accumulate(start_theta + np.arange(k - 1) * 1e-3)
        p0 = np.concatenate(
            [[start_theta[0]], np.log(np.maximum(np.diff(start_theta), 1e-2)), [1.0]]
        )
        res = minimize(nll_and_grad, p0, jac=True, method="L-BFGS-B")
        theta, beta = unpack(res.x)
        self.thresholds_ = theta
        self.coef_ = float(beta)
        self.center_ = center
        self.spread_ = spread
        self.converged_ = bool(res.success)
        self.n_fit_ = int(x_.size)
        return self

    def predict_proba(self, x: Any) -> np.ndarray:
        """The probability of each scale value (in ascending order) for each score in ``x``.

        Args:
            x: Judge scores, any shape.

        Returns:
            The probabilities, on a last axis added to the shape of ``x``.

        Raises:
            NotFittedError: Before ``fit``.
        """
        if not hasattr(self, "thresholds_"):
            raise NotFittedError("OrdinalCalibrator is not fitted; call fit(x, y) first")
        z = (np.asarray(x, dtype=float) - self.center_) / self.spread_
        return _category_probs(self.thresholds_, self.coef_, z)

    def predict(self, x: Any) -> np.ndarray:
        """The calibrated values of ``x``: the expected human value or the most probable one.

        The expected human value with ``output="clip"``, the most probable scale value with
        ``"round"``; NaN stays NaN.

        Args:
            x: Judge scores, any shape.

        Returns:
            The calibrated values, in the shape of ``x``.

        Raises:
            NotFittedError: Before ``fit``.
        """
        x_ = np.asarray(x, dtype=float)
        scale = np.asarray(sorted(self.scale), dtype=float)
        probs = self.predict_proba(np.nan_to_num(x_))
        if self.output == "round":
            pred = scale[probs.argmax(axis=-1)]
        else:
            pred = _finish(probs @ scale, scale, "clip")
        return np.where(np.isnan(x_), np.nan, pred)

    def to_dict(self) -> dict[str, Any]:
        """The fitted calibrator as plain data: parameters, thresholds, slope and standardisation.

        Returns:
            The data `from_dict` reads.
        """
        return {
            "kind": self.kind,
            "scale": [float(v) for v in self.scale],
            "output": self.output,
            "l2": self.l2,
            "thresholds": self.thresholds_.tolist(),
            "coef": self.coef_,
            "center": self.center_,
            "spread": self.spread_,
            "converged": self.converged_,
            "n_fit": self.n_fit_,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OrdinalCalibrator:
        """A fitted calibrator from `to_dict`'s data.

        Args:
            d: The data `to_dict` wrote.

        Returns:
            The calibrator, fitted.

        Raises:
            InputDataError: Unless there is one threshold fewer than scale values.
        """
        self = cls(d["scale"], d.get("output", "clip"), d.get("l2", 1e-3))
        self.thresholds_ = np.asarray(d["thresholds"], dtype=float)
        self.coef_ = float(d["coef"])
        self.center_ = float(d["center"])
        self.spread_ = float(d["spread"])
        self.converged_ = bool(d.get("converged", True))
        self.n_fit_ = int(d.get("n_fit", 0))
        if self.thresholds_.size != len(self.scale) - 1:
            raise InputDataError("ordinal map needs len(scale) - 1 thresholds")
        return self


def _category_probs(theta: np.ndarray, beta: float, z: np.ndarray) -> np.ndarray:
    cum = 1.0 / (1.0 + np.exp(-(theta[None, :] - beta * np.asarray(z, dtype=float)[..., None])))
    ones = np.ones(cum.shape[:-1] + (1,))
    cum = np.concatenate([np.zeros_like(ones), cum, ones], axis=-1)
    return np.clip(np.diff(cum, axis=-1), 0.0, 1.0)


CALIBRATORS: dict[str, type[IsotonicCalibrator] | type[OrdinalCalibrator]] = {
    "isotonic": IsotonicCalibrator,
    "ordinal": OrdinalCalibrator,
}


def calibrator_from_dict(d: dict[str, Any]) -> IsotonicCalibrator | OrdinalCalibrator:
    """The calibrator a ``to_dict`` result describes, by its ``kind``.

    InputDataError for an unknown kind.
    """
    kind = d.get("kind")
    if kind not in CALIBRATORS:
        raise InputDataError(f"unknown calibrator kind {kind!r} (expected {list(CALIBRATORS)})")
    return CALIBRATORS[kind].from_dict(d)
