"""Lazy names for a package's front, imported on first use.

``from jurybox import Jury`` imports the judges when asked, not ``import jurybox`` (which stays
cheap: no torch, Ray or vLLM, not even numpy).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` that import its exports on first use.

    Each name is imported on first use, then kept in the package's namespace. In the client-only
    install (jurybox-client) a name whose module it lacks is an `InstallError` naming the full
    install's command.

    Args:
        package: The package whose front this is (``__name__`` in its ``__init__``).
        exports: Name -> the module it lives in, absolute or relative to ``package``.

    Returns:
        The module's ``__getattr__`` and ``__dir__``.
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            found = importlib.import_module(module, package)
        except ModuleNotFoundError as exc:
            from jurybox.rubrics.errors import client_only, needs_full_install

            if not client_only():
                raise
            raise needs_full_install(f"{package}.{name}", f"module {exc.name}") from exc
        value = getattr(found, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
