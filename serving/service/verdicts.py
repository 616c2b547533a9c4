"""A request's verdicts on the service, around their judging.

Before the judges, the verdict cache (`looked_up`: only the items it does not hold are judged; a
canary never looked up); after them, the fresh verdicts stored (`stored`), the jurors checked
across requests (`Jurors`), the verdict records calibrated (`records_of`) and canaries counted apart
(`count_canaries`). The scoring service (`jurybox.serving.service.scoring.ScoringService.judge`)
runs them in this order; none of them waits on the cache: when another process holds it, the
request judges, or answers, without it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jurybox.judges.cache import CacheBusy, CacheLookup, VerdictCache
from jurybox.judges.jurors import (
    AgreementHistory,
    JurorCheck,
    decide_without,
    flag_jurors,
    mark_flagged,
)
from jurybox.rubrics import Rubric, Verdict, input_hash
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import RewardSpec
from jurybox.serving.service.metrics import Metrics

if TYPE_CHECKING:
    from jurybox.calibration import AppliedCalibration
    from jurybox.judges.spec import JurySpec

logger = logging.getLogger("jurybox.serving")

# Clients and rubric configurations whose jurors' agreement is kept, one history per client and
# configuration (inline rubrics are each one); the least recently used is forgotten first.
MAX_AGREEMENT_KEYS = 256


async def looked_up(
    cache: VerdictCache | None,
    metrics: Metrics,
    prov: str,
    items: list[Any],
    canaries: frozenset[int] = frozenset(),
) -> CacheLookup:
    """The items' cache lookup; every item to judge when the cache is busy.

    Busy: another process holds its lock. A verdict never waits on the cache. A canary is
    never looked up: it is judged afresh each time, so that a jury that changes shows in it.
    """
    if canaries:
        rest = [k for k in range(len(items)) if k not in canaries]
        part = await looked_up(cache, metrics, prov, [items[k] for k in rest])
        keys = [""] * len(items)
        for j, key in enumerate(part.keys):
            keys[rest[j]] = key
        found = {rest[j]: v for j, v in part.found.items()}
        todo = sorted(canaries | {rest[j] for j in part.todo})
        return CacheLookup(part.cache, prov, keys, found, todo)
    if cache is None:
        return CacheLookup.of(None, prov, items)  # every item to judge
    try:
        lookup = await asyncio.to_thread(CacheLookup.of, cache, prov, items)
    except CacheBusy as exc:
        logger.warning("verdict cache skipped for %d item(s): %s", len(items), exc)
        metrics.cache.labels("skipped").inc(len(items))
        return CacheLookup.of(None, prov, items)
    metrics.cache.labels("hit").inc(len(lookup.found))
    metrics.cache.labels("miss").inc(len(lookup.todo))
    return lookup


async def stored(
    lookup: CacheLookup,
    fresh: list[Verdict],
    metrics: Metrics,
    canaries: frozenset[int] = frozenset(),
) -> None:
    """Store fresh verdicts in the cache (never a canary's), or skip it when it is busy."""
    if lookup.cache is None:
        return
    if canaries:
        kept = [(k, v) for k, v in zip(lookup.todo, fresh) if k not in canaries]
        lookup = replace(lookup, todo=[k for k, _ in kept])
        fresh = [v for _, v in kept]
    try:
        await asyncio.to_thread(lookup.store, fresh)
    except CacheBusy as exc:
        logger.warning("verdict cache skipped: %d verdict(s) not stored: %s", len(fresh), exc)
        metrics.cache.labels("skipped").inc(len(fresh))


class Jurors:
    """The jurors' checks of a service (``--juror-checks``), their agreement kept across requests.

    ``check`` None: the service checks no juror (`checked` returns the verdicts as they are).
    """

    def __init__(self, check: JurorCheck | None, jury: JurySpec, metrics: Metrics) -> None:
        self.check = check
        self.jury = jury
        self.metrics = metrics
        self.agreement: collections.OrderedDict[str, AgreementHistory] = collections.OrderedDict()
        self._lock = threading.Lock()  # (checked runs in threads)
        self._flagged: set[tuple[str, str, str]] = set()  # warned of once each

    def checked(
        self, rubric: Rubric, prov: str, verdicts: list[Verdict], client: str = ""
    ) -> list[Verdict]:
        """A request's verdicts with its failing jurors flagged, counted and, if asked, left out.

        Agreement is kept per client (its address, `jurybox.serving.service.gate.CLIENT`) and
        rubric configuration (``prov``) across requests, so one-item requests are judged over a
        window (`jurybox.judges.jurors`), and one client's requests never flag a juror (nor
        leave it out) in another's verdicts. At most `MAX_AGREEMENT_KEYS` histories are kept,
        the least recently used forgotten first. The verdicts are the cache's and the fresh
        ones: a juror's leaving out depends on the request, so it is done here, after the cache
        stored what it stores, and never stored.
        """
        check = self.check
        if check is None or not verdicts:
            return verdicts
        key = f"{client}\n{prov}"
        with self._lock:
            history = self.agreement.pop(key, None) or AgreementHistory(check.history)
            self.agreement[key] = history  # the most recent last; the oldest forgotten
            while len(self.agreement) > MAX_AGREEMENT_KEYS:
                self.agreement.popitem(last=False)
        flags = flag_jurors(rubric, self.jury, verdicts, check, history)
        if not flags:
            return verdicts
        self.metrics.count_flags(flags)
        for flag in flags:
            if (key, flag.judge, flag.kind) not in self._flagged:
                if len(self._flagged) >= 16 * MAX_AGREEMENT_KEYS:
                    self._flagged.clear()  # (warned again, rather than kept without bound)
                self._flagged.add((key, flag.judge, flag.kind))
                logger.warning(
                    "juror %s flagged on rubric %s: %s%s (%s)",
                    flag.judge,
                    rubric.name,
                    flag.kind,
                    f" on {flag.criterion}" if flag.criterion else "",
                    flag.detail,
                )
        verdicts = mark_flagged(verdicts, flags)
        if not check.leave_out:
            return verdicts
        return decide_without(rubric, self.jury, verdicts, flags)


def records_of(
    calibrations: Mapping[str, AppliedCalibration],
    rubric: Rubric,
    prov: str,
    verdicts: list[Verdict],
    items: list[Any],
) -> list[dict[str, Any]]:
    """The verdict records of a request, calibrated where a map applies (in a thread)."""
    out = [v.to_record(input=input_hash(item)) for v, item in zip(verdicts, items)]
    calibration = calibrations.get(prov)
    if calibration is not None:
        out = [calibration.apply(r, rubric, it) for r, it in zip(out, items)]
    return out


def count_canaries(
    metrics: Metrics,
    known: Mapping[str, Rubric],
    rubric: Rubric,
    records: list[dict[str, Any]],
    at: frozenset[int],
) -> None:
    """Canary verdicts say so (``canary: true``) and are counted apart in the metrics.

    Labelled by the rubric's name where the service knows it (``known``: its rubrics), else
    ``inline`` (a client's names must not grow the metrics without bound). The score is the
    rubric's reward (its formula, or its only criterion) on [0, 1]; a rubric without one, or an
    unscored canary, is counted but not scored.
    """
    name = rubric.name if known.get(rubric.name) == rubric else "inline"
    for k in at:
        records[k]["canary"] = True
    metrics.canary_items.labels(name).inc(len(at))
    try:
        unit = RewardSpec(unscored="none").bind(rubric)
    except InputError:
        return
    for k in at:
        value = unit.value(records[k])
        if value is not None:
            metrics.canary_score.labels(name).observe(value)
