"""``jurybox leaderboard``: systems judged on the same items, compared with paired intervals.

The statistics are in `jurybox.calibration.reports.leaderboard`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from jurybox.serving.cli.console import dumps, options_of, out, reported, warn
from jurybox.serving.runs.board import board_of


@options_of(board_of, place={"json_out": "confidence", "html": "confidence"})
def leaderboard(
    options: dict[str, Any],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write the leaderboard as an HTML page: a forest plot of the "
            "means and the matrix of paired differences.",
            dir_okay=False,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Rank systems judged on the same items, with paired intervals and honest ties.

    Ranks stand on common ground: per criterion, the items every system scored (an item one
    system lacks, missing or unscored, is dropped from every system's ranked mean; the board
    says how many and which system lacks them, and shows each system's mean over its own items
    beside, never ranked). One row per system: per criterion and formula the mean over those
    items with its CI, the counts scored / unscored / missing, and the rank with a bootstrap
    rank interval over items. Each pair of systems is compared on the same items (never
    zero-filled): the mean difference with its paired t interval, Holm-adjusted over the pairs
    of a criterion; systems sharing a letter are ones the data cannot separate. With --human,
    the human-corrected (PPI++) means on the same items, and each pair's corrected difference;
    with --length-control, the length-controlled means. A system whose few scored items alone
    shrink the common ground is named, with how many it has: --exclude it (or --min-items) to
    rank the others on theirs, it listed apart. Intervals stay on the rubric's scale.

    Benchmark runs (`jurybox bench NAME ... --out DIR`, one per system) are compared the same
    way on the pack's per-item results: accuracy for MicroVQA and MIR, nDCG@10 and Hit@1 for
    MRMR, the jury's scores (the weighted sum first) for the MIRAGE packs.
    """
    with reported():
        board = board_of(**options)
        if html is not None:
            from jurybox.calibration.reports.leaderboard_html import render_leaderboard

            html.write_text(render_leaderboard(board), encoding="utf-8")
    for message in board.notes:
        warn(message)
    if json_out:
        typer.echo(dumps(board.to_dict()))
        return
    render(board)
    if html is not None:
        out.print(f"wrote {html}", highlight=False, markup=False)


def render(board: Any) -> None:
    """The leaderboard as rich tables within 80 columns."""
    from rich.table import Table

    pct = round(board.confidence * 100)
    by = board.rank_by
    ground = board.ranked_on[by]
    left_out = ground.get("left_out") or {}
    on = (
        ""
        if not ground["dropped"] and ground["items"] == board.items and not left_out
        else f" on the {ground['items']} items every system scored"
        + (f" ({len(left_out)} left out)" if left_out else "")
    )  # else: on every item
    _say(f"{len(board.systems)} systems on {board.items} items, ranked by {by}{on} ({pct}% CIs)")
    corrected = any("human_corrected" in s["criteria"][by] for s in board.systems)
    controlled = board.length_control is not None
    apart = [s for s in board.systems if "left_out" in s["criteria"][by]]
    out.print(_ranking(board, by, corrected, controlled))
    if apart:
        _left_out(apart, by)
    if ground["dropped"]:
        _own_means(board, by)
    others = [c for c in board.criteria if c != by]
    if others:
        m = Table(title="every criterion: mean (rank)", title_justify="left")
        m.add_column("system")
        for c in board.criteria:
            m.add_column(c[:12], justify="right")
        for s in board.systems:
            m.add_row(s["name"], *(_short(s["criteria"][c]) for c in board.criteria))
        out.print(m)
    left = {s["name"] for s in apart}
    pairs = [p for p in board.pairs if p["criterion"] == by and not {p["a"], p["b"]} & left]
    if pairs:
        out.print(_pairs(pairs, by))
    if corrected:
        _corrected_pairs(pairs, by)
    if controlled:
        changed = board.length_control[by]["order_changes"]
        out.print(
            f"length control on {by}: the order " + ("changes" if changed else "does not change"),
            highlight=False,
        )
    out.print(
        "Systems sharing a letter are not shown to differ; a rank interval (a-b)\n"
        "is the bootstrap's over items."
        + ("\nPPI++: human-corrected, on the same items as the ranking." if corrected else ""),
        highlight=False,
    )


