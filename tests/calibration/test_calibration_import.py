"""`import jurybox.calibration` stays light, and every exported name resolves."""

from __future__ import annotations

import json
import subprocess
import sys

import jurybox.calibration as calibration


def test_import_pulls_no_heavy_modules() -> None:
    code = (
        "import sys, json, jurybox.calibration; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'ray', 'vllm', 'scipy', 'sklearn', 'statsmodels', 'pandas'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_statistics_do_not_pull_heavy_modules() -> None:
    code = (
        "import sys, json, numpy as np; from jurybox.calibration import "
        "krippendorff_alpha, cohen_kappa, gwet_ac, fleiss_kappa; "
        "krippendorff_alpha(np.eye(3), 'interval'); cohen_kappa([0, 1], [0, 1]); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'ray', 'vllm', 'sklearn', 'statsmodels'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_every_export_resolves() -> None:
    for name in calibration.__all__:
        assert getattr(calibration, name) is not None, name
