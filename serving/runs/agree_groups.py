"""A jury's group rewards against human rankings: what ``jurybox agree-groups`` calls.

`group_agreement_with_humans` reads the two files and returns the report
(`jurybox.calibration.reports.group_agreement`, whose docstring says what is measured).
"""

from __future__ import annotations

from pathlib import Path

from jurybox.calibration.reports.group_agreement import GroupAgreement, agreement_of
from jurybox.serving.options import argument, command_line, option


@command_line(
    human=argument(
        help="Human labels of the groups (JSONL, one object a line with the group's id): "
        '"ranking" (the completions\' positions, best first), "ranks" (each '
        "completion's rank, 1 the best, equal ranks tied, null unranked), or one "
        'preference a line: "a", "b" (positions) and "winner" (a, b or tie).',
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
    judged=argument(
        help="The jury's group results (JSONL, one group a line: what POST /v1/groups answers "
        "per group, or at least its id and rewards, null when unscored).",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
    confidence=option(help="Interval level.", min=0.5, max=0.999),
)
def group_agreement_with_humans(
    human: Path, judged: Path, *, confidence: float = 0.95
) -> GroupAgreement:
    """How well the jury's group rewards rank each group as humans did.

    Per group, Kendall's tau-b between the rewards and the human ranking, and the share of
    human pairwise preferences the rewards order the same way, each with an interval over
    groups (`jurybox.calibration.reports.group_agreement`).

    Args:
        human: Human labels of the groups (JSONL: per group id a ``ranking``, ``ranks``, or
            one preference a line, ``a``, ``b`` and ``winner``).
        judged: The jury's group results (JSONL, one group a line, as ``POST /v1/groups``
            answers them: at least ``id`` and ``rewards``).
        confidence: Interval level.

    Returns:
        The report (its ``words``, ``to_dict``, and the groups each file alone holds).

    Raises:
        InputDataError: A file or line that cannot be read, naming it; no group in both files.
    """
    return agreement_of(Path(human), Path(judged), confidence)
