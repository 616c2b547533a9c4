"""The judges' calls: one judge deployment's votes, a jury's steps, a judge's health.

Every call to a judge deployment goes through `JudgeCalls`: it counts the call
(``jurybox_judge_requests``), measures the judge's pace (`jurybox.serving.service.pace`), stops
the judge's work when its caller stops waiting, asks a dead replica's work once more, and turns a
judge that cannot answer into a retryable 503, never into votes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jurybox.judges.cascade import Steps
from jurybox.judges.spec import JurySpec
from jurybox.rubrics import Rubric, Verdict
from jurybox.rubrics.errors import last_line
from jurybox.serving.errors import Overloaded, Unavailable
from jurybox.serving.service.metrics import Metrics
from jurybox.serving.service.pace import Pace

# What a 503 for a judge that could not answer tells the client to wait (Serve restarts a dead
# replica; a tiny model reloads in seconds, a large one in about a minute).
RETRY_AFTER_UNAVAILABLE_S = 10


class JudgeCalls:
    """The calls to the jury's judge deployments (``judges``: judge name -> DeploymentHandle).

    Each call counted in ``metrics`` and timed into ``pace``; a ping waits at most
    ``health_timeout_s``.
    """

    def __init__(
        self,
        jury: JurySpec,
        judges: dict[str, Any],
        metrics: Metrics,
        pace: Pace,
        health_timeout_s: float,
    ) -> None:
        self.jury, self.judges, self.metrics, self.pace = jury, judges, metrics, pace
        self.health_timeout_s = health_timeout_s

    async def votes(self, judge: str, requests: Any, deadline: float) -> Any:
        """One judge's votes; a replica that dies is asked once more.

        Serve routes the retry to a live or restarted replica. A judge that still cannot answer
        fails the request with a retryable 503, never with votes: as in-process (``JudgeFailed``),
        an infrastructure failure is no verdict, so a client (``judge --url``) writes nothing and a
        rerun retries.
        """
        from ray.exceptions import RayActorError
        from ray.serve.exceptions import BackPressureError

        handle = self.judges[judge]
        reason = "no answer"
        for _ in range(2):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.metrics.judge_calls.labels(judge).inc()
            began = time.monotonic()
            response = handle.votes.remote(requests)
            try:
                votes = await asyncio.wait_for(response, left)
                self.pace.measured(judge, len(requests.requests), time.monotonic() - began)
                return votes
            except (TimeoutError, asyncio.CancelledError) as exc:
                # Past the deadline, or the client left: stop the judge's work too (awaiting
                # no more does not cancel it), so none runs beside the next request's.
                try:
                    response.cancel()
                except Exception:  # its routing failed at this very moment: nothing to stop
                    pass
                if cancelled_here() or not isinstance(exc, asyncio.CancelledError):
                    raise
                # Cancelled by someone else (Serve, for another request): no answer, asked again.
                reason = "its call was cancelled"
                continue
            except BackPressureError as exc:
                raise Overloaded(
                    f"judge {judge} is busy; retry later",
                    retry_after=int(exc.retry_after_s or 5),
                ) from None
            except RayActorError as exc:
                reason = f"its replica died ({type(exc).__name__})"
                continue
            except Exception as exc:
                reason = short(exc)
                break
        raise Unavailable(
            f"judge {judge} could not answer: {reason}; nothing was scored, retry later",
            retry_after=RETRY_AFTER_UNAVAILABLE_S,
        )

    async def steps(
        self, rubric: Rubric, prov: str, requests: Any, deadline: float
    ) -> list[Verdict]:
        """The verdicts of ``requests``: every judge of a step at once.

        A cascaded jury's later stages get only the items the earlier ones left open.
        """
        steps = Steps(rubric, self.jury, prov, requests)
        while (step := steps.next()) is not None:
            judges, open_requests = step
            votes = await every([self.votes(j.name, open_requests, deadline) for j in judges])
            # Deciding (aggregation, a client's formula) is CPU work: not on the loop.
            await asyncio.to_thread(steps.add, votes)
        return steps.verdicts()

    async def state(self, judge: str) -> str:
        """``ok``, or why the judge does not answer a ping within ``health_timeout_s``."""
        try:
            response = self.judges[judge].ping.remote()
            await asyncio.wait_for(response, self.health_timeout_s)
            return "ok"
        except TimeoutError:
            response.cancel()
            return f"no answer within {self.health_timeout_s:g} s (loading, or overloaded)"
        except Exception as exc:
            return short(exc)


async def every(calls: list[Any]) -> list[Any]:
    """Every judge's answer; when one fails the request, the others' calls are cancelled.

    When one fails the request (503, 429), the others' calls are cancelled, at the judges too,
    instead of judging on for a request that has failed.
    """
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


def cancelled_here() -> bool:
    """Whether the running task is being cancelled (else a CancelledError came from elsewhere)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def stopped() -> Unavailable:
    """What a client still waiting gets when its batch is stopped under it (the service stops)."""
    return Unavailable(
        "the batch this request was judged in was stopped (the service is shutting "
        "down); nothing was scored, retry later",
        retry_after=RETRY_AFTER_UNAVAILABLE_S,
    )


def short(exc: BaseException) -> str:
    """An exception from another process, in one line, with its type."""
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {last_line(exc)}"[:300]
