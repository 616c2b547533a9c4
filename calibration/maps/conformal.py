"""Conformal intervals per item and criterion, with a finite-sample guarantee.

"A human would give this item a level between 2 and 4, with probability at least 90%", from
the jury's own distributions, with a finite-sample guarantee (split conformal prediction; Vovk
et al. 2005, Angelopoulos & Bates 2021; for LLM-judge scores on ordinal scales, arXiv
2509.18658).

The set grows from the jury's predictive distribution on the criterion (the judges' score
distributions mixed with equal weight, a point mass where a judge gave none:
`jurybox.calibration.data.verdicts.mixed_distribution`): it starts at the most probable
level and adds, one at a time, the more probable of the two neighbouring levels (ties: the one
nearer the distribution's mean, then the lower), so that it is always a run of contiguous levels.
A level's *score* is the probability mass of the set just after it was added (plus a
``1e-6``-per-step tie-break, so that levels the jury gives no mass are still ordered by how far
the set had to grow). A labelled item's nonconformity is the largest score of its raters' labels
(``cover="every-rater"``: the set must hold every rater's label), or the score of one of its
raters' labels drawn at random (``cover="one-rater"``: the set holds a randomly chosen rater's
label with probability at least ``1 - alpha``, narrower where raters disagree). With one rater
per item the two are the same.

From ``n`` labelled items, the threshold is the ``ceil((n + 1)(1 - alpha))``-th smallest
nonconformity (the whole scale when that exceeds ``n``); an item's interval is every level whose
score is at most the threshold. Whatever the jury's calibration, if the labelled items and the
item are exchangeable, the interval holds a human's label with probability at least ``1 -
alpha`` (and at most ``1 - alpha + 1/(n + 1)`` without ties), marginally over items: an
overconfident jury gets wide intervals everywhere, not wrong ones. With groups (a task, a
language), one threshold per group gives the guarantee within each group (Mondrian conformal).

The guarantee is marginal: over all items, not among those whose interval is narrow. The
report therefore gives, by the same cross-validation, the coverage among the items a route
width would keep (those whose interval is at most that wide: ``cv_by_route_width``), so the
width is chosen knowing it (a jury confidently wrong on some items gives those items single
levels that miss, and routing never sends them to a human).

Labels must be a sample of the items alike: labels chosen actively for the benchmark mean
(unequal inclusion probabilities) are refused (`fit_conformal`): the items the jury is sure
of are under-represented among them, so a threshold fitted on them undercovers new items while
its own cross-validation, on the same kind of items, looks right. So are lines routed to a
second rater (``overlap``) with no line of the session's own design beside them: their items
may be an active session's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputDataError

#: The tie-break per step of the growing set (far below any probability that matters).
STEP = 1e-6
#: What an interval covers with probability >= 1 - alpha where items have several raters.
COVERS = ("every-rater", "one-rater")


def level_scores(probabilities: Any, levels: Sequence[float]) -> np.ndarray:
    """Each level's score (module text) for each row of ``probabilities``.

    ``probabilities`` is items x levels, the levels ascending, rows summing to 1.
    """
    p = np.asarray(probabilities, dtype=float)
    values = np.asarray(levels, dtype=float)
    n, k = p.shape
    rows = np.arange(n)
    mean = p @ values
    distance = np.abs(values[None, :] - mean[:, None])
    start = np.argmax(p - 1e-12 * distance, axis=1)  # the most probable level, nearest the mean
    scores = np.empty((n, k))
    low, high = start.copy(), start.copy()
    mass = p[rows, start]
    scores[rows, start] = mass
    for step in range(1, k):
        can_left, can_right = low > 0, high < k - 1
        left_p = np.where(can_left, p[rows, np.maximum(low - 1, 0)], -1.0)
        right_p = np.where(can_right, p[rows, np.minimum(high + 1, k - 1)], -1.0)
        left_d = distance[rows, np.maximum(low - 1, 0)]
        right_d = distance[rows, np.minimum(high + 1, k - 1)]
        go_left = can_left & (
            (left_p > right_p) | ((left_p == right_p) & (left_d <= right_d)) | ~can_right
        )
        added = np.where(go_left, low - 1, high + 1)
        mass = mass + p[rows, added]
        scores[rows, added] = mass + step * STEP
        low = np.where(go_left, low - 1, low)
        high = np.where(go_left, high, high + 1)
    return scores


def threshold(nonconformity: Any, alpha: float) -> float:
    """The split-conformal threshold: the ``ceil((n + 1)(1 - alpha))``-th smallest score.

    Infinity (the whole scale) when there are too few.
    """
    s = np.sort(np.asarray(nonconformity, dtype=float))
    if not 0 < alpha < 1:
        raise InputDataError(f"alpha must be in (0, 1); got {alpha}")
    rank = math.ceil((s.size + 1) * (1 - alpha))
    return math.inf if rank > s.size else float(s[rank - 1])


def intervals(scores: Any, levels: Sequence[float], cut: float) -> np.ndarray:
    """``[low, high]`` per row: the levels whose score is at most ``cut``.

    Contiguous by construction; the whole scale for an infinite cut.
    """
    s = np.asarray(scores, dtype=float)
    values = np.asarray(levels, dtype=float)
    inside = s <= cut
    inside[np.arange(s.shape[0]), np.argmin(s, axis=1)] = True  # never empty
    low = values[np.argmax(inside, axis=1)]
    high = values[s.shape[1] - 1 - np.argmax(inside[:, ::-1], axis=1)]
    return np.column_stack([low, high])


@dataclass(frozen=True)
class ConformalCriterion:
    """One criterion's thresholds: overall and per group (group -> (threshold, labelled))."""

    criterion: str
    levels: tuple[float, ...]
    threshold: float
    labelled: int
    groups: dict[str, tuple[float, int]] = field(default_factory=dict)

    def cut(self, group: str | None = None) -> float:
        """The threshold for an item of ``group`` (the overall one for an unknown group)."""
        if group is not None and group in self.groups:
            return self.groups[group][0]
        return self.threshold


