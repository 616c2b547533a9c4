"""Jurors that fail loudly: a judge whose votes collapse, who refuses, or who leaves the jury.

A jury's aggregation bounds what one bad judge can do to a verdict (docs/guides/juries.md, "One
juror that fails"); this module says, per batch of verdicts, which judge is failing, so the
failure is counted and shown instead of averaged away. Three kinds:

- **collapsed**: on a criterion, one value over at least ``min_items`` scored votes while
  another judge's values vary (a judge that no longer reads the answers);
- **refused**: at least ``refusal_share`` of its votes unscored for a refusal: no answer, the
  engine refusing, or a value off the scale;
- **departed**: it agrees with the rest of the jury (within a quarter of the scale's span of
  the other judges' median) less often than the other judges do, by Fisher's one-sided exact
  test at ``alpha / J`` over each judge's last ``history`` comparisons (an `AgreementHistory`,
  so a service's one-item requests are judged over a window). It needs three judges: with two,
  each is as far from the other, and nothing says which one departed; no such flag is raised.

`decide_without` decides the verdicts again without the flagged judges, each naming who was
left out and why (``left_out``); the left-out judges' votes stay in the verdict as evidence.
Such a verdict depends on its batch: it must never be stored in a verdict cache.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Literal

from jurybox.rubrics import Rubric, Verdict, VerdictRecord, Vote

from .judging import decide
from .parsing import reason_code
from .spec import JurySpec

#: The reason codes (`jurybox.judges.parsing.REASON_CODES`) counted as a refusal.
REFUSALS = frozenset({"no_answer", "engine_refused", "off_scale"})


@dataclass(frozen=True)
class JurorCheck:
    """What counts as a failing juror in a batch, and whether the verdicts leave it out.

    Attributes:
        min_items: Scored votes on a criterion before one value throughout is a collapse, and
            comparisons in a judge's window before it can be found departed.
        refusal_share: The share of a judge's votes unscored for a refusal that flags it.
        alpha: The departed test's level for the whole jury (each judge is tested at
            ``alpha / J``).
        history: The comparisons per judge an `AgreementHistory` keeps (its window).
        leave_out: Decide the verdicts again without the flagged jurors (`decide_without`).
    """

    min_items: int = 8
    refusal_share: float = 0.5
    alpha: float = 0.01
    history: int = 64
    leave_out: bool = False


@dataclass(frozen=True)
class JurorFlag:
    """One juror flagged in a batch, on one criterion (or all), and why."""

    judge: str
    criterion: str | None
    kind: Literal["collapsed", "refused", "departed"]
    detail: str


class AgreementHistory:
    """Each judge's running record of agreement with the rest of the jury (a window).

    Per judge, the last ``window`` comparisons (agreed or not) with the other judges' median
    (None: every one); `flag_jurors` adds each batch's and tests over the window. Safe to share
    between threads.
    """

    def __init__(self, window: int | None = 64) -> None:
        self.window = window
        self._seen: dict[str, deque[bool]] = defaultdict(lambda: deque(maxlen=self.window))
        self._lock = threading.Lock()

    def add(self, judge: str, agreed: Sequence[bool]) -> None:
        """Add a judge's comparisons (oldest first)."""
        with self._lock:
            self._seen[judge].extend(agreed)

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per judge: (agreements, comparisons) in its window."""
        with self._lock:
            return {j: (sum(seen), len(seen)) for j, seen in self._seen.items()}


def _spec(jury: Any) -> JurySpec:
    return jury if isinstance(jury, JurySpec) else jury.spec


def _verdict(verdict: Any) -> Verdict:
    if isinstance(verdict, Verdict):
        return verdict
    return Verdict.from_record(VerdictRecord.from_record(verdict))


def _values(votes: Sequence[Vote]) -> dict[tuple[str, str], float]:
    """Each (judge, criterion)'s scored value (a pairwise judge's two orders averaged)."""
    seen: dict[tuple[str, str], list[float]] = defaultdict(list)
    for v in votes:
        if v.scored:
            seen[v.judge, v.criterion].append(float(v.score))  # type: ignore[arg-type]
    return {key: sum(vals) / len(vals) for key, vals in seen.items()}


def departed_note(jury: Any) -> str | None:
    """What a jury of fewer than three judges cannot tell (None for three or more)."""
    judges = len(_spec(jury).judges)
    if judges >= 3:
        return None
    return (
        f"jury {_spec(jury).name} has {judges} judge(s): with fewer than three, nothing says "
        "which judge departed from the others, so none is ever flagged as departed (collapsed "
        "and refusing jurors still are)"
    )


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fewer_agreements(k: int, n: int, k_rest: int, n_rest: int) -> float:
    """How unlikely a judge's k agreements of n are beside the others' k_rest of n_rest.

    Fisher's one-sided exact test: the chance, were the k + k_rest agreements shared at random
    among all n + n_rest comparisons, that this judge's n hold k or fewer (a hypergeometric
    lower tail). Unlike a binomial tail at the others' rate, it does not take that rate as
    known: honest judges stay within the level (tests/judges/test_jurors.py).
    """
    total, agreed = n + n_rest, k + k_rest
    low = max(0, n - (total - agreed))
    if k < low:
        return 0.0
    base = _log_choose(total, n)
    terms = (
        _log_choose(agreed, x) + _log_choose(total - agreed, n - x) - base
        for x in range(low, min(k, agreed) + 1)
    )
    return min(1.0, sum(math.exp(t) for t in terms))


def flag_jurors(
    rubric: Any,
    jury: Any,
    verdicts: Sequence[Any],
    check: JurorCheck | None = None,
    history: AgreementHistory | None = None,
) -> list[JurorFlag]:
    """The jurors failing in this batch of verdicts.

    Args:
        rubric: The rubric the verdicts were judged with (its scales).
        jury: The `Jury` or `JurySpec` that judged them.
        verdicts: The batch: `Verdict` objects, `VerdictRecord` objects or records (dicts).
        check: What counts as failing (default `JurorCheck()`).
        history: The judges' running agreement (updated with this batch); default this batch
            alone, all of it.

    Returns:
        The flags, by judge in the jury's order, then kind.
    """
    check = check or JurorCheck()
    spec = _spec(jury)
    names = [j.name for j in spec.judges]
    history = history if history is not None else AgreementHistory(None)
    given = [_verdict(v) for v in verdicts]
    per_item = [_values(v.votes) for v in given]
    votes = [vote for v in given for vote in v.votes]
    flags = [*_collapsed(rubric, names, per_item, check), *_refused(names, votes, check)]
    if len(names) >= 3:
        flags += _departed(rubric, names, per_item, check, history)
    order = {n: k for k, n in enumerate(names)}
    return sorted(flags, key=lambda f: (order.get(f.judge, len(order)), f.kind))


def _collapsed(
    rubric: Rubric,
    names: Sequence[str],
    per_item: Sequence[Mapping[tuple[str, str], float]],
    check: JurorCheck,
) -> list[JurorFlag]:
    flags = []
    for c in rubric.criterion_names:
        for name in names:
            mine = {vals[name, c] for vals in per_item if (name, c) in vals}
            count = sum((name, c) in vals for vals in per_item)
            if count < check.min_items or len(mine) != 1:
                continue
            varied = {
                o: len({vals[o, c] for vals in per_item if (o, c) in vals})
                for o in names
                if o != name
            }
            if max(varied.values(), default=0) > 1:
                spread = ", ".join(f"{o} {k}" for o, k in varied.items() if k > 1)
                flags.append(
                    JurorFlag(
                        name,
                        c,
                        "collapsed",
                        f"{next(iter(mine)):g} on all {count} of its scored votes, while other "
                        f"judges gave different values ({spread})",
                    )
                )
    return flags


def _refused(names: Sequence[str], votes: Sequence[Vote], check: JurorCheck) -> list[JurorFlag]:
    flags = []
    for name in names:
        mine = [v for v in votes if v.judge == name]
        codes = [reason_code(v.error) for v in mine if not v.scored and v.error]
        refused = [c for c in codes if c in REFUSALS]
        if mine and len(refused) / len(mine) >= check.refusal_share:
            kinds = ", ".join(f"{c} {refused.count(c)}" for c in sorted(set(refused)))
            flags.append(
                JurorFlag(
                    name,
                    None,
                    "refused",
                    f"{len(refused)} of its {len(mine)} votes unscored ({kinds})",
                )
            )
    return flags


def _departed(
    rubric: Rubric,
    names: Sequence[str],
    per_item: Sequence[Mapping[tuple[str, str], float]],
    check: JurorCheck,
    history: AgreementHistory,
) -> list[JurorFlag]:
    agreed: dict[str, list[bool]] = {n: [] for n in names}
    for vals in per_item:
        for c in rubric.criteria:
            near = (c.scale.high - c.scale.low) / 4
            for name in names:
                if (name, c.name) not in vals:
                    continue
                others = [vals[o, c.name] for o in names if o != name and (o, c.name) in vals]
                if len(others) >= 2:
                    agreed[name].append(abs(vals[name, c.name] - median(others)) <= near + 1e-9)
    for name, seen in agreed.items():
        history.add(name, seen)
    counts = history.counts()
    level = check.alpha / len(names)
    flags = []
    for name in names:
        k, n = counts.get(name, (0, 0))
        rest = [counts[o] for o in names if o != name and o in counts]
        k_rest, n_rest = sum(a for a, _ in rest), sum(m for _, m in rest)
        if n < check.min_items or not n_rest:
            continue
        rate = k_rest / n_rest
        p = fewer_agreements(k, n, k_rest, n_rest)
        if p < level:
            flags.append(
                JurorFlag(
                    name,
                    None,
                    "departed",
                    f"agreed with the others' median on {k} of its last {n} comparisons, the "
                    f"other judges on {rate:.0%} (Fisher's p = {p:.2g} < {level:.2g})",
                )
            )
    return flags


def decide_without(
    rubric: Any, jury: Any, verdicts: Sequence[Any], flags: Sequence[JurorFlag]
) -> list[Any]:
    """The verdicts decided again without the flagged jurors, each saying who was left out.

    Each verdict is decided (`jurybox.judges.judging.decide`) from the other judges' votes by
    `JurySpec.without` the flagged ones (the same aggregation; a quorum count capped at the
    judges left), keeping its provenance, stage and every vote; ``left_out`` names each judge
    left out and why. A verdict none of whose judges would be left keeps its own decision.

    Args:
        rubric: The rubric the verdicts were judged with.
        jury: The `Jury` or `JurySpec` that judged them.
        verdicts: `Verdict` objects, `VerdictRecord` objects or records (dicts).
        flags: The flags of `flag_jurors`.

    Returns:
        One `Verdict` per verdict, in order (the same object where no flagged judge voted).
    """
    spec = _spec(jury)
    why = _why(flags)
    out = []
    for given in verdicts:
        verdict = _verdict(given)
        voted = {v.judge for v in verdict.votes}
        out_here = [n for n in why if n in voted]
        keep = voted - set(out_here)
        if not out_here or not keep:
            out.append(verdict)
            continue
        absent = {j.name for j in spec.judges} - keep
        decided = decide(
            rubric,
            spec.without(absent),
            verdict.provenance,
            verdict.id,
            [v for v in verdict.votes if v.judge in keep],
        )
        out.append(
            decided.model_copy(
                update={
                    "votes": verdict.votes,
                    "stage": verdict.stage,
                    "left_out": [f"{n}: {why[n]}" for n in out_here],
                    "flagged": verdict.flagged or [f"{n}: {why[n]}" for n in out_here],
                }
            )
        )
    return out


def _why(flags: Sequence[JurorFlag]) -> dict[str, str]:
    """Per flagged judge, why: each kind once, with the criteria it was found on."""
    kinds: dict[str, dict[str, list[JurorFlag]]] = defaultdict(lambda: defaultdict(list))
    for flag in flags:
        kinds[flag.judge][flag.kind].append(flag)
    why = {}
    for judge, of_kind in kinds.items():
        parts = []
        for kind, found in of_kind.items():
            on = ", ".join(f.criterion for f in found if f.criterion)
            parts.append(f"{kind}{' on ' + on if on else ''} ({found[0].detail})")
        why[judge] = "; ".join(parts)
    return why


def mark_flagged(verdicts: Sequence[Any], flags: Sequence[JurorFlag]) -> list[Any]:
    """The verdicts, each naming in ``flagged`` the flagged jurors that voted in it.

    Nothing else changes: the jury's decision stands (`decide_without` leaves them out).

    Args:
        verdicts: `Verdict` objects, `VerdictRecord` objects or records (dicts).
        flags: The flags of `flag_jurors`.

    Returns:
        One `Verdict` per verdict, in order (the same object where no flagged judge voted).
    """
    why = _why(flags)
    out = []
    for given in verdicts:
        verdict = _verdict(given)
        voted = {v.judge for v in verdict.votes}
        named = [f"{n}: {why[n]}" for n in why if n in voted]
        out.append(verdict.model_copy(update={"flagged": named}) if named else verdict)
    return out


def records_flagged(
    records: Sequence[Mapping[str, Any]], flags: Sequence[JurorFlag]
) -> list[dict[str, Any]]:
    """`mark_flagged` on verdict records: each gains ``flagged`` where a flagged judge voted."""
    why = _why(flags)
    out = []
    for record in records:
        voted = {v.get("judge") for v in record.get("votes") or ()}
        named = [f"{n}: {why[n]}" for n in why if n in voted]
        out.append({**record, "flagged": named} if named else dict(record))
    return out


def records_without(
    rubric: Any, jury: Any, records: Sequence[Mapping[str, Any]], flags: Sequence[JurorFlag]
) -> list[dict[str, Any]]:
    """`decide_without` on verdict records, keeping each record's ``input`` hash.

    A record decided again is written afresh: a calibration applied to it is not carried
    over (apply it after). Records no flagged judge voted in are returned as they are.
    """
    verdicts = decide_without(rubric, jury, records, flags)
    return [
        dict(r) if not v.left_out else v.to_record(input=r.get("input"))
        for v, r in zip(verdicts, records)
    ]
