"""One error family for all of jurybox.

The command line and the HTTP service map errors in one place each (the exit code here, the
HTTP answer in ``jurybox.serving.problems``).

* `InputError`: what the user gave is wrong (a definition file, a prediction row, a
  label, an option, a request field). Exit code 2 on the command line, HTTP 4xx in the service.
  It carries the ``field`` at fault where there is one, so callers never parse messages.
* `ExecutionError`: the input was fine but running it failed (a judge crashed, a server
  went away, a model ran out of memory). Exit code 1, HTTP 503: trying again may work.
"""

from __future__ import annotations

from typing import Any


def rebuilt(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """An exception of ``cls`` with these ``args`` and attributes, its ``__init__`` not run.

    What `Picklable.__reduce__` unpickles with.
    """
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class Picklable:
    """Mixin: an exception that survives pickling whatever its ``__init__`` takes.

    Pickle rebuilds an exception by calling its class with its ``args`` (the message alone, for
    most of ours), which fails for an ``__init__`` that takes other arguments: Ray then reports
    ``Failed to deserialize exception`` in place of the error. This one is rebuilt from its
    ``args`` and its attributes (``field``, ``unscored``, ...), its ``__init__`` not run.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        assert isinstance(self, BaseException)
        return rebuilt, (type(self), self.args, dict(self.__dict__))


class JuryboxError(Picklable, Exception):
    """Base of every error jurybox raises on purpose.

    Every one survives pickling (a Ray worker's error reaches the driver) with its message and
    fields (`Picklable`).
    """

    exit_code = 1


class InputError(JuryboxError, ValueError):
    """Bad input, phrased for the user.

    Args:
        message: What is wrong, phrased for the user.
        field: The field at fault, if any (kept as ``field``, so callers never parse messages).
    """

    exit_code = 2

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ExecutionError(JuryboxError, RuntimeError):
    """Running failed although the input was valid."""

    exit_code = 1


#: How to get the full jurybox where jurybox-client is installed (they hold the same modules).
FULL_INSTALL = "from a clone of jurybox: pip uninstall -y jurybox-client && pip install ."


class InstallError(JuryboxError, ImportError):
    """What needs the full jurybox, used where only jurybox-client (the adapters' URL mode) is.

    The message names what was asked for, what is missing and the install command.
    """

    exit_code = 2


def client_only() -> bool:
    """Whether this environment has jurybox-client and not the full jurybox."""
    from importlib.metadata import PackageNotFoundError, distribution

    for name, answer in (("jurybox", False), ("jurybox-client", True)):
        try:
            distribution(name)
        except PackageNotFoundError:
            continue
        return answer
    return False


def needs_full_install(what: str, missing: str) -> InstallError:
    """The error for ``what``, which needs ``missing``, in the client-only install."""
    return InstallError(
        f"{what} needs the full jurybox install ({missing} is not here: this is jurybox-client, "
        f"which judges through a running jurybox serve only, with url=); {FULL_INSTALL}"
    )


def last_line(exc: BaseException) -> str:
    """An error raised in another process, in one line.

    Ray wraps a remote exception (its ``cause``) with the remote traceback, whose last line is the
    error itself.
    """
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return text[-1] if text else type(cause).__name__
