"""Record the tiny jury's real answers for the replay jury of the tests (``replay_jury`` in
tests/conftest.py): ``python tests/data/record.py`` rewrites tests/data/tiny-recorded.json.gz.

The items are those the plumbing tests judge: the example predictions and the two items of
tests/judging_helpers.py under the mirage-mg and general rubrics, and the pairs the pairwise
tests build from them. A prompt that was not recorded still gets a real recorded answer of the
same rubric (see ReplayBackend). Re-record after a change to a rubric, the prompt template or
the tiny models (test_replay_jury.py fails when the recording no longer matches the prompts).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RECORDING = HERE / "tiny-recorded.json.gz"
sys.path.insert(0, str(HERE.parent))


def example_rows() -> list[dict]:
    return [json.loads(line) for line in (ROOT / "examples" / "mirage_mg.jsonl").read_text().splitlines()]


def scored_items() -> list:
    from judging_helpers import ITEMS

    from jurybox.rubrics import Item

    rows = example_rows()
    examples = [Item(id=r["id"], question=r["question"], response=r["response"],
                     reference=r.get("reference"),
                     extra={k: v for k, v in r.items()
                            if k not in ("id", "question", "response", "reference")})
                for r in rows]
    return examples + list(ITEMS)


def pairs() -> list:
    """The pairs of test_pairwise_cli (long vs short), test_ray_engine and test_service."""
    from judging_helpers import ITEMS

    from jurybox.rubrics import Item

    rows = example_rows()
    out = []
    for r in rows[:3]:
        out.append((r["id"], r["question"], r["response"], r["response"].split(". ")[0] + "."))
    for k, r in enumerate(rows[:2]):
        out.append((r["id"], r["question"], r["response"], rows[-1 - k]["response"]))
    out.append(("p1", ITEMS[0].question, ITEMS[0].response, ITEMS[1].response))
    return [Item(id=f"{i}-{n}", question=q, extra={"response_a": a, "response_b": b})
            for n, (i, q, a, b) in enumerate(out)]


def main() -> None:
    from jurybox.judges import Jury
    from jurybox.judges.backends.replay import Recording, record
    from jurybox.rubrics import load_rubric

    jury = Jury.load("tiny")
    recordings = []
    for rubric, items in (("mirage-mg", scored_items()), ("general", scored_items()),
                          ("pairwise", pairs())):
        judges = record(jury, load_rubric(rubric), items,
                        lambda line, r=rubric: print(f"{r}: {line}", file=sys.stderr))
        recordings.append(Recording(rubric=rubric, items=[it.model_dump(mode="json") for it in items],
                                    judges=judges))
    jury.close()
    merged = Recording.merged(recordings)
    merged.specs = {j.name: j.model_dump(mode="json") for j in jury.spec.judges}
    merged.produced_by = "python tests/data/record.py (jurybox transformers backend, tiny jury)"
    merged.save(RECORDING)
    print(f"wrote {RECORDING} ({RECORDING.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
