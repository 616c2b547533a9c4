"""perf/checklist_sim.py (#63) at a small seeded size: a checklist score from noisy per-point
judges against a known expert score, and a single Likert judgment of the same noise; and
perf/checklist_calls.py: the judge calls per item of each checklist mode, counted on the replay
backend.

The full table (2,000 items per cell, every eps and N) is in perf/RESULTS.md; here one cell
(eps 0.1, N 10, 1,000 items), with the direction asserted by a margin in standard errors of the
paired per-item gap."""

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _perf(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "perf" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


sim = _perf("checklist_sim")
calls = _perf("checklist_calls")

#: Each paired gap (``sim.GAPS``: Likert minus checklist, one judge each; three each, the
#: checklist by majority; three each, by the mean) must be positive by this many of its
#: standard errors. At these 1,000 items and seed 63 they are z 8.8, 22.0 and 4.8 (at 2,000
#: items, perf/RESULTS.md: 13.0, 28.8, 5.3; over seeds 1 and 2 at 1,000 items the third is
#: 5.5 and 3.1, hence 2 for it: the mean's edge is the scale's rounding only).
MARGIN_SE = (3.0, 3.0, 2.0)


def healthbench_rule(weights, mets):
    """HealthBench's rule written out with numpy, an oracle for the library's."""
    possible = np.where(weights > 0, weights, 0.0).sum(axis=1)
    return [np.clip((weights * met).sum(axis=1) / possible, 0.0, 1.0) for met in mets]


def test_sim_scores_are_jurybox_s_points_score():
    """The simulation scores with jurybox's rule (``points_score``), pitfalls, clipping and
    ties of two judges (met 0.5) included: the claim is about the library's score."""
    rng = np.random.default_rng(1)
    weights, met = sim.draw_items(rng, 300, 10)
    votes = sim.readings(rng, met, 0.3, 3)
    mets = [met, sim.majority(votes[:2]), votes[0]]
    got = sim.library_scores(weights, mets)
    for a, b in zip(got, healthbench_rule(weights, mets)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    assert (weights < 0).any() and (got[0] == 0).any() and (got[1] % 1 > 0).any()


def test_sim_checklist_beats_likert_at_matched_noise():
    ((cell, rows, gaps),) = sim.run(1000, 20, 63, eps=(0.1,), ns=(10,))
    assert len(cell.expert) == 1000 and len(gaps) == len(MARGIN_SE)
    for (likert, checklist), (mean, _, _, se), margin in zip(sim.GAPS, gaps, MARGIN_SE):
        assert mean > margin * se, (likert, checklist, mean, se)
    by = {r.method: r for r in rows}
    # three judges by majority per point beat one: the noise matters, not only the scale
    for three in ("checklist, 3, majority", "checklist, 3, mean"):
        assert by[three].mae[0] < by["checklist, 1 judge"].mae[0]
        assert by[three].pearson[0] > by["checklist, 1 judge"].pearson[0]


def test_likert_reports_one_of_ten_values():
    scores = sim.likert(np.linspace(-0.2, 1.2, 301))
    assert set(np.round(scores * 9).astype(int).tolist()) == set(range(10))


def test_the_noise_flips_a_point_with_probability_eps():
    rng = np.random.default_rng(0)
    met = np.zeros((2000, 10))
    votes = sim.readings(rng, met, 0.2, 3)
    assert abs(votes.mean() - 0.2) < 4 * np.sqrt(0.2 * 0.8 / votes.size)
    assert sim.majority(votes[:2]).max() <= 1.0
    assert set(np.unique(sim.majority(votes[:2])).tolist()) == {0.0, 0.5, 1.0}


def test_calls_per_item_per_mode_equals_checklist_calls(replay_tiny):
    """The replay backend's generate requests, per mode, equal ``checklist_calls`` times the
    judges: per_point one per point, all_points and implicit one per item; through
    ``Jury.score`` on the checklist rubric and through its units judged group by group."""
    from jurybox.rubrics import load_rubric

    items = calls.read_items(calls.ITEMS)  # examples/checklists.jsonl
    points = sum(len(i.checklist) for i in items)
    assert len({len(i.checklist) for i in items}) > 1  # (all_points: a group per count)
    jury, counters = calls.counting_jury(replay_tiny)  # (the session's backends, wrapped)
    for path in ("units", "jury"):
        got = {m: calls.count(jury, counters, load_rubric(m), items, path) for m in calls.MODES}
        for mode, c in got.items():
            assert c.requests == c.expected, (path, mode, c)
        judges = len(counters)
        assert got["checklist"].requests == judges * points
        assert got["checklist-all"].requests == judges * len(items)
        assert got["checklist-implicit"].requests == judges * len(items)
        # one batch per judge and unit group: all_points groups the items by their point count
        assert got["checklist"].batches == judges
        assert got["checklist-all"].batches == judges * len({len(i.checklist) for i in items})
