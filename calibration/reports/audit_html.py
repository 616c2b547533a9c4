"""``jurybox audit --html``: the audit's findings as one self-contained HTML page.

Each finding is its sentence and a small inline SVG: the estimate as a dot, its CI as a bar, on
an axis with the value of "no bias" marked (0 for a correlation or an effect, 0.5 for P(first),
the number of judges for the effective number); flagged findings are drawn red.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1000px}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
.finding{display:flex;align-items:center;gap:16px;margin:.4em 0;font-size:14px}
.finding svg{flex:none} .flagged{color:#b22} .note{color:#666;font-size:12px}
"""
WIDTH, HEIGHT = 320, 46


def _interval(
    value: float | None,
    ci: Sequence[float] | None,
    lo: float,
    hi: float,
    null: float,
    flagged: bool,
) -> str:
    """One estimate with its CI on the axis lo..hi, the no-bias value dashed."""
    x0, x1 = 30, WIDTH - 30
    span = (hi - lo) or 1.0

    def px(v: float) -> float:
        return x0 + (min(max(v, lo), hi) - lo) / span * (x1 - x0)

    colour = "#b22" if flagged else "#2a6"
    parts = [
        f"<svg width='{WIDTH}' height='{HEIGHT}' xmlns='http://www.w3.org/2000/svg' "
        "font-size='10' role='img'>",
        f"<line x1='{x0}' x2='{x1}' y1='20' y2='20' stroke='#ccc'/>",
        f"<line x1='{px(null):.1f}' x2='{px(null):.1f}' y1='6' y2='34' stroke='#666' "
        "stroke-dasharray='3 3'/>",
    ]
    for tick in (lo, null, hi):
        parts.append(
            f"<text x='{px(tick):.1f}' y='{HEIGHT - 2}' text-anchor='middle'>{_tick(tick)}</text>"
        )
    if value is None:
        parts.append(
            f"<text x='{WIDTH / 2}' y='16' text-anchor='middle' fill='#999'>undefined</text>"
        )
    else:
        if ci is not None:
            parts.append(
                f"<line x1='{px(ci[0]):.1f}' x2='{px(ci[1]):.1f}' y1='20' y2='20' "
                f"stroke='{colour}' stroke-width='4'/>"
            )
        parts.append(f"<circle cx='{px(value):.1f}' cy='20' r='5' fill='{colour}'/>")
    parts.append("</svg>")
    return "".join(parts)


def _tick(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def _axis(
    values: Sequence[float | None],
    cis: Sequence[Sequence[float] | None],
    null: float,
    floor: float | None = None,
    ceiling: float | None = None,
) -> tuple[float, float]:
    seen = [
        null,
        *(v for v in values if v is not None),
        *(x for c in cis if c is not None for x in c),
    ]
    lo, hi = min(seen), max(seen)
    pad = (hi - lo) * 0.1 or 0.5
    lo, hi = lo - pad, hi + pad
    return (
        max(lo, floor) if floor is not None else lo,
        min(hi, ceiling) if ceiling is not None else hi,
    )


def _section(
    title: str,
    rows: list[dict[str, Any]],
    value: str,
    null: float,
    floor: float | None = None,
    ceiling: float | None = None,
    null_of: Any = None,
) -> str:
    if not rows:
        return ""
    if floor is not None and ceiling is not None:  # a bounded statistic: its whole range
        lo, hi = floor, ceiling
    else:
        lo, hi = _axis([r[value] for r in rows], [r["ci"] for r in rows], null, floor, ceiling)
    out = [f"<h2>{escape(title)}</h2>"]
    for r in rows:
        n0 = null_of(r) if null_of is not None else null
        lo_r, hi_r = (min(lo, n0), max(hi, n0)) if null_of is not None else (lo, hi)
        svg = _interval(r[value], r["ci"], lo_r, hi_r, n0, r["flagged"])
        cls = " flagged" if r["flagged"] else ""
        out.append(
            f"<div class='finding{cls}'>{svg}<span>{'! ' if r['flagged'] else ''}"
            f"{escape(r['finding'])}</span></div>"
        )
    return "".join(out)


def render_audit(
    source: str,
    *,
    length: Sequence[Any],
    self_preference: Sequence[Any],
    dependence: Sequence[Any],
    position: Sequence[Any],
    notes: Sequence[str],
) -> str:
    """The page: one section per kind of finding, each finding with its plot."""
    length_rows = []
    for f in length:
        d = f.to_dict()
        use_error = d["error_spearman"] is not None
        length_rows.append(
            {
                "finding": d["finding"],
                "flagged": d["flagged"],
                "value": d["error_spearman"] if use_error else d["spearman"],
                "ci": d["error_ci"] if use_error else d["ci"],
            }
        )
    position_rows = [
        {"finding": f.words(), "flagged": f.flagged, "value": f.first, "ci": f.first_ci}
        for f in position
    ]
    dependence_rows = [
        {**d.to_dict(), "value": d.n_eff.value, "k": len(d.judges)} for d in dependence
    ]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>jurybox audit</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Judge audit: {escape(source)}</h1>",
        "<p class='note'>Dots: estimates; bars: 95% CIs (percentile bootstrap over items; "
        "Wilson for P(first)); dashed: no bias. Red: the CI excludes no bias.</p>",
        _section(
            "Length: Spearman correlation with the response length (of the error, with "
            "human labels)",
            length_rows,
            "value",
            0.0,
            -1.0,
            1.0,
        ),
        _section(
            "Self-preference: extra points on the judge's own family's answers",
            [f.to_dict() for f in self_preference],
            "effect",
            0.0,
        ),
        _section(
            "Position: P(the answer shown first is chosen)", position_rows, "value", 0.5, 0.0, 1.0
        ),
        _section(
            "Dependence: effective number of independent judges (dashed: the jury's size)",
            dependence_rows,
            "value",
            1.0,
            0.0,
            None,
            null_of=lambda r: float(r["k"]),
        ),
    ]
    if notes:
        parts.append(
            "<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
        )
    parts.append("</body></html>")
    return "".join(parts)