def _ranking(board: Any, by: str, corrected: bool, controlled: bool) -> Any:
    """The ranking by ``by``: one row per ranked system (those left out are apart)."""
    from rich.table import Table

    t = Table()
    t.add_column("rank", justify="right")
    t.add_column("system")
    t.add_column("mean [CI]", justify="right")
    t.add_column("n/unsc/miss", justify="right")
    t.add_column("group")
    if corrected:
        t.add_column("PPI++ mean", justify="right")
    if controlled:
        t.add_column("LC mean", justify="right")
    for s in board.systems:
        c = s["criteria"][by]
        if "left_out" in c:
            continue
        rank = "-" if s["rank"] is None else str(s["rank"])
        if s["rank_ci"] is not None and s["rank_ci"][0] != s["rank_ci"][1]:
            rank += f" ({s['rank_ci'][0]}-{s['rank_ci'][1]})"
        row = [
            rank,
            s["name"],
            _mean_ci(c["mean"], c["ci"]),
            f"{c['scored']}/{c['unscored']}/{c['missing']}",
            c["group"] or "-",
        ]
        if corrected:
            h = c.get("human_corrected") or {}
            row.append(_mean_ci(h.get("mean"), h.get("ci")) if h.get("mean") is not None else "-")
        if controlled:
            lc = c.get("length_controlled") or {}
            row.append("-" if lc.get("mean") is None else f"{lc['mean']:.3f}")
        t.add_row(*row)
    return t


def _pairs(pairs: Sequence[Mapping[str, Any]], by: str) -> Any:
    """Each pair's mean difference on ``by`` over their shared items, Holm-adjusted."""
    from rich.table import Table

    p_table = Table(
        title=f"pairs on {by}: mean difference on those items (* Holm-significant)",
        title_justify="left",
    )
    for col in ("a - b", "difference [CI]", "shared", "p (Holm)"):
        p_table.add_column(col, justify="left" if col == "a - b" else "right")
    for p in pairs:
        p_table.add_row(
            f"{p['a']} - {p['b']}",
            _mean_ci(p["difference"], p["ci"], sign=True),
            str(p["shared"]),
            ("-" if p["p_holm"] is None else f"{p['p_holm']:.3g}")
            + (" *" if p["significant"] else ""),
        )
    return p_table


def _corrected_pairs(pairs: Sequence[Mapping[str, Any]], by: str) -> None:
    """Each pair's human-corrected difference (PPI++ on the per-item differences), or why none."""
    from rich.table import Table

    t = Table(
        title=f"pairs on {by}, human-corrected: PPI++ on the differences, same items",
        title_justify="left",
    )
    for col in ("a - b", "PPI++ difference [CI]", "labelled"):
        t.add_column(col, justify="left" if col == "a - b" else "right")
    for p in pairs:
        h = p.get("human_corrected") or {}
        if h.get("difference") is None:
            t.add_row(f"{p['a']} - {p['b']}", "-", h.get("reason") or "-")
            continue
        t.add_row(
            f"{p['a']} - {p['b']}",
            _mean_ci(h["difference"], h["ci"], sign=True),
            str(h["labelled"]),
        )
    out.print(t)


def _left_out(systems: Sequence[Mapping[str, Any]], by: str) -> None:
    """The systems left out of the common ground (--exclude, --min-items): own means, apart."""
    from rich.table import Table

    _say("Left out of the common ground, not ranked (each on its own items):")
    t = Table()
    t.add_column("system")
    t.add_column("own items", justify="right")
    t.add_column("mean [CI]", justify="right")
    t.add_column("why")
    for s in systems:
        c = s["criteria"][by]
        own = c["own"]
        t.add_row(s["name"], str(own["scored"]), _mean_ci(own["mean"], own["ci"]), c["left_out"])
    out.print(t)


def _own_means(board: Any, by: str) -> None:
    """Each system's mean over its own scored items, where the ranking dropped some.

    Shown, not ranked (each system's own items differ).
    """
    from rich.table import Table

    ground = board.ranked_on[by]
    who = ", ".join(f"{n} lacks {k}" for n, k in ground["lacking"].items())
    _say(
        f"{ground['dropped']} of {ground['scored_by_any']} items dropped from the ranking "
        f"({who}); each system's mean on its own items, not ranked:"
    )
    t = Table()
    t.add_column("system")
    t.add_column("own items", justify="right")
    t.add_column("mean [CI]", justify="right")
    corrected = any("human_corrected" in s["criteria"][by]["own"] for s in board.systems)
    if corrected:
        t.add_column("PPI++ mean [CI]", justify="right")
    for s in board.systems:
        own = s["criteria"][by]["own"]
        row = [s["name"], str(own["scored"]), _mean_ci(own["mean"], own["ci"])]
        if corrected:
            h = own.get("human_corrected") or {}
            row.append(_mean_ci(h.get("mean"), h.get("ci")))
        t.add_row(*row)
    out.print(t)


def _say(text: str) -> None:
    """A sentence wrapped within 80 columns (the console soft-wraps, so it is wrapped here)."""
    import textwrap

    out.print(textwrap.fill(text, 79), highlight=False, markup=False)


def _mean_ci(mean: float | None, ci: Sequence[float] | None, sign: bool = False) -> str:
    if mean is None:
        return "-"
    f = "+.3f" if sign else ".3f"
    return f"{mean:{f}}" + (f" [{ci[0]:{f}}, {ci[1]:{f}}]" if ci else "")


def _short(entry: Mapping[str, Any]) -> str:
    return "-" if entry["mean"] is None else f"{entry['mean']:.2f} ({entry['rank']})"
