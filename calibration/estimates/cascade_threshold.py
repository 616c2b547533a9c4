"""Cascade thresholds with a guarantee: trust a cheap stage where it is sure, escalate the rest.

A cascade is a sequence of stages (e.g. stage 1: one small judge; stage 2: the full panel). An item
leaves at the first stage whose **confidence** reaches the threshold ``t``; the last stage decides
whatever reaches it. This module chooses ``t`` on human-labelled items, judged by every stage, so
that (Jung et al., 2024, "Trust or Escalate", arXiv 2407.18370; Angelopoulos et al., 2021, "Learn
then Test", arXiv 2110.01052)::

    P( agreement of cascade verdicts with humans >= target ) >= 1 - risk

where agreement is the share, over the **population of items drawn like the labelled ones**
(i.i.d.), of items whose cascade verdict equals the human consensus (within ``tolerance``) on
every criterion the jury measures confidence on (``confidence.criteria``; all by default). It is
a statement about that population as a whole, not about each of its groups: a kind of item on
which the cheap stage is confidently wrong can sit far below the target while the whole meets it
(``jurybox calibrate --cascade --group COL`` shows each group; ``--by-group COL`` fits one
threshold per group, each with its own guarantee).

**Confidence** of a stage on an item, for one criterion: the stage's votes for that criterion are
pooled (the mean of the judges' score distributions, read from the logprobs at the score token),
and the confidence is the pooled probability of the stage's verdict, snapped to the scale, within
``tolerance``. It is high only when each judge is sure *and* the judges agree. A stage whose verdict
is unscored has confidence -1 here (it never settles an item); one of whose scored votes has no
distribution (an API without logprobs), or a distribution that is not one (NaN, negative, not
summing to 1), has confidence 0 for that criterion: it cannot be trusted on what it cannot
measure. An item's confidence is the minimum over the chosen criteria.

**The test.** Thresholds are tried in an order fixed before any label is seen: ``t = inf`` (the
whole jury on every item: no cascade) first, then the grid from high to low. For each the null
hypothesis "agreement below the target" is tested with the exact binomial p-value
``P(Binomial(n, 1 - target) <= k)``, ``k`` the cascade's disagreements at ``t`` on the ``n``
labelled items. The risk is shared out in advance (a *fallback procedure*, Wiens 2003, one of the
family-wise procedures Learn then Test allows): ``FIRST_SHARE`` of it to ``t = inf`` and the rest
in equal parts to ``RESTARTS`` thresholds spread evenly along the grid. Each threshold is tested
at its own share plus the whole level of the threshold before it when that one was rejected (a
rejection passes its level on; a threshold not rejected passes nothing, and the walk goes on at
the next one's own share). So where the agreement falls steadily the procedure is (nearly) the
fixed sequence at the full risk, and a band of thresholds where the cheap stage is confidently
wrong (a dip in the agreement curve) no longer ends the walk: the thresholds past it can still
be certified. The probability that any rejected threshold's true agreement is below the target
is at most ``risk``, whatever the shape of the curve; so the one chosen among them, the one with
the fewest judge calls on the labelled items (the whole jury alone when no cascade is cheaper),
meets the target with probability at least ``1 - risk``. (When the whole jury alone is not
certified but a cascade is, the cascade is kept even if it costs more calls: it is what meets
the target.) ``procedure="fixed-sequence"`` is the
plain fixed sequence (stop at the first threshold not rejected), kept for comparison
(``perf/cascade.py``).

What the fit reports besides the guarantee are **in-sample** numbers: the cascade's agreement
on the labelled items that chose the threshold is not a bound (it is biased upwards by the
choice). A **refusal** (`CascadeTargetError`) means that no threshold, the whole jury
alone included, could be shown to reach the target with these labels; not that no cascade
reaches it. All stages share one threshold: a one-parameter path is what lets the order of the
tests be fixed before the labels are seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputDataError

#: Thresholds tried, in this order after ``inf``: fixed before any data is seen (the order of the
#: tests must be). Dense near 1, where a cheap judge's trustworthy items are.
DEFAULT_GRID: tuple[float, ...] = (
    1.0,
    0.9999,
    0.999,
    0.998,
    0.995,
    0.99,
    0.985,
    0.98,
    0.975,
    0.97,
    0.96,
    0.95,
    0.94,
    0.93,
    0.92,
    0.91,
    0.9,
    0.875,
    0.85,
    0.825,
    0.8,
    0.775,
    0.75,
    0.7,
    0.65,
    0.6,
    0.55,
    0.5,
    0.45,
    0.4,
    0.35,
    0.3,
    0.25,
    0.2,
    0.1,
    0.0,
)
#: The fallback procedure's shares of the risk: FIRST_SHARE to the whole jury alone (t = inf), the
#: rest in equal parts to RESTARTS thresholds evenly spaced along the order. Chosen by simulation
#: (perf/cascade.py, perf/RESULTS.md): on a steadily falling agreement curve they cost a few
#: tenths of a point of savings against the fixed sequence; past a dip they save many times more.
FIRST_SHARE = 0.7
RESTARTS = 6
PROCEDURES = ("fallback", "fixed-sequence")
#: How a stage whose verdict is unscored is marked in ``confidence`` (it never settles an item).
UNSCORED = -1.0


class CascadeTargetError(InputDataError):
    """The labelled data cannot certify the requested agreement at the requested risk."""


def binomial_p_value(disagreements: int, n: int, alpha: float) -> float:
    """Exact p-value of "disagreement rate > alpha" given ``disagreements`` out of ``n``.

    It is ``P(Binomial(n, alpha) <= disagreements)`` (small when there are few disagreements).
    """
    from scipy.stats import binom

    return float(binom.cdf(disagreements, n, alpha))


def agreement_lower_bound(agreements: int, n: int, risk: float) -> float:
    """One-sided Clopper-Pearson lower bound on an agreement rate at confidence 1 - risk.

    Valid for a rate fixed before the labels are seen, such as the whole jury's; not for the rate
    of a threshold the same labels chose.
    """
    from scipy.special import betaincinv  # beta.ppf's function, without its overhead

    if agreements <= 0:
        return 0.0
    return float(betaincinv(agreements, n - agreements + 1, risk))


def agreement_upper_bound(agreements: int, n: int, risk: float) -> float:
    """One-sided Clopper-Pearson upper bound on an agreement rate at confidence 1 - risk."""
    from scipy.special import betaincinv

    if agreements >= n:
        return 1.0
    return float(betaincinv(agreements + 1, n - agreements, 1.0 - risk))


def risk_shares(m: int, procedure: str = "fallback") -> np.ndarray:
    """Each of ``m`` hypotheses' own share of the risk, in test order (``t = inf`` first).

    All of it on the first for the fixed sequence; for the fallback procedure ``FIRST_SHARE`` on
    the first and the rest in equal parts on ``RESTARTS`` positions spread evenly along the order.
    """
    if procedure not in PROCEDURES:
        raise InputDataError(f"procedure must be one of {list(PROCEDURES)}; got {procedure!r}")
    shares = np.zeros(m)
    if procedure == "fixed-sequence" or m == 1:
        shares[0] = 1.0
        return shares
    shares[0] = FIRST_SHARE
    k = min(RESTARTS, m - 1)
    positions = sorted({min(m - 1, max(1, round(m * j / (k + 1)))) for j in range(1, k + 1)})
    shares[positions] += (1.0 - FIRST_SHARE) / len(positions)
    return shares


@dataclass
class CascadeFit:
    """The chosen threshold, what it certifies, and what it does on the labelled items.

    Attributes:
        threshold: The chosen threshold; inf: no stage before the last may decide (no cascade).
        target_agreement: The agreement with the humans certified.
        risk: The probability that the true agreement is below the target nonetheless.
        n: Labelled items the threshold was fitted on.
        decided_share: Per stage: share of the labelled items it decides.
        in_sample_agreement: The cascade's agreement, on the labels that chose it (not a bound).
        full_in_sample_agreement: The whole jury's agreement on every labelled item.
        calls_per_item: Judge calls per labelled item (one per judge run on it).
        full_calls_per_item: Judge calls of the whole jury alone on every item (no cascade).
        procedure: The testing procedure: ``fallback`` or ``fixed-sequence``.
        path: Every threshold tested, in order: its disagreements, p-value, level and whether it
            was rejected.
    """

    threshold: float  # inf: no stage before the last may decide (no cascade)
    target_agreement: float
    risk: float
    n: int  # labelled items the threshold was fitted on
    decided_share: list[float]  # per stage: share of the labelled items it decides
    in_sample_agreement: float  # the cascade's, on the labels that chose it (not a bound)
    full_in_sample_agreement: float  # the whole jury on every labelled item
    calls_per_item: float  # judge calls per labelled item (one per judge run on it)
    full_calls_per_item: float  # the whole jury alone on every item (no cascade)
    procedure: str = "fallback"
    path: list[dict[str, Any]] = field(default_factory=list)  # every threshold tested

    @property
    def certified(self) -> str:
        """What the fit guarantees, in words."""
        return (
            f"agreement >= {self.target_agreement:g} with probability >= {1 - self.risk:g}, "
            "over items drawn like the labelled ones"
        )

    @property
    def calls_saved(self) -> float:
        """Share of the whole jury's judge calls that the cascade saves on the labelled items.

        The whole jury alone on every item is the base; 0 with no cascade.
        """
        return 1.0 - self.calls_per_item / self.full_calls_per_item

    def to_dict(self) -> dict[str, Any]:
        """The fit as plain data, with `certified` and `calls_saved`.

        Returns:
            A JSON-ready dict of the fields; an infinite threshold is None.
        """
        return {
            "threshold": None if math.isinf(self.threshold) else self.threshold,
            "target_agreement": self.target_agreement,
            "risk": self.risk,
            "certified": self.certified,
            "procedure": self.procedure,
            "n": self.n,
            "decided_share": self.decided_share,
            "in_sample_agreement": self.in_sample_agreement,
            "full_in_sample_agreement": self.full_in_sample_agreement,
            "calls_per_item": self.calls_per_item,
            "full_calls_per_item": self.full_calls_per_item,
            "calls_saved": self.calls_saved,
            "path": self.path,
        }


def decided_stage(confidence: np.ndarray, threshold: float) -> np.ndarray:
    """Per item, the stage that decides it.

    That is the first stage before the last whose confidence reaches ``threshold``, else the last.
    ``confidence`` is stages x items (the last row unused).
    """
    n_stages = confidence.shape[0]
    early = confidence[:-1] >= threshold
    first = np.argmax(early, axis=0)
    return np.where(early.any(axis=0), first, n_stages - 1)


def fit_threshold(
    confidence: np.ndarray,
    agrees: np.ndarray,
    *,
    target_agreement: float,
    risk: float,
    stage_calls: Sequence[float] | None = None,
    baseline_calls: float | None = None,
    grid: Iterable[float] = DEFAULT_GRID,
    procedure: str = "fallback",
) -> CascadeFit:
    """Choose the cascade threshold with a guarantee (see the module docstring).

    Args:
        confidence: Stages x items: each stage's confidence on each labelled item (in [0, 1], or
            -1 where the stage's verdict is unscored).
        agrees: Stages x items: whether each stage's verdict agrees with the humans (booleans, or
            0/1).
        target_agreement: The agreement with the humans to certify, in (0, 1).
        risk: The chance allowed that the true agreement is below the target, in (0, 1).
        stage_calls: ``stage_calls[k]`` is the number of judge calls stage ``k`` adds for an item
            that reaches it (default 1 each).
        baseline_calls: The judge calls of the whole jury alone on an item (default: every
            stage's).
        grid: The thresholds tried after ``inf``, in order; fixed before any label is seen.
        procedure: ``fallback`` or ``fixed-sequence`` (module text).

    Returns:
        The fit: of the thresholds certified, the one with the fewest judge calls on the labelled
        items (the earlier on a tie).

    Raises:
        InputDataError: Bad input, naming the problem: ``target_agreement`` or ``risk`` outside
            (0, 1), matrices that are not both stages x items, fewer than two stages or no item, a
            confidence outside [0, 1] (and not -1), an agreement that is not a boolean, calls that
            are not positive numbers, a grid threshold outside [0, 1], or an unknown
            ``procedure``.
        CascadeTargetError: No threshold can be certified.
    """
    confidence, agrees = _checked_matrices(confidence, agrees)
    n_stages, n = confidence.shape
    if not 0.0 < target_agreement < 1.0:
        raise InputDataError(f"target agreement must be between 0 and 1; got {target_agreement}")
    if not 0.0 < risk < 1.0:
        raise InputDataError(f"risk must be between 0 and 1; got {risk}")
    calls = _positive(
        np.ones(n_stages) if stage_calls is None else stage_calls, "stage_calls", n_stages
    )
    cumulative = np.cumsum(calls)
    baseline = float(
        cumulative[-1]
        if baseline_calls is None
        else _positive([baseline_calls], "baseline_calls", 1)[0]
    )
    thresholds = [math.inf, *_checked_grid(grid)]
    shares = risk_shares(len(thresholds), procedure)
    alpha = 1.0 - target_agreement
    items = np.arange(n)

    path: list[dict[str, Any]] = []
    rejected: list[tuple[float, float, np.ndarray, int]] = []  # (calls, threshold, stage, k)
    carried = 0.0
    for t, share in zip(thresholds, shares):
        stage = decided_stage(confidence, t)
        k = int((~agrees[stage, items]).sum())
        p = binomial_p_value(k, n, alpha)
        level = float(risk * share + carried)
        reject = p <= level
        path.append(
            {
                "threshold": None if math.isinf(t) else t,
                "disagreements": k,
                "p_value": p,
                "level": level,
                "rejected": bool(reject),
            }
        )
        if reject:
            item_calls = baseline if math.isinf(t) else float(cumulative[stage].mean())
            rejected.append((item_calls, t, stage, k))
            carried = level
        else:
            carried = 0.0
            if procedure == "fixed-sequence":
                break
    full_k = path[0]["disagreements"]
    if not rejected:
        bound = agreement_lower_bound(n - int(full_k), n, risk)
        raise CascadeTargetError(
            f"no threshold can be certified: these labels cannot support agreement "
            f"{target_agreement:g} at risk {risk:g}. The whole jury on every item agrees with "
            f"the humans on {n - int(full_k)} of {n} labelled items ({(n - full_k) / n:.3f}; "
            f"with probability 1 - {risk:g} its agreement is at least {bound:.3f}), and no "
            "threshold letting an earlier stage decide could be shown to reach the target "
            "either. Lower the target, accept more risk, label more items, or strengthen the "
            "last stage"
        )
    # The cheapest certified threshold on the labelled items; on a tie the earlier (higher).
    item_calls, t, stage, k = min(rejected, key=lambda r: r[0])
    if math.isinf(t):
        stage = np.full(n, n_stages - 1)
    shares_decided = np.bincount(stage, minlength=n_stages) / n
    return CascadeFit(
        threshold=t,
        target_agreement=target_agreement,
        risk=risk,
        n=n,
        decided_share=[float(s) for s in shares_decided],
        in_sample_agreement=1.0 - k / n,
        full_in_sample_agreement=1.0 - full_k / n,
        calls_per_item=item_calls,
        full_calls_per_item=baseline,
        procedure=procedure,
        path=path,
    )


def _checked_matrices(confidence: Any, agrees: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both stages x items: the confidences in [0, 1] or -1, the agreements booleans (or 0/1).

    -1 is the unscored sentinel; otherwise an error naming the first bad entry and how many there
    are.
    """
    try:
        conf = np.asarray(confidence, dtype=float)
    except (TypeError, ValueError):
        raise InputDataError("confidence must be numbers (stages x items)") from None
    raw = np.asarray(agrees)
    if conf.ndim != 2 or conf.shape != raw.shape:
        raise InputDataError(
            f"confidence {conf.shape} and agreement {raw.shape} must both be stages x items"
        )
    n_stages, n = conf.shape
    if n_stages < 2:
        raise InputDataError("a cascade needs at least two stages")
    if n == 0:
        raise InputDataError("no labelled item is judged by every stage")
    bad = ~(np.isfinite(conf) & (((conf >= 0.0) & (conf <= 1.0)) | (conf == UNSCORED)))
    if bad.any():
        k, i = (int(x[0]) for x in np.nonzero(bad))
        raise InputDataError(
            f"confidence of stage {k + 1} on item {i} is {float(conf[k, i])!r} ({int(bad.sum())} bad "
            f"value(s) in all): each must be in [0, 1], or {UNSCORED:g} where the stage's "
            "verdict is unscored"
        )
    if raw.dtype == bool:
        return conf, raw
    if raw.dtype.kind in "iuf":
        values = raw.astype(float)
        bad = ~((values == 0.0) | (values == 1.0))
        if not bad.any():
            return conf, values == 1.0
        k, i = (int(x[0]) for x in np.nonzero(bad))
        found = repr(raw[k, i].item())
    else:
        k, i, found = 0, 0, f"of type {raw.dtype}"
        for index, value in np.ndenumerate(raw):
            if not isinstance(value, (bool, np.bool_)):
                (k, i), found = index, repr(value.item() if hasattr(value, "item") else value)
                break
    raise InputDataError(
        f"agreement of stage {k + 1} on item {i} is {found}: each must be "
        "True or False (or 1 or 0), whether the stage's verdict agrees with "
        "the humans; a missing one is not an agreement"
    )


def _positive(values: Any, name: str, count: int) -> np.ndarray:
    try:
        out = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputDataError(f"{name} must be numbers; got {values!r}") from None
    if out.shape != (count,):
        raise InputDataError(
            f"{name} needs {count} number(s) (one per stage); got {values!r}"
            if name == "stage_calls"
            else f"{name} must be one number"
        )
    if not (np.isfinite(out) & (out > 0)).all():
        raise InputDataError(
            f"{name} must be positive numbers of judge calls; got "
            f"{[float(v) for v in out] if count > 1 else float(out[0])}"
        )
    return out


def _checked_grid(grid: Iterable[float]) -> list[float]:
    values = [float(t) for t in grid]
    bad = [t for t in values if not (math.isfinite(t) and 0.0 <= t <= 1.0)]
    if bad:
        raise InputDataError(f"grid thresholds must be confidences in [0, 1]; got {bad[:5]}")
    return values
