"""One error family for all of jurybox.

The command line and the HTTP service map errors in one place.

* `InputError`: what the user gave is wrong (a definition file, a prediction row, a
  label, an option, a request field). Exit code 2 on the command line, HTTP 4xx in the service.
  It carries the ``field`` at fault where there is one, so callers never parse messages.
* `ExecutionError`: the input was fine but running it failed (a judge crashed, a server
  went away, a model ran out of memory). Exit code 1, HTTP 503: trying again may work.
"""

from __future__ import annotations


class JuryboxError(Exception):
    """Base of every error jurybox raises on purpose."""

    exit_code = 1
    http_status = 500


class InputError(JuryboxError, ValueError):
    """Bad input, phrased for the user.

    Args:
        message: What is wrong, phrased for the user.
        field: The field at fault, if any (kept as ``field``, so callers never parse messages).
    """

    exit_code = 2
    http_status = 422

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ExecutionError(JuryboxError, RuntimeError):
    """Running failed although the input was valid."""

    exit_code = 1
    http_status = 503


def last_line(exc: BaseException) -> str:
    """An error raised in another process, in one line.

    Ray wraps a remote exception (its ``cause``) with the remote traceback, whose last line is the
    error itself.
    """
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return text[-1] if text else type(cause).__name__
