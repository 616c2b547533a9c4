"""PPI++ mean: against ppi-python, against the paper's formulas by hand, and by coverage."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from jurybox.calibration import InputDataError, ppi_mean


def _biased_judge(
    n: int, big_n: int, seed: int, bias: float = 0.7, noise: float = 0.6
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 4, size=n + big_n)
    judge = 0.6 * truth + bias + rng.normal(0, noise, size=n + big_n)
    human = truth + rng.normal(0, 0.3, size=n + big_n)
    return human[:n], judge[:n], judge[n:]


def test_matches_ppi_python_reference() -> None:
    ppi_py = pytest.importorskip("ppi_py")
    y, f, fu = _biased_judge(150, 3000, seed=4)
    ours = ppi_mean(y, f, fu, confidence=0.9)
    lo, hi = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.1)
    point = ppi_py.ppi_mean_pointestimate(y, f, fu)
    assert ours.ci[0] == pytest.approx(float(np.ravel(lo)[0]), rel=1e-9)
    assert ours.ci[1] == pytest.approx(float(np.ravel(hi)[0]), rel=1e-9)
    # ppi-python's point estimate tunes lambda at the lambda=1 estimate; same lambda formula.
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), rel=1e-9)
    for lam in (0.0, 1.0):
        lo, hi = ppi_py.ppi_mean_ci(y, f, fu, alpha=0.1, lam=lam)
        fixed = ppi_mean(y, f, fu, confidence=0.9, lam=lam)
        assert fixed.ci == pytest.approx((float(np.ravel(lo)[0]), float(np.ravel(hi)[0])), rel=1e-9)


def test_matches_ppi_plus_plus_formulas_by_hand() -> None:
    # Angelopoulos, Duchi & Zrnic (2023), PPI++ eq. for the mean: theta = lam*mean(f~) +
    # mean(Y - lam f); lam* = Cov(Y, f) / ((1 + n/N) Var(f)); CLT interval.
    y = np.array([3.0, 1.0, 4.0, 2.0, 2.0, 0.0, 3.0, 4.0])
    f = np.array([2.6, 1.5, 3.1, 2.2, 1.9, 0.8, 2.5, 3.3])
    fu = np.array([1.0, 2.0, 3.0, 2.5, 0.5, 3.5, 2.2, 1.8, 2.9, 3.1, 0.9, 1.4])
    n, big_n = len(y), len(fu)
    cov = sum((a - y.mean()) * (b - f.mean()) for a, b in zip(y, f)) / n
    allf = list(f) + list(fu)
    mean_all = sum(allf) / len(allf)
    var_f = sum((v - mean_all) ** 2 for v in allf) / (len(allf) - 1)
    lam = min(1.0, max(0.0, cov / ((1 + n / big_n) * var_f)))
    theta = lam * sum(fu) / big_n + sum(a - lam * b for a, b in zip(y, f)) / n
    rect = [a - lam * b for a, b in zip(y, f)]
    var = (lam**2 * np.var(fu) / big_n) + (np.var(rect) / n)
    z = NormalDist().inv_cdf(0.975)
    ours = ppi_mean(y, f, fu)
    assert ours.lam == pytest.approx(lam)
    assert ours.estimate == pytest.approx(theta)
    assert ours.ci == pytest.approx((theta - z * math.sqrt(var), theta + z * math.sqrt(var)))


def test_coverage_with_biased_judge_and_narrower_than_classical() -> None:
    true_mean = 2.0  # E[human] for uniform(0, 4) truth plus zero-mean noise
    covered = covered_naive = 0
    ratios = []
    trials = 300
    for seed in range(trials):
        y, f, fu = _biased_judge(100, 2000, seed=seed)
        est = ppi_mean(y, f, fu, confidence=0.9)
        covered += est.ci[0] <= true_mean <= est.ci[1]
        covered_naive += abs(est.judge_only_mean - true_mean) < 0.05
        ratios.append(est.width_ratio)
    assert 0.85 <= covered / trials <= 0.95  # valid despite the judge's bias
    assert covered_naive / trials < 0.05  # the judge alone is clearly biased
    assert np.mean(ratios) < 0.85  # and the judge scores still help


def test_useless_judge_falls_back_to_classical() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=50)
    est = ppi_mean(y, np.full(50, 3.0), np.full(500, 3.0))
    assert est.lam == 0.0
    assert est.ci == pytest.approx(est.classical_ci)


def test_missing_values_rejected() -> None:
    with pytest.raises(InputDataError, match="missing"):
        ppi_mean([1.0, np.nan], [1.0, 2.0], [1.0])
    with pytest.raises(InputDataError, match="at least 2"):
        ppi_mean([1.0], [1.0], [1.0])
