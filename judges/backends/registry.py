"""Backends by name: what a jury file's ``backend:`` may say.

The shipped backends are here; a package adds its own under the ``jurybox.backends`` entry point
group (``name = "package.module:factory"``), and a program with `register`. A factory takes the
judge's `JudgeSpec` and returns a `Backend`. A backend is imported only when a judge uses it, so
naming a kind whose libraries are missing fails at load, saying which.

>>> from jurybox.judges.backends.registry import backend_kind
>>> backend_kind("vllm").weights, backend_kind("openai").weights  # local weights, a server's
(True, False)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from jurybox.rubrics.errors import InputError

if TYPE_CHECKING:
    from .protocol import Backend

ENTRY_POINTS = "jurybox.backends"

# A factory takes the judge's JudgeSpec (jurybox.judges.spec, which validates its backend's name
# against this registry: so the spec is not named here) and returns its backend.
Factory = Callable[[Any], "Backend"]


@dataclass(frozen=True)
class BackendKind:
    """A backend a jury file can name: how to make one, and what jurybox needs to know of it.

    Attributes:
        name: What a jury file's ``backend:`` says.
        factory: ``"module:attribute"``, imported on first use, or the callable; it takes the
            judge's `JudgeSpec` and returns its backend.
        weights: Its judges' models are weights on this machine (checked before a service
            starts, counted by ``jurybox models``).
        batches: One generate at a time over batches of prompts, as a local model does (the Ray
            engine sizes its batches by the judge's ``batch_size``), rather than many concurrent
            requests, as a server or engine takes.
    """

    name: str
    factory: str | Factory  # "module:attribute", imported on first use, or the callable
    weights: bool = False
    batches: bool = False

    def make(self, spec: Any) -> Backend:
        """A new backend for ``spec``.

        Args:
            spec: The judge's `JudgeSpec`.

        Returns:
            The backend the factory makes.
        """
        factory = self.factory
        if isinstance(factory, str):
            module, _, attribute = factory.partition(":")
            factory = getattr(importlib.import_module(module), attribute)
        return factory(spec)


_SHIPPED = (
    BackendKind(
        "transformers",
        "jurybox.judges.backends.transformers:TransformersBackend",
        weights=True,
        batches=True,
    ),
    BackendKind("vllm", "jurybox.judges.backends.vllm:VLLMBackend", weights=True),
    BackendKind("openai", "jurybox.judges.backends.openai:OpenAIBackend"),
    BackendKind("replay", "jurybox.judges.backends.replay:replay_backend", batches=True),
)
_registered: dict[str, BackendKind] = {}


def register(
    name: str, factory: str | Factory, *, weights: bool = False, batches: bool = False
) -> BackendKind:
    """Make ``backend: name`` in a jury file use ``factory``.

    A shipped name cannot be replaced; registering a name again replaces the earlier one.

    Args:
        name: The name a jury file's ``backend:`` gives.
        factory: A callable that takes the judge's `JudgeSpec` and returns its `Backend`, or
            ``"module:attribute"`` naming one (imported on first use).
        weights: Its judges' models are weights on this machine (checked before a service
            starts, counted by ``jurybox models``).
        batches: It generates one batch of prompts at a time, as a local model does, rather
            than taking many concurrent requests.

    Returns:
        The registered kind.

    Raises:
        ValueError: ``name`` is one of the shipped backends'.
    """
    if name in {k.name for k in _SHIPPED}:
        raise ValueError(
            f"backend {name!r} is one of jurybox's own; register yours under another name"
        )
    kind = BackendKind(name, factory, weights=weights, batches=batches)
    _registered[name] = kind
    return kind


def _from_entry_points() -> dict[str, BackendKind]:
    found: dict[str, BackendKind] = {}
    for point in entry_points(group=ENTRY_POINTS):
        found[point.name] = BackendKind(point.name, point.value)
    return found


def kinds() -> dict[str, BackendKind]:
    """Every backend a jury file can name, by name.

    The shipped ones come first, then those of installed packages' ``jurybox.backends`` entry
    points, then those registered in this process.
    """
    out = {k.name: k for k in _SHIPPED}
    for name, kind in {**_from_entry_points(), **_registered}.items():
        out.setdefault(name, kind)
    return out


def backend_kind(name: str) -> BackendKind:
    """The backend kind named ``name``.

    Args:
        name: What a jury file's ``backend:`` says.

    Returns:
        The kind: how to make one, and what jurybox needs to know of it.

    Raises:
        InputError: No backend has that name (the message lists the known ones).
    """
    known = kinds()
    if name not in known:
        raise InputError(
            f"unknown backend {name!r}: known backends are {sorted(known)} "
            f"(a package adds one under the {ENTRY_POINTS!r} entry point group)",
            field="backend",
        )
    return known[name]


def make_backend(spec: Any) -> Backend:
    """A new backend for the judge, of the kind its ``backend`` names.

    Args:
        spec: The judge's `JudgeSpec`.

    Returns:
        The judge's backend.

    Raises:
        InputError: No backend has the name the spec gives.
    """
    return backend_kind(spec.backend).make(spec)
