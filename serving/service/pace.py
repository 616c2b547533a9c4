"""How fast the judges answer, and what one request may take of them.

A request the judges cannot finish within its deadline, at the best rate this replica has seen
them judge in the last `MAX_AGE_S` seconds, is refused before any judge runs (413, saying the
estimate), instead of holding them until its 504. (The rate is judge calls a second, whatever
their prompts' length: a client whose calls are slow lowers it for everyone, for at most
`MAX_AGE_S` seconds after its last such call.) And no request holds more than its share of them while others wait: a request of
more judge calls than a slice (an eighth of ``max_judge_calls``, at least `MIN_SLICE`) is judged slice by slice, at most
`SHARE` slices at once, each slice waiting for a slot of the gate as any request does, so that
the others' batches are judged between its slices.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from jurybox.serving.errors import TooLarge

#: Slices of one request judged at once (the gate's other slots stay for the others).
SHARE = 2
#: The fewest judge calls per judge in a slice (below, a call costs more than it holds a judge).
MIN_SLICE = 32
#: Judge calls of one judge remembered for the rate.
RECENT = 64
#: Seconds a measured call counts for the rate: slow calls (a client's long items, a judge that
#: was busy) stop refusing others once they are this old, since refused requests measure nothing.
MAX_AGE_S = 600.0


class Pace:
    """Each judge's recent calls: how many requests each took and how long."""

    def __init__(self) -> None:
        self._recent: dict[str, collections.deque[tuple[float, int, float]]] = {}

    def measured(self, judge: str, calls: int, seconds: float) -> None:
        """One call of ``judge`` answered ``calls`` requests in ``seconds``."""
        if calls > 0 and seconds > 0:
            recent = self._recent.setdefault(judge, collections.deque(maxlen=RECENT))
            recent.append((time.monotonic(), calls, seconds))

    def rate(self, judges: list[str], at_least: int) -> float | None:
        """Judge calls per second the slowest judge answers, at its best in calls this large.

        In calls of at least ``at_least`` requests: a call of a few requests takes about as long
        as one of many on a judge that batches them, so a small call's pace would underrate a
        large request's. None until each judge has answered such a call in the last
        `MAX_AGE_S` seconds.
        """
        rates = []
        since = time.monotonic() - MAX_AGE_S
        for judge in judges:
            seen = [
                n / t for at, n, t in self._recent.get(judge, ()) if n >= at_least and at >= since
            ]
            if not seen:
                return None
            rates.append(max(seen))
        return min(rates) if rates else None

    def check(
        self, calls: int, per_slice: int, deadline: float, judges: list[str], timeout: float
    ) -> None:
        """Refuse ``calls`` judge calls per judge that cannot end by ``deadline`` (monotonic).

        Judged in slices of ``per_slice`` calls, `SHARE` at once, at the rate measured in calls
        of at least half a slice (no estimate, so no refusal, before the judges have answered
        such a call). A request of one slice or less is never refused here: it holds no more
        than a slice, and a slow judge ends it at its deadline (504) as before.

        Raises:
            TooLarge: saying the estimate: calls, the measured rate, the deadline.
        """
        if calls <= per_slice:
            return  # a request of one slice holds no more than its share: it runs to its 504
        at_least = max(1, per_slice // 2)
        rate = self.rate(judges, at_least)
        if rate is None:
            return
        share = SHARE
        estimate = calls / (rate * share)
        left = deadline - time.monotonic()
        if estimate > left:
            raise TooLarge(
                f"{calls} judge calls per judge take about {estimate:.0f} s at this "
                f"service's measured rate ({rate:.3g} calls/s per judge in calls of "
                f"{at_least} or more, {share} at once), more than the {left:.0f} s left of "
                f"its deadline of {timeout:g} s (request_timeout_s): send fewer items, or "
                "fewer groups or a design with fewer calls",
            )


def check_pace(service: Any, calls: int, deadline: float) -> None:
    """Refuse a request of ``calls`` judge calls per judge that ``service`` cannot judge in time.

    ``service``: the scoring service (its gate's `Pace`, jury and limits); see `Pace.check`.
    """
    judges = [j.name for j in service.jury.judges]
    limits = service.limits
    per_slice = slice_calls(limits.max_judge_calls)
    service.gate.pace.check(calls, per_slice, deadline, judges, limits.request_timeout_s)


def slice_calls(max_judge_calls: int) -> int:
    """Judge calls per judge in a slice: an eighth of ``max_judge_calls``, at least `MIN_SLICE`."""
    return max(MIN_SLICE, max_judge_calls // 8)


def slices(n_items: int, calls_per_item: int, max_judge_calls: int) -> list[range]:
    """The items of a request in slices of an eighth of ``max_judge_calls`` calls (at least 32).

    >>> slices(40, 2, 512)
    [range(0, 32), range(32, 40)]
    >>> slices(10, 2, 64)  # a slice of 32 calls: 16 items
    [range(0, 10)]
    """
    per_slice = max(1, slice_calls(max_judge_calls) // max(1, calls_per_item))
    return [range(i, min(n_items, i + per_slice)) for i in range(0, n_items, per_slice)]