def label_scores(
    criterion: str, scores: np.ndarray, labels: Sequence[Sequence[float]], levels: Sequence[float]
) -> list[np.ndarray]:
    """Per labelled item, the scores (module text) of its raters' labels."""
    index = {float(v): k for k, v in enumerate(levels)}
    out = []
    for row, item_labels in enumerate(labels):
        if not len(item_labels):
            raise InputDataError(f"{criterion}: a labelled item without a label")
        try:
            out.append(np.array([scores[row, index[float(y)]] for y in item_labels]))
        except KeyError as exc:
            raise InputDataError(
                f"{criterion}: a label {exc.args[0]!r} is not a level of the "
                f"scale {list(map(float, levels))}"
            ) from None
    return out


def nonconformity(
    per_rater: Sequence[np.ndarray], cover: str, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Each item's nonconformity from its raters' label scores: the largest, or one at random.

    The largest with ``every-rater``, one drawn at random with ``one-rater`` (``rng`` fixes the
    draw).
    """
    if cover not in COVERS:
        raise InputDataError(f"cover must be one of {list(COVERS)}; got {cover!r}")
    if cover == "every-rater":
        return np.array([float(s.max()) for s in per_rater])
    rng = rng or np.random.default_rng(0)
    return np.array([float(s[rng.integers(s.size)]) for s in per_rater])


def fit_criterion(
    criterion: str,
    probabilities: Any,
    labels: Sequence[Sequence[float]],
    levels: Sequence[float],
    alpha: float,
    groups: Sequence[str | None] | None = None,
    *,
    cover: str = "every-rater",
    rng: np.random.Generator | None = None,
) -> ConformalCriterion:
    """The thresholds from labelled items: the jury's distributions and the raters' labels.

    The distributions are items x levels; each item's raters' labels are values of ``levels``;
    the intervals cover every rater's label or a random one's (``cover``, module text).
    """
    values = list(map(float, levels))
    scores = level_scores(probabilities, values)
    worst = nonconformity(label_scores(criterion, scores, labels, values), cover, rng)
    by_group: dict[str, tuple[float, int]] = {}
    if groups is not None:
        for name in sorted({g for g in groups if g is not None}):
            mine = worst[[g == name for g in groups]]
            by_group[name] = (threshold(mine, alpha), int(mine.size))
    return ConformalCriterion(
        criterion, tuple(values), threshold(worst, alpha), len(labels), by_group
    )


def probability_rows(
    distributions: Sequence[Mapping[float, float] | None], levels: Sequence[float]
) -> np.ndarray:
    """Items x levels from per-item distributions (value -> probability; None: no row, NaN)."""
    values = list(map(float, levels))
    index = {v: k for k, v in enumerate(values)}
    out = np.full((len(distributions), len(values)), np.nan)
    for row, dist in enumerate(distributions):
        if dist is None:
            continue
        out[row] = 0.0
        for value, p in dist.items():
            if float(value) in index:
                out[row, index[float(value)]] += p
        total = out[row].sum()
        if total <= 0:
            out[row] = np.nan
        else:
            out[row] /= total
    return out


@dataclass
class ConformalMap:
    """Conformal thresholds per criterion, fitted on human labels for one rubric and jury.

    The configuration is ``provenance``; ``report`` holds what cross-validation on those labels
    says of the thresholds. `apply_to_record` gives a verdict its intervals and, with a
    ``route_width``, sends an item with a wider (or no) interval to a human.
    """

    alpha: float
    criteria: dict[str, ConformalCriterion]
    provenance: str | None = None
    rubric: str | None = None
    group_column: str | None = None
    report: dict[str, Any] = field(default_factory=dict)
    #: What an interval holds with probability >= 1 - alpha (`COVERS`).
    cover: str = "every-rater"

    def to_dict(self) -> dict[str, Any]:
        """The map as plain data (what `save` writes; infinite thresholds as null)."""
        return {
            "kind": "conformal",
            "alpha": self.alpha,
            "cover": self.cover,
            "provenance": self.provenance,
            "rubric": self.rubric,
            "group_column": self.group_column,
            "criteria": {
                c: {
                    "levels": list(k.levels),
                    "threshold": _finite(k.threshold),
                    "labelled": k.labelled,
                    "groups": {
                        g: {"threshold": _finite(t), "labelled": n}
                        for g, (t, n) in k.groups.items()
                    },
                }
                for c, k in self.criteria.items()
            },
            "report": self.report,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "the file") -> ConformalMap:
        """A map from `to_dict`'s data.

        InputDataError naming ``source`` when it is not one.
        """
        if not isinstance(data, Mapping) or data.get("kind") != "conformal":
            raise InputDataError(
                f"{source} is not a conformal map (from `jurybox calibrate --conformal`)"
            )
        try:
            criteria = {
                c: ConformalCriterion(
                    c,
                    tuple(map(float, k["levels"])),
                    _threshold(k["threshold"]),
                    int(k["labelled"]),
                    {
                        g: (_threshold(v["threshold"]), int(v["labelled"]))
                        for g, v in (k.get("groups") or {}).items()
                    },
                )
                for c, k in data["criteria"].items()
            }
            return cls(
                float(data["alpha"]),
                criteria,
                data.get("provenance"),
                data.get("rubric"),
                data.get("group_column"),
                dict(data.get("report") or {}),
                str(data.get("cover") or "every-rater"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputDataError(f"{source}: a malformed conformal map ({exc})") from None

    def save(self, path: Any) -> Any:
        """Write the map: YAML for ``.yaml``/``.yml``, JSON otherwise."""
        import json
        from pathlib import Path

        import yaml

        from ..stats.stat import jsonable

        path, data = Path(path), jsonable(self.to_dict())
        path.write_text(
            yaml.safe_dump(data, sort_keys=False)
            if path.suffix.lower() in (".yaml", ".yml")
            else json.dumps(data, indent=2) + "\n",
            encoding="utf-8",
        )
        return path

    @classmethod
    def load(cls, path: Any) -> ConformalMap:
        """A map read from a YAML or JSON file.

        InputDataError when it does not parse or is not a conformal map.
        """
        from pathlib import Path

        import yaml

        text = Path(path).read_text(encoding="utf-8")
        try:
            data = yaml.safe_load(text)  # JSON is YAML too
        except yaml.YAMLError as exc:
            raise InputDataError(f"{path}: not YAML or JSON ({exc})") from None
        return cls.from_dict(data, str(path))

    def intervals_of(
        self, record: Any, scales: Mapping[str, Any], group: str | None = None
    ) -> dict[str, list[float] | None]:
        """Criterion -> ``[low, high]`` for a verdict record.

        None where the jury gave no scored vote on the criterion.
        """
        from ..data.verdicts import mixed_distribution

        raw = record.votes if hasattr(record, "votes") else record.get("votes", [])
        votes = [_vote(v) for v in raw]  # each vote read once, not once per criterion
        out: dict[str, list[float] | None] = {}
        for name, fitted in self.criteria.items():
            scale = scales.get(name)
            mine = [v for v in votes if v.criterion == name]
            dist = mixed_distribution(mine, scale) if scale is not None else None
            rows = probability_rows([dist], fitted.levels)
            if np.isnan(rows).any():
                out[name] = None
                continue
            got = intervals(level_scores(rows, fitted.levels), fitted.levels, fitted.cut(group))
            out[name] = [float(got[0, 0]), float(got[0, 1])]
        return out

    def apply_to_record(
        self,
        record: dict[str, Any],
        scales: Mapping[str, Any],
        route_width: float | None = None,
        group: str | None = None,
    ) -> dict[str, Any]:
        """The record with ``interval`` and, with a ``route_width``, ``route``.

        ``interval`` is criterion -> [low, high] or null; ``route`` (``{"to": "human", "reasons":
        [...]}``) is added where an interval is wider than ``route_width`` or missing.
        """
        got = self.intervals_of(record, scales, group)
        out = {**record, "interval": got}
        if route_width is not None:
            reasons = [
                f"{c}: no interval (the jury did not score it)"
                if iv is None
                else f"{c}: interval [{iv[0]:g}, {iv[1]:g}] wider than {route_width:g}"
                for c, iv in got.items()
                if iv is None or iv[1] - iv[0] > route_width + 1e-12
            ]
            if reasons:
                out["route"] = {"to": "human", "reasons": reasons}
        return out


def _vote(v: Any) -> Any:
    from jurybox.rubrics import Vote

    return v if isinstance(v, Vote) else Vote.model_validate(v)


def _finite(x: float) -> float | None:
    return None if math.isinf(x) else x


def _threshold(x: Any) -> float:
    return math.inf if x is None else float(x)


def fit_conformal(
    lines: Sequence[Mapping[str, Any]],
    records: Sequence[Any],
    scales: Mapping[str, Any],
    *,
    alpha: float = 0.1,
    groups: Mapping[str, str] | None = None,
    group_column: str | None = None,
    provenance: str | None = None,
    rubric: str | None = None,
    folds: int = 5,
    seed: int = 0,
    cover: str = "every-rater",
) -> ConformalMap:
    """A `ConformalMap` from human label ``lines`` and the verdict ``records``.

    ``lines`` are as ``label_rows`` gives them; ``records`` are those of the labelled items (and
    others: every record counts towards the report's widths). ``groups``: item id -> group, for
    per-group thresholds; ``cover``: what an interval holds where items have several raters
    (`COVERS`, module text). The report holds, per criterion, the labelled items used, the
    threshold, the mean width and single-level share over all the records, the coverage under
    ``folds``-fold cross-validation on the labels (overall, per group, and among the items each
    route width would keep), and where items have several raters what the other ``cover`` would
    give. Labels chosen actively for the benchmark mean are refused (module text).
    """
    from ..data.labels import chosen_actively, labels_by_item, undesigned_overlap
    from ..data.verdicts import mixed_distribution

    active = chosen_actively(lines)
    if active:
        raise InputDataError(
            f"{len(active)} label(s) (the first for item {active[0]!r}) were chosen actively for "
            "the benchmark mean (jurybox label --goal benchmark-mean), with unequal "
            "probabilities: the items the jury is sure of, where a confidently wrong jury errs, "
            "are under-represented, so a threshold fitted on them undercovers new items while "
            "its own cross-validation looks right. Fit the map on labels from a uniform order "
            "(--goal agreement)",
            field="selection",
        )
    routed = undesigned_overlap(lines)
    if routed:
        raise InputDataError(
            f"{len(routed)} label(s) (the first for item {routed[0]!r}) were routed to a second "
            "rater (overlap) and no label shows the session's own design: an active session's "
            "overlap items are as unequally chosen as its own labels. Fit the map with the "
            "session's uniform labels beside them, or on labels from --goal agreement",
            field="selection",
        )
    nonconformity([], cover)  # an unknown cover is refused before any work
    by_id = {r.id: r for r in records}
    criteria: dict[str, ConformalCriterion] = {}
    report: dict[str, Any] = {}
    rng = np.random.default_rng(seed)
    for name, scale in scales.items():
        labels = labels_by_item(lines, name, scale, by_id)
        if not labels:
            continue
        levels = [float(v) for v in scale.values]
        dists = [
            mixed_distribution([v for v in by_id[i].votes if v.criterion == name], scale)
            for i in labels
        ]
        rows = probability_rows(dists, levels)
        usable = ~np.isnan(rows).any(axis=1)
        ids = [i for i, ok in zip(labels, usable) if ok]
        if len(ids) < 2:
            continue
        item_groups = [groups.get(i) for i in ids] if groups else None
        item_labels = [labels[i] for i in ids]
        fitted = fit_criterion(
            name, rows[usable], item_labels, levels, alpha, item_groups, cover=cover, rng=rng
        )
        criteria[name] = fitted
        all_rows = probability_rows(
            [
                mixed_distribution([v for v in r.votes if v.criterion == name], scale)
                for r in records
            ],
            levels,
        )
        all_rows = all_rows[~np.isnan(all_rows).any(axis=1)]
        spans = _spans(all_rows, levels, fitted.threshold)
        report[name] = {
            "labelled": len(ids),
            "left_out_unscored": int((~usable).sum()),
            "covers": cover,
            "raters_per_item": float(np.mean([len(y) for y in item_labels])),
            "threshold": _finite(fitted.threshold),
            "mean_width": float(spans.mean()) if spans.size else None,
            "single_level_share": float(np.mean(spans == 0)) if spans.size else None,
            **_cross_validated(
                rows[usable], item_labels, levels, alpha, item_groups, folds, rng, cover
            ),
        }
        if max(len(y) for y in item_labels) > 1:
            other = COVERS[1 - COVERS.index(cover)]
            refit = fit_criterion(
                name, rows[usable], item_labels, levels, alpha, cover=other, rng=rng
            )
            widths = _spans(all_rows, levels, refit.threshold)
            report[name]["other_cover"] = {
                "covers": other,
                "threshold": _finite(refit.threshold),
                "mean_width": float(widths.mean()) if widths.size else None,
            }
        if math.isinf(fitted.threshold):
            report[name]["note"] = (
                f"{len(ids)} labelled items are too few for "
                f"{1 - alpha:.0%} coverage: every interval is the whole "
                f"scale (at least {math.ceil(1 / alpha) - 1} are needed)"
            )
    if not criteria:
        raise InputDataError("no criterion has two labelled items the jury scored: nothing to fit")
    return ConformalMap(alpha, criteria, provenance, rubric, group_column, report, cover)


def _spans(rows: np.ndarray, levels: Sequence[float], cut: float) -> np.ndarray:
    """The width of each row's interval at threshold ``cut``."""
    if not rows.shape[0]:
        return np.empty(0)
    return np.diff(intervals(level_scores(rows, levels), levels, cut)).ravel()


def _cross_validated(
    rows: np.ndarray,
    labels: Sequence[Sequence[float]],
    levels: Sequence[float],
    alpha: float,
    groups: Sequence[str | None] | None,
    folds: int,
    rng: np.random.Generator,
    cover: str = "every-rater",
) -> dict[str, Any]:
    """Coverage under k-fold cross-validation, overall, per group and per route width.

    The coverage is of every rater's label (``every-rater``) or of a random rater's
    (``one-rater``: the share of an item's raters covered), overall, per group (each group's own
    threshold where groups are given) and among the items each route width would keep
    (``cv_by_route_width``: the held-out items whose interval is at most that wide; the guarantee
    is marginal, so these can be covered less than 1 - alpha).
    """
    n = rows.shape[0]
    k = max(2, min(folds, n))
    order = rng.permutation(n)
    hit = np.zeros(n)
    width = np.zeros(n)
    for fold in np.array_split(order, k):
        train = np.setdiff1d(order, fold)
        fitted = fit_criterion(
            "cv",
            rows[train],
            [labels[i] for i in train],
            levels,
            alpha,
            [groups[i] for i in train] if groups else None,
            cover=cover,
            rng=rng,
        )
        for i in fold:
            cut = fitted.cut(groups[i] if groups else None)
            got = intervals(level_scores(rows[[i]], levels), levels, cut)[0]
            inside = [got[0] <= y <= got[1] for y in labels[i]]
            hit[i] = all(inside) if cover == "every-rater" else float(np.mean(inside))
            width[i] = got[1] - got[0]
    out: dict[str, Any] = {
        "cv_coverage": float(hit.mean()),
        "cv_folds": k,
        "cv_by_route_width": _by_route_width(hit, width, levels),
    }
    if groups:
        out["cv_coverage_by_group"] = {
            g: {
                "coverage": float(hit[[x == g for x in groups]].mean()),
                "labelled": int(sum(x == g for x in groups)),
            }
            for g in sorted({x for x in groups if x is not None})
        }
    return out


def _by_route_width(
    hit: np.ndarray, width: np.ndarray, levels: Sequence[float]
) -> list[dict[str, Any]]:
    """Per route width W: the share of held-out items kept and their coverage.

    The widths are each distance between levels, as ``--route-width W`` keeps an item whose
    interval is at most W wide.
    """
    out = []
    for w in sorted({float(v) - float(levels[0]) for v in levels}):
        kept = width <= w + 1e-12
        out.append(
            {
                "route_width": w,
                "kept": float(kept.mean()),
                "coverage": float(hit[kept].mean()) if kept.any() else None,
            }
        )
    return out
