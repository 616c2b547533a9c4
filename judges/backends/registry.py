"""Backends by name: what a jury file's ``backend:`` may say, and what each one is.

The shipped backends are here; a package adds its own under the ``jurybox.backends`` entry point
group (``name = "package.module:factory"``), and a program with `register`. A factory takes the
judge's `JudgeSpec` and returns a `Backend`. A backend is imported only when a judge uses it, so
naming a kind whose libraries are missing fails at load, saying which.

What jurybox needs to know of a backend is its entry's word, never read from its name: its kind
(``local`` weights, a ``remote`` API's model, a ``recording`` played back) and what it can do
(batches, tensor parallelism, loading beside other judges, a backend of its own in a service
replica). A package's entry point that names a `BackendKind` rather than a factory declares
them; one that names a factory is ``local``.

>>> from jurybox.judges.backends.registry import backend_kind
>>> backend_kind("vllm").kind, backend_kind("openai").kind, backend_kind("replay").kind
('local', 'remote', 'recording')
>>> backend_kind("vllm").weights, backend_kind("openai").weights  # local weights, a server's
(True, False)
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Literal

from jurybox.rubrics.errors import InputError

if TYPE_CHECKING:
    from .protocol import Backend

ENTRY_POINTS = "jurybox.backends"

# A factory takes the judge's JudgeSpec (jurybox.judges.spec, which validates its backend's name
# against this registry: so the spec is not named here) and returns its backend.
Factory = Callable[[Any], "Backend"]
# A rule over the judge's JudgeSpec, e.g. whether its model may load beside the others'.
Rule = Callable[[Any], bool]

Kind = Literal["local", "remote", "recording"]
KINDS: tuple[str, ...] = ("local", "remote", "recording")


def _load(reference: str | Callable) -> Callable:
    """``reference`` itself, or the attribute a ``"module:attribute"`` string names."""
    if isinstance(reference, str):
        module, _, attribute = reference.partition(":")
        return getattr(importlib.import_module(module), attribute)
    return reference


@dataclass(frozen=True)
class BackendKind:
    """A backend a jury file can name: how to make one, and what jurybox needs to know of it.

    Attributes:
        name: What a jury file's ``backend:`` says.
        factory: ``"module:attribute"``, imported on first use, or the callable; it takes the
            judge's `JudgeSpec` and returns its backend.
        kind: What a judge's ``model`` names. ``local``: weights this backend loads on this
            machine (identified in the provenance hash by their hub revision or files,
            "unpinned" warned of, checked before a service starts, counted by ``jurybox
            models``, in need of the full install). ``remote``: a model a server holds, known
            here by its name only. ``recording``: recorded generations played back, identified
            as the weights recorded (so a replayed run hashes as the recorded one).
        batches: One generate at a time over batches of prompts, as a local model does (the Ray
            engine sizes its batches by the judge's ``batch_size``), rather than many concurrent
            requests, as a server or engine takes.
        tensor_parallel: Its judges may split a model over several devices
            (``tensor_parallel_size`` above 1).
        side_by_side: Whether a judge's model may load while other judges' do (a rule over the
            judge's spec, or ``"module:attribute"`` naming one); None: never, one after another.
        replica: The factory of the backend a scoring service's replica runs, or None for the
            backend ``factory`` makes (a synchronous one gets concurrent requests merged into
            its batches).
    """

    name: str
    factory: str | Factory  # "module:attribute", imported on first use, or the callable
    kind: Kind = "local"
    batches: bool = False
    tensor_parallel: bool = False
    side_by_side: str | Rule | None = None
    replica: str | Factory | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"backend {self.name!r}: kind {self.kind!r} is none of {list(KINDS)}")

    @property
    def weights(self) -> bool:
        """Its judges' models are weights on this machine (the ``local`` kind)."""
        return self.kind == "local"

    def make(self, spec: Any) -> Backend:
        """A new backend for ``spec``.

        Args:
            spec: The judge's `JudgeSpec`.

        Returns:
            The backend the factory makes.
        """
        return _load(self.factory)(spec)

    def make_replica(self, spec: Any) -> Backend:
        """A new backend for ``spec`` as a scoring service's replica runs it.

        Args:
            spec: The judge's `JudgeSpec`.

        Returns:
            The backend the entry's ``replica`` factory makes, or its ``factory``'s.
        """
        return _load(self.replica or self.factory)(spec)

    def loads_side_by_side(self, spec: Any) -> bool:
        """Whether the judge's model may load while other judges' do.

        Args:
            spec: The judge's `JudgeSpec`.
        """
        return self.side_by_side is not None and bool(_load(self.side_by_side)(spec))


_SHIPPED = (
    BackendKind(
        "transformers",
        "jurybox.judges.backends.transformers:TransformersBackend",
        batches=True,
    ),
    # vLLM's own rules (what loads side by side, the replica's async engine) are in its module.
    BackendKind(
        "vllm",
        "jurybox.judges.backends.vllm:VLLMBackend",
        tensor_parallel=True,
        side_by_side="jurybox.judges.backends.vllm:loads_side_by_side",
        replica="jurybox.judges.backends.vllm:replica_backend",
    ),
    BackendKind("openai", "jurybox.judges.backends.openai:OpenAIBackend", kind="remote"),
    BackendKind(
        "replay", "jurybox.judges.backends.replay:replay_backend", kind="recording", batches=True
    ),
)
_SHIPPED_NAMES = frozenset(k.name for k in _SHIPPED)
_registered: dict[str, BackendKind] = {}


def register(
    name: str,
    factory: str | Factory,
    *,
    kind: Kind = "local",
    batches: bool = False,
    tensor_parallel: bool = False,
    side_by_side: str | Rule | None = None,
    replica: str | Factory | None = None,
) -> BackendKind:
    """Make ``backend: name`` in a jury file use ``factory``.

    A shipped name cannot be replaced; registering a name again replaces the earlier one.

    Args:
        name: The name a jury file's ``backend:`` gives.
        factory: A callable that takes the judge's `JudgeSpec` and returns its `Backend`, or
            ``"module:attribute"`` naming one (imported on first use).
        kind: ``local`` (its judges' models are weights on this machine: identified by their
            revision or files, checked before a service starts), ``remote`` (a server's model,
            known by its name) or ``recording`` (recorded generations of the weights named).
        batches: It generates one batch of prompts at a time, as a local model does, rather
            than taking many concurrent requests.
        tensor_parallel: Its judges may set ``tensor_parallel_size`` above 1.
        side_by_side: A rule over the judge's spec: may its model load while other judges' do
            (None: never).
        replica: The factory of the backend a scoring service's replica runs (None: ``factory``).

    Returns:
        The registered kind.

    Raises:
        ValueError: ``name`` is one of the shipped backends', or ``kind`` is none of the kinds.
    """
    if name in _SHIPPED_NAMES:
        raise ValueError(
            f"backend {name!r} is one of jurybox's own; register yours under another name"
        )
    entry = BackendKind(
        name,
        factory,
        kind=kind,
        batches=batches,
        tensor_parallel=tensor_parallel,
        side_by_side=side_by_side,
        replica=replica,
    )
    _registered[name] = entry
    return entry


def _from_entry_points() -> dict[str, BackendKind]:
    return dict(_entry_point_kinds(tuple(sys.path)))


@functools.lru_cache(maxsize=4)
def _entry_point_kinds(path: tuple[str, ...]) -> dict[str, BackendKind]:
    # Reading every installed package's entry points takes tens of milliseconds, and a kind is
    # asked for each judge of each provenance hash: read once per import path.
    return {p.name: BackendKind(p.name, p.value) for p in entry_points(group=ENTRY_POINTS)}


def kinds() -> dict[str, BackendKind]:
    """Every backend a jury file can name, by name.

    The shipped ones come first, then those of installed packages' ``jurybox.backends`` entry
    points, then those registered in this process. An entry point's is as it names it, not yet
    imported: `backend_kind` reads what it declares.
    """
    out = {k.name: k for k in _SHIPPED}
    for name, kind in {**_from_entry_points(), **_registered}.items():
        out.setdefault(name, kind)
    return out


def _named(name: str) -> BackendKind:
    # As kinds()[name], without reading the entry points for a shipped or registered name.
    if name in _SHIPPED_NAMES:
        return next(k for k in _SHIPPED if k.name == name)
    if name in _registered:
        return _registered[name]
    found = _from_entry_points()
    if name not in found:
        raise InputError(
            f"unknown backend {name!r}: known backends are {sorted(kinds())} "
            f"(a package adds one under the {ENTRY_POINTS!r} entry point group)",
            field="backend",
        )
    return found[name]


def require_known(name: str) -> None:
    """Check that a backend has the name ``name``, importing none.

    Args:
        name: What a jury file's ``backend:`` says.

    Raises:
        InputError: No backend has that name (the message lists the known ones).
    """
    _named(name)


def backend_kind(name: str) -> BackendKind:
    """The backend kind named ``name``.

    A package's entry point that names a `BackendKind` declares the kind and capabilities
    (under the entry point's name, whatever name it gives); one that names a factory is a
    ``local`` kind with none of them. Either is imported here.

    Args:
        name: What a jury file's ``backend:`` says.

    Returns:
        The kind: how to make one, and what jurybox needs to know of it.

    Raises:
        InputError: No backend has that name (the message lists the known ones).
    """
    entry = _named(name)
    if name in _SHIPPED_NAMES or name in _registered:
        return entry
    declared = _load(entry.factory)  # an entry point's target
    if isinstance(declared, BackendKind):
        return dataclasses.replace(declared, name=name)
    return entry


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
