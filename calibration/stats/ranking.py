"""Agreement of a jury's group rankings with human rankings of the same groups.

How well a ranking of each group's completions (a jury's group rewards) agrees with human
rankings of the same groups, per group: Kendall's tau-b, and the human pairwise preferences the
jury's order agrees with (the report over groups, with its intervals, is
`jurybox.calibration.reports.group_agreement`).

* `kendall_tau_b`: tau-b of one group (ties in either ranking corrected for, as
  ``scipy.stats.kendalltau`` computes it, which the tests check it against); undefined
  (None) with fewer than two completions or a ranking that ties them all.
* `pair_agreement_counts`: per human preference (completion i over j, or a tie), 1 when
  the jury's rewards order them the same way, 0.5 when the jury ties them, 0 otherwise; human
  ties are left out and counted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two rankings of the same items (higher is better in both)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 2:
        return None
    da = np.sign(a[:, None] - a[None, :])
    db = np.sign(b[:, None] - b[None, :])
    upper = np.triu_indices(a.size, 1)
    sa, sb = da[upper], db[upper]
    n_a, n_b = np.count_nonzero(sa), np.count_nonzero(sb)
    if n_a == 0 or n_b == 0:
        return None
    return float((sa * sb).sum() / np.sqrt(float(n_a) * float(n_b)))


def pair_agreement_counts(
    rewards: Sequence[float | None], pairs: Sequence[tuple[int, int, float]]
) -> tuple[float, int, int]:
    """How far a group's rewards agree with human pairwise preferences.

    The preferences are ``(i, j, share)`` (share 1: i is better, 0: j is, 0.5: a tie).

    Returns:
        The agreement summed over the preferences both of whose completions have a reward, how
        many those are, and how many human ties were left out.
    """
    agree, n, ties = 0.0, 0, 0
    for i, j, share in pairs:
        ri, rj = rewards[i], rewards[j]
        if ri is None or rj is None:
            continue
        if share == 0.5:
            ties += 1
            continue
        n += 1
        human = 1.0 if share > 0.5 else -1.0
        jury = float(np.sign(ri - rj))
        agree += 0.5 if jury == 0 else float(jury == human)
    return agree, n, ties
