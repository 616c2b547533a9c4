"""``jurybox leaderboard --html``: the leaderboard as one self-contained HTML page.

Per criterion (the ranking one first): the items its ranks stand on (the common ground: how many,
how many dropped and which system lacks them, which systems were left out of it), a forest plot
(each system's mean on those items as a dot and its CI as a bar, best first, with its rank
interval and letters), each system's mean over its own items where items were dropped or
systems left out (shown, not ranked), and the matrix of paired differences (row minus column on
the common items; Holm-significant cells coloured, the others grey). The systems left out of
the common ground (``--exclude``, ``--min-items``) are in neither the plot nor the matrix.
"""

from __future__ import annotations

from html import escape
from typing import Any

from .leaderboard import Leaderboard

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:13px;margin:.6em 0}
td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}
th{background:#f4f4f4} td.name,th.name{text-align:left}
td.sig-pos{background:#cfe8d5;font-weight:600} td.sig-neg{background:#f3d0d0;font-weight:600}
td.ns{color:#888} td.self{background:#fafafa}
.note{color:#666;font-size:12px}
"""
ROW, LEFT, PLOT = 26, 170, 420


def render_leaderboard(board: Leaderboard) -> str:
    """The page for ``board``."""
    pct = round(board.confidence * 100)
    order = [board.rank_by] + [c for c in board.criteria if c != board.rank_by]
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<title>jurybox leaderboard</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Leaderboard: {len(board.systems)} systems on {board.items} items</h1>",
        f"<p>Ranked by <b>{escape(board.rank_by)}</b>. Per criterion, means, ranks and "
        "paired differences are on the common ground: the items every ranked system "
        f"scored ({pct}% CIs; paired t, Holm-adjusted over the pairs of each criterion). "
        "Systems sharing a letter are not shown to differ; the rank interval is the "
        "bootstrap's over those items.</p>",
    ]
    for message in board.notes:
        parts.append(f"<p class='note'>note: {escape(message)}</p>")
    for criterion in order:
        parts.append(f"<h2 id='c-{escape(criterion)}'>{escape(criterion)}</h2>")
        parts.append(_ground(board, criterion))
        parts.append(_forest(board, criterion))
        parts.append(_own(board, criterion))
        parts.append(_matrix(board, criterion))
    parts.append("</body></html>")
    return "\n".join(parts)


def _ground(board: Leaderboard, criterion: str) -> str:
    """The items the criterion's ranks stand on, in words."""
    ground = board.ranked_on.get(criterion)
    if ground is None:
        return ""
    if not ground["items"]:
        return (
            "<p class='ground'>Ranked on no item: none was scored for every system, so no "
            "system is ranked on this criterion.</p>"
        )
    text = f"Ranked on the <b>{ground['items']}</b> items every system scored"
    if ground["dropped"]:
        who = ", ".join(f"{escape(n)} lacks {k}" for n, k in ground["lacking"].items())
        text += f"; {ground['dropped']} of {ground['scored_by_any']} dropped ({who})"
    left_out = ground.get("left_out") or {}
    unranked = [n for n in ground["unranked"] if n not in left_out]
    if unranked:
        text += "; not ranked (no scored item): " + ", ".join(map(escape, unranked))
    if left_out:
        text += "; left out of the common ground, not ranked: " + ", ".join(
            f"{escape(n)} ({escape(why)})" for n, why in left_out.items()
        )
    return f"<p class='ground'>{text}.</p>"


def _own(board: Leaderboard, criterion: str) -> str:
    """Each system's mean over its own scored items, where items were dropped: shown, not ranked.

    Not ranked because the systems' own items differ.
    """
    ground = board.ranked_on.get(criterion)
    if not ground or not (ground["dropped"] or ground.get("left_out")):
        return ""
    html = [
        "<table class='own'><caption class='note'>each system's mean over its own scored "
        "items: not ranked, the items differ</caption><tr><th class='name'>system</th>"
        "<th>own items</th><th>mean [CI]</th></tr>"
    ]
    for s in board.systems:
        own = s["criteria"][criterion]["own"]
        ci = "" if own["ci"] is None else f" [{own['ci'][0]:.3f}, {own['ci'][1]:.3f}]"
        mean = "-" if own["mean"] is None else f"{own['mean']:.3f}{ci}"
        html.append(
            f"<tr><td class='name'>{escape(s['name'])}</td><td>{own['scored']}</td>"
            f"<td>{mean}</td></tr>"
        )
    html.append("</table>")
    return "".join(html)


def _ranked(board: Leaderboard, criterion: str) -> list[dict[str, Any]]:
    """The systems on the criterion's common ground (not left out of it), best first."""
    return sorted(
        (s for s in board.systems if "left_out" not in s["criteria"][criterion]),
        key=lambda s: (
            s["criteria"][criterion]["rank"] is None,
            s["criteria"][criterion]["rank"] or 0,
        ),
    )


def _forest(board: Leaderboard, criterion: str) -> str:
    rows = _ranked(board, criterion)
    values = [
        x
        for s in rows
        for x in ([s["criteria"][criterion]["mean"]] + list(s["criteria"][criterion]["ci"] or []))
        if x is not None
    ]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    # The data's ends and middle as ticks; one value alone gets an axis of +-0.5 around it.
    ticks = (lo, (lo + hi) / 2, hi) if hi > lo else (lo - 0.5, lo, lo + 0.5)
    pad = (hi - lo) * 0.08 or 0.5
    lo, hi = lo - pad, hi + pad
    height = ROW * len(rows) + 30

    def px(v: float) -> float:
        return LEFT + (v - lo) / (hi - lo) * PLOT

    svg = [
        f"<svg class='forest' width='{LEFT + PLOT + 150}' height='{height}' role='img' "
        f"aria-label='means of {escape(criterion)}' xmlns='http://www.w3.org/2000/svg' "
        "font-size='12'>"
    ]
    for k, s in enumerate(rows):
        c = s["criteria"][criterion]
        y = 14 + k * ROW
        rank = "-" if c["rank"] is None else str(c["rank"])
        if c["rank_ci"]:
            rank += f" ({c['rank_ci'][0]}-{c['rank_ci'][1]})"
        svg.append(f"<text x='4' y='{y + 4}'>{escape(rank)} {escape(s['name'][:18])}</text>")
        if c["mean"] is None:
            svg.append(f"<text x='{LEFT}' y='{y + 4}' fill='#999'>no scored item</text>")
            continue
        if c["ci"]:
            svg.append(
                f"<line x1='{px(c['ci'][0]):.1f}' x2='{px(c['ci'][1]):.1f}' y1='{y}' "
                f"y2='{y}' stroke='#2a6' stroke-width='4'/>"
            )
        svg.append(f"<circle cx='{px(c['mean']):.1f}' cy='{y}' r='5' fill='#174'/>")
        svg.append(
            f"<text x='{LEFT + PLOT + 10}' y='{y + 4}'>{c['mean']:.3f} "
            f"{escape(c['group'] or '')}</text>"
        )
    axis_y = height - 12
    for tick in ticks:
        svg.append(
            f"<text x='{px(tick):.1f}' y='{axis_y + 10}' text-anchor='middle' "
            f"fill='#666'>{tick:.2f}</text>"
        )
    svg.append(
        f"<line x1='{LEFT}' x2='{LEFT + PLOT}' y1='{axis_y - 4}' y2='{axis_y - 4}' "
        "stroke='#ccc'/></svg>"
    )
    return "".join(svg)


def _matrix(board: Leaderboard, criterion: str) -> str:
    names = [s["name"] for s in _ranked(board, criterion)]
    cell: dict[tuple[str, str], dict[str, Any]] = {}
    for pair in board.pairs:
        if pair["criterion"] == criterion:
            cell[pair["a"], pair["b"]] = pair
    html = [
        "<table class='pairs'><caption class='note'>row minus column: mean difference "
        "[CI] on the common items</caption><tr><th class='name'></th>"
    ]
    html += [f"<th>{escape(n)}</th>" for n in names]
    html.append("</tr>")
    for a in names:
        html.append(f"<tr><td class='name'>{escape(a)}</td>")
        for b in names:
            if a == b:
                html.append("<td class='self'></td>")
                continue
            p: dict[str, Any] | None
            p, flip = (cell[a, b], 1.0) if (a, b) in cell else (cell.get((b, a)), -1.0)
            if p is None or p["difference"] is None:
                html.append("<td class='ns'>-</td>")
                continue
            d = flip * p["difference"] + 0.0  # no -0.000
            ci = (
                ""
                if p["ci"] is None
                else f" [{min(flip * p['ci'][0], flip * p['ci'][1]) + 0.0:+.2f}, "
                f"{max(flip * p['ci'][0], flip * p['ci'][1]) + 0.0:+.2f}]"
            )
            kind = ("sig-pos" if d > 0 else "sig-neg") if p["significant"] else "ns"
            mark = " *" if p["significant"] else ""
            title = f"n={p['shared']}, p Holm=" + (
                "-" if p["p_holm"] is None else f"{p['p_holm']:.3g}"
            )
            html.append(f"<td class='{kind}' title='{escape(title)}'>{d:+.3f}{ci}{mark}</td>")
        html.append("</tr>")
    html.append("</table>")
    return "".join(html)
