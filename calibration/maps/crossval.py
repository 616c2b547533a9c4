"""Whether calibration helps: cross-validated agreement with humans before and after.

K-fold cross-validated agreement of the jury with the human consensus before and after
calibration, with a bootstrap CI of the improvement, and the text that reports it.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from ..data._rows import count as _plural
from ..data.joined import CriterionData
from ..errors import InputDataError
from .fitting import fit_criterion, folds, subset


def cross_validate(data: CriterionData, params: dict[str, Any]) -> dict[str, Any]:
    """K-fold before/after agreement of the jury (and each judge) with the human consensus.

    Numeric criteria compare with the human mean (MAE, RMSE, bias, Spearman, interval alpha);
    labelled criteria compare the jury's label and the calibrated posterior mode with the human
    majority (accuracy, Cohen's kappa). ``improvement`` is the paired bootstrap CI of the MAE
    reduction (numeric) or accuracy gain (labelled); ``helps`` is true when it lies above 0,
    ``hurts`` when it lies below 0 (calibrated values are further from the humans).
    """
    from ..stats.agreement import exact_agreement, mean_absolute_error, mean_difference, spearman
    from ..stats.alpha import krippendorff_alpha
    from ..stats.bootstrap import bootstrap_ci
    from ..stats.kappa import cohen_kappa

    human_mean = data.human_mean
    usable = np.nonzero(~np.isnan(human_mean))[0]
    k = min(params["cv_folds"], usable.size)
    if usable.size < 4 or k < 2:
        return {
            "skipped": f"only {_plural(int(usable.size), 'labelled item')}; need at least 4 for CV"
        }
    fold = folds(usable.size, k, params["seed"])
    output = "round" if data.categorical else params["output"]
    after = np.full(len(data.ids), np.nan)
    after_judge = {j: np.full(len(data.ids), np.nan) for j in data.judges}
    failed = 0
    for f in range(k):
        train, test = usable[fold != f], usable[fold == f]
        try:
            cmap = fit_criterion(subset(data, train), params)
        except InputDataError:
            failed += 1
            continue
        pred = cmap.predict({j: v[test] for j, v in data.judges.items()}, output)
        after[test] = np.where(np.isnan(data.jury[test]), np.nan, pred)
        for j, cal in cmap.calibrators.items():
            after_judge[j][test] = cal.predict(data.judges[j][test])

    target = data.human_reference if data.categorical else human_mean
    # A labelled criterion's jury score may lie between labels (a mean of yes and no): the
    # label it is nearest, as the humans' majority is compared.
    before = data.scale.snap(data.jury) if data.categorical else data.jury
    both = ~(np.isnan(before) | np.isnan(after) | np.isnan(target))
    b, a, h = before[both], after[both], target[both]
    result: dict[str, Any] = {
        "folds": k,
        "n_items": int(both.sum()),
        "n_folds_failed": failed,
        "target": "human majority" if data.categorical else "human mean",
    }
    if both.sum() < 3:
        result["skipped"] = "fewer than 3 items with jury, calibrated and human values"
        return result
    scale = list(data.scale.values)

    if data.categorical:

        def summary(x: np.ndarray) -> dict[str, Any]:
            return {
                "accuracy": exact_agreement(x, h).to_dict(),
                "kappa": cohen_kappa(x, h, labels=scale).to_dict(),
            }

        def gain_fn(bb: np.ndarray, aa: np.ndarray, hh: np.ndarray) -> float:
            return float(np.mean(aa == hh) - np.mean(bb == hh))

        metric = "accuracy gain"
    else:

        def summary(x: np.ndarray) -> dict[str, Any]:
            return {
                "mae": mean_absolute_error(x, h).to_dict(),
                "rmse": float(np.sqrt(np.mean((x - h) ** 2))),
                "bias": mean_difference(x, h).to_dict(),
                "spearman": spearman(x, h).to_dict(),
                "alpha_interval": krippendorff_alpha(np.vstack([x, h]), "interval").to_dict(),
            }

        def gain_fn(bb: np.ndarray, aa: np.ndarray, hh: np.ndarray) -> float:
            return float(np.mean(np.abs(bb - hh)) - np.mean(np.abs(aa - hh)))

        metric = "MAE reduction"

    gain = bootstrap_ci(gain_fn, b, a, h, n_resamples=1000, seed=params["seed"])
    result["before"] = summary(b)
    result["after"] = summary(a)
    result["improvement"] = {
        "metric": metric,
        "value": gain.value,
        "ci": list(gain.ci) if gain.ci else None,
    }
    result["helps"] = bool(gain.ci is not None and gain.ci[0] > 0)
    result["hurts"] = bool(gain.ci is not None and gain.ci[1] < 0)
    per_judge = {}
    for j, x in data.judges.items():
        ok = ~(np.isnan(x) | np.isnan(after_judge[j]) | np.isnan(human_mean))
        if ok.sum() >= 1:
            per_judge[j] = {
                "n_items": int(ok.sum()),
                "mae_before": float(np.mean(np.abs(x[ok] - human_mean[ok]))),
                "mae_after": float(np.mean(np.abs(after_judge[j][ok] - human_mean[ok]))),
            }
    result["per_judge"] = per_judge
    return result


def cv_verdict(cv: dict[str, Any]) -> Literal["helps", "hurts", "unclear", "skipped"]:
    """What one criterion's cross-validation says: helps, hurts, unclear (or skipped).

    The improvement CI lies above 0 (helps), below 0 (hurts), or straddles it (unclear). Read from
    the CI, so maps saved before the ``hurts`` flag existed get the same answer.
    """
    if "before" not in cv:
        return "skipped"
    ci = (cv.get("improvement") or {}).get("ci")
    if ci and ci[0] > 0:
        return "helps"
    if ci and ci[1] < 0:
        return "hurts"
    return "unclear"


_VERDICT_TEXT = {
    "helps": "calibration helps",
    "hurts": "calibration hurts (calibrated values are further from the humans); do not apply it",
    "unclear": "no clear improvement",
}


def format_cv(cv: dict[str, Any]) -> list[str]:
    """Readable lines for one criterion's cross-validation result."""
    if not cv:
        return []
    if "before" not in cv:
        return [f"cross-validation skipped: {cv.get('skipped', 'no result')}"]

    def val(d: dict[str, Any]) -> str:
        v = d.get("value")
        return "undefined" if v is None else f"{v:.3f}"

    b, a = cv["before"], cv["after"]
    gain = cv["improvement"]
    ci = gain["ci"]
    ci_text = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
    verdict = _VERDICT_TEXT[cv_verdict(cv)]
    lines = [f"{cv['folds']}-fold CV on {_plural(cv['n_items'], 'item')} (jury vs {cv['target']}):"]
    if "accuracy" in b:
        lines.append(
            f"  accuracy {val(b['accuracy'])} -> {val(a['accuracy'])}   kappa "
            f"{val(b['kappa'])} -> {val(a['kappa'])}"
        )
    else:
        lines += [
            f"  MAE   {val(b['mae'])} -> {val(a['mae'])}",
            f"  bias  {val(b['bias'])} -> {val(a['bias'])}   RMSE {b['rmse']:.3f} -> "
            f"{a['rmse']:.3f}",
            f"  alpha {val(b['alpha_interval'])} -> {val(a['alpha_interval'])}   spearman "
            f"{val(b['spearman'])} -> {val(a['spearman'])}",
        ]
    lines.append(f"  {gain['metric']} {gain['value']:+.3f}{ci_text}: {verdict}")
    for j, d in cv.get("per_judge", {}).items():
        lines.append(f"  {j}: MAE {d['mae_before']:.3f} -> {d['mae_after']:.3f} (n={d['n_items']})")
    return lines
