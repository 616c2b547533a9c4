"""The judged verdicts a command reads beside human labels, loaded one way for every command.

Agree, calibrate, label and audit read them: one loading, with the same refusals, for every
command that needs it.
"""

from __future__ import annotations

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
