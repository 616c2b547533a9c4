"""The transformers backend: local generation on CPU or GPU, constrained by xgrammar.

Why xgrammar: it compiles a JSON schema against the tokenizer once and masks logits with a
bitmask per step (fast on CPU), it ships a transformers LogitsProcessor, and it is the default
structured-output engine of vLLM, so both backends constrain judges the same way.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..weights import materialize, resolve
from .base import (
    PieceEncoder,
    bos_prefix,
    escaped_prompt,
    length_error,
    prompt_char_limit,
    prompt_text,
    require_chat_template,
    require_vision_chat,
)
from .protocol import (
    CancelCheck,
    Generation,
    GenerationCancelled,
    JudgeConfigError,
    Request,
    TokenStep,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..spec import JudgeSpec

PREFILL_CHUNK_TOKENS = 1024


class _Recorder:
    """Wraps the grammar's logits processor, keeping the top-k logprobs at each step.

    The logprobs are those of the masked distribution, before temperature or top-p warp it: that
    is the judge's probability over the allowed answers.
    """

    def __init__(self, inner: Any, k: int) -> None:
        self.inner = inner
        self.k = k
        self.steps: list[tuple[Any, Any]] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.inner is not None:
            scores = self.inner(input_ids, scores)
        logprobs = torch.log_softmax(scores.float(), dim=-1)
        values, ids = logprobs.topk(self.k, dim=-1)
        self.steps.append((values.cpu(), ids.cpu()))
        return scores


class _StopWhenCancelled:
    """A stopping criterion that ends every row of a generate once ``cancelled()`` is True.

    It remembers that it did. ``model.generate`` cannot be interrupted, but it asks its stopping
    criteria after every new token (``StoppingCriteriaList`` ORs the per-row bool tensors they
    return), so an abandoned batch stops within one decoding step rather than running to its
    ``max_new_tokens``.
    """

    def __init__(self, cancelled: CancelCheck) -> None:
        self.cancelled = cancelled
        self.fired = False

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        stop = self.fired or bool(self.cancelled())
        self.fired = stop
        return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)


def _vision_processor(spec: JudgeSpec, directory: str, revision: str | None) -> Any:
    """The model's processor, with an image processor.

    Raises:
        JudgeConfigError: The processor has no image processor (a judge set to see images whose
            model cannot).
    """
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(directory, revision=revision)
    except Exception as exc:
        raise JudgeConfigError(
            f"judge {spec.name}: vision is on, but model {spec.model} has no "
            f"processor that takes images ({type(exc).__name__}: {exc}); "
            "set vision: false to judge on text"
        ) from None
    if getattr(processor, "image_processor", None) is None or not hasattr(processor, "tokenizer"):
        raise JudgeConfigError(
            f"judge {spec.name}: vision is on, but model {spec.model} has no "
            "image processor (a text-only model?); set vision: false"
        )
    return processor


def _stop_if_cancelled(cancelled: CancelCheck | None) -> None:
    if cancelled is not None and cancelled():
        raise GenerationCancelled("nobody waits for this generate any more")


class TransformersBackend:
    """A judge's model run locally by transformers (on ``execution.device``).

    Its answers are constrained to the rubric's schema by xgrammar; the model loads at
    construction.

    A judge that sees images (its ``vision``, decided where the jury makes the backend) loads the model's processor and its image-text-to-text
    class: a request with images is given to the processor (the chat template's text with the
    images' placeholders, and the images), whose token ids, image tokens included, and pixel tensors
    the model generates from; its other requests go as text. Requests with images are batched when
    their pixel tensors have the same shapes (the processor's per-image tensors stack along the
    batch).
    """

    def __init__(self, spec: JudgeSpec) -> None:
        import torch
        import xgrammar
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        self.spec = spec
        self.name = spec.name
        self.vision = bool(spec.vision)  # decided where the jury makes it (decide_vision)
        if self.vision:
            require_vision_chat(spec)
        source = materialize(resolve(spec.model, spec.revision))
        self.device = (
            spec.execution.device
            if spec.execution.device != "auto"
            else ("cuda" if torch.cuda.is_available() else "cpu")
        )
        dtype = {
            "auto": torch.bfloat16 if self.device.startswith("cuda") else torch.float32,
            "float32": torch.float32,
            "bfloat16": torch.bfloat16,
            "float16": torch.float16,
        }[spec.dtype]
        self.processor: Any = None
        if self.vision:
            self.processor = _vision_processor(spec, source.directory, source.revision)
            self.tokenizer = self.processor.tokenizer
            from transformers import AutoModelForImageTextToText

            model_class: Any = AutoModelForImageTextToText
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(
                source.directory, revision=source.revision
            )
            model_class = AutoModelForCausalLM
        self.model = model_class.from_pretrained(
            source.directory, revision=source.revision, dtype=dtype
        ).to(self.device)
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        require_chat_template(spec, self.tokenizer)
        self._bos = bos_prefix(self.tokenizer)
        self.encoder = PieceEncoder(self.tokenizer)
        config = self.model.config
        text_config = getattr(config, "get_text_config", lambda: config)()
        context: int = getattr(text_config, "max_position_embeddings", 2048)
        self.max_len = spec.max_model_len or context
        self._max_chars = prompt_char_limit(
            spec, self.tokenizer, self.max_len, self.device == "cpu"
        )
        vocab_size = text_config.vocab_size
        self._info = xgrammar.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=vocab_size)
        self._compiler = xgrammar.GrammarCompiler(self._info)
        self._grammars: dict[str, Any] = {}
        eos = self.model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self._stop_ids = sorted(set(eos) | set(self._info.stop_token_ids))

    # -- prompts ---------------------------------------------------------------------------------

    def prompt_text(self, messages: list[dict[str, str]]) -> str:
        """The exact text the judge is given for ``messages`` (chat template or plain framing)."""
        return prompt_text(self.spec, self.tokenizer, self._bos, messages)

    def grammar(self, schema: dict[str, Any]) -> Any:
        """The xgrammar grammar for ``schema``, compiled once per schema.

        The schema's property order is kept.
        """
        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            # Compile the schema as written: its property order is the order the judge answers in.
            self._grammars[key] = self._compiler.compile_json_schema(
                json.dumps(schema), any_whitespace=False
            )
        return self._grammars[key]

    # -- generation ------------------------------------------------------------------------------

    def _encode(self, texts: list[str]) -> list[list[int]]:
        """The judge's own text's ids (its thought, given back to it before it answers)."""
        return list(self.tokenizer(texts, add_special_tokens=False)["input_ids"])

    def encode(self, requests: list[Request]) -> list[list[int] | str]:
        """Each request's prompt ids, or why the judge is not given it (see `PieceEncoder`).

        For a judge that sees images, the ids of the text with the images' placeholders (as a
        replay judge tokenizes it; the model is given the processor's: `_vision_inputs`).
        """
        # (a vision model's chat template takes every message as parts, images or not)
        return self.encoder.encode(self.spec, self._bos, requests, self.vision, self._max_chars)

    def _generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        processor: Any = None,
        stop_strings: list[str] | None = None,
        cancelled: CancelCheck | None = None,
        pixels: list[dict[str, Any]] | None = None,
    ) -> tuple[list[list[int]], list[str]]:
        """Generate for a batch of prompts (token ids).

        ``pixels``: each row's image tensors, for a judge that sees images.

        Returns:
            Each row's new token ids (up to its stop) and why it ended ("stop" or "length").

        Raises:
            GenerationCancelled: ``cancelled()`` turned True during the generate (rows are never
                cut short).
        """
        import torch
        from transformers import StoppingCriteriaList

        s = self.spec.sampling
        padded = self.tokenizer.pad({"input_ids": prompts}, padding=True, return_tensors="pt")
        if pixels:  # one row's tensors per prompt, stacked along the batch
            padded.update({k: torch.cat([row[k] for row in pixels]) for k in pixels[0]})
        enc = {k: v.to(self.device) for k, v in padded.items()}
        kwargs: dict[str, Any] = dict(
            max_new_tokens=max_new_tokens,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self._stop_ids,
        )
        if not pixels:
            # Long prompts are read in chunks: attention memory grows with chunk x prompt
            # length, not prompt length squared (8k tokens on Gemma: +0 MB instead of +470 MB
            # peak). (Not with images: the image tokens' features enter at the first step.)
            kwargs["prefill_chunk_size"] = PREFILL_CHUNK_TOKENS
        if s.temperature > 0:
            kwargs.update(do_sample=True, temperature=s.temperature, top_p=s.top_p, top_k=0)
            if s.seed is not None:
                torch.manual_seed(s.seed)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if processor is not None:
            kwargs["logits_processor"] = [processor]
        if stop_strings:
            kwargs.update(stop_strings=stop_strings, tokenizer=self.tokenizer)
        stopper = _StopWhenCancelled(cancelled) if cancelled is not None else None
        if stopper is not None:
            kwargs["stopping_criteria"] = StoppingCriteriaList([stopper])
        with torch.inference_mode():
            out = self.model.generate(**enc, **kwargs)
        if stopper is not None and stopper.fired:  # the rows end where it stopped: no answers
            raise GenerationCancelled("nobody waits for this generate any more")
        width = enc["input_ids"].shape[1]
        rows, reasons = [], []
        stops = set(self._stop_ids)
        for seq in out[:, width:].tolist():
            ids = []
            reason = "length"
            for t in seq:
                if t in stops:
                    reason = "stop"
                    break
                ids.append(t)
            if reason == "length" and stop_strings and len(ids) < max_new_tokens:
                reason = "stop"  # a stop string ended it (rest is padding)
                while ids and ids[-1] == self.tokenizer.pad_token_id:
                    ids.pop()
            rows.append(ids)
            reasons.append(reason)
        return rows, reasons

    def _steps(self, ids: list[int], recorder: _Recorder, row: int) -> tuple[str, list[TokenStep]]:
        # A list of ids decodes to one str (transformers types decode as str | list[str]).
        decode = cast("Callable[..., str]", self.tokenizer.decode)
        steps: list[TokenStep] = []
        prev = ""
        for t in range(len(ids)):
            text = decode(ids[: t + 1])
            values, alt_ids = recorder.steps[t][0][row], recorder.steps[t][1][row]
            prefix_ids = ids[:t]

            def top(prefix_ids=prefix_ids, prev=prev, values=values, alt_ids=alt_ids):
                out: dict[str, float] = {}
                for lp, alt in zip(values.tolist(), alt_ids.tolist()):
                    if lp == -math.inf:
                        continue
                    appended = decode(prefix_ids + [alt])[len(prev) :]
                    out[appended] = (
                        float(np.logaddexp(out[appended], lp)) if appended in out else lp
                    )
                return out

            steps.append(TokenStep(len(prev), text[len(prev) :], top))
            prev = text
        return prev, steps

    def _think(
        self,
        prompts: list[list[int]],
        cancelled: CancelCheck | None = None,
        pixels: list[dict[str, Any]] | None = None,
    ) -> list[tuple[str | None, str | None, list[int]]]:
        """Reasoning phase: (reasoning text, error, prompt ids for the answer phase) per prompt.

        The answer phase's prompt ids are the prompt's own ids and the thought's (as the vLLM
        backend continues).
        """
        r = self.spec.reasoning
        rows, reasons = self._generate(
            prompts, r.budget_tokens, stop_strings=[r.end], cancelled=cancelled, pixels=pixels
        )
        out: list[tuple[str | None, str | None, list[int]]] = []
        for prompt, ids, why in zip(prompts, rows, reasons):
            text = cast(str, self.tokenizer.decode(ids, skip_special_tokens=False))  # ids: one str
            cut = text.find(r.end)
            if cut < 0:
                error = (
                    f"thinking budget of {r.budget_tokens} tokens exhausted before {r.end!r}"
                    if why == "length"
                    else f"judge stopped without closing its reasoning with {r.end!r}"
                )
                out.append((text, error, prompt))
                continue
            thought = text[: cut + len(r.end)]
            reasoning = thought[:cut].removeprefix(r.start).strip()
            out.append((reasoning, None, prompt + self._encode([thought + "\n\n"])[0]))
        return out

    def _answer(
        self,
        prompts: list[list[int]],
        schemas: list[dict[str, Any]],
        cancelled: CancelCheck | None = None,
        pixels: list[dict[str, Any]] | None = None,
    ) -> list[Generation]:
        import xgrammar.contrib.hf

        grammars = [self.grammar(s) for s in schemas]
        recorder = _Recorder(xgrammar.contrib.hf.LogitsProcessor(grammars), self.spec.top_logprobs)
        rows, reasons = self._generate(
            prompts, self.spec.sampling.max_tokens, recorder, cancelled=cancelled, pixels=pixels
        )
        results = []
        for row, (ids, why) in enumerate(zip(rows, reasons)):
            text, steps = self._steps(ids, recorder, row)
            results.append(
                Generation(text=text, steps=steps, finish_reason=why, output_tokens=len(ids))
            )
        return results

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        """Every request's generation, in order.

        ``cancelled`` (the scoring service passes one) is asked before each sub-batch, between
        the thinking and answering phases and after every new token: once it is True, the
        generate stops and raises GenerationCancelled, so a batch that every client has given up
        on does not keep the judge busy.
        """
        seen = [i for i, r in enumerate(requests) if self.vision and r.images]
        plain = [i for i in range(len(requests)) if not (self.vision and requests[i].images)]
        encoded: list[list[int] | str] = [""] * len(requests)
        for i, ids in zip(plain, self.encode([requests[i] for i in plain])):
            encoded[i] = ids
        pixels: dict[int, dict[str, Any]] = {}
        for i in seen:
            got = self._vision_inputs(requests[i])
            if isinstance(got, str):
                encoded[i] = got
            else:
                encoded[i], pixels[i] = got
        prompts: dict[int, list[int]] = {}
        results: list[Generation | None] = [None] * len(requests)
        on_cpu = self.device == "cpu"
        for i, ids in enumerate(encoded):
            if isinstance(ids, str):
                results[i] = Generation(error=ids)
                continue
            error = length_error(self.spec, len(ids), self.max_len, on_cpu)
            if error is not None:
                results[i] = Generation(error=error, prompt_tokens=len(ids))
            else:
                prompts[i] = ids
        lengths = {i: len(ids) for i, ids in prompts.items()}
        # Requests batch with those whose image tensors have the same shapes (text alone: none),
        # and similar lengths together waste less padding.
        shapes = {
            i: tuple((k, tuple(v.shape)) for k, v in sorted(pixels[i].items()))
            if i in pixels
            else ()
            for i in prompts
        }
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i in sorted(prompts, key=lambda i: lengths[i]):
            groups.setdefault(shapes[i], []).append(i)
        size = self.spec.execution.batch_size
        batches = [
            group[start : start + size]
            for group in groups.values()
            for start in range(0, len(group), size)
        ]
        for batch in batches:
            began = time.perf_counter()
            batch_prompts = [prompts[i] for i in batch]
            batch_pixels = [pixels[i] for i in batch] if batch[0] in pixels else None
            thoughts: list[tuple[str | None, str | None, list[int]]] = [
                (None, None, p) for p in batch_prompts
            ]
            _stop_if_cancelled(cancelled)
            if self.spec.reasoning.mode == "think":
                thoughts = self._think(batch_prompts, cancelled, batch_pixels)
                _stop_if_cancelled(cancelled)
            go = [k for k, (_, err, _) in enumerate(thoughts) if err is None]
            answers = (
                self._answer(
                    [thoughts[k][2] for k in go],
                    [requests[batch[k]].schema for k in go],
                    cancelled,
                    [batch_pixels[k] for k in go] if batch_pixels else None,
                )
                if go
                else []
            )
            by_k = dict(zip(go, answers))
            elapsed = time.perf_counter() - began
            for k, i in enumerate(batch):
                reasoning, error, _ = thoughts[k]
                gen = by_k.get(k) or Generation(error=error)
                gen.reasoning = reasoning
                gen.latency_s = elapsed
                gen.prompt_tokens = lengths[i]
                results[i] = gen
        assert all(r is not None for r in results)
        return results  # type: ignore[return-value]

    def _vision_inputs(self, request: Request) -> tuple[list[int], dict[str, Any]] | str:
        """A request with images as the processor makes it, or why it cannot be given to the judge.

        As made, it is its token ids (image tokens included) and its image tensors. The item's
        pieces are escaped where they are inserted (`escaped_prompt`): the processor tokenizes the
        prompt as a whole, so the item's strings cannot be tokenized apart.
        """
        pieces = escaped_prompt(
            self.spec, self.tokenizer, self._bos, request, True, self.encoder.pattern
        )
        if isinstance(pieces, str):
            return pieces
        text = "".join(t for t, _ in pieces)
        if len(text) > self._max_chars:
            return (
                f"prompt is {len(text)} characters, more than the judge's token limit could "
                f"hold ({self._max_chars} characters); it was not tokenized"
            )
        try:
            images = [image.pil() for image in request.images]
            enc = self.processor(text=[text], images=[images], return_tensors="pt")
        except Exception as exc:  # an image the model's processor cannot take: this item's
            digests = ", ".join(im.digest for im in request.images)
            return (
                f"the judge's image processor could not take the item's images "
                f"({digests}): {type(exc).__name__}: {exc}"
            )
        ids = enc.pop("input_ids")[0].tolist()
        enc.pop("attention_mask", None)
        return ids, dict(enc)

    def close(self) -> None:
        """Drop the model and collect garbage, so its memory can be freed."""
        import gc

        del self.model
        gc.collect()
