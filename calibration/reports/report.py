"""``agreement_report``: judges against humans (and each other), every number with a bootstrap CI.

For each criterion the report holds

* human-human: Krippendorff's alpha among the human raters (the ceiling a judge can reach);
* judge-human: each judge, and the jury's aggregated score, against the human consensus
  (per-item mean of the human ratings; snapped to the nearest scale value where a statistic
  needs categories);
* judge-judge: every pair of judges, and alpha across all judges.

CIs resample items (percentile bootstrap). ``to_dict()`` is the ``--json`` form, ``to_text()``
the terminal table, ``to_html()`` a self-contained page with inline SVG plots.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from ..data.joined import CriterionData, Joined, join
from ..data.labels import HumanLabels
from ..data.verdicts import JudgeOutput, ValueKind
from ..errors import InputDataError
from ..stats.agreement import (
    adjacent_agreement,
    exact_agreement,
    kendall,
    mean_absolute_error,
    mean_difference,
    pearson,
    spearman,
)
from ..stats.alpha import LEVELS, Level, krippendorff_alpha
from ..stats.bootstrap import bootstrap_ci
from ..stats.kappa import cohen_kappa, gwet_ac
from ..stats.stat import Stat

JURY = "jury"
_TABLE_STATS_NUMERIC = ("alpha", "qwk", "spearman", "exact", "adjacent", "mae")
_TABLE_STATS_CATEGORICAL = ("alpha", "kappa", "ac1", "exact")


@dataclass
class CriterionAgreement:
    """Agreement on one criterion: human-human, judges and jury against humans, judge pairs.

    And per system how many labelled items it has no value for.
    """

    criterion: str
    scale: list[float]
    categorical: bool
    n_items: int
    human_raters: list[str]
    human_human: dict[str, Stat]
    judge_human: dict[str, dict[str, Stat]]
    judge_judge: dict[str, dict[str, Stat]]
    judges_alpha: Stat | None
    missing: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The criterion's statistics as plain data (its part of the ``--json`` form)."""
        return {
            "scale": self.scale,
            "categorical": self.categorical,
            "n_items": self.n_items,
            "human_raters": self.human_raters,
            "human_human": {k: s.to_dict() for k, s in self.human_human.items()},
            "judge_human": {
                j: {k: s.to_dict() for k, s in d.items()} for j, d in self.judge_human.items()
            },
            "judge_judge": {
                p: {k: s.to_dict() for k, s in d.items()} for p, d in self.judge_judge.items()
            },
            "judges_alpha": self.judges_alpha.to_dict() if self.judges_alpha else None,
            "missing_values": self.missing,
        }


