"""How often a GRPO group's rewards tie on the tiny jury's real outputs, under the judges'
chosen scores (the mode of each answer distribution: the default reward) and under their
expected scores (``use="expected"``, :mod:`jurybox.judges.resolution`).

The outputs are the tiny jury's recorded real answers (tests/data/tiny-recorded.json.gz and
tiny-leaderboard-recorded.json.gz, written by tests/data/record.py from the transformers
backend), replayed exactly: every item is rebuilt from the recording, so every prompt is a
recorded one (the script checks that none is answered by a checksum). The completions of one
question under one rubric (the examples' answers, their first sentences, another question's
answer: what the leaderboard's three systems answered) are a prompt's completions; every
subset of ``G`` of them is a group, as GRPO samples ``num_generations`` per prompt. A group
ties when all its rewards are equal (its spread is zero: GRPO learns nothing from it); a pair
of its completions ties when their rewards are equal.

    python perf/group_ties.py [--json]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
RECORDINGS = (
    ROOT / "tests/data/tiny-recorded.json.gz",
    ROOT / "tests/data/tiny-leaderboard-recorded.json.gz",
)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--json", action="store_true", help="one JSON object as the last line")
    args = ap.parse_args()
    from judging_helpers import write_replay_jury

    from jurybox.judges import Jury
    from jurybox.judges.resolution import ResolvedReward
    from jurybox.rubrics import Item, load_rubric
    from jurybox.rubrics.reward import RewardSpec

    items: list[Item] = []
    for path in RECORDINGS:
        with gzip.open(path) as fh:
            data = json.loads(fh.read())
        items += [Item.model_validate(x) for x in data["items"] if x.get("response")]
    jury_file = write_replay_jury(
        Path(tempfile.mkdtemp()) / "tiny-replay.yaml", recordings=RECORDINGS
    )
    rows = []
    with Jury.load(jury_file) as jury:
        jury.load_backends()
        for name, score in (("mirage-mg", None), ("general", "accuracy")):
            rubric = load_rubric(name)
            chosen = ResolvedReward.bind(RewardSpec(score=score), rubric, jury.spec, "score")
            expected = ResolvedReward.bind(RewardSpec(score=score), rubric, jury.spec, "expected")
            # Each distinct completion once, kept only where every judge's prompt was recorded
            # under this rubric (a real answer, never one chosen by a checksum).
            values: dict[str, dict[str, tuple[float | None, float | None, str]]] = defaultdict(dict)
            for it in items:
                if (it.response or "") in values[it.question or ""]:
                    continue
                before = sum(b.unrecorded for b in jury._backends.values())  # type: ignore[attr-defined]
                (record,) = jury.score_records(rubric, [it])
                if sum(b.unrecorded for b in jury._backends.values()) > before:  # type: ignore[attr-defined]
                    continue
                reading = expected.read(record)
                values[it.question or ""][it.response or ""] = (
                    chosen.read(record).value,
                    reading.value,
                    reading.used,
                )
            recorded = [list(v.values()) for v in values.values() if len(v) > 1]
            sizes = sorted({len(v) for v in recorded})
            for g in range(2, max(sizes) + 1):
                groups = [
                    [v[k] for k in pick]
                    for v in recorded
                    for pick in itertools.combinations(range(len(v)), g)
                ]
                if not groups:
                    continue
                row: dict[str, object] = {
                    "rubric": name + (f" ({score})" if score else ""),
                    "G": g,
                    "groups": len(groups),
                    "questions": sum(len(v) >= g for v in recorded),
                }
                for label, at in (("chosen", 0), ("expected", 1)):
                    zero = sum(len({round(c[at], 12) for c in group}) == 1 for group in groups)
                    pairs = [
                        (a[at], b[at])
                        for group in groups
                        for a, b in itertools.combinations(group, 2)
                    ]
                    tied = sum(abs(a - b) <= 1e-12 for a, b in pairs)
                    row[f"zero_spread_{label}"] = round(zero / len(groups), 3)
                    row[f"tied_pairs_{label}"] = round(tied / len(pairs), 3)
                row["expected_used"] = round(
                    sum(c[2] == "expected" for group in groups for c in group) / (g * len(groups)),
                    3,
                )
                rows.append(row)
                print(
                    f"| {row['rubric']} | {g} | {row['groups']} | "
                    f"{row['zero_spread_chosen']:.0%} | {row['zero_spread_expected']:.0%} | "
                    f"{row['tied_pairs_chosen']:.0%} | {row['tied_pairs_expected']:.0%} |",
                    flush=True,
                )
    if args.json:
        print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main()
