"""Helpers of the benchmark-pack tests: a judge that returns scripted verdicts (to check each
pack's arithmetic by hand), a jury whose backends answer by rule (to run the real judging path,
resumable runner included, without models), and the public evaluators' extraction rules."""

from __future__ import annotations

import json
import re

from jurybox.benchmarks import Judged
from jurybox.judges import Jury, JurySpec
from jurybox.judges.backends.protocol import Generation
from jurybox.rubrics import VerdictRecord


def scripted_judge(votes: dict[str, dict[str, dict[str, float | None]]], calls: list | None = None):
    """A Judge whose verdicts are ``votes[item id][judge][criterion]`` (None: an unscored
    vote), aggregated by the mean with quorum 1, the rubric's formula on top. Items not in
    ``votes`` get no verdict. ``calls`` collects (task, item ids)."""

    def judge(task, rubric, items):
        if calls is not None:
            calls.append((task, [it.id for it in items]))
        records = {}
        for it in items:
            if it.id not in votes:
                continue
            by_judge = votes[it.id]
            scores = {}
            for c in rubric.criterion_names:
                scored = [v[c] for v in by_judge.values() if v.get(c) is not None]
                scores[c] = sum(scored) / len(scored) if scored else None
            if rubric.formula is not None:
                scores[rubric.formula.name] = rubric.formula.evaluate(scores)
            unscored = [c for c in scores if scores[c] is None]
            vote_rows = [
                {"judge": j, "criterion": c, "score": v.get(c)}
                if v.get(c) is not None
                else {"judge": j, "criterion": c, "error": "scripted failure"}
                for j, v in by_judge.items()
                for c in rubric.criterion_names
            ]
            records[it.id] = VerdictRecord(
                id=it.id,
                status="unscored" if unscored else "scored",
                rubric=rubric.name,
                jury="scripted",
                provenance="p0",
                scores=scores,
                reasons=[f"{c}: below quorum" for c in unscored],
                votes=vote_rows,
            )
        return Judged(records)

    return judge


class RuleBackend:
    """Answers every request with ``rule(criterion, scale, prompt)`` per criterion of its
    schema: the real parsing and aggregation run on its text."""

    def __init__(self, name, rule):
        self.name, self.rule, self.prompts = name, rule, []

    def generate(self, requests, cancelled=None):
        out = []
        for r in requests:
            prompt = r.messages[-1]["content"]
            self.prompts.append(prompt)
            answer = {c: self.rule(c, spec, prompt) for c, spec in r.schema["properties"].items()}
            out.append(Generation(text=json.dumps(answer), finish_reason="stop"))
        return out

    def close(self):
        pass


def top_of(c, spec, prompt):
    return spec["enum"][-1] if spec["type"] != "string" else spec["enum"][0]


def bottom_of(c, spec, prompt):
    return spec["enum"][0] if spec["type"] != "string" else spec["enum"][-1]


def rule_jury(*rules):
    """A two-judge (or more) jury whose judges answer by ``rules``; mean, quorum 1."""
    judges = [{"name": f"j{i}", "model": "org/m"} for i in range(len(rules))]
    spec = JurySpec.model_validate(
        {"name": "rules", "judges": judges, "aggregation": {"method": "mean", "quorum": 1}}
    )
    return Jury(spec, {f"j{i}": RuleBackend(f"j{i}", rule) for i, rule in enumerate(rules)})


def option_named_in_response(c, spec, prompt):
    """mcq-extract: the option whose number follows 'pick' in the response, else 0."""
    m = re.search(r"Response:\n.*?pick #(\d+)", prompt, re.DOTALL)
    return int(m.group(1)) if m else 0


def public_microvqa(response):
    """microvqa/eval/eval.py: first match, one digit, 0-based; -1 when nothing matches."""
    m = re.search(r"answer is \*?\*?\(?([0-9])\)?\*?\*?", response)
    return int(m.group(1)) - 1 if m else -1


def public_mir(response):
    """MIR's suggested rule: the first capital letter after 'Option' (case-sensitive)."""
    m = re.search(r"Option\s*\(?([A-Z])", response)
    return ord(m.group(1)) - ord("A") if m else -1
