"""Command-line options written once, beside the library parameter or field they set.

A library class's field carries its option as its ``metadata`` (`option`, `argument`; as
`RunPlan`'s fields do), a library function's parameters (or a pydantic model's fields, as
`ServiceConfig`'s) as `command_line` attaches them; the command is built from them by
``jurybox.serving.cli.console.options_of``. Here, outside the rooms of ``serving``, so that
``runs``, ``service`` and ``labelling`` may all use it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

#: The labelling goals (``jurybox label --goal``, ``jurybox labels plan --goal``).
Goal = Literal["agreement", "benchmark-mean", "cascade", "review"]
#: Goal benchmark-mean's confidence sequence (``--sequence``).
SequenceKind = Literal["asymptotic", "betting"]
#: Goal benchmark-mean's design (``jurybox label --design``).
DesignKind = Literal["auto", "active", "uniform"]
SEQUENCE_HELP = (
    "Goal benchmark-mean: the confidence sequence shown for the mean (valid "
    "whenever you stop). `asymptotic` (Waudby-Smith et al. 2024): about 2.5 times "
    "the labels of a fixed-sample interval, for active and uniform orders alike; "
    "valid as the labels grow (it is shown once 5 labels depart from the jury's "
    "score, before that the betting sequence), not exactly at every count. "
    "`betting`: valid in finite samples for labels on the scale, but its range "
    "grows with the active choice's weights (about 3 times the labels in a "
    "uniform order, 11 with the active choice)."
)


def option(*flags: str, **cli: Any) -> dict[str, Any]:
    """A field's command-line option, as its ``metadata``: written once, here, for both.

    ``flags`` (default: the field's name as ``--name``) and ``cli`` are what the command line
    makes of the field: ``help``, ``type`` (where the command line reads another type than the
    field holds, e.g. a path for a path or a loaded object), ``default`` (likewise),
    ``negated`` (a flag that sets the field False, e.g. ``--no-cache``), and the rest as
    Typer's ``Option`` takes them (``min``, ``show_default``, ``exists``, ...).
    ``jurybox.serving.cli.console.options_of`` builds a command's parameters from them.
    """
    return {"cli": {"flags": flags, **cli}}


def argument(**cli: Any) -> dict[str, Any]:
    """A field's command-line argument (a positional one), as its ``metadata``; see `option`."""
    return {"cli": {"argument": True, **cli}}


def nested() -> dict[str, Any]:
    """A field holding another model's options, for `command_line` (``ServiceConfig.limits``).

    That model's options are the command's, in this field's place.
    """
    return {"cli": {"nested": True}}


def command_line(**parameters: dict[str, Any]) -> Callable[[F], F]:
    """A library function (or model) whose parameters (fields) are a command's options.

    Each as ``name=option(...)``, in the order the command shows them. The function is unchanged; its signature (the model's fields) gives each option's name,
    type and default, these its flags and help. A parameter not named here is not on the
    command line.
    """

    def mark(function: F) -> F:
        function.__command_line__ = {  # type: ignore[attr-defined]
            name: meta["cli"] for name, meta in parameters.items()
        }
        return function

    return mark


#: The verdicts a command reads beside human labels (agree, calibrate, audit).
JUDGED = argument(
    type=Path,
    help="Verdicts written by `jurybox judge` (a JSONL file, or a directory of its shards), "
    "joined with the labels on id.",
    exists=True,
    show_default=False,
)
#: The rubric whose scales the labels are read on (agree, calibrate, audit).
RUBRIC = option(
    "--rubric",
    "-r",
    help="Rubric name or YAML file giving each criterion's scale. Default: the rubric named in "
    "the verdicts.",
)
#: Human labels beside the verdicts (agree, calibrate).
HUMAN = argument(
    type=Path,
    help="Human labels: JSONL or CSV with an id column, an optional rater column (several rows "
    "per id = several raters) and one column per criterion (scale value or label).",
    exists=True,
    dir_okay=False,
    show_default=False,
)
#: Which value of each vote (agree, calibrate).
VALUE = option(
    help="Judge value to use: each vote's `score` (the answer on the scale) or its logprob-"
    "`expected` score (continuous; finer-grained when judges give few distinct scores)."
)
#: Only these criteria (agree, calibrate).
CRITERIA = option(
    "--criterion",
    "-c",
    type=list[str],
    default=[],
    help="Only this criterion (repeatable). Default: every judged criterion the labels file has.",
)
#: Only the verdicts of one configuration (agree, calibrate).
PROVENANCE = option(
    help="Use only the verdicts with this provenance hash (for a file holding several "
    "rubric/jury configurations)."
)
#: The random seed of the resamples and folds (agree, calibrate).
SEED = option(help="Random seed (bootstrap resamples, CV folds).")
#: Cross-validation folds (calibrate: the map's before/after report, the conformal coverage).
FOLDS = option(help="Cross-validation folds for the before/after report.", min=2)
#: The labels' group column (calibrate --cascade's report, --conformal's thresholds).
GROUP = option(
    "--group",
    help="With --cascade: a column of HUMAN naming each item's group (a task, a "
    "scenario, a domain): report each group's agreement at the fitted "
    "threshold and warn where one is shown to fall below the target (the "
    "guarantee is over all items, not per group). With --conformal: one "
    "threshold per group of that column, so that the coverage holds within "
    "each group.",
    show_default=False,
)
#: The cascaded jury whose thresholds are fitted (calibrate --cascade, --by-group).
CASCADE_JURY = option(
    "--jury",
    "-j",
    type=str | None,
    default=None,
    help="With --cascade: the jury (name or YAML file) whose stages to fit.",
    show_default=False,
)
#: The agreement a cascade must reach (calibrate --cascade, --by-group).
TARGET_AGREEMENT = option(
    type=float | None,
    default=None,
    help="With --cascade: the agreement with the human consensus the cascade must reach "
    "(share of items within the jury's confidence.tolerance on every criterion).",
    min=0.0,
    max=1.0,
    show_default=False,
)
#: The allowed probability of missing the target (calibrate --cascade, --by-group).
RISK = option(
    help="With --cascade: the allowed probability that the cascade's true agreement is "
    "below the target.",
    min=0.0,
    max=1.0,
)
