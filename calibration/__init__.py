# ruff: noqa: F401  (the TYPE_CHECKING imports exist for static tools only)
"""jurybox.calibration: agreement statistics, calibration maps and prediction-powered estimates.

Statistics (vectorised numpy; undefined results are ``Stat(value=None, reason=...)``, never
NaN): :func:`krippendorff_alpha`, :func:`fleiss_kappa`, :func:`cohen_kappa`, :func:`gwet_ac`,
:func:`spearman`, :func:`kendall`, :func:`pearson`, :func:`exact_agreement`,
:func:`adjacent_agreement`, :func:`bootstrap_ci`.

Judges vs humans: :func:`load_human_labels` (file format in :mod:`.labels`),
:func:`load_judge_output`, :func:`join`, :func:`agreement_report`, :func:`fit_calibration` /
:class:`CalibrationMap`, :func:`fit_threshold` (a cascade's threshold with a guarantee; fitting
a jury's cascade from its verdicts is :mod:`jurybox.serving.runs.cascade_fit`, since it needs the
judges), :func:`ppi_mean` / :func:`prediction_powered_mean`.

Imports nothing of ``jurybox.judges`` or ``jurybox.serving``: only ``jurybox.rubrics``.

Names resolve lazily, so ``import jurybox.calibration`` stays cheap (no scipy/sklearn until a
function needs them; never torch, ray or vllm).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    # statistics
    "krippendorff_alpha": "alpha",
    "cohen_kappa": "kappa",
    "fleiss_kappa": "kappa",
    "gwet_ac": "kappa",
    "agreement_weights": "kappa",
    "pearson": "agreement",
    "spearman": "agreement",
    "kendall": "agreement",
    "exact_agreement": "agreement",
    "adjacent_agreement": "agreement",
    "mean_absolute_error": "agreement",
    "mean_difference": "agreement",
    "bootstrap_ci": "bootstrap",
    "Stat": "stat",
    # data
    "HumanLabels": "labels",
    "JudgeOutput": "verdicts",
    "Joined": "joined",
    "CriterionData": "joined",
    "load_human_labels": "labels",
    "load_judge_output": "verdicts",
    "human_labels_from_rows": "labels",
    "label_groups": "labels",
    "judge_output_from_records": "verdicts",
    "join": "joined",
    "scales_from": "labels",
    "rubric_for": "verdicts",
    "join_warnings": "joined",
    # calibration
    "IsotonicCalibrator": "calibrators",
    "OrdinalCalibrator": "calibrators",
    "CalibrationMap": "calibration_map",
    "AppliedCalibration": "calibration_map",
    "fit_calibration": "calibration_map",
    "dawid_skene": "dawid_skene",
    "fit_threshold": "cascade_threshold",
    "CascadeFit": "cascade_threshold",
    "CascadeTargetError": "cascade_threshold",
    "CascadeSimulation": "synthetic",
    "DawidSkeneResult": "dawid_skene",
    # estimates and reports
    "ppi_mean": "ppi",
    "prediction_powered_mean": "ppi",
    "PPIEstimate": "ppi",
    "agreement_report": "report",
    "AgreementReport": "report",
    "simulate_judging": "synthetic",
    # errors
    "CalibrationError": "errors",
    "InputDataError": "errors",
    "JoinError": "errors",
    "UndefinedStatisticError": "errors",
    "ProvenanceMismatchError": "errors",
    "NotFittedError": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # static tools see real imports
    from .agreement import (
        adjacent_agreement,
        exact_agreement,
        kendall,
        mean_absolute_error,
        mean_difference,
        pearson,
        spearman,
    )
    from .alpha import krippendorff_alpha
    from .bootstrap import bootstrap_ci
    from .calibration_map import AppliedCalibration, CalibrationMap, fit_calibration
    from .calibrators import IsotonicCalibrator, OrdinalCalibrator
    from .cascade_threshold import CascadeFit, CascadeTargetError, fit_threshold
    from .dawid_skene import DawidSkeneResult, dawid_skene
    from .errors import (
        CalibrationError,
        InputDataError,
        JoinError,
        NotFittedError,
        ProvenanceMismatchError,
        UndefinedStatisticError,
    )
    from .joined import CriterionData, Joined, join, join_warnings
    from .kappa import agreement_weights, cohen_kappa, fleiss_kappa, gwet_ac
    from .labels import (
        HumanLabels,
        human_labels_from_rows,
        label_groups,
        load_human_labels,
        scales_from,
    )
    from .ppi import PPIEstimate, ppi_mean, prediction_powered_mean
    from .report import AgreementReport, agreement_report
    from .stat import Stat
    from .synthetic import CascadeSimulation, simulate_judging
    from .verdicts import JudgeOutput, judge_output_from_records, load_judge_output, rubric_for
