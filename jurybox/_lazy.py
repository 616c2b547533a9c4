"""Lazy names for a package's front: ``from jurybox import Jury`` imports the judges when asked,
not ``import jurybox`` (which stays cheap: no torch, Ray or vLLM, not even numpy).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``exports`` (name -> the module it lives
    in, absolute or relative to ``package``): each name imported on first use, then kept.
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
