"""`serve_jury`: ``jurybox serve``'s service in the foreground, called from Python.

(Serving itself, Ctrl-C and the drain: test_service.py through the command.)"""

from __future__ import annotations

import pytest

from jurybox.judges.weights import ModelNotAvailable
from jurybox.serving.service.config import ServiceConfig
from jurybox.serving.service.foreground import serve_jury


def test_missing_weights_are_refused_before_ray_starts(tmp_path, monkeypatch):
    import ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    jury = tmp_path / "ghost.yaml"
    jury.write_text("judges:\n  - name: ghost\n    model: /nonexistent/model.gguf\n")
    said: list[str] = []
    with pytest.raises(ModelNotAvailable, match="^judge ghost: GGUF file /nonexistent"):
        serve_jury(ServiceConfig(jury=str(jury)), say=said.append)
    assert said == [] and not ray.is_initialized()
