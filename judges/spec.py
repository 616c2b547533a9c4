"""Jury files: which judges, how each is asked, and how their votes are combined.

One judge (`JudgeSpec`, with its `Sampling`, `Reasoning` and `Execution`) is
`jurybox.judges.judge_spec`'s, re-exported here; the jury (`JurySpec`, its `Aggregation`, `Stage`
and `Confidence`), a verdict's `provenance` and the jury files' loading are here.
"""

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

from .judge_spec import Execution, JudgeSpec, Reasoning, Sampling

__all__ = [
    "PROMPT_VERSION",
    "Aggregation",
    "Confidence",
    "Execution",
    "JudgeSpec",
    "JurySpec",
    "Method",
    "Reasoning",
    "Sampling",
    "Stage",
    "list_juries",
    "load_jury_spec",
    "provenance",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# Bump when code-side prompt text (output instructions, plain-prompt framing) changes: it is part
# of what a verdict depends on, so it is part of the provenance hash.
PROMPT_VERSION = "2"

Method = Literal["mean", "median", "majority", "trimmed", "weighted"]


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
