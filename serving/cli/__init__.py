"""The ``jurybox`` command line. Commands parse options and print; the work is in the library.

One module per command group: ``judge`` (judge, --estimate), ``catalog`` (rubrics, juries,
models, cache), ``calibration`` (agree, calibrate), ``audit``, ``compare``, ``leaderboard``,
``label``, ``serve``, ``bench``; ``console`` holds what they share (printing, errors, option
parsing).
"""

from __future__ import annotations

import os

import typer

from jurybox.serving.cli import (
    audit,
    bench,
    calibration,
    catalog,
    compare,
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
app.command()(judge.judge)
app.command("rubrics")(catalog.rubrics_cmd)
app.command("juries")(catalog.juries_cmd)
app.command()(calibration.agree)
app.command()(calibration.calibrate)
app.command()(audit.audit)
app.command()(compare.compare)
app.command()(leaderboard.leaderboard)
app.command()(label.label)
app.command()(serve.serve)
app.command()(bench.bench)
app.add_typer(catalog.models_app, name="models")
app.add_typer(catalog.cache_app, name="cache")
app.add_typer(label.labels_app, name="labels")


def main() -> None:  # pragma: no cover - console entry
    """The ``jurybox`` console script."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()
