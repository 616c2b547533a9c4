"""What a request to jurybox meets, named by its class, without HTTP.

The scoring service (``serving/service``) and the labelling page (``serving/labelling``) raise
these where the problem happens: `TooLarge` where a limit is passed, `Overloaded` where a queue
is full, `Invalid` where a field is wrong. Each carries what is wrong, the field at fault and,
for a problem that passes, how many seconds to wait before trying again (and `Unauthorized`, the
credentials asked for); none carries a status code or a header. ``serving/problems.py`` is the
one place that says which HTTP answer (status, kind, body, headers) each class is.

Each survives pickling with its fields (`jurybox.rubrics.errors.Picklable`): an inline rubric's
problem is raised in a worker process and answered in the ingress.
"""

from __future__ import annotations

import copy
from typing import Self

from jurybox.rubrics.errors import Picklable


class RequestProblem(Picklable, Exception):
    """What went wrong with a request, named by its class (raised only as one of its kinds).

    Args:
        message: What is wrong, in words.
        field: The field at fault, if any.
        retry_after: Seconds to wait before trying again, for a problem that passes (a busy
            queue, a judge down); None otherwise.
    """

    def __init__(
        self, message: str, field: str | None = None, *, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.message, self.field, self.retry_after = message, field, retry_after

    def moved(self, message: str, field: str | None) -> Self:
        """The same problem (its class, its facts) told in another message, at another field."""
        moved = copy.copy(self)
        moved.args, moved.message, moved.field = (message,), message, field
        return moved


class Invalid(RequestProblem):
    """A request's field (or the request) is not what the service takes."""


class Unscorable(RequestProblem):
    """A sample the jury could not score, where the client asked for an error then."""


class BadRequest(RequestProblem):
    """A request that cannot be read at all (its body, its headers)."""


class Unauthorized(RequestProblem):
    """A request without the service's token.

    Args:
        message: What is wrong, in words.
        field: The field at fault, if any.
        retry_after: Seconds to wait before trying again; None: not told.
        scheme: The credentials the service asks for (``Bearer``), told to the client; None:
            not told.
    """

    def __init__(
        self,
        message: str,
        field: str | None = None,
        *,
        retry_after: int | None = None,
        scheme: str | None = None,
    ) -> None:
        super().__init__(message, field, retry_after=retry_after)
        self.scheme = scheme


class NotFound(RequestProblem):
    """A name the service does not know."""


class SlowBody(RequestProblem):
    """A body that did not arrive in time (the connection ends: the rest is never read)."""


class LengthRequired(RequestProblem):
    """A body sent without its length."""


class TooLarge(RequestProblem):
    """A request over one of the service's limits."""


class Overloaded(RequestProblem):
    """The service, or a judge, is busy: come back later (after ``retry_after`` seconds)."""


class Unavailable(RequestProblem):
    """The service cannot answer now (a judge down, shutting down): retry later."""


class TimedOut(RequestProblem):
    """A request that took longer than the service's deadline."""