@dataclass
class AgreementReport:
    """What `agreement_report` returns: per-criterion agreement, the join, settings, sources.

    Attributes:
        criteria: Criterion -> its agreement: human-human, each judge and the jury against the
            humans, judge pairs, and the values missing per system.
        join_summary: How the join went, as plain data (ids joined, ids only one side has, columns
            not used).
        join_text: The join summary as one line of text.
        value: Which vote value was compared: ``score`` or ``expected``.
        confidence: The bootstrap intervals' coverage.
        n_resamples: Bootstrap resamples per interval.
        sources: Where the human labels and the judge output came from.
        joined: The joined data, kept for the page's plots (not part of `to_dict`).
    """

    criteria: dict[str, CriterionAgreement]
    join_summary: dict[str, Any]
    join_text: str
    value: str
    confidence: float
    n_resamples: int
    sources: dict[str, str]
    joined: Joined | None = None  # kept for plots; not part of to_dict()

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (the ``--json`` form); the joined data is left out.

        Returns:
            The sources, settings, join summary and every criterion's statistics.
        """
        return {
            "sources": self.sources,
            "value": self.value,
            "confidence": self.confidence,
            "n_resamples": self.n_resamples,
            "join": self.join_summary,
            "criteria": {c: a.to_dict() for c, a in self.criteria.items()},
        }

    def to_text(self) -> str:
        """The report as terminal tables, one block per criterion.

        Returns:
            The tables, with notes on undefined statistics and missing values.
        """
        pct = round(self.confidence * 100)
        lines = [
            f"Agreement ({self.value}; {pct}% bootstrap CIs over items, "
            f"{_plural(self.n_resamples, 'resample')})",
            f"join: {self.join_text}",
        ]
        for name, crit in self.criteria.items():
            lines.append("")
            lines.append(
                f"{name}  (scale {_scale_text(crit.scale)}; "
                f"{_plural(crit.n_items, 'item')}; "
                f"{_plural(len(crit.human_raters), 'human rater')})"
            )
            for key, stat in crit.human_human.items():
                lines.append(f"  human-human {key}: {stat.format()}")
            keys = _TABLE_STATS_CATEGORICAL if crit.categorical else _TABLE_STATS_NUMERIC
            lines.extend("  " + row for row in _table("judge-human", keys, crit.judge_human))
            if crit.judge_judge:
                lines.extend(
                    "  " + row
                    for row in _table(
                        "judge-judge", ("alpha", "spearman", "exact"), crit.judge_judge
                    )
                )
            if crit.judges_alpha is not None:
                lines.append(f"  all judges {crit.judges_alpha.name}: {crit.judges_alpha.format()}")
            if any(crit.missing.values()):
                miss = ", ".join(f"{j} {n}" for j, n in crit.missing.items() if n)
                lines.append(
                    f"  missing values (unscored votes / no value) on labelled items: {miss}"
                )
        return "\n".join(lines)

    def to_html(self) -> str:
        """The report as a self-contained HTML page (`.html.render_report`).

        Returns:
            The page.
        """
        from .html import render_report

        return render_report(self)

    def write_html(self, path: str | Path) -> Path:
        """Write `to_html` to ``path``; returns the path.

        Args:
            path: The file to write.

        Returns:
            The path written.
        """
        path = Path(path)
        path.write_text(self.to_html(), encoding="utf-8")
        return path

    def __str__(self) -> str:
        return self.to_text()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _scale_text(scale: list[float]) -> str:
    vals = [f"{v:g}" for v in scale]
    return ",".join(vals) if len(vals) <= 6 else f"{vals[0]}..{vals[-1]}"


def _table(title: str, keys: tuple[str, ...], rows: dict[str, dict[str, Stat]]) -> list[str]:
    width = max([len(title)] + [len(r) for r in rows]) + 2
    head = title.ljust(width) + "n".rjust(5) + "".join(k.rjust(22) for k in keys)
    out = [head]
    for name, stats in rows.items():
        n = max((s.n for s in stats.values()), default=0)
        cells = []
        for k in keys:
            s = stats.get(k)
            if s is None:
                cells.append("-".rjust(22))
            elif s.value is None:
                cells.append("undefined".rjust(22))
            elif s.ci is None:
                cells.append(f"{s.value:.3f}".rjust(22))
            else:
                cells.append(f"{s.value:.3f} [{s.ci[0]:.2f},{s.ci[1]:.2f}]".rjust(22))
        out.append(name.ljust(width) + str(n).rjust(5) + "".join(cells))
    undefined = [
        (name, k, s.reason)
        for name, stats in rows.items()
        for k, s in stats.items()
        if s.value is None
    ]
    for name, k, reason in undefined[:8]:
        out.append(f"  note: {name} {k} undefined: {reason}")
    return out


# ---------------------------------------------------------------------- statistics bundles


def _step(scale: list[float]) -> float:
    return float(np.min(np.diff(scale))) if len(scale) > 1 else 1.0


def default_level(crit: CriterionData) -> Level:
    """Krippendorff's level when none is asked for: nominal for labelled scales, else interval."""
    return "nominal" if crit.categorical else "interval"


def _alpha_of(crit: CriterionData, level: Level) -> Callable[[np.ndarray], Stat]:
    """Alpha at ``level`` on raters x items values; nominal compares values snapped to the scale."""

    def alpha(m: np.ndarray) -> Stat:
        return krippendorff_alpha(crit.scale.snap(m) if level == "nominal" else m, level)

    return alpha


def judge_human_stats(
    crit: CriterionData, level: Level | None = None
) -> Callable[..., dict[str, Stat]]:
    """Statistic bundle comparing one score vector with the human consensus (mean, snapped)."""
    scale = list(crit.scale.values)
    step = _step(scale)
    level = level or default_level(crit)
    alpha = _alpha_of(crit, level)

    def alpha_vs_humans(x: np.ndarray, h_ref: np.ndarray, h_mean: np.ndarray) -> Stat:
        return alpha(np.vstack([x, h_ref if level == "nominal" else h_mean]))

    if crit.categorical:

        def categorical(x: np.ndarray, h_ref: np.ndarray, h_mean: np.ndarray) -> dict[str, Stat]:
            xs = crit.scale.snap(x)
            return {
                "alpha": alpha_vs_humans(x, h_ref, h_mean),
                "kappa": cohen_kappa(xs, h_ref, labels=scale),
                "ac1": gwet_ac(np.vstack([xs, h_ref]), "identity", categories=scale),
                "exact": exact_agreement(xs, h_ref),
                "mae": mean_absolute_error(x, h_mean),
            }

        return categorical

    def numeric(x: np.ndarray, h_ref: np.ndarray, h_mean: np.ndarray) -> dict[str, Stat]:
        xs = crit.scale.snap(x)
        return {
            "alpha": alpha_vs_humans(x, h_ref, h_mean),
            "qwk": cohen_kappa(xs, h_ref, weights="quadratic", labels=scale),
            "spearman": spearman(x, h_mean),
            "kendall": kendall(x, h_mean),
            "pearson": pearson(x, h_mean),
            "exact": exact_agreement(xs, h_ref),
            "adjacent": adjacent_agreement(xs, h_ref, tolerance=step),
            "mae": mean_absolute_error(x, h_mean),
            "bias": mean_difference(x, h_mean),
        }

    return numeric


