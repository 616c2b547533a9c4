"""Self-contained HTML for an agreement report: tables plus inline SVG, no plotting deps.

The report is `.report.AgreementReport`. Per criterion: a forest plot of judge-human
alpha with CIs (human-human alpha as the reference line), and per judge a score confusion matrix
(judge vs human consensus) and a reliability diagram (mean human score for each judge score,
against the diagonal).
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from ..data.joined import CriterionData, Joined
    from ..stats.stat import Stat


# What the page reads of an agreement report (report.py's AgreementReport and
# CriterionAgreement have it): the report renders itself here, so these types live on this side
# and the import goes one way, report -> html.
class CriterionView(Protocol):
    """What the page reads of one criterion of an agreement report."""

    @property
    def categorical(self) -> bool:
        """Whether the criterion is labelled (categories such as yes/no)."""
        ...

    @property
    def n_items(self) -> int:
        """The labelled items compared."""
        ...

    @property
    def human_raters(self) -> list[str]:
        """The human raters' names."""
        ...

    @property
    def scale(self) -> list[float]:
        """The criterion's scale values."""
        ...

    @property
    def human_human(self) -> Mapping[str, Stat]:
        """Agreement among the human raters, by statistic."""
        ...

    @property
    def judge_human(self) -> Mapping[str, Mapping[str, Stat]]:
        """Each judge's (and the jury's) agreement with the humans, by statistic."""
        ...

    @property
    def judge_judge(self) -> Mapping[str, Mapping[str, Stat]]:
        """Each pair of judges' agreement, by statistic."""
        ...


