"""The ``jurybox`` command line. Commands parse options and print; the work is in the library.

One module per command group: ``judge`` (judge, --estimate), ``catalog`` (rubrics, juries,
models, cache), ``calibration`` (agree, calibrate), ``groups`` (agree-groups), ``audit``, ``exploits``,
``compare``, ``leaderboard``, ``label``, ``serve``, ``bench``, ``check`` (check-reward), ``checklists`` (draft, import);
``console`` holds what they
share (printing, errors, option parsing).
"""

from __future__ import annotations

import os

import typer

from jurybox.serving.cli import (
    audit,
    bench,
    calibration,
    catalog,
    check,
    checklists,
    compare,
    exploits,
    groups,
    judge,
    label,
    leaderboard,
    serve,
)

app = typer.Typer(
    name="jurybox",
    help="Score long-form answers with a jury of open LLM judges against explicit rubrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help wraps at any width; rich panels cut option names at 80 columns.
    rich_markup_mode=None,
)
# Each command's line in `jurybox --help` (whole, where the first line of its help would be cut).
app.command(short_help="Judge a prediction file: one verdict per item.")(judge.judge)
app.command("rubrics")(catalog.rubrics_cmd)
app.command("juries", short_help="List the shipped juries, or show one.")(catalog.juries_cmd)
app.command(short_help="Agreement between judges and human labels.")(calibration.agree)
app.command("agree-groups", short_help="Group rewards against human rankings of the groups.")(
    groups.agree_groups
)
app.command(short_help="Fit a calibration map from human labels.")(calibration.calibrate)
app.command(short_help="Audit the judges for bias, in plain words.")(audit.audit)
app.command(short_help="What a jury rewards known exploits; a gate.")(exploits.exploits)
app.command()(compare.compare)
app.command(short_help="Rank systems judged on the same items.")(leaderboard.leaderboard)
app.command(short_help="Label judged items in a web page.")(label.label)
app.command(short_help="Serve the jury over HTTP (Ray Serve).")(serve.serve)
app.command(short_help="Score predictions on a benchmark pack.")(bench.bench)
app.command("check-reward", short_help="Probe a trainer's reward URL once, before training.")(
    check.check_reward
)
app.add_typer(
    catalog.models_app, name="models", short_help="The judge models: list and fetch them."
)
app.add_typer(catalog.cache_app, name="cache", short_help="The verdict cache: show or clear it.")
app.add_typer(label.labels_app, name="labels")
app.add_typer(
    checklists.checklists_app,
    name="checklists",
    short_help="Items' own checklists: draft them with a judge, or import HealthBench's.",
)


def main() -> None:  # pragma: no cover - console entry
    """The ``jurybox`` console script."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()
