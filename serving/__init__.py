"""jurybox.serving: how jurybox runs: the command line, the bulk runner and its results file,
the scoring service (Ray Serve + HTTP API) and its Python client.

Names resolve lazily: ``import jurybox.serving`` pulls in neither Ray nor the judges' models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {"Client": "service.client", "RemoteJury": "service.client",
            "build_jury_app": "service.builder", "ServiceConfig": "service.config",
            "judge_file": "runs.local"}
__all__ = ["Client", "RemoteJury", "ServiceConfig", "build_jury_app", "judge_file"]


def __getattr__(name: str) -> Any:
    import importlib

    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


if TYPE_CHECKING:
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.service.builder import build_jury_app
    from jurybox.serving.service.client import Client, RemoteJury
    from jurybox.serving.service.config import ServiceConfig