class ReportView(Protocol):
    """What the page reads of an agreement report."""

    @property
    def confidence(self) -> float:
        """The bootstrap intervals' coverage."""
        ...

    @property
    def value(self) -> str:
        """Which vote value was compared: ``score`` or ``expected``."""
        ...

    @property
    def n_resamples(self) -> int:
        """Bootstrap resamples per interval."""
        ...

    @property
    def sources(self) -> Mapping[str, str]:
        """Where the human labels and the judge output came from."""
        ...

    @property
    def join_text(self) -> str:
        """The join summary as one line of text."""
        ...

    @property
    def criteria(self) -> Mapping[str, CriterionView]:
        """Criterion -> what the page reads of it."""
        ...

    @property
    def joined(self) -> Joined | None:
        """The joined data, for the plots (None: no plots)."""
        ...


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4} td:first-child,th:first-child{text-align:left}
.plots{display:flex;flex-wrap:wrap;gap:16px} .plots figure{margin:0}
figcaption{font-size:12px;color:#555;text-align:center}
.note{color:#666;font-size:12px}
"""


def render_report(report: ReportView) -> str:
    """The report as one self-contained HTML page: per criterion its tables and inline SVG plots."""
    pct = round(report.confidence * 100)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>jurybox agreement</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Judge-human agreement</h1>",
        f"<p>Value: <b>{escape(report.value)}</b>; {pct}% percentile-bootstrap CIs over items "
        f"({report.n_resamples} resamples).<br>"
        f"Human labels: {escape(report.sources['human_labels'])}"
        f"<br>Judge output: {escape(report.sources['judge_output'])}</p>",
        f"<p class='note'>Join: {escape(report.join_text)}</p>",
    ]
    for name, crit in report.criteria.items():
        data = report.joined.criteria[name] if report.joined else None
        parts.append(_criterion_section(name, crit, data))
    parts.append("</body></html>")
    return "\n".join(parts)


def _fmt(stat) -> str:
    if stat is None:
        return "-"
    if stat.value is None:
        return f"<span title='{escape(str(stat.reason))}'>undefined</span>"
    if stat.ci is None:
        return f"{stat.value:.3f}"
    return f"{stat.value:.3f} <small>[{stat.ci[0]:.2f}, {stat.ci[1]:.2f}]</small>"


def _criterion_section(name: str, crit: CriterionView, data: CriterionData | None) -> str:
    keys = (
        ["alpha", "kappa", "ac1", "exact", "mae"]
        if crit.categorical
        else ["alpha", "qwk", "spearman", "kendall", "pearson", "exact", "adjacent", "mae", "bias"]
    )
    out = [
        f"<h2>{escape(name)}</h2>",
        f"<p>{crit.n_items} labelled items, {len(crit.human_raters)} human raters, scale "
        f"{escape(', '.join(f'{v:g}' for v in crit.scale))}.</p>",
    ]
    for key, stat in crit.human_human.items():
        out.append(f"<p>Human-human {escape(key)}: {_fmt(stat)}</p>")
    out.append(
        "<table><tr><th>judge-human</th><th>n</th>"
        + "".join(f"<th>{k}</th>" for k in keys)
        + "</tr>"
    )
    for judge, stats in crit.judge_human.items():
        n = max((s.n for s in stats.values()), default=0)
        out.append(
            f"<tr><td>{escape(judge)}</td><td>{n}</td>"
            + "".join(f"<td>{_fmt(stats.get(k))}</td>" for k in keys)
            + "</tr>"
        )
    out.append("</table>")
    if crit.judge_judge:
        out.append(
            "<table><tr><th>judge-judge</th><th>alpha</th><th>spearman</th><th>exact</th></tr>"
        )
        for pair, stats in crit.judge_judge.items():
            out.append(
                f"<tr><td>{escape(pair)}</td>"
                + "".join(f"<td>{_fmt(stats.get(k))}</td>" for k in ("alpha", "spearman", "exact"))
                + "</tr>"
            )
        out.append("</table>")
    ref = next(iter(crit.human_human.values()), None)
    out.append("<div class='plots'>")
    out.append(
        _figure(
            _forest(
                {j: s.get("alpha") for j, s in crit.judge_human.items()},
                ref.value if ref is not None else None,
            ),
            "alpha vs human consensus (dashed: human-human alpha)",
        )
    )
    if data is not None:
        h_ref = data.human_reference
        h_mean = data.human_mean
        systems = dict(data.judges)
        systems["jury"] = data.jury
        for judge, x in systems.items():
            out.append(
                _figure(
                    _confusion(data.scale.snap(x), h_ref, list(data.scale.values)),
                    f"{escape(judge)}: judge score (rows) vs human (columns)",
                )
            )
            out.append(
                _figure(
                    _reliability(x, h_mean, list(data.scale.values)),
                    f"{escape(judge)}: mean human score per judge score",
                )
            )
    out.append("</div>")
    return "\n".join(out)


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


def _forest(stats: dict, reference: float | None, width: int = 360) -> str:
    rows = [(k, s) for k, s in stats.items() if s is not None]
    h = 24 * len(rows) + 40
    x0, x1 = 110, width - 20

    def px(v: float) -> float:
        return x0 + (min(max(v, -1.0), 1.0) + 1.0) / 2.0 * (x1 - x0)

    parts = [
        f"<svg width='{width}' height='{h}' xmlns='http://www.w3.org/2000/svg' font-size='11'>"
    ]
    for tick in (-1, -0.5, 0, 0.5, 1):
        parts.append(
            f"<line x1='{px(tick):.1f}' x2='{px(tick):.1f}' y1='10' y2='{h - 20}' stroke='#eee'/>"
        )
        parts.append(f"<text x='{px(tick):.1f}' y='{h - 6}' text-anchor='middle'>{tick:g}</text>")
    if reference is not None:
        parts.append(
            f"<line x1='{px(reference):.1f}' x2='{px(reference):.1f}' y1='10' "
            f"y2='{h - 20}' stroke='#c33' stroke-dasharray='4 3'/>"
        )
    for i, (name, stat) in enumerate(rows):
        y = 24 + 24 * i
        parts.append(f"<text x='{x0 - 6}' y='{y + 4}' text-anchor='end'>{escape(name)}</text>")
        if stat.value is None:
            parts.append(f"<text x='{x0 + 4}' y='{y + 4}' fill='#999'>undefined</text>")
            continue
        if stat.ci is not None:
            parts.append(
                f"<line x1='{px(stat.ci[0]):.1f}' x2='{px(stat.ci[1]):.1f}' y1='{y}' "
                f"y2='{y}' stroke='#333' stroke-width='2'/>"
            )
        parts.append(f"<circle cx='{px(stat.value):.1f}' cy='{y}' r='4' fill='#2a6'/>")
    parts.append("</svg>")
    return "".join(parts)


def _confusion(judge: np.ndarray, human: np.ndarray, scale: list[float], cell: int = 30) -> str:
    vals = np.asarray(scale)
    keep = ~(np.isnan(judge) | np.isnan(human))
    q = vals.size
    ji = np.abs(judge[keep][:, None] - vals).argmin(axis=1)
    hi = np.abs(human[keep][:, None] - vals).argmin(axis=1)
    counts = np.bincount(ji * q + hi, minlength=q * q).reshape(q, q)
    top = max(int(counts.max()), 1)
    size = 40 + cell * q
    parts = [
        f"<svg width='{size}' height='{size}' xmlns='http://www.w3.org/2000/svg' font-size='10'>"
    ]
    for k, v in enumerate(vals):
        parts.append(
            f"<text x='{40 + cell * k + cell / 2}' y='30' text-anchor='middle'>{v:g}</text>"
        )
        parts.append(
            f"<text x='32' y='{40 + cell * k + cell / 2 + 3}' text-anchor='end'>{v:g}</text>"
        )
    for r in range(q):
        for c in range(q):
            shade = int(255 - 200 * counts[r, c] / top)
            colour = f"rgb({shade},{shade},255)" if r != c else f"rgb({shade},255,{shade})"
            x, y = 40 + cell * c, 40 + cell * r
            parts.append(
                f"<rect x='{x}' y='{y}' width='{cell}' height='{cell}' "
                f"fill='{colour}' stroke='#fff'/>"
            )
            if counts[r, c]:
                parts.append(
                    f"<text x='{x + cell / 2}' y='{y + cell / 2 + 3}' "
                    f"text-anchor='middle'>{counts[r, c]}</text>"
                )
    parts.append("</svg>")
    return "".join(parts)


def _reliability(judge: np.ndarray, human: np.ndarray, scale: list[float], size: int = 220) -> str:
    keep = ~(np.isnan(judge) | np.isnan(human))
    x, y = judge[keep], human[keep]
    lo, hi = float(min(scale)), float(max(scale))
    span = hi - lo or 1.0
    pad = 30

    def px(v: float) -> float:
        return pad + (v - lo) / span * (size - 2 * pad)

    def py(v: float) -> float:
        return size - pad - (v - lo) / span * (size - 2 * pad)

    parts = [
        f"<svg width='{size}' height='{size}' xmlns='http://www.w3.org/2000/svg' font-size='10'>",
        f"<rect x='{pad}' y='{pad}' width='{size - 2 * pad}' height='{size - 2 * pad}' "
        "fill='none' stroke='#ccc'/>",
        f"<line x1='{px(lo)}' y1='{py(lo)}' x2='{px(hi)}' y2='{py(hi)}' stroke='#999' "
        "stroke-dasharray='4 3'/>",
    ]
    for v in (lo, hi):
        parts.append(f"<text x='{px(v)}' y='{size - pad + 14}' text-anchor='middle'>{v:g}</text>")
        parts.append(f"<text x='{pad - 4}' y='{py(v) + 3}' text-anchor='end'>{v:g}</text>")
    if x.size:
        # Bin continuous (expected) scores to the nearest scale point; discrete scores are exact.
        vals = np.asarray(scale)
        idx = np.abs(x[:, None] - vals).argmin(axis=1)
        n = np.bincount(idx, minlength=vals.size)
        mean_x = np.bincount(idx, weights=x, minlength=vals.size) / np.maximum(n, 1)
        mean_y = np.bincount(idx, weights=y, minlength=vals.size) / np.maximum(n, 1)
        sq = np.bincount(idx, weights=y * y, minlength=vals.size) / np.maximum(n, 1)
        se = np.sqrt(np.maximum(sq - mean_y**2, 0) / np.maximum(n - 1, 1))
        pts = [(mean_x[k], mean_y[k], se[k], n[k]) for k in range(vals.size) if n[k]]
        path = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b, _, _ in pts)
        parts.append(f"<polyline points='{path}' fill='none' stroke='#2a6'/>")
        for a, b, s, count in pts:
            parts.append(
                f"<line x1='{px(a):.1f}' x2='{px(a):.1f}' y1='{py(b - s):.1f}' "
                f"y2='{py(b + s):.1f}' stroke='#2a6'/>"
            )
            parts.append(
                f"<circle cx='{px(a):.1f}' cy='{py(b):.1f}' r='{2 + min(count, 50) / 10}'"
                f" fill='#2a6'><title>n={count}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)
