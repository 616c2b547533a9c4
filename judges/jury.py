"""The jury: every judge on every item, then one verdict per item.

This is the single code path that renders prompts, reads answers and aggregates votes; the CLI,
the HTTP service and Ray Data only move items in and verdicts out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from jurybox.rubrics import Criterion, Item, Rubric, Verdict, Vote, output_schema, render_messages

from .aggregate import aggregate_criterion
from .backends.base import Backend, Generation, Request
from .models import ModelNotAvailable
from .parsing import expected_score, parse_answers, score_distribution
from .spec import JudgeSpec, JurySpec, load_jury_spec, provenance


class MissingInputs(ValueError):
    """Items that lack fields the rubric needs."""


class JudgeFailed(RuntimeError):
    """A judge could not judge a batch at all; nothing of the batch is recorded."""


def make_backend(spec: JudgeSpec) -> Backend:
    if spec.backend == "transformers":
        from .backends.transformers import TransformersBackend

        return TransformersBackend(spec)
    if spec.backend == "vllm":
        from .backends.vllm import VLLMBackend

        return VLLMBackend(spec)
    if spec.backend == "openai":
        from .backends.openai import OpenAIBackend

        return OpenAIBackend(spec)
    raise ValueError(f"judge {spec.name}: unknown backend {spec.backend!r}")


def votes_from_generation(
    judge: str, criteria: list[Criterion], gen: Generation, keep_reasoning: bool = False
) -> list[Vote]:
    """One vote per criterion of a judge call: a score, or the reason there is none."""
    reasoning = gen.reasoning if keep_reasoning else None
    if gen.error is not None:
        return [
            Vote(judge=judge, criterion=c.name, error=gen.error, latency_s=gen.latency_s,
                 raw=gen.text or None, reasoning=reasoning)
            for c in criteria
        ]
    answers = parse_answers(gen.text, criteria, complete=gen.finish_reason != "length")
    votes = []
    for c in criteria:
        a = answers[c.name]
        if a.error is not None:
            error = a.error
            if gen.finish_reason == "length":
                error = f"output cut at max_tokens ({gen.output_tokens} tokens): {error}"
            votes.append(Vote(judge=judge, criterion=c.name, error=error, latency_s=gen.latency_s,
                              raw=gen.text, reasoning=reasoning))
            continue
        dist = score_distribution(c, gen.steps, a.position)
        votes.append(
            Vote(
                judge=judge,
                criterion=c.name,
                score=a.value,
                label=a.label,
                expected=expected_score(c, dist),
                distribution=dist,
                latency_s=gen.latency_s,
                raw=gen.text,
                reasoning=reasoning,
            )
        )
    return votes


def decide(rubric: Rubric, jury: JurySpec, prov: str, item_id: str, votes: list[Vote]) -> Verdict:
    """The verdict on one item from all its votes."""
    criteria = {}
    scores: dict[str, float | None] = {}
    reasons = []
    for c in rubric.criteria:
        result = aggregate_criterion(c.name, [v for v in votes if v.criterion == c.name], jury)
        criteria[c.name] = result
        scores[c.name] = result.score
        if result.score is None:
            reasons.append(f"{c.name}: {result.reason}")
    if rubric.formula is not None:
        scores[rubric.formula.name] = rubric.formula.evaluate(scores)
    return Verdict(
        id=item_id,
        status="scored" if not reasons else "unscored",
        rubric=rubric.name,
        jury=jury.name,
        provenance=prov,
        scores=scores,
        criteria=criteria,
        votes=votes,
        reasons=reasons,
    )


class Jury:
    """A loaded jury. Backends (the models) load on first use and stay loaded.

    >>> jury = Jury.load("tiny")
    >>> verdicts = jury.score(load_rubric("general"), items)
    """

    def __init__(self, spec: JurySpec, backends: dict[str, Backend] | None = None) -> None:
        self.spec = spec
        self._backends: dict[str, Backend] = dict(backends or {})

    @classmethod
    def load(cls, name_or_path: str | Path) -> Jury:
        return cls(load_jury_spec(name_or_path))

    def backend(self, judge: JudgeSpec) -> Backend:
        if judge.name not in self._backends:
            self._backends[judge.name] = make_backend(judge)
        return self._backends[judge.name]

    def load_backends(self) -> None:
        for judge in self.spec.judges:
            self.backend(judge)

    def provenance(self, rubric: Rubric) -> str:
        return provenance(rubric, self.spec)

    def score(
        self,
        rubric: Rubric,
        items: Sequence[Item],
        on_judge_done: Callable[[str, int], None] | None = None,
    ) -> list[Verdict]:
        """Judge ``items`` with every judge and return one verdict per item, in order."""
        missing = {it.id: it.missing(rubric) for it in items}
        missing = {k: v for k, v in missing.items() if v}
        if missing:
            shown = "; ".join(f"{k}: {', '.join(v)}" for k, v in list(missing.items())[:5])
            raise MissingInputs(
                f"{len(missing)} item(s) lack inputs the rubric {rubric.name} needs ({shown})"
            )
        calls = rubric.calls()
        requests: list[Request | None] = []
        render_errors: dict[int, str] = {}
        for item in items:
            for criteria in calls:
                try:
                    requests.append(
                        Request(render_messages(rubric, item, criteria), output_schema(criteria))
                    )
                except Exception as exc:  # a template that fails on this item's values
                    render_errors[len(requests)] = f"prompt could not be rendered: {exc}"
                    requests.append(None)
        runnable = [k for k, r in enumerate(requests) if r is not None]
        votes: list[list[Vote]] = [[] for _ in items]
        for judge in self.spec.judges:
            generations: dict[int, Generation] = {
                k: Generation(error=message) for k, message in render_errors.items()
            }
            batch = [requests[k] for k in runnable]
            # A backend reports per-prompt trouble as Generation errors; an exception means the
            # judge as a whole failed (out of memory, server gone). Writing that down as unscored
            # votes would make a rerun skip these items, so it stops the run instead.
            try:
                outputs = self.backend(judge).generate(batch) if batch else []  # type: ignore[arg-type]
            except (ModelNotAvailable, JudgeFailed):
                raise
            except Exception as exc:
                raise JudgeFailed(f"judge {judge.name} failed: {type(exc).__name__}: {exc}") from exc
            if len(outputs) != len(batch):
                raise JudgeFailed(
                    f"judge {judge.name}: backend returned {len(outputs)} outputs for {len(batch)} prompts"
                )
            generations.update(zip(runnable, outputs))
            keep = judge.reasoning.keep
            for k in range(len(requests)):
                item_index, call_index = divmod(k, len(calls))
                votes[item_index].extend(
                    votes_from_generation(judge.name, calls[call_index], generations[k], keep)
                )
            if on_judge_done is not None:
                on_judge_done(judge.name, len(items))
        prov = self.provenance(rubric)
        return [decide(rubric, self.spec, prov, item.id, v) for item, v in zip(items, votes)]

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()
