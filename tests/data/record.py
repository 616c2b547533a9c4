"""Record the tiny jury's real answers for the replay jury of the tests (``replay_jury`` in
tests/conftest.py): ``python tests/data/record.py`` rewrites tests/data/tiny-recorded.json.gz
tests/data/tiny-bench-recorded.json.gz and tests/data/tiny-leaderboard-recorded.json.gz
and tests/data/tiny-exploits-recorded.json.gz and tests/data/tiny-checklists-recorded.json.gz
(``python tests/data/record.py bench`` only the second, ``plumbing`` only the first,
``leaderboard`` only the third, ``exploits`` only the fourth, ``checklists`` only the fifth).

The items are those the plumbing tests judge: the example predictions and the two items of
tests/judging_helpers.py under the mirage-mg and general rubrics, and the pairs the pairwise
tests build from them. A prompt that was not recorded still gets a real recorded answer of the
same rubric (see ReplayBackend). Re-record after a change to a rubric, the prompt template or
the tiny models (test_replay_jury.py fails when the recording no longer matches the prompts).

The benchmark recording holds the prompts of the benchmark packs' runs in
tests/benchmarks/bench_cases.py (each pack's own rubrics): test_bench_models.py runs them on a
replay jury of this recording alone and fails when one of its prompts was not recorded.
The leaderboard recording holds the three systems of ``judging_helpers.leaderboard_systems``
under mirage-mg, which tests/serving/cli/test_leaderboard_cli.py judges the same way.
The exploit recording holds the items of the exploit audit in docs/guides/reward-hacking.md
(``exploit_items``), plain and hardened: tests/serving/runs/test_exploit_audit.py replays it
and fails when one of its prompts was not recorded.
The checklist recording holds the units of the three shipped checklist rubrics on
``checklist_items`` (CHECKLISTS), each under its unit rubric's name: test_replay_jury.py checks
that it matches their prompts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RECORDING = HERE / "tiny-recorded.json.gz"
BENCH_RECORDING = HERE / "tiny-bench-recorded.json.gz"
LEADERBOARD_RECORDING = HERE / "tiny-leaderboard-recorded.json.gz"
EXPLOITS_RECORDING = HERE / "tiny-exploits-recorded.json.gz"
#: The exploit audit the recording holds: `jurybox exploits examples/mirage_mg.jsonl --rubric
#: mirage-mg --jury tiny` with these options, plain and with --harden (a subset of the suite
#: and of the items: the tiny models take minutes per batch on a shared CPU).
EXPLOITS_ONLY = (
    "colon",
    "thought-process",
    "step-by-step",
    "self-assessment",
    "instruction",
    "output-format",
    "control-tokens",
    "reference",
)
EXPLOITS_LIMIT = 3
CHECKLISTS_RECORDING = HERE / "tiny-checklists-recorded.json.gz"
#: Hand-written checklists for examples/mirage_mg.jsonl's items (``checklist_items``): 3, 3, 4
#: and 5 points, a pitfall among them, so that each all-points schema the tests judge (p1..p3,
#: p1..p4, p1..p5) and the yes/no one is recorded.
CHECKLISTS = {
    "mg-001": [
        {"criterion": "Identifies the disease as early blight", "points": 5, "tag": "essential"},
        {"criterion": "Says to remove the infected lower leaves", "points": 3},
        {"criterion": "Recommends spraying an insecticide", "points": -3},
    ],
    "mg-003": [
        {"criterion": "Identifies slugs or snails as the cause", "points": 5, "tag": "essential"},
        {"criterion": "Suggests hand-picking them at night", "points": 2},
        {"criterion": "Suggests beer traps", "points": 2, "tag": "optional"},
        {"criterion": "Recommends a fence against deer", "points": -2},
    ],
    "mg-005": [
        {"criterion": "Recommends a pre-emergent herbicide", "points": 5, "tag": "essential"},
        {"criterion": "Times it for early spring, before germination", "points": 4},
        {"criterion": "Advises mowing high", "points": 2, "tag": "important"},
        {"criterion": "Advises overseeding thin areas in fall", "points": 1},
        {"criterion": "Says to treat only in midsummer", "points": -3},
    ],
}
CHECKLISTS["mg-002"] = CHECKLISTS["mg-001"]  # the same question, another answer
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "benchmarks"))


def example_rows() -> list[dict]:
    return [
        json.loads(line)
        for line in (ROOT / "examples" / "mirage_mg.jsonl").read_text().splitlines()
    ]


def scored_items() -> list:
    from judging_helpers import ITEMS

    from jurybox.rubrics import Item

    rows = example_rows()
    examples = [
        Item(
            id=r["id"],
            question=r["question"],
            response=r["response"],
            reference=r.get("reference"),
            extra={
                k: v for k, v in r.items() if k not in ("id", "question", "response", "reference")
            },
        )
        for r in rows
    ]
    return examples + list(ITEMS)


def checklist_items() -> list:
    """The example items that have a checklist in CHECKLISTS, with it (mg-001, 002, 003, 005)."""
    from jurybox.rubrics import Item

    return [
        Item(
            id=r["id"],
            question=r["question"],
            response=r["response"],
            reference=r.get("reference"),
            checklist=CHECKLISTS[r["id"]],
        )
        for r in example_rows()
        if r["id"] in CHECKLISTS
    ]


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
    return [
        Item(id=f"{i}-{n}", question=q, extra={"response_a": a, "response_b": b})
        for n, (i, q, a, b) in enumerate(out)
    ]


def save(recordings: list, jury, path: Path) -> None:
    from jurybox.judges.backends.replay import Recording

    merged = Recording.merged(recordings)
    merged.specs = {j.name: j.model_dump(mode="json") for j in jury.spec.judges}
    merged.produced_by = "python tests/data/record.py (jurybox transformers backend, tiny jury)"
    merged.save(path)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)", file=sys.stderr)


def record_plumbing(jury) -> None:
    from jurybox.judges.backends.replay import Recording, record
    from jurybox.rubrics import load_rubric

    recordings = []
    for rubric, items in (
        ("mirage-mg", scored_items()),
        ("general", scored_items()),
        ("pairwise", pairs()),
    ):
        judges = record(
            jury,
            load_rubric(rubric),
            items,
            lambda line, r=rubric: print(f"{r}: {line}", file=sys.stderr),
        )
        recordings.append(
            Recording(
                rubric=rubric, items=[it.model_dump(mode="json") for it in items], judges=judges
            )
        )
    save(recordings, jury, RECORDING)


def record_bench(jury) -> None:
    """Run each case of bench_cases.py with the real jury, keeping the rubric and items of
    every judging call, then record the jury's answers to exactly those prompts."""
    import tempfile

    from bench_cases import CASES, EXAMPLES

    from jurybox.judges.backends.replay import Recording, record

    calls = []

    def wrap(judge):
        def keep(task, rubric, items):
            calls.append((task, rubric, list(items)))
            return judge(task, rubric, items)

        return keep

    for case in CASES.values():
        with tempfile.TemporaryDirectory() as tmp:
            case(EXAMPLES, Path(tmp), jury, wrap)
    recordings = []
    for task, rubric, items in calls:
        judges = record(
            jury, rubric, items, lambda line, t=task: print(f"{t}: {line}", file=sys.stderr)
        )
        recordings.append(
            Recording(
                rubric=rubric.name,
                items=[it.model_dump(mode="json") for it in items],
                judges=judges,
            )
        )
    save(recordings, jury, BENCH_RECORDING)


