"""Calibration maps fitted on human labels and applied when scoring.

The calibrators (isotonic, ordinal), the per-criterion fit (`.fitting`),
`.calibration_map.CalibrationMap` (fit, save, load, apply), cross-validation
(`.crossval`) and correlation-aware judge weights (`.aggregation`).
"""
