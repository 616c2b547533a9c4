"""Which judged item a human labels next, and how far the labels so far have got.

Goals (``jurybox label --goal``):

- ``agreement`` (default): representative items for the per-criterion agreement of the jury with
  the humans: a uniform random order of the judged items, fixed by a seed for the session (every
  rater walks the same order), so the labelled items are a simple random sample and every
  estimate weights them equally. With ``stratify``: three strata by the jury's uncertainty,
  random within each and interleaved in proportion to their sizes (proportional allocation),
  so every prefix of the order is balanced across them and still self-weighting.
- ``benchmark-mean``: items chosen actively for the PPI++ estimate of the benchmark's mean score:
  a uniform random visiting order in which each item is labelled with a probability that grows
  with the square root of the jury's uncertainty on it
  (`jurybox.calibration.estimates.active`); the estimate weights each label by that
  probability, so it stays unbiased. With ``design`` ``uniform`` (where the plan finds the
  active choice costs more labels under the page's sequence), the uniform order of goal
  agreement instead, recorded as uniform.
- ``cascade``: the same uniform order, because a cascade's threshold is certified on labels drawn
  at random from the items (`jurybox.calibration.estimates.cascade_threshold`): items chosen
  any other way would void its guarantee.
- ``review``: the items a conformal map routed to a human (``jurybox judge --conformal MAP
  --route-width W``: their interval was too wide to act on), the widest first, and only those.
  A label line records ``strategy: review``: such items are the ones the jury is least sure of,
  so agreement, calibration, cascades and means refuse these labels rather than be biased by
  them (label another goal into another file for those); the page shows how many of the
  routed items are reviewed, and the goal is met when all of them are.

With ``overlap`` > 0, that share of a rater's items are items another rater labelled (the
earliest in the order), so human-human agreement, the ceiling ``jurybox agree`` reports, is
measured on them. Each choice is recorded with the label (``selection``: the strategy, and the
inclusion probability, None for a uniform order, where it is the same for every item; for
benchmark-mean also the item's position in the visiting order, the pool's size and the seed).

Progress (`progress`): per criterion, the jury's agreement with the humans (the share of
an item's labels that equal the jury's verdict snapped to the scale, averaged over the labelled
items) with a 95% *confidence sequence* (`jurybox.calibration.stats.sequences`: the
betting sequence for the mean of the pool's items, drawn without replacement in the session's
uniform order), valid at every number of labels at once, so the page may show it after every
label and stop on the first narrow one; for benchmark-mean, the weighted PPI++ mean, and the
sequence for it (`jurybox.calibration.estimates.active.mean_sequences`). The goal is met
when every criterion's sequence has half-width at most the target width: no minimum number of
labels, since the sequence is wide while the labels are few.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputDataError
from . import active

GOALS = ("agreement", "benchmark-mean", "cascade", "review")
#: How benchmark-mean chooses its items: actively (by the jury's uncertainty) or uniformly.
DESIGNS = ("active", "uniform")
REVIEW = "review"
STRATA = ("surest", "middle", "least sure")


@dataclass(frozen=True)
class Choice:
    """The item offered next, why, and what the label line records of it (``selection``)."""

    id: str
    why: str
    selection: dict[str, Any]


def labelled(line: Mapping[str, Any]) -> bool:
    """A label line that holds labels (not an undo or a skip line)."""
    return not line.get("undone") and line.get("skipped") is None


class Selector:
    """The order in which items are offered (see the module's text)."""

    def __init__(
        self,
        ids: Sequence[str],
        goal: str = "agreement",
        *,
        seed: int = 0,
        overlap: float = 0.0,
        uncertainty: Mapping[str, float] | None = None,
        stratify: bool = False,
        routed: Mapping[str, str] | None = None,
        design: str = "active",
    ) -> None:
        if goal not in GOALS:
            raise InputDataError(f"goal must be one of {list(GOALS)}; got {goal!r}")
        if design not in DESIGNS:
            raise InputDataError(f"design must be one of {list(DESIGNS)}; got {design!r}")
        if design == "uniform" and goal != active.GOAL:
            raise InputDataError(
                f"design is for goal {active.GOAL}; goal {goal} takes items "
                "as its estimate needs them"
            )
        self.design = design if goal == active.GOAL else "uniform"
        if not 0.0 <= overlap <= 1.0:
            raise InputDataError(f"overlap must be a share between 0 and 1; got {overlap}")
        if not ids:
            raise InputDataError("no judged item to label")
        self.goal, self.overlap, self.seed = goal, overlap, seed
        unique = list(dict.fromkeys(ids))
        rng = np.random.default_rng(seed)
        self.probability: dict[str, float] = {}
        self.chosen: set[str] | None = None  # benchmark-mean: the items whose coins came up
        self.stratum: dict[str, str] = {}
        if stratify and goal != "agreement":
            raise InputDataError(
                f"stratify is for goal agreement; goal {goal} takes items "
                "as its estimate needs them"
            )
        if ((goal == active.GOAL and design == "active") or stratify) and uncertainty is None:
            raise InputDataError(
                f"goal {goal}"
                + (" stratified" if stratify else "")
                + " needs each item's uncertainty"
            )
        self.routed = dict(routed or {})  # review: item -> why it was routed, in order
        if goal == REVIEW and not self.routed:
            raise InputDataError(
                "goal review offers the items routed to a human, and no "
                "verdict is: judge with --conformal MAP --route-width W first"
            )
        if goal == REVIEW and stratify:
            raise InputDataError(
                "stratify is for goal agreement; goal review takes the routed "
                "items, widest interval first"
            )
        if goal == REVIEW:
            order = [item for item in self.routed if item in set(unique)]
        elif stratify:
            order = self._stratified(unique, uncertainty or {}, rng)
        elif goal == active.GOAL and design == "active":
            pi = active.inclusion_probabilities([(uncertainty or {})[i] for i in unique])
            drawn = active.Design.draw(pi, rng)
            order = [unique[k] for k in drawn.order]
            self.probability = dict(zip(order, map(float, drawn.pi)))
            self.chosen = {item for item, c in zip(order, drawn.chosen) if c}
        else:
            order = unique
            rng.shuffle(order)
        self.order = order
        self.position = {item: k for k, item in enumerate(order)}

    def _stratified(
        self, ids: list[str], uncertainty: Mapping[str, float], rng: np.random.Generator
    ) -> list[str]:
        """Three strata by the jury's uncertainty, random within each, interleaved in proportion.

        The strata are its most sure, middle and least sure thirds, each in a uniform random order,
        interleaved so that every prefix holds each stratum in proportion to its size (proportional
        allocation: the labels stay self-weighting, so every estimate's stratum weights are equal
        and the unweighted statistics unbiased).
        """
        ranked = sorted(ids, key=lambda i: (uncertainty[i], i))
        keys = {}
        for h, name in enumerate(STRATA):
            members = ranked[h * len(ids) // 3 : (h + 1) * len(ids) // 3]
            rng.shuffle(members)
            offset = rng.random()
            for j, item in enumerate(members):
                self.stratum[item] = name
                keys[item] = (j + offset) / len(members)
        return sorted(ids, key=lambda i: (keys[i], STRATA.index(self.stratum[i])))

    def next(
        self, rater: str, latest: Mapping[tuple[str, str], Mapping[str, Any]]
    ) -> Choice | None:
        """The item ``rater`` labels next, given the latest line per (item, rater).

        None when every item is labelled or skipped by this rater.
        """
        seen = {item for (item, r), line in latest.items() if r == rater}
        seen -= {item for (item, r), line in latest.items() if r == rater and line.get("undone")}
        by_others = {item for (item, r), line in latest.items() if r != rater and labelled(line)}
        mine = [item for (item, r), line in latest.items() if r == rater and labelled(line)]
        shared = sum(item in by_others for item in mine)
        overlap = [item for item in self.order if item in by_others and item not in seen]
        fresh = [
            item
            for item in self.order
            if item not in seen
            and item not in by_others
            and (self.chosen is None or item in self.chosen)
        ]
        # Route a share of the rater's items to items others labelled.
        if overlap and (not fresh or shared < self.overlap * (len(mine) + 1)):
            item = overlap[0]
            return Choice(
                item,
                "labelled by another rater too: human-human agreement is measured on such items",
                {"strategy": "overlap", "probability": None},
            )
        if not fresh:
            return None
        item = fresh[0]
        k, n = self.position[item] + 1, len(self.order)
        if self.goal == REVIEW:
            return Choice(
                item,
                f"routed to a human ({k} of {n}, the widest intervals first): {self.routed[item]}",
                {"strategy": REVIEW, "probability": None, "route": self.routed[item]},
            )
        if self.chosen is not None:
            p = self.probability[item]
            return Choice(
                item,
                f"chosen for the benchmark mean: item {k} of {n} in a uniform "
                f"random visiting order, labelled with probability {p:.2f} (the more "
                "the jury is unsure of it, the likelier: this saves labels where the "
                "jury's uncertainty is calibrated)",
                {
                    "strategy": active.GOAL,
                    "probability": p,
                    "position": k - 1,
                    "pool": n,
                    "seed": self.seed,
                },
            )
        if self.stratum:
            h = self.stratum[item]
            return Choice(
                item,
                f"item {k} of {n}: random within the jury's {h} third by "
                "uncertainty, the thirds in proportion",
                {"strategy": "stratified", "probability": None, "stratum": h},
            )
        why = (
            f"item {k} of {n} in a uniform random order"
            + (
                " (a cascade's guarantee needs labels chosen at random)"
                if self.goal == "cascade"
                else ""
            )
            + (
                " (for the benchmark mean: the plan found a uniform order needs fewer labels "
                "than the active choice under the page's confidence sequence)"
                if self.goal == active.GOAL
                else ""
            )
        )
        return Choice(item, why, {"strategy": "uniform", "probability": None})


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper-Pearson interval for ``k`` successes out of ``n``."""
    from scipy.special import betaincinv  # beta.ppf's function, without its overhead

    a = (1.0 - level) / 2.0
    low = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, a))
    high = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1.0 - a))
    return low, high


def progress(
    latest: Mapping[tuple[str, str], Mapping[str, Any]],
    jury_scores: Mapping[str, Mapping[str, float | None]],
    scales: Mapping[str, Any],
    target_width: float | None,
    total: int,
    goal: str = "agreement",
    *,
    model: Mapping[str, Mapping[str, tuple[float, float] | None]] | None = None,
    probabilities: Mapping[str, float] | None = None,
    sequence: str = "asymptotic",
) -> dict[str, Any]:
    """How far the labels have got: counts, and per criterion the jury's agreement so far.

    The counts are items labelled by anyone, lines per rater, items left; the agreement is the
    jury's with the human labels (exact, after snapping the jury's score to the scale) with its
    95% interval; ``goal_met`` when every criterion's half-width is at most ``target_width``. For
    benchmark-mean, ``sequence`` is the mean's sequence
    (`jurybox.calibration.estimates.active.mean_sequences`), the asymptotic one tuned for
    what the target width needs were the jury calibrated (`mean_horizons`).
    """
    lines = [line for line in latest.values() if labelled(line)]
    items = {str(line["id"]) for line in lines}
    by_rater: dict[str, int] = {}
    for line in lines:
        by_rater[str(line.get("rater", ""))] = by_rater.get(str(line.get("rater", "")), 0) + 1
    out: dict[str, Any] = {
        "labelled_items": len(items),
        "labels_by_rater": by_rater,
        "left": total - len(items),
        "total": total,
        "target_width": target_width,
    }
    if goal == REVIEW:
        # The routed items are the jury's least sure: no estimate over them stands for the
        # pool. The goal is every routed item reviewed.
        out["review"] = {"reviewed": len(items), "routed": total}
        out["goal_met"] = len(items) >= total
        return out
    if goal == active.GOAL:
        # Agreement over actively chosen items would over-weight the uncertain ones: the goal's
        # estimate is the weighted mean instead.
        try:
            means: dict[str, active.MeanEstimate | str] = active.mean_estimates(
                lines, jury_scores, scales, model=model, probabilities=probabilities
            )
        except InputDataError as exc:  # e.g. labels for items a client chose itself
            means = dict.fromkeys(scales, str(exc))
        out["mean"] = {
            c: e.to_dict()
            if isinstance(e, active.MeanEstimate)
            else {"estimate": None, "reason": e}
            for c, e in means.items()
        }
        horizons = (
            mean_horizons(jury_scores, scales, model, probabilities, target_width)
            if sequence == "asymptotic"
            else {}
        )
        sequences = {
            c: active.mean_sequences(
                lines,
                jury_scores,
                {c: scale},
                probabilities,
                ALPHA,
                horizons.get(c),
                method=sequence,
                model=model,
            )[c]
            for c, scale in scales.items()
        }
        for criterion, got in sequences.items():
            if isinstance(got, str):
                out["mean"][criterion]["sequence"] = {"reason": got}
            else:
                out["mean"][criterion]["sequence"] = got
        out["goal_met"] = target_width is not None and all(
            not isinstance(got, str) and got["half_width"] <= target_width
            for got in sequences.values()
        )
        return out
    estimates = {
        criterion: agreement_sequence(lines, jury_scores, criterion, scale, target_width)
        for criterion, scale in scales.items()
    }
    out["agreement"] = estimates
    out["goal_met"] = target_width is not None and all(
        e["half_width"] <= target_width for e in estimates.values()
    )
    return out


#: The confidence sequences' level: 95%, at every number of labels at once.
ALPHA = 0.05


def mean_horizons(
    jury_scores: Mapping[str, Mapping[str, float | None]],
    scales: Mapping[str, Any],
    model: Mapping[str, Mapping[str, tuple[float, float] | None]] | None,
    probabilities: Mapping[str, float] | None,
    width: float | None,
) -> dict[str, float]:
    """Per criterion, the visits the mean's asymptotic sequence is tuned for.

    As `jurybox.calibration.estimates.active.mean_horizon` gives them: fixed by the verdicts
    and the target width before any label; none without a target or a model (the sequence's
    default).
    """
    if width is None or width <= 0 or model is None:
        return {}
    out = {}
    for criterion in scales:
        scored = [i for i, s in jury_scores.items() if s.get(criterion) is not None]
        if not scored:
            continue
        jury = [model.get(i, {}).get(criterion) or (jury_scores[i][criterion], 0.0) for i in scored]
        pi = np.array([(probabilities or {}).get(i, 1.0) for i in scored])
        out[criterion] = active.mean_horizon(
            np.array([float(jury_scores[i][criterion] or 0.0) for i in scored]),
            np.array([m for m, _ in jury]),
            np.array([v for _, v in jury]),
            pi,
            width,
        )
    return out


@functools.lru_cache(maxsize=64)  # asked per criterion after every label
def horizon(width: float | None) -> float | None:
    """The number of labels a sequence's bets are tuned for, fixed before the first label.

    It is what a fixed-sample interval (Clopper-Pearson) needs for ``width`` at the widest
    agreement rate, 0.5 (the sequence stays valid at every count, and is tightest around it).
    """
    return None if width is None or not 0.0 < width < 0.5 else float(labels_needed(0.5, width))


def agreement_sequence(
    lines: Sequence[Mapping[str, Any]],
    jury_scores: Mapping[str, Mapping[str, float | None]],
    criterion: str,
    scale: Any,
    target_width: float | None,
) -> dict[str, Any]:
    """One criterion's agreement so far and its confidence sequence.

    The values are each labelled item's share of labels equal to the jury's snapped score, the
    items in the order they were first labelled (the session's uniform order), the pool the items
    the jury scored on it.
    """
    from ..stats.sequences import betting_interval

    agreed: dict[str, list[float]] = {}
    for line in lines:
        human = line.get(criterion)
        jury = jury_scores.get(str(line["id"]), {}).get(criterion)
        if human is not None and jury is not None:
            agreed.setdefault(str(line["id"]), []).append(
                float(float(scale.snap(jury)) == float(human))
            )
    values = [float(np.mean(v)) for v in agreed.values()]
    pool = max(len(values), sum(s.get(criterion) is not None for s in jury_scores.values()))
    low, high = betting_interval(values, ALPHA, pool, horizon(target_width))
    return {
        "agreement": float(np.mean(values)) if values else None,
        "low": low,
        "high": high,
        "half_width": (high - low) / 2,
        "n": len(values),
        "labels": sum(len(v) for v in agreed.values()),
        "pool": pool,
    }


def half_width(agreed: int, n: int, level: float = 0.95) -> float:
    """Half the width of the Clopper-Pearson interval for ``agreed`` of ``n``."""
    low, high = clopper_pearson(agreed, n, level)
    return (high - low) / 2.0


def labels_needed(p: float, width: float, level: float = 0.95, cap: int = 1_000_000) -> int:
    """The fewest labels at which rate ``p`` has a narrow enough Clopper-Pearson interval.

    For an agreement rate ``p``, narrow enough is half-width at most ``width`` (its agreements
    counted as ``round(p * n)``); ``cap`` when even that many are not enough.
    """
    if not 0.0 < width < 0.5:
        raise InputDataError(f"the target width is a half-width between 0 and 0.5; got {width}")

    def ok(n: int) -> bool:
        return half_width(round(p * n), n, level) <= width

    low, high = 1, 2
    while not ok(high):
        low, high = high, high * 2
        if high >= cap:
            return cap
    while low < high:  # the half-width falls with n (up to rounding of p * n)
        mid = (low + high) // 2
        low, high = (mid + 1, high) if not ok(mid) else (low, mid)
    return low


def plan(
    latest: Mapping[tuple[str, str], Mapping[str, Any]],
    jury_scores: Mapping[str, Mapping[str, float | None]],
    votes: Mapping[str, Mapping[str, list[float]]],
    scales: Mapping[str, Any],
    width: float,
) -> dict[str, dict[str, Any]]:
    """How many labelled items each criterion needs for the agreement's sequence to reach ``width``.

    That is, for the page's confidence sequence of the jury's agreement (`progress`) to
    reach half-width ``width``: from the labels so far (at their agreement, and the range over its
    sequence), or, before any label, from the verdicts alone (between the rate at which the judges
    agree with the jury, a guess at the human rate, and the worst case 0.5); beside it, what a
    fixed-sample Clopper-Pearson interval would need (``fixed_sample``: valid only if the count is
    fixed in advance, not for a labeller who stops on the first narrow interval). ``votes``: per
    item and criterion, the judges' scores.
    """
    if not 0.0 < width < 0.5:
        raise InputDataError(f"the target width is a half-width between 0 and 0.5; got {width}")
    now = progress(latest, jury_scores, scales, width, len(jury_scores))["agreement"]
    out: dict[str, dict[str, Any]] = {}
    for criterion, scale in scales.items():
        e = now[criterion]
        n, pool = int(e["n"]), int(e["pool"])
        if n:
            p = float(e["agreement"])
            low, high = float(e["low"]), float(e["high"])
            worst = 0.5 if low <= 0.5 <= high else min((low, high), key=lambda x: abs(x - 0.5))
            best = max((low, high), key=lambda x: abs(x - 0.5))
            basis = f"{n} labelled item(s) so far (agreement {p:.3f} [{low:.3f}, {high:.3f}])"
        else:
            pairs = [
                (float(scale.snap(s)), float(scale.snap(v)))
                for item, by in votes.items()
                for v in by.get(criterion, [])
                if (s := jury_scores.get(item, {}).get(criterion)) is not None
            ]
            p = sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.5
            worst, best = 0.5, p
            basis = (
                f"the verdicts alone (no label yet): the judges agree with the jury on "
                f"{p:.3f} of their votes, a guess at the human rate; the range runs to the "
                "worst case 0.5"
            )

        needed, *span = (_sequence_needed(rate, width, pool) for rate in (p, best, worst))
        span.sort()
        out[criterion] = {
            "labelled": n,
            "needed": needed,
            "range": span,
            "further": max(0, needed - n),
            "basis": basis,
            "fixed_sample": min(labels_needed(p, width), pool or 1_000_000),
        }
    return out


def _sequence_needed(rate: float, width: float, pool: int) -> int:
    """Labelled items until the agreement's sequence reaches half-width ``width`` at ``rate``.

    The whole pool when it does not before: there the agreement is known exactly.
    """
    from ..stats.sequences import labels_needed as sequence_needed

    got = sequence_needed(rate, width, ALPHA, pool or None, horizon(width))
    return pool if got is None else got
