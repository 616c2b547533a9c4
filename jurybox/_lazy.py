"""Lazy names for a package's front, imported on first use.

``from jurybox import Jury`` imports the judges when asked, not ``import jurybox`` (which stays
cheap: no torch, Ray or vLLM, not even numpy).

It also knows what the client-only install (jurybox-client, client/pyproject.toml) holds, so
that a front there exports only the names whose modules came with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, distribution
from importlib.util import resolve_name
from typing import Any

#: What jurybox-client holds (client/pyproject.toml's patterns say the same to setuptools;
#: tests/test_wheels.py checks its built wheel against this): a package -> whether the packages
#: below it come too (otherwise only its own files).
CLIENT_PACKAGES = {
    "jurybox": False,
    "jurybox.rubrics": True,
    "jurybox.judges": True,
    "jurybox.integrations": True,
    "jurybox.serving": False,
    "jurybox.calibration": False,  # (its __init__ and errors: the front of the modules below)
}
#: ... and these modules of packages it does not hold (with their packages' ``__init__``s): the
#: service's Python client, and the drift monitor the adapters' guard runs on this side (#62;
#: numpy only, and the client has numpy and scipy).
CLIENT_SINGLE_MODULES = (
    "jurybox.serving.service.client",
    "jurybox.calibration.stats.sequences",
    "jurybox.calibration.stats.monitors",
)


def client_holds(path: str) -> bool:
    """Whether jurybox-client's wheel holds the file at ``path`` (``jurybox/judges/jury.py``)."""
    folder, _, name = path.rpartition("/")
    here = folder.replace("/", ".")
    if f"{here}.{name.removesuffix('.py')}" in CLIENT_SINGLE_MODULES:
        return True
    if name == "__init__.py" and any(m.startswith(f"{here}.") for m in CLIENT_SINGLE_MODULES):
        return True
    package = here
    while package:
        below = CLIENT_PACKAGES.get(package)
        if below is not None and (below or package == here):
            return True
        package = package.rpartition(".")[0]
    return False


def _module_file(module: str) -> str:
    # An export names a module; a package is its __init__ (only CLIENT_PACKAGES' are told apart,
    # which is all a front's exports need: the packages it names are the client's own).
    path = module.replace(".", "/")
    return f"{path}/__init__.py" if module in CLIENT_PACKAGES else f"{path}.py"


def client_exports(package: str, exports: dict[str, str]) -> set[str]:
    """The names of a front's ``exports`` (as `lazy` takes them) whose modules the client holds."""
    return {
        name for name in exports if client_holds(_module_file(resolve_name(exports[name], package)))
    }


def client_only() -> bool:
    """Whether this environment has jurybox-client and not the full jurybox.

    The same question as `jurybox.rubrics.errors.client_only` (which the errors ask, and tests
    stand in for), answered here without importing the rubrics: ``import jurybox`` stays cheap,
    and the errors module imports nothing of this one (no import circle).
    """
    for name, answer in (("jurybox", False), ("jurybox-client", True)):
        try:
            distribution(name)
        except PackageNotFoundError:
            continue
        return answer
    return False


def lazy(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` that import its exports on first use.

    Each name is imported on first use, then kept in the package's namespace. In the client-only
    install (jurybox-client) the front lists (``__all__``, ``dir()``) only the names whose
    modules it holds, and a name whose module it lacks is an `InstallError` naming the full
    install's command.

    Args:
        package: The package whose front this is (``__name__`` in its ``__init__``).
        exports: Name -> the module it lives in, absolute or relative to ``package``.

    Returns:
        The module's ``__getattr__`` and ``__dir__``.
    """
    namespace = importlib.import_module(package).__dict__
    listed = set(exports)
    if client_only():  # (a look at the installed distributions: well under a millisecond)
        listed = client_exports(package, exports)
        if "__all__" in namespace:
            namespace["__all__"] = [
                name for name in namespace["__all__"] if name in listed or name not in exports
            ]

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
        return sorted({*namespace, *listed})

    return __getattr__, __dir__
