"""A bias audit of judged verdicts as ``jurybox audit`` makes it, for any caller.

Length, self-preference and dependence of scored verdicts; position of pairwise ones. The
statistics are in `jurybox.calibration.audits`; this reads the files (verdicts, predictions,
human labels, the run's manifest) and asks them.

```python
from jurybox.serving.runs.audit import audit_verdicts

audit = audit_verdicts("out.judged.jsonl", predictions="preds.jsonl")
for finding in audit.length:
    print(finding.words())
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jurybox.serving.options import JUDGED, RUBRIC, command_line, option
from jurybox.serving.runs.inputs import load_inputs


@dataclass
class Audit:
    """What an audit found.

    Attributes:
        source: The verdicts' name (the file's, or the source the records name).
        pairwise: Whether the verdicts are pairwise (then only ``position`` is audited).
        length: Per judge and criterion, the score's (and error's) dependence on length.
        self_preference: Per judge and criterion, its excess on its own family's answers.
        dependence: Per criterion, the correlation of the judges' errors.
        position: Pairwise: per judge and criterion, P(the answer shown first is chosen).
        families: Judge -> model family (self-preference).
        notes: What the caller should warn its user of (items left out, audits skipped).
    """

    source: str
    pairwise: bool = False
    length: list[Any] = field(default_factory=list)
    self_preference: list[Any] = field(default_factory=list)
    dependence: list[Any] = field(default_factory=list)
    position: list[Any] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def length_unit(self) -> str:
        """The length audit's unit: tokens, words, or tokens and words."""
        return _unit(self.length)

    def to_dict(self) -> dict[str, Any]:
        """The findings as plain data (``jurybox audit --json``)."""
        if self.pairwise:
            return {"position": [f.to_dict() for f in self.position], "warnings": self.notes}
        return {
            "length": [f.to_dict() for f in self.length],
            "self_preference": [f.to_dict() for f in self.self_preference],
            "dependence": [d.to_dict() for d in self.dependence],
            "length_unit": self.length_unit,
            "families": self.families,
            "warnings": self.notes,
        }

    def html(self) -> str:
        """A self-contained HTML report, a plot per finding."""
        from jurybox.calibration.reports.audit_html import render_audit

        return render_audit(
            self.source,
            length=self.length,
            self_preference=self.self_preference,
            dependence=self.dependence,
            position=self.position,
            notes=self.notes,
        )


