"""The benchmark mean's fixed-sample interval at the label counts users get (#52 defect 2): the
interval `jurybox agree --ppi`, the leaderboard's human-corrected mean and the page's mean show
now (the normal PPI++ interval once 5 labelled items depart from the jury's score, else the
betting interval at that count: jurybox.calibration.estimates.rectified) against the normal
interval alone (what they showed before), at a count decided in advance.

Juries (pools of 2,000 items on a 0-4 scale, `calibration/estimates/synthetic.py`): calibrated
(30% of items uncertain, the label drawn from the jury's distribution), underconfident (its
distributions four times too broad), and overconfident (0.999 on its own score, wrong the
lenient way on 1%, 3% or 10% of items), and calibrated on most items but 0.999 sure of 4
where the label is 0 on 2% or 5% of them (#60: rare sure errors behind ordinary noise,
`synthetic.sure_errors_pool`); labels chosen in a uniform order or actively
(`--goal benchmark-mean`). Per count: the coverage of the pool's mean over the sessions, with
its Monte Carlo standard error, for the interval shown, the one shown before #60 (without the
rare-error allowance for the items the jury is sure of: "today") and the normal one (before
#52); the mean half-widths shown and today, and their ratio (the width cost of #60; labels
for a given width grow as its square); and the share of sessions where the betting interval
was shown.

With ``--easy N``: #60 item 2, an easy benchmark (humans give the top level to 97% of 2,000
items, the level below to the rest; a jury whose scores vary around them, normal noise of 0.8
levels): `ppi_mean` with the scale's ends at 20, 30 and 60 labels over N sessions, now (an
interval whose labelled terms take one value is at least the bounded score interval) and today
(without that floor), with the share of sessions whose labels were all one value.

    python perf/fixed_sample.py [--sessions 2000] [--juries sure]
    python perf/fixed_sample.py --easy 2000
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from jurybox.calibration.estimates.synthetic import (
    LabellingPool,
    fixed_sample_session,
    overconfident_pool,
    sure_errors_pool,
)

COUNTS = (20, 30, 60, 100, 200)
JURIES = {
    "calibrated": lambda rng: LabellingPool.draw(rng, 2000),
    "underconfident x4": lambda rng: LabellingPool.draw(rng, 2000, stated=4.0),
    "overconfident 1%": lambda rng: overconfident_pool(rng, 2000, wrong=0.01),
    "overconfident 3%": lambda rng: overconfident_pool(rng, 2000, wrong=0.03),
    "overconfident 10%": lambda rng: overconfident_pool(rng, 2000, wrong=0.1),
    "sure-wrong 2%": lambda rng: sure_errors_pool(rng, 2000, wrong=0.02),
    "sure-wrong 5%": lambda rng: sure_errors_pool(rng, 2000, wrong=0.05),
}


def coverage(runs: list[dict], key: str) -> tuple[float, float]:
    """The share covered and its Monte Carlo standard error (at least that of 95%)."""
    share = float(np.mean([r[key] for r in runs]))
    return share, math.sqrt(max(share * (1 - share), 0.95 * 0.05) / len(runs))


def row(name: str, design: str, count: int, runs: list[dict]) -> str:
    (shown, se), (today, se_today) = coverage(runs, "covered"), coverage(runs, "today_covered")
    normal = np.mean([r["normal_covered"] for r in runs])
    width, before = (np.mean([r[k] for r in runs]) for k in ("half_width", "today_half_width"))
    betting = np.mean([r["interval"] == "betting" for r in runs])
    return (
        f"{name:<18} {design:<8} {count:>4}   {shown:6.1%} +-{se:4.1%}   {today:6.1%} +-"
        f"{se_today:4.1%}   {normal:6.1%}   {width:6.3f}  {before:6.3f}  {width / before:5.2f}x"
        f"   {betting:6.1%}"
    )


def easy_table(sessions: int, rng: np.random.Generator) -> None:
    """#60 item 2: ppi_mean on an easy benchmark, with the one-value floor and without."""
    from unittest import mock

    from jurybox.calibration.estimates.ppi import ppi_mean

    print(f"{'n':>4}   {'coverage now':<14} {'today':<14} {'half-width now/today':<20} one value")
    for count in (20, 30, 60):
        runs = []
        for _ in range(sessions):
            y = np.where(rng.random(2000) < 0.97, 4.0, 3.0)
            f = np.clip(y + rng.normal(0.0, 0.8, y.size), 0.0, 4.0)
            args = (y[:count], f[:count], f[count:])
            now = ppi_mean(*args, bounds=(0.0, 4.0))
            with mock.patch("jurybox.calibration.estimates.ppi.no_spread", return_value=False):
                today = ppi_mean(*args, bounds=(0.0, 4.0))
            truth = y.mean()
            runs.append(
                {
                    "covered": now.ci[0] <= truth <= now.ci[1],
                    "today_covered": today.ci[0] <= truth <= today.ci[1],
                    "half_width": (now.ci[1] - now.ci[0]) / 2,
                    "today_half_width": (today.ci[1] - today.ci[0]) / 2,
                    "one": bool(np.ptp(y[:count]) == 0),
                }
            )
        (c, se), (t, se_t) = coverage(runs, "covered"), coverage(runs, "today_covered")
        width, before = (np.mean([r[k] for r in runs]) for k in ("half_width", "today_half_width"))
        one = np.mean([r["one"] for r in runs])
        print(
            f"{count:>4}   {c:6.1%} +-{se:4.1%}   {t:6.1%} +-{se_t:4.1%}   {width:6.3f}  "
            f"{before:6.3f}        {one:6.1%}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--juries", default="", help="only the juries whose name holds this")
    parser.add_argument("--easy", type=int, default=0, help="sessions: the easy benchmark only")
    args = parser.parse_args()
    from jurybox.judges.cpu import cpu

    if args.easy:
        print(f"cpu: {cpu().describe()}; {args.easy} sessions per count")
        easy_table(args.easy, np.random.default_rng(args.seed))
        return

    print(f"cpu: {cpu().describe()}; {args.sessions} sessions per jury and design")
    print(
        f"{'jury':<18} {'design':<8} {'n':>4}   {'coverage now':<14} {'today':<14} "
        f"{'(#52)':<8} {'half-width now/today':<20} {'cost':<6} {'betting shown'}"
    )
    rng = np.random.default_rng(args.seed)
    for name, draw in JURIES.items():
        if args.juries not in name:
            continue
        for design in ("uniform", "active"):
            start = time.time()
            sessions = [
                fixed_sample_session(draw(rng), rng, COUNTS, active=design == "active")
                for _ in range(args.sessions)
            ]
            for k, count in enumerate(COUNTS):
                runs = [s[k] for s in sessions if len(s) > k]
                print(row(name, design, count, runs), flush=True)
            print(f"  ({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
