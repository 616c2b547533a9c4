"""Calibration maps fitted on human labels and applied when scoring.

The calibrators (isotonic, ordinal), the per-criterion fit (:mod:`.fitting`),
:class:`.calibration_map.CalibrationMap` (fit, save, load, apply), cross-validation
(:mod:`.crossval`) and correlation-aware judge weights (:mod:`.aggregation`).
"""
