"""The judged verdicts a command reads beside human labels, loaded one way for every command.

Agree, calibrate, label and audit read them: one loading, with the same refusals, for every
command that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jurybox.calibration import JudgeOutput
    from jurybox.rubrics import Rubric


def load_inputs(
    judged: Path, rubric: str | None, provenance: str | None, pairwise: bool = False
) -> tuple[JudgeOutput, Rubric | None, list[str]]:
    """The verdicts, the rubric whose scales validate the labels, and warnings to show.

    Pairwise verdicts are refused unless the caller reads them (``pairwise``).

    Raises:
        InputError: The file holds no verdicts, or pairwise ones the caller does not read.
    """
    from jurybox.calibration import load_judge_output, rubric_for
    from jurybox.rubrics.errors import InputError

    output = load_judge_output(judged, provenance=provenance)
    if not output.records:
        raise InputError(f"{judged}: no verdicts")
    if not pairwise and output.pairwise:
        raise InputError(
            f"{judged}: pairwise verdicts (two answers compared); labelling "
            "them on the page is not built yet (`jurybox agree` and `calibrate` "
            "take human preference labels a/b/tie in a file)"
        )
    rubric_def, notes = rubric_for(output, rubric)
    return output, rubric_def, notes


def scaled_inputs(
    judged: Path, rubric: str | None, provenance: str | None, criteria: list[str]
) -> tuple[JudgeOutput, Rubric, list[str], dict[str, Any]]:
    """`load_inputs`, with the rubric required and its scales.

    ``criteria`` are checked against the scales.
    """
    from jurybox.calibration.data.labels import scales_from
    from jurybox.rubrics.errors import InputError

    output, rubric_def, notes = load_inputs(judged, rubric, provenance)
    if rubric_def is None:
        raise InputError("the verdicts name no rubric jurybox knows: give --rubric")
    scales = scales_from(rubric_def)
    unknown = [c for c in criteria if c not in scales]
    if unknown:
        raise InputError(
            f"--criterion {unknown[0]}: not a criterion of {rubric_def.name} ({list(scales)})",
            field="criterion",
        )
    return output, rubric_def, notes, scales


@dataclass
class JudgedItems:
    """The items of a predictions file that have a verdict, with their verdicts.

    Attributes:
        items: The judged items by id (in the file's order).
        verdicts: Each judged item's verdict record, by id.
        rubric: The rubric the verdicts were judged with.
        warnings: What the caller should warn its user of (rows that could not be read, items
            without a verdict, ...).
    """

    items: dict[str, Any]
    verdicts: dict[str, Any]
    rubric: Rubric
    warnings: list[str] = field(default_factory=list)


def judged_from(verdicts: Path) -> Path:
    """The predictions file the manifest beside ``verdicts`` says they were judged from.

    Raises:
        InputError: No manifest names it, or it is not there any more.
    """
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.results import read_manifest

    manifest = read_manifest(verdicts)
    if manifest is None or not manifest.get("predictions"):
        raise InputError(
            f"{verdicts}: no manifest names the predictions file it was judged "
            "from: give it first (jurybox label ITEMS VERDICTS)",
            field="items",
        )
    items = Path(manifest["predictions"])
    if not items.exists():
        raise InputError(
            f"{verdicts} was judged from {items} (its manifest says), which is "
            "not there any more: give the predictions file first (jurybox label "
            "ITEMS VERDICTS)",
            field="items",
        )
    return items


def judged_items(
    items_path: Path,
    verdicts_path: Path,
    rubric: str | None = None,
    warnings: list[str] | None = None,
) -> JudgedItems:
    """The items of ``items_path`` that ``verdicts_path`` holds a verdict on (``jurybox label``).

    Args:
        items_path: The predictions file that was judged.
        verdicts_path: What ``jurybox judge`` wrote for it.
        rubric: A rubric name or YAML file (default: the verdicts').
        warnings: Where warnings go as they arise (default: a new list), so that a caller has
            those said before an error too.

    Raises:
        InputError: No rubric, no item with a verdict, or an item that is not the text that
            was judged.
    """
    from jurybox.rubrics import input_hash
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.predictions import read_predictions

    warnings = [] if warnings is None else warnings
    output, rubric_def, notes = load_inputs(verdicts_path, rubric, None)
    if rubric_def is None:
        raise InputError("the verdicts name no rubric jurybox knows: give --rubric NAME_OR_FILE")
    warnings += notes
    read = read_predictions(items_path, rubric_def, allow_empty=True)
    if read.errors:
        first = read.errors[0]
        warnings.append(
            f"{items_path}: {len(read.errors)} row(s) could not be read and are not offered "
            f"(first: row {first.row}, {first.field}: {first.message})"
        )
    verdicts = {r.id: r for r in output.records}
    items = {}
    for item in read.items:
        record = verdicts.get(item.id)
        if record is None:
            continue
        if record.input is not None and record.input != input_hash(item):
            raise InputError(
                f"{items_path}: item {item.id!r} is not the text that was judged "
                f"({verdicts_path} holds a verdict on other text for it): label "
                "the predictions file the verdicts come from",
                field="id",
            )
        items[item.id] = item
    if not items:
        raise InputError(
            f"no item of {items_path} has a verdict in {verdicts_path}: give the "
            "predictions file and what `jurybox judge` wrote for it"
        )
    unjudged = len(read.items) - len(items)
    if unjudged:
        warnings.append(f"{unjudged} item(s) of {items_path} have no verdict and are not offered")
    return JudgedItems(items, {i: verdicts[i] for i in items}, rubric_def, warnings)