@command_line(
    judged=JUDGED,
    predictions=option(
        type=Path | None,
        help="The predictions file that was judged: its responses' lengths (in each judge's "
        "tokens where its tokenizer is on this machine, else words) for the length audit, "
        "and the column naming each answer's model for self-preference.",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
    human=option(
        type=Path | None,
        help="Human labels: the length audit then measures the judges' errors (score minus "
        "the human mean) too; the dependence audit needs them (the judges' errors "
        "against the humans).",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
    rubric=RUBRIC,
    model_column=option(
        help="The predictions' column naming the model that wrote each answer (self-preference "
        "audit; skipped when the column is absent)."
    ),
    families=option(
        "--family",
        type=list[str],
        default=[],
        help="A judge's model family, JUDGE=FAMILY (repeatable): an answer is the "
        "judge's own family's when its model's family is FAMILY's: the leading letters of the "
        "name, any case (Qwen3-8B and qwen3 are qwen; openai/o3-mini is o, not gemma's). "
        "Default: the family of the judge's model in the run's manifest.",
        show_default=False,
    ),
    resamples=option(help="Bootstrap resamples per CI.", min=1),
    seed=option(help="Random seed of the bootstrap."),
)
def audit_verdicts(
    judged: str | Path,
    *,
    predictions: str | Path | None = None,
    human: str | Path | None = None,
    rubric: str | None = None,
    model_column: str = "model",
    families: Mapping[str, str] | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> Audit:
    """Audit the judges of ``judged`` for bias, with bootstrap CIs over items.

    Args:
        judged: Verdicts written by ``jurybox judge`` (a JSONL file or a directory of shards).
        predictions: The predictions file that was judged: the responses' lengths (length
            audit) and each answer's model (self-preference).
        human: Human labels: the length audit then measures the judges' errors too; the
            dependence audit needs them.
        rubric: A rubric name or YAML file (default: the verdicts').
        model_column: The predictions' column naming each answer's model.
        families: Judge -> model family (default: from the judge's model in the manifest).
        resamples: Bootstrap resamples per CI.
        seed: The bootstrap's random seed.

    Returns:
        The findings; for pairwise verdicts, the position audit only.

    Raises:
        InputError: Nothing to audit, or the verdicts, predictions or labels cannot be used.
    """
    import numpy as np

    from jurybox.calibration.audits.audit import dependence, family_of, length_bias, self_preference
    from jurybox.calibration.data.joined import join
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.predictions import read_predictions

    judged = Path(judged)
    output, rubric_def, notes = load_inputs(judged, rubric, None, pairwise=True)
    if "winner" in output.records[0].model_fields_set:
        return _audit_pairwise(output, predictions is not None or human is not None)
    if predictions is None and len(output.judges) < 2:
        raise InputError(
            "nothing to audit: give --predictions (length) or a jury of at "
            "least two judges (dependence" + (", which --human is for)" if human else ")")
        )
    ids = output.ids
    lengths = None
    token_lengths: dict[str, Any] = {}
    writers: dict[str, str] = {}
    if predictions is not None:
        if rubric_def is None:
            raise InputError("the verdicts name no rubric jurybox knows: give --rubric")
        read = read_predictions(predictions, rubric_def, allow_empty=True)
        texts = {item.id: str(item.fields().get("response") or "") for item in read.items}
        words = {i: len(t.split()) for i, t in texts.items()}
        writers = {
            item.id: str(item.extra[model_column])
            for item in read.items
            if item.extra.get(model_column) is not None
        }
        missing = sum(i not in words for i in ids)
        if missing:
            notes.append(
                f"{missing} judged item(s) are not in {predictions}: left out of the length audit"
            )
        lengths = np.array([words.get(i, np.nan) for i in ids], dtype=float)
        token_lengths, units = _token_lengths(judged, output.judges, ids, texts)
        for judge, unit in units.items():
            if unit != "tokens":
                notes.append(f"{judge}: lengths in words ({unit})")
    found = Audit(judged.name, families=_families(judged, output.judges, dict(families or {})))
    humans = _humans(join(human, output, scales=rubric_def), ids, notes) if human else {}
    if writers and len(output.judges) >= 2:
        unknown = [j for j in output.judges if j not in found.families]
        if unknown:
            notes.append(
                f"no model family known for {unknown} (no manifest beside "
                f"{judged}): give --family JUDGE=FAMILY; self-preference skipped "
                "for them"
            )
    elif predictions is not None and not writers:
        notes.append(
            f"{predictions} has no column {model_column!r}: self-preference not "
            "audited (--model-column names the column of each answer's model)"
        )
    for criterion in output.criteria:
        scores = output.judge_values(criterion)
        labels = humans.get(criterion)
        reference = None if labels is None else _mean_label(labels)
        if lengths is not None:
            for judge, values in scores.items():
                own = token_lengths.get(judge)
                found.length.append(
                    length_bias(
                        judge,
                        criterion,
                        values,
                        lengths if own is None else own,
                        reference,
                        unit="words" if own is None else "tokens",
                        n_resamples=resamples,
                        seed=seed,
                    )
                )
        if writers and len(scores) >= 2:
            authored = {
                j: np.array([i in writers and family_of(writers[i]) == family_of(f) for i in ids])
                for j, f in found.families.items()
            }
            for judge in scores:
                if judge in found.families:
                    found.self_preference.append(
                        self_preference(
                            judge,
                            criterion,
                            scores,
                            authored,
                            found.families[judge],
                            n_resamples=resamples,
                            seed=seed,
                        )
                    )
        if len(scores) >= 2:
            found.dependence.append(
                dependence(criterion, scores, labels, n_resamples=resamples, seed=seed)
            )
    found.notes = notes
    return found


def _humans(joined: Any, ids: list[str], notes: list[str]) -> dict[str, Any]:
    """Criterion -> the human labels as raters x items (NaN where a rater gave none)."""
    import numpy as np

    notes += joined.summary.warnings()
    position = {i: k for k, i in enumerate(ids)}
    humans: dict[str, Any] = {}
    for criterion, data in joined.criteria.items():
        matrix = np.full((len(data.human_raters), len(ids)), np.nan)
        matrix[:, [position[item] for item in data.ids]] = data.human
        humans[criterion] = matrix  # raters x items
    return humans


def _mean_label(labels: Any) -> Any:
    """Each item's mean human label (raters x items in; NaN where no rater labelled it)."""
    import warnings

    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an unlabelled item's mean: NaN
        return np.nanmean(labels, axis=0)


def _unit(findings: list[Any]) -> str:
    units = {f.unit for f in findings}
    return units.pop() if len(units) == 1 else "tokens and words"


def _token_lengths(
    judged: Path, judges: list[str], ids: list[str], texts: dict[str, str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Each judge's lengths of the responses, in its own tokenizer's tokens.

    Returns:
        Judge -> the responses' lengths in its own tokenizer's tokens (per id, NaN where the id
            has no response), for the judges whose tokenizer is on this machine (their models from
            the run's manifest); and judge -> "tokens" or why words are used.
    """
    import numpy as np

    from jurybox.judges.weights import local_tokenizer
    from jurybox.serving.runs.results import read_manifest

    specs = {
        s.get("name"): s
        for s in ((read_manifest(judged) or {}).get("jury") or {}).get("judges") or []
        if isinstance(s, dict)
    }
    lengths: dict[str, Any] = {}
    units: dict[str, str] = {}
    known = [i for i in ids if i in texts]
    for judge in judges:
        spec = specs.get(judge)
        if spec is None or not spec.get("model"):
            units[judge] = "its model is unknown: no manifest beside the verdicts"
            continue
        tokenizer, how = local_tokenizer(
            str(spec["model"]), spec.get("revision"), str(spec.get("backend", "transformers"))
        )
        if tokenizer is None:
            units[judge] = how
            continue
        counts = dict(
            zip(
                known,
                (
                    len(x)
                    for x in tokenizer([texts[i] for i in known], add_special_tokens=False)[
                        "input_ids"
                    ]
                ),
            )
        )
        lengths[judge] = np.array([counts.get(i, np.nan) for i in ids], dtype=float)
        units[judge] = "tokens"
    return lengths, units


def _families(judged: Path, judges: list[str], given: dict[str, str]) -> dict[str, str]:
    """Judge -> model family: --family, else from the judge's model in the run's manifest."""
    from jurybox.calibration.audits.audit import family_of
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.results import read_manifest

    unknown = sorted(set(given) - set(judges))
    if unknown:
        raise InputError(
            f"--family names judges the verdicts do not have: {unknown} (judges: {judges})",
            field="family",
        )
    out = dict(given)
    manifest = read_manifest(judged) or {}
    for spec in (manifest.get("jury") or {}).get("judges") or []:
        if isinstance(spec, dict) and spec.get("name") in judges and spec["name"] not in out:
            out[spec["name"]] = family_of(str(spec.get("model", "")))
    return out


def _audit_pairwise(output: Any, ignored: bool) -> Audit:
    """The position audit of pairwise verdicts (length and dependence are not built for them)."""
    from jurybox.calibration.audits.preference import position_bias
    from jurybox.rubrics.pairwise import side

    chose: dict[tuple[str, str], list[int]] = {}
    pair_of: dict[tuple[str, str], list[str]] = {}
    flipped: dict[tuple[str, str], list[bool]] = {}
    for rec in output.records:
        sides: dict[tuple[str, str], dict[str, int]] = {}
        for v in rec.votes:
            if v.score is None or v.order is None:
                continue
            key = (v.judge, v.criterion)
            shown_first = side(v.score if v.order == "ab" else 1.0 - v.score)
            chose.setdefault(key, []).append(-1 if shown_first == 0 else int(shown_first > 0))
            pair_of.setdefault(key, []).append(rec.id)
            sides.setdefault(key, {})[v.order] = side(v.score)
        for key, by_order in sides.items():
            if len(by_order) == 2:
                flipped.setdefault(key, []).append(by_order["ab"] != by_order["ba"])
    findings = [
        position_bias(
            judge,
            criterion,
            votes,
            flipped.get((judge, criterion), []),
            pair_of[(judge, criterion)],
        )
        for (judge, criterion), votes in chose.items()
    ]
    notes = (
        [
            "pairwise verdicts: only the position audit is built for them (--predictions "
            "and --human are not used)"
        ]
        if ignored
        else []
    )
    return Audit(output.source, pairwise=True, position=findings, notes=notes)
