"""How jurybox runs: the command line, bulk runs, the scoring service and its client.

``jurybox.serving`` holds the command line, the bulk runner and its results file, the scoring
service (Ray Serve + HTTP API) and its Python client.

Names resolve lazily: ``import jurybox.serving`` pulls in neither Ray nor the judges' models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jurybox._lazy import lazy

_EXPORTS = {
    "Client": "service.client",
    "RemoteJury": "service.client",
    "build_jury_app": "service.builder",
    "ServiceConfig": "service.config",
    "judge_file": "runs.local",
}
__all__ = ["Client", "RemoteJury", "ServiceConfig", "build_jury_app", "judge_file"]


__getattr__, __dir__ = lazy(__name__, {name: f".{module}" for name, module in _EXPORTS.items()})


if TYPE_CHECKING:
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.service.builder import build_jury_app
    from jurybox.serving.service.client import Client, RemoteJury
    from jurybox.serving.service.config import ServiceConfig
