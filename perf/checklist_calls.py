"""Judge calls per item for each checklist mode (#63), counted on the replay backend.

The tiny jury's two judges with ``backend: replay`` (tests/judging_helpers.py's
``write_replay_jury``: their real tokenizers, recorded answers, no model's time), each backend
wrapped so that it counts the requests ``generate`` is given. Each mode's rubric judges the same
items: ``checklist`` (``calls: per_point``: one call per point), ``checklist-all``
(``calls: all_points``: one structured call per item) and ``checklist-implicit``
(``score: implicit``: one judgment of the whole checklist). The counts are set beside
``checklist_calls(rubric, items)`` (judge calls per judge) times the judges.

``--path units`` judges each unit group of ``units(rubric, items)`` with the ordinary path
instead of the checklist rubric through ``Jury.score`` (the counts must be the same).

    PYTHONPATH=. python perf/checklist_calls.py [--items examples/checklists.jsonl] [--path jury|units]

Counts, not times: requests, generate calls (batches) and the prompts' tokens (as the judges'
tokenizers count them), exact for these items (a request the renderer refuses, e.g. a prompt
too long for the judge, is never sent and would show as a shortfall).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

MODES = ("checklist", "checklist-all", "checklist-implicit")
ITEMS = ROOT / "examples" / "checklists.jsonl"


class Counting:
    """A backend that counts the requests its ``generate`` is given, then passes them on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests = 0
        self.batches = 0
        self.prompt_tokens = 0

    def generate(self, requests: list[Any], cancelled: Any = None) -> Any:
        self.requests += len(requests)
        self.batches += 1
        out = self.inner.generate(requests, cancelled)
        self.prompt_tokens += sum(g.prompt_tokens for g in out)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass(frozen=True)
class Count:
    """One mode's count over the items."""

    rubric: str
    items: int
    points: int
    judges: int
    requests: int  # generate requests, all judges together
    batches: int  # generate calls (batches of requests), all judges together
    prompt_tokens: int  # the prompts' tokens, all judges together
    expected: int  # checklist_calls(rubric, items) x judges

    @property
    def per_item_per_judge(self) -> float:
        return self.requests / self.items / self.judges


def counting_jury(jury: Any) -> tuple[Any, dict[str, Counting]]:
    """A jury of ``jury``'s judges whose backends (``jury``'s own, made if need be) are each
    wrapped in `Counting`. Closing ``jury`` closes them."""
    from jurybox.judges import Jury

    counters = {j.name: Counting(jury.backend(j)) for j in jury.spec.judges}
    return Jury(jury.spec, backends=dict(counters)), counters


def count(
    jury: Any, counters: dict[str, Counting], rubric: Any, items: Sequence[Any], path: str
) -> Count:
    """Judge ``items`` with ``rubric`` (through ``path``) and count the requests sent."""
    from jurybox.rubrics.checklist import checklist_calls, units

    before = sum(c.requests for c in counters.values())
    batches = sum(c.batches for c in counters.values())
    tokens = sum(c.prompt_tokens for c in counters.values())
    if path == "jury":
        jury.score(rubric, items)
    else:
        for group in units(rubric, items):
            jury.score(group.rubric, list(group.items))
    sent = sum(c.requests for c in counters.values()) - before
    return Count(
        rubric=rubric.name,
        items=len(items),
        points=sum(len(i.checklist or ()) for i in items),
        judges=len(counters),
        requests=sent,
        batches=sum(c.batches for c in counters.values()) - batches,
        prompt_tokens=sum(c.prompt_tokens for c in counters.values()) - tokens,
        expected=checklist_calls(rubric, items) * len(counters),
    )


def read_items(path: Path) -> list[Any]:
    """The items of a JSONL file (fields an `Item` lacks go into its ``extra``)."""
    from jurybox.rubrics import Item

    fields = set(Item.model_fields)
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return [
        Item(
            **{k: v for k, v in row.items() if k in fields},
            extra={k: v for k, v in row.items() if k not in fields},
        )
        for row in rows
    ]


def measure(items_path: Path, path: str, modes: Sequence[str] = MODES) -> list[Count]:
    """Each mode's count over the items of ``items_path`` on the replay jury."""
    from judging_helpers import write_replay_jury

    from jurybox.judges import Jury
    from jurybox.rubrics import load_rubric

    items = read_items(items_path)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Jury.load(write_replay_jury(Path(tmp) / "r.yaml")) as base,
    ):
        jury, counters = counting_jury(base)
        return [count(jury, counters, load_rubric(m), items, path) for m in modes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--items", type=Path, default=ITEMS, help="a JSONL file of items with checklists"
    )
    parser.add_argument("--path", choices=("jury", "units"), default="jury")
    args = parser.parse_args()
    counts = measure(args.items, args.path)
    first = counts[0]
    print(
        f"{args.items.relative_to(ROOT) if args.items.is_relative_to(ROOT) else args.items}: "
        f"{first.items} items, {first.points} points, "
        f"{first.judges} judges (replay), path {args.path}"
    )
    print(
        "| rubric | generate requests | per item | per item and judge "
        "| checklist_calls x judges | generate calls (batches) | prompt tokens per item and judge |"
    )
    print("|---|---|---|---|---|---|---|")
    for c in counts:
        print(
            f"| {c.rubric} | {c.requests} | {c.requests / c.items:.2f} | "
            f"{c.per_item_per_judge:.2f} | {c.expected} | {c.batches} | "
            f"{c.prompt_tokens / c.items / c.judges:.0f} |"
        )


if __name__ == "__main__":
    main()
