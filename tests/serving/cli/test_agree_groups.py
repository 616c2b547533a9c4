"""``jurybox agree-groups``: group rewards judged by simulated judges of known qualities
(tests/group_helpers.py, the whole judging path) against human rankings that are the true
order, given as rankings, ranks and one preference a line; and its errors naming the line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from group_helpers import sim_jury
from typer.testing import CliRunner

from jurybox.judges.groups import Group, GroupJob, GroupSpec, judge_groups
from jurybox.rubrics import load_rubric
from jurybox.serving.cli import app


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """20 groups of 4, judged in a round robin; their true qualities."""
    rng = np.random.default_rng(0)
    quality = rng.normal(size=(20, 4))
    texts = {f"[g{g} c{c}]": float(quality[g, c]) for g in range(20) for c in range(4)}
    jury = sim_jury(texts, noise=0.5, tie=0.2, bias=0.3)
    groups = [
        Group(f"g{g}", {"question": f"Q{g}?"}, [f"[g{g} c{c}]" for c in range(4)])
        for g in range(20)
    ]
    results = judge_groups(jury, GroupJob(GroupSpec(), load_rubric("pairwise"), jury.spec, groups))
    folder = tmp_path_factory.mktemp("agree-groups")
    path = folder / "groups.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in results))
    return path, quality, results


def run(*args):
    return CliRunner().invoke(app, ["agree-groups", *map(str, args)])


def test_rankings_ranks_and_preferences_give_the_same_agreement(judged, tmp_path):
    path, quality, results = judged
    order = [list(np.argsort(-q)) for q in quality]
    rankings = tmp_path / "rankings.jsonl"
    rankings.write_text(
        "".join(
            json.dumps({"id": f"g{g}", "ranking": [int(c) for c in o]}) + "\n"
            for g, o in enumerate(order)
        )
    )
    ranks = tmp_path / "ranks.jsonl"
    ranks.write_text(
        "".join(
            json.dumps({"id": f"g{g}", "ranks": [int(list(o).index(c)) + 1 for c in range(4)]})
            + "\n"
            for g, o in enumerate(order)
        )
    )
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"g{g}",
                    "a": i,
                    "b": j,
                    "winner": "a" if quality[g, i] > quality[g, j] else "b",
                }
            )
            + "\n"
            for g in range(20)
            for i in range(4)
            for j in range(i + 1, 4)
        )
    )
    got = {}
    for name, human in (("rankings", rankings), ("ranks", ranks), ("pairs", pairs)):
        out = run(human, path, "--json")
        assert out.exit_code == 0, out.output
        got[name] = json.loads(out.output)
    assert got["rankings"] == got["ranks"]
    assert got["pairs"]["pair_agreement"] == got["rankings"]["pair_agreement"]
    assert got["pairs"]["kendall_tau_b"]["value"] is None  # preferences give no ranking
    tau = got["rankings"]["kendall_tau_b"]
    from scipy.stats import kendalltau

    want = np.mean([kendalltau(r.rewards, q).statistic for r, q in zip(results, quality)])
    assert tau["value"] == pytest.approx(want) and tau["n"] == 20
    low, high = tau["ci"]
    assert 0.3 < low < tau["value"] < high <= 1.0
    text = run(rankings, path)
    assert text.exit_code == 0
    assert text.output.splitlines()[1].startswith("Kendall's tau-b, mean over ranked groups: ")


@pytest.mark.parametrize(
    "line,words",
    [
        ('{"id": "g0", "ranking": [0, 0, 1, 2]}', "ranking: every completion's position"),
        ('{"id": "g0", "a": 1, "b": 1, "winner": "a"}', "two different completion positions"),
        ('{"id": "g0", "a": 0, "b": 1, "winner": "first"}', "winner: a, b or tie"),
        ('{"id": "g0"}', "give ranking, ranks, or a, b and winner"),
        ('{"id": "g0", "ranks": [1, 2]}', "ranks 2 completions, and the jury rewarded 4"),
        ('{"id": "elsewhere", "ranks": [1, 2]}', "no group id is in both"),
    ],
)
def test_bad_human_labels_are_named(judged, tmp_path, line, words):
    path, _, _ = judged
    human = tmp_path / "human.jsonl"
    human.write_text(line + "\n")
    out = run(human, path)
    assert out.exit_code == 2 and words in out.output, out.output