def judge_judge_stats(
    crit: CriterionData, level: Level | None = None
) -> Callable[..., dict[str, Stat]]:
    """Statistic bundle comparing two judges' score vectors: alpha, exact agreement, Spearman.

    Spearman on numeric scales only.
    """
    alpha = _alpha_of(crit, level or default_level(crit))

    def pair(a: np.ndarray, b: np.ndarray) -> dict[str, Stat]:
        out = {
            "alpha": alpha(np.vstack([a, b])),
            "exact": exact_agreement(crit.scale.snap(a), crit.scale.snap(b)),
        }
        if not crit.categorical:
            out["spearman"] = spearman(a, b)
        return out

    return pair


def _criterion_agreement(
    crit: CriterionData, boot: dict[str, Any], level: Level | Literal["auto"]
) -> CriterionAgreement:
    level = default_level(crit) if level == "auto" else level
    alpha = _alpha_of(crit, level)
    n_raters = crit.human.shape[0]
    if n_raters >= 2:
        human_human = {f"alpha[{level}]": bootstrap_ci(alpha, crit.human, **boot)}
    else:
        who = f" ({', '.join(crit.human_raters)})" if crit.human_raters else ""
        human_human = {
            f"alpha[{level}]": Stat(
                f"krippendorff_alpha[{level}]",
                None,
                int((~np.isnan(crit.human_mean)).sum()),
                f"needs at least 2 human raters; the labels have {n_raters}{who} for "
                f"{crit.criterion}",
            )
        }

    h_mean = crit.human_mean
    h_ref = crit.human_reference
    labelled = ~np.isnan(h_mean)
    fn = judge_human_stats(crit, level)
    judge_human: dict[str, dict[str, Stat]] = {}
    missing: dict[str, int] = {}
    systems = dict(crit.judges)
    systems[JURY] = crit.jury
    for name, x in systems.items():
        missing[name] = int((np.isnan(x) & labelled).sum())
        keep = labelled & ~np.isnan(x)
        judge_human[name] = bootstrap_ci(fn, x[keep], h_ref[keep], h_mean[keep], **boot)

    judge_judge: dict[str, dict[str, Stat]] = {}
    pair_fn = judge_judge_stats(crit, level)
    for a, b in combinations(sorted(crit.judges), 2):
        xa, xb = crit.judges[a], crit.judges[b]
        keep = ~(np.isnan(xa) | np.isnan(xb))
        judge_judge[f"{a} | {b}"] = bootstrap_ci(pair_fn, xa[keep], xb[keep], **boot)
    judges_alpha = None
    if len(crit.judges) >= 2:
        mat = np.vstack([crit.judges[j] for j in sorted(crit.judges)])
        judges_alpha = bootstrap_ci(alpha, mat, **boot)
    return CriterionAgreement(
        crit.criterion,
        list(crit.scale.values),
        crit.categorical,
        int(labelled.sum()),
        crit.human_raters,
        human_human,
        judge_human,
        judge_judge,
        judges_alpha,
        missing,
    )


def agreement_report(
    human_labels: HumanLabels | str | Path,
    judge_output: JudgeOutput | str | Path,
    *,
    scales: Any = None,
    value: ValueKind = "score",
    criteria: list[str] | None = None,
    level: str = "auto",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> AgreementReport:
    """Judge-human, jury-human, human-human and judge-judge agreement with bootstrap CIs.

    Args:
        human_labels: Human labels, or the path of a labels file.
        judge_output: Judge output, or the path of a ``jurybox judge`` output file.
        scales: A rubric or {criterion: values}; inferred from the observed values when omitted.
        value: Which value of each vote: its ``score`` or its logprob-``expected`` score.
        criteria: The criteria to report (default: all the judge output has).
        level: Krippendorff's level for every alpha in the report (``auto``: nominal for labelled
            scales, interval otherwise).
        n_resamples: Bootstrap resamples per interval.
        confidence: The intervals' coverage.
        seed: The bootstrap's seed (``None``: a fresh one).

    Returns:
        The report: per criterion every statistic with its CI, the join, settings and sources.

    Raises:
        InputDataError: ``level`` is not ``auto`` or a level, or a file cannot be read (and the
            join's errors).
        JoinError: Labels and verdicts have no id or criterion in common.
    """
    if level != "auto" and level not in LEVELS:
        raise InputDataError(f"level must be 'auto' or one of {LEVELS}; got {level!r}")
    joined = join(human_labels, judge_output, scales=scales, value=value, criteria=criteria)
    boot = {"n_resamples": n_resamples, "confidence": confidence, "seed": seed}
    checked = cast("Level | Literal['auto']", level)  # checked against LEVELS above
    crits = {
        name: _criterion_agreement(data, boot, checked) for name, data in joined.criteria.items()
    }
    sources = {
        "human_labels": getattr(human_labels, "source", str(human_labels)),
        "judge_output": getattr(judge_output, "source", str(judge_output)),
    }
    return AgreementReport(
        crits,
        joined.summary.to_dict(),
        joined.summary.describe(),
        value,
        confidence,
        n_resamples,
        sources,
        joined,
    )
