# ruff: noqa: F401  (the TYPE_CHECKING imports exist for static tools only)
"""Agreement statistics, human labels and verdicts, calibration maps, estimates and audits.

jurybox.calibration holds agreement statistics, human labels and verdicts, calibration maps,
estimates from few labels, and audits, in rooms:

- ``stats``: `krippendorff_alpha`, `fleiss_kappa`, `cohen_kappa`,
  `gwet_ac`, `spearman`, `kendall`, `pearson`,
  `exact_agreement`, `adjacent_agreement`, `bootstrap_ci`,
  `dawid_skene`, `Stat` (vectorised numpy; undefined results are
  ``Stat(value=None, reason=...)``, never NaN).
- ``data``: `load_human_labels` (file format in `.data.labels`; the labelling page's
  file is `.data.label_store`), `load_judge_output`, `join`.
- ``maps``: `fit_calibration` / `CalibrationMap`, the calibrators, judge weights.
- ``estimates``: `ppi_mean` / `prediction_powered_mean`, actively chosen labels
  (`.estimates.active`), which item next (`.estimates.selection`), `fit_threshold`
  (a cascade's threshold with a guarantee; fitting a jury's cascade from its verdicts is
  `jurybox.serving.runs.cascade_fit`, since it needs the judges), the simulations.
- ``audits``: bias audits, win rates and Bradley-Terry, length control.
- ``reports``: `agreement_report` and the pages.

Imports nothing of ``jurybox.judges`` or ``jurybox.serving``: only ``jurybox.rubrics``.

Names resolve lazily, so ``import jurybox.calibration`` stays cheap (no scipy/sklearn until a
function needs them; never torch, ray or vllm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jurybox._lazy import lazy

_EXPORTS: dict[str, str] = {
    # statistics
    "krippendorff_alpha": "stats.alpha",
    "cohen_kappa": "stats.kappa",
    "fleiss_kappa": "stats.kappa",
    "gwet_ac": "stats.kappa",
    "agreement_weights": "stats.kappa",
    "pearson": "stats.agreement",
    "spearman": "stats.agreement",
    "kendall": "stats.agreement",
    "exact_agreement": "stats.agreement",
    "adjacent_agreement": "stats.agreement",
    "mean_absolute_error": "stats.agreement",
    "mean_difference": "stats.agreement",
    "bootstrap_ci": "stats.bootstrap",
    "Stat": "stats.stat",
    # data
    "HumanLabels": "data.labels",
    "JudgeOutput": "data.verdicts",
    "Joined": "data.joined",
    "CriterionData": "data.joined",
    "load_human_labels": "data.labels",
    "load_judge_output": "data.verdicts",
    "human_labels_from_rows": "data.labels",
    "label_groups": "data.labels",
    "judge_output_from_records": "data.verdicts",
    "join": "data.joined",
    "scales_from": "data.labels",
    "rubric_for": "data.verdicts",
    "join_warnings": "data.joined",
    # calibration
    "IsotonicCalibrator": "maps.calibrators",
    "OrdinalCalibrator": "maps.calibrators",
    "CalibrationMap": "maps.calibration_map",
    "AppliedCalibration": "maps.calibration_map",
    "fit_calibration": "maps.calibration_map",
    "dawid_skene": "stats.dawid_skene",
    "fit_threshold": "estimates.cascade_threshold",
    "CascadeFit": "estimates.cascade_threshold",
    "CascadeTargetError": "estimates.cascade_threshold",
    "CascadeSimulation": "estimates.synthetic",
    "DawidSkeneResult": "stats.dawid_skene",
    # estimates and reports
    "ppi_mean": "estimates.ppi",
    "prediction_powered_mean": "estimates.ppi",
    "PPIEstimate": "estimates.ppi",
    "agreement_report": "reports.report",
    "AgreementReport": "reports.report",
    "simulate_judging": "estimates.synthetic",
    # errors
    "CalibrationError": "errors",
    "InputDataError": "errors",
    "JoinError": "errors",
    "UndefinedStatisticError": "errors",
    "ProvenanceMismatchError": "errors",
    "NotFittedError": "errors",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy(__name__, {name: f".{module}" for name, module in _EXPORTS.items()})


if TYPE_CHECKING:  # static tools see real imports
    from .data.joined import CriterionData, Joined, join, join_warnings
    from .data.labels import (
        HumanLabels,
        human_labels_from_rows,
        label_groups,
        load_human_labels,
        scales_from,
    )
    from .data.verdicts import JudgeOutput, judge_output_from_records, load_judge_output, rubric_for
    from .errors import (
        CalibrationError,
        InputDataError,
        JoinError,
        NotFittedError,
        ProvenanceMismatchError,
        UndefinedStatisticError,
    )
    from .estimates.cascade_threshold import CascadeFit, CascadeTargetError, fit_threshold
    from .estimates.ppi import PPIEstimate, ppi_mean, prediction_powered_mean
    from .estimates.synthetic import CascadeSimulation, simulate_judging
    from .maps.calibration_map import AppliedCalibration, CalibrationMap, fit_calibration
    from .maps.calibrators import IsotonicCalibrator, OrdinalCalibrator
    from .reports.report import AgreementReport, agreement_report
    from .stats.agreement import (
        adjacent_agreement,
        exact_agreement,
        kendall,
        mean_absolute_error,
        mean_difference,
        pearson,
        spearman,
    )
    from .stats.alpha import krippendorff_alpha
    from .stats.bootstrap import bootstrap_ci
    from .stats.dawid_skene import DawidSkeneResult, dawid_skene
    from .stats.kappa import agreement_weights, cohen_kappa, fleiss_kappa, gwet_ac
    from .stats.stat import Stat
