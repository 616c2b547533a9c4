"""Jury files: which judges, how each is asked, and how their votes are combined."""

from __future__ import annotations

import hashlib
import math
import json
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jurybox.rubrics import Rubric
from jurybox.rubrics.loading import load_definition, resolve_definition

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# Bump when code-side prompt text (output instructions, plain-prompt framing) changes: it is part
# of what a verdict depends on, so it is part of the provenance hash.
PROMPT_VERSION = "2"

Method = Literal["mean", "median", "majority", "trimmed", "weighted"]


class Sampling(BaseModel):
    model_config = _FROZEN

    temperature: float = Field(0.0, ge=0.0, le=5.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(256, ge=1)
    seed: int | None = 0


class Reasoning(BaseModel):
    """How a reasoning judge thinks before it answers.

    With ``mode: think`` the judge first writes freely until ``end`` (at most ``budget_tokens``
    tokens); only then is the constrained JSON answer generated. A judge that does not close its
    reasoning within the budget gives an unscored vote, not a guess.
    """

    model_config = _FROZEN

    mode: Literal["off", "think"] = "off"
    start: str = "<think>"
    end: str = "</think>"
    budget_tokens: int = Field(4096, ge=1)
    keep: bool = False
    # Extra variables for the model's chat template (e.g. Qwen3's enable_thinking).
    template_kwargs: dict[str, Any] = Field(default_factory=dict)


class JudgeSpec(BaseModel):
    model_config = _FROZEN

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    model: str = Field(
        min_length=1,
        description="hub id, local directory, a .gguf file, or pypi:PACKAGE[/FILE] for a model "
        "shipped as a Python package",
    )
    revision: str | None = None
    backend: Literal["transformers", "vllm", "openai"] = "transformers"
    prompt_format: Literal["chat", "plain"] = "chat"
    sampling: Sampling = Sampling()
    reasoning: Reasoning = Reasoning()
    weight: float = Field(1.0, gt=0.0)
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = "auto"
    max_model_len: int | None = Field(None, ge=16)
    batch_size: int = Field(8, ge=1)
    top_logprobs: int = Field(20, ge=1, le=100)
    # vllm: the engine's share of the accelerator's memory (on CPU, of RAM, process included), or
    # an explicit KV-cache size, which takes precedence; several judges on one GPU need shares
    # that add up to less than 1. enforce_eager skips graph capture / compilation (faster start).
    gpu_memory_utilization: float | None = Field(None, gt=0.0, le=1.0)
    kv_cache_gib: float | None = Field(None, gt=0.0)
    enforce_eager: bool = False
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    # openai: an OpenAI-compatible server (vllm serve, SGLang, a hosted API). ``model`` is the
    # name the server knows the model by. The key is read from the environment variable named
    # here (never from the jury file); base_url defaults to $OPENAI_BASE_URL.
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int = Field(8, ge=1)
    timeout_s: float = Field(120.0, gt=0.0)
    max_retries: int = Field(4, ge=0)
    # Constrain the answer with the rubric's JSON schema (response_format / structured_outputs):
    # "auto" falls back to unconstrained output plus regex parsing when the server rejects it.
    structured_outputs: Literal["auto", "on", "off"] = "auto"


# Where and how fast a judge runs, not what it answers: left out of the provenance hash, so
# moving a judge to another server or memory share keeps its verdicts and calibration maps valid.
EXECUTION_ONLY = frozenset(
    {"gpu_memory_utilization", "kv_cache_gib", "enforce_eager", "base_url", "api_key_env",
     "concurrency", "timeout_s", "max_retries", "batch_size", "device"}
)


class Aggregation(BaseModel):
    model_config = _FROZEN

    method: Method = "mean"
    # Per-criterion overrides, e.g. {spurious: majority}.
    methods: dict[str, Method] = Field(default_factory=dict)
    # Proportion cut from each end for "trimmed" (scipy.stats.trim_mean semantics).
    trim: float = Field(0.25, ge=0.0, lt=0.5)
    # Minimum scored votes per criterion: a count, a fraction of the jury, or "all".
    quorum: int | float | Literal["all"] = 1
    # Aggregate the chosen scores, or the logprob-expected scores where a judge has them.
    use: Literal["score", "expected"] = "score"

    @model_validator(mode="after")
    def _quorum(self) -> Aggregation:
        q = self.quorum
        # 1 and 1.0 read alike but would mean "one judge" and "every judge": fractions stay below 1.
        if isinstance(q, float) and not 0.0 < q < 1.0:
            raise ValueError("a fractional quorum must lie strictly between 0 and 1 (use a count or 'all')")
        if isinstance(q, int) and not isinstance(q, bool) and q < 1:
            raise ValueError("quorum must be at least 1")
        majority = [c for c, m in {"(default)": self.method, **self.methods}.items() if m == "majority"]
        if majority and self.use == "expected":
            raise ValueError(
                "majority voting needs the judges' chosen scores: expected scores are continuous "
                "and almost never tie into a majority (use: score, or another method)"
            )
        return self


class JurySpec(BaseModel):
    model_config = _FROZEN

    name: str
    description: str = ""
    judges: list[JudgeSpec] = Field(min_length=1)
    aggregation: Aggregation = Aggregation()

    @model_validator(mode="after")
    def _consistent(self) -> JurySpec:
        names = [j.name for j in self.judges]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"judge names repeat: {dupes}")
        q = self.aggregation.quorum
        if isinstance(q, int) and not isinstance(q, bool) and q > len(self.judges):
            raise ValueError(f"quorum {q} is larger than the jury ({len(self.judges)} judges)")
        return self

    def quorum_count(self) -> int:
        q = self.aggregation.quorum
        n = len(self.judges)
        if q == "all":
            return n
        if isinstance(q, float):
            return max(1, math.ceil(q * n - 1e-9))
        return int(q)


def provenance(rubric: Rubric, jury: JurySpec) -> str:
    """Hash of everything a verdict depends on: rubric content (incl. template), judge specs
    (model, revision, sampling, reasoning), the identity of each judge's weights, aggregation,
    and the code-side prompt version."""
    from .models import weights_identity

    excluded: dict = {field: True for field in EXECUTION_ONLY}
    excluded["reasoning"] = {"keep"}  # keeping the reasoning text changes what is stored, not judged
    payload = {
        "rubric": rubric.model_dump(mode="json"),
        "jury": jury.model_dump(
            mode="json",
            exclude={"name": True, "description": True, "judges": {"__all__": excluded}},
        ),
        "weights": [weights_identity(j.model, j.revision, j.backend) for j in jury.judges],
        "prompt_version": PROMPT_VERSION,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _library() -> Path:
    return Path(str(files("jurybox.judges").joinpath("juries")))


def list_juries() -> list[str]:
    return sorted(p.stem for p in _library().glob("*.yaml"))


def load_jury_spec(name_or_path: str | Path) -> JurySpec:
    """Load a shipped jury by name (``tiny``, ``mirage``, ``small-gpu``) or a jury YAML file."""
    return load_definition(resolve_definition(name_or_path, _library(), "jury"), JurySpec, "jury")
