"""A backend that replays recorded generations of a real judge: for benchmarks and tests, not users.

The model costs nothing, everything else is real: each prompt is rendered and tokenized exactly
as the local backends do it (``prompt_text`` with the judge's own tokenizer), and the answer's
text and token steps are built from the recorded token ids and per-position top-k logprobs as
the vLLM backend builds them from its outputs (``steps_from_logprobs`` with the judge's
tokenizer), so detokenizing costs what it costs there. Tokenizing and detokenizing use the
shared helpers of ``backends.base`` (``PromptEncoder``, ``Detokenizer``,
``steps_from_logprobs``), as the vLLM backend does. That makes it the yardstick for jurybox's own work per judgment
(``perf/machinery.py``), and a fixture that runs the real judging path in tests without a model.

A recording (``perf/data/*.json.gz``, written by ``python perf/machinery.py --record``) holds,
per judge, the prompt token ids, the answer's token ids, why it ended, the text the recording
backend decoded, and the top-k ``{token id: logprob}`` at each answer position.
"""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import (
    Detokenizer,
    Generation,
    PromptEncoder,
    Request,
    bos_prefix,
    length_error,
    prompt_text,
    require_chat_template,
    steps_from_logprobs,
)

if TYPE_CHECKING:
    from ..spec import JudgeSpec

FORMAT = "jurybox-replay/1"


@dataclass(frozen=True)
class RecordedGeneration:
    """One recorded answer of a judge."""

    item: str  # the id of the item it answered (for reading the recording, not for matching)
    prompt_ids: tuple[int, ...]
    output_ids: list[int]
    logprobs: list[dict[int, float]]  # per output position: the top-k alternatives' logprobs
    finish_reason: str
    text: str  # what the recording backend decoded: a check, never used as the answer

    def to_json(self) -> dict[str, Any]:
        """The generation as plain JSON data (each position's logprobs as two parallel lists)."""
        return {
            "item": self.item,
            "prompt_ids": list(self.prompt_ids),
            "output_ids": self.output_ids,
            # Two parallel lists per position: about half the size of {"id": logprob} objects.
            "logprobs": [[list(p), list(p.values())] for p in self.logprobs],
            "finish_reason": self.finish_reason,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecordedGeneration:
        """A generation from :meth:`to_json`'s data."""
        return cls(
            item=data["item"],
            prompt_ids=tuple(data["prompt_ids"]),
            output_ids=list(data["output_ids"]),
            logprobs=[dict(zip(ids, lps)) for ids, lps in data["logprobs"]],
            finish_reason=data["finish_reason"],
            text=data["text"],
        )


@dataclass
class Recording:
    """Recorded generations per judge, and the items and rubric they answered."""

    rubric: str
    items: list[dict[str, Any]]  # Item fields, as ``Item.model_dump(mode="json")``
    judges: dict[str, list[RecordedGeneration]]
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)  # judge specs when recorded
    produced_by: str = ""

    def save(self, path: str | Path) -> None:
        """Write the recording as gzipped JSON; the same recording gives the same bytes."""
        payload = {
            "format": FORMAT,
            "produced_by": self.produced_by,
            "rubric": self.rubric,
            "items": self.items,
            "specs": self.specs,
            "judges": {name: [g.to_json() for g in gens] for name, gens in self.judges.items()},
        }
        # mtime=0: the same recording gives the same bytes.
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(json.dumps(payload, separators=(",", ":")).encode())

    @classmethod
    def load(cls, path: str | Path) -> Recording:
        """A recording read from a file :meth:`save` wrote; ValueError when it is not one."""
        with gzip.open(path, "rb") as fh:
            data = json.loads(fh.read())
        if data.get("format") != FORMAT:
            raise ValueError(f"{path}: not a jurybox replay recording ({FORMAT})")
        return cls(
            rubric=data["rubric"],
            items=data["items"],
            judges={name: [RecordedGeneration.from_json(g) for g in gens]
                    for name, gens in data["judges"].items()},
            specs=data.get("specs", {}),
            produced_by=data.get("produced_by", ""),
        )


def load_tokenizer(spec: JudgeSpec) -> Any:
    """The judge's own tokenizer, loaded as the transformers backend loads it."""
    from transformers import AutoTokenizer

    from ..weights import materialize, resolve

    source = materialize(resolve(spec.model, spec.revision))
    return AutoTokenizer.from_pretrained(source.directory, revision=source.revision)


class ReplayBackend:
    """Answers every request with a recorded generation of the judge ``spec.name``.

    A request whose prompt tokens equal a recorded prompt's gets that recording's answer (so
    replaying the recorded items gives the judge's real answers); any other request gets the
    recordings in turn, deterministically. ``timings`` adds up seconds spent per stage
    (``prompt``: chat template or plain framing, ``tokenize``, ``steps``: detokenizing the
    answer into token steps).
    """

    def __init__(self, spec: JudgeSpec, recording: Recording, tokenizer: Any = None,
                 context: int = 1 << 20) -> None:
        if spec.name not in recording.judges or not recording.judges[spec.name]:
            raise ValueError(f"the recording has no generations of judge {spec.name}")
        self.spec = spec
        self.name = spec.name
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(spec)
        require_chat_template(spec, self.tokenizer)
        self._bos = bos_prefix(self.tokenizer)
        self.max_len = spec.max_model_len or context
        self._recorded = recording.judges[spec.name]
        self._by_prompt = {g.prompt_ids: g for g in self._recorded}
        self._turn = 0
        self.replayed = 0  # requests answered by the recording of their own prompt
        self.timings = {"prompt": 0.0, "tokenize": 0.0, "steps": 0.0}
        self._steps = steps_from_logprobs
        self._decode: Any = Detokenizer(self.tokenizer)
        self.encoder = PromptEncoder(self.tokenizer, spec.name)

    def prompt_text(self, messages: list[dict[str, str]]) -> str:
        """The exact text the judge is given for ``messages`` (chat template or plain framing)."""
        return prompt_text(self.spec, self.tokenizer, self._bos, messages)

    def _pick(self, ids: list[int]) -> RecordedGeneration:
        found = self._by_prompt.get(tuple(ids))
        if found is not None:
            self.replayed += 1
            return found
        found = self._recorded[self._turn % len(self._recorded)]
        self._turn += 1
        return found

    def generate(self, requests: list[Request]) -> list[Generation]:
        """One Generation per request, in order, from the recording: a prompt too long for the judge
        gets an error instead."""
        clock = time.perf_counter
        t0 = clock()
        prompts = [self.prompt_text(r.messages) for r in requests]
        t1 = clock()
        prompt_ids = self.encoder(prompts)
        t2 = clock()
        out = []
        for ids in prompt_ids:
            error = length_error(self.spec, len(ids), self.max_len, on_cpu=False)
            if error is not None:
                out.append(Generation(error=error, prompt_tokens=len(ids)))
                continue
            rec = self._pick(ids)
            text, steps = self._steps(self._decode, rec.output_ids, rec.logprobs)
            out.append(Generation(
                text=text,
                steps=steps,
                finish_reason=rec.finish_reason,
                prompt_tokens=len(ids),
                output_tokens=len(rec.output_ids),
            ))
        self.timings["prompt"] += t1 - t0
        self.timings["tokenize"] += t2 - t1
        self.timings["steps"] += clock() - t2
        return out

    def close(self) -> None:
        """Nothing to release."""
        pass
