"""jurybox.serving: how jurybox runs: the command line, the bulk runner and its results file,
the scoring service (Ray Serve + HTTP API) and its Python client.

Names resolve lazily: ``import jurybox.serving`` pulls in neither Ray nor the judges' models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

_EXPORTS = {"Client": "client", "RemoteJury": "client", "build_jury_app": "builder",
            "ServiceConfig": "config", "judge_file": "bulk"}
__all__ = ["Client", "RemoteJury", "ServiceConfig", "build_jury_app", "judge_file"]


def __getattr__(name: str) -> Any:
    import importlib

    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


if TYPE_CHECKING:
    from .builder import build_jury_app
    from .bulk import judge_file
    from .client import Client, RemoteJury
    from .config import ServiceConfig