def record_leaderboard(jury) -> None:
    from judging_helpers import leaderboard_systems

    from jurybox.judges.backends.replay import Recording, record
    from jurybox.rubrics import load_rubric
    from jurybox.serving.runs.predictions import read_predictions

    rubric = load_rubric("mirage-mg")
    recordings = []
    import tempfile

    for name, rows in leaderboard_systems().items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            items = read_predictions(path, rubric).items
        judges = record(
            jury, rubric, items, lambda line, n=name: print(f"{n}: {line}", file=sys.stderr)
        )
        recordings.append(
            Recording(
                rubric=rubric.name,
                items=[it.model_dump(mode="json") for it in items],
                judges=judges,
            )
        )
    save(recordings, jury, LEADERBOARD_RECORDING)


def exploit_items(harden: bool) -> tuple:
    """The rubric and the items of the recorded exploit audit (plain or hardened)."""
    from jurybox.serving.runs.exploits import exploit_items as made

    got = made(
        ROOT / "examples" / "mirage_mg.jsonl",
        "mirage-mg",
        only=EXPLOITS_ONLY,
        limit=EXPLOITS_LIMIT,
        harden=harden,
    )
    return got.rubric, [it for _, it in got.pairs]


def record_exploits(jury) -> None:
    """The exploit audit's items (EXPLOITS_ONLY, EXPLOITS_LIMIT), plain and hardened."""
    from jurybox.judges.backends.replay import Recording, record

    recordings = []
    for harden in (False, True):
        rubric, items = exploit_items(harden)
        judges = record(
            jury, rubric, items, lambda line, r=rubric.name: print(f"{r}: {line}", file=sys.stderr)
        )
        recordings.append(
            Recording(
                rubric=rubric.name,
                items=[it.model_dump(mode="json") for it in items],
                judges=judges,
            )
        )
    save(recordings, jury, EXPLOITS_RECORDING)


def record_checklists(jury) -> None:
    """The checklist rubrics' units (checklist, checklist-all, checklist-implicit) on
    ``checklist_items``: what each unit rubric's judges are asked, by its own name."""
    from jurybox.judges.backends.replay import Recording, record
    from jurybox.rubrics import load_rubric
    from jurybox.rubrics.checklist import units

    recordings = []
    items = checklist_items()
    for name in ("checklist", "checklist-all", "checklist-implicit"):
        for group in units(load_rubric(name), items):
            judges = record(
                jury,
                group.rubric,
                list(group.items),
                lambda line, r=group.rubric.name: print(f"{r}: {line}", file=sys.stderr),
            )
            recordings.append(
                Recording(
                    rubric=group.rubric.name,
                    items=[it.model_dump(mode="json") for it in group.items],
                    judges=judges,
                )
            )
    save(recordings, jury, CHECKLISTS_RECORDING)


def main() -> None:
    from jurybox.judges import Jury

    kinds = {"plumbing", "bench", "leaderboard", "exploits", "checklists"}
    which = set(sys.argv[1:]) or kinds
    if which - kinds:
        sys.exit(
            "usage: python tests/data/record.py "
            "[plumbing] [bench] [leaderboard] [exploits] [checklists]"
        )
    jury = Jury.load("tiny")
    if "plumbing" in which:
        record_plumbing(jury)
    if "bench" in which:
        record_bench(jury)
    if "leaderboard" in which:
        record_leaderboard(jury)
    if "exploits" in which:
        record_exploits(jury)
    if "checklists" in which:
        record_checklists(jury)
    jury.close()


if __name__ == "__main__":
    main()
