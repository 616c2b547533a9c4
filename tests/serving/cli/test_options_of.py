"""Options written once: a library class's fields carry their command-line options, and
`options_of` makes a command of them (as `jurybox judge` is made of `RunPlan`)."""

import dataclasses
from typing import Annotated

import typer
from typer.testing import CliRunner

from jurybox.serving.cli import app
from jurybox.serving.cli.console import options_of
from jurybox.serving.runs.plan import RunPlan, argument, option

runner = CliRunner()


@dataclasses.dataclass
class Sketch:
    name: str = dataclasses.field(metadata=option("--name", "-n", help="The name."))
    path: str | None = dataclasses.field(default=None, metadata=argument(help="A path."))
    size: int = dataclasses.field(default=3, metadata=option(help="The size.", min=1))
    cache: bool = dataclasses.field(
        default=True, metadata=option("--no-cache", negated=True, help="No cache.")
    )
    hidden: int = 0  # no option: not on the command line


def test_a_command_made_of_a_class_gets_its_fields_as_one_dict():
    got = {}

    @options_of(Sketch, place={"loud": "cache"})
    def command(options, loud: Annotated[bool, typer.Option("--loud")] = False) -> None:
        """Sketch it."""
        got.update(options, loud=loud)
        Sketch(**options)  # the values are the class's own

    cli = typer.Typer()
    cli.command()(command)
    cli.command("other")(lambda: None)
    r = runner.invoke(cli, ["command", "p.txt", "-n", "x", "--no-cache", "--loud"])
    assert r.exit_code == 0, r.output
    assert got == {"name": "x", "path": "p.txt", "size": 3, "cache": False, "loud": True}
    r = runner.invoke(cli, ["command", "--name", "y", "--size", "0"])
    assert r.exit_code == 2  # min=1 is the command line's check
    help_text = runner.invoke(cli, ["command", "--help"]).output
    assert "Sketch it." in help_text and "The size." in help_text
    # the command's own option sits where `place` put it: before --no-cache
    assert help_text.index("--size") < help_text.index("--loud") < help_text.index("--no-cache")
    assert "hidden" not in help_text


def test_every_option_of_a_run_plan_is_an_option_of_jurybox_judge():
    help_text = runner.invoke(app, ["judge", "--help"], terminal_width=200).output
    for f in dataclasses.fields(RunPlan):
        if not f.init:
            continue
        cli = f.metadata["cli"]
        flags = cli.get("flags") or (f"--{f.name.replace('_', '-')}",)
        assert cli.get("argument") or all(flag in help_text for flag in flags), f.name
        assert " ".join(cli["help"].split()[:4]) in " ".join(help_text.split()), f.name


def test_a_command_made_of_a_function_gets_its_marked_parameters():
    from jurybox.serving.options import command_line

    @command_line(path=argument(help="A path."), size=option("--size", "-s", help="The size."))
    def sketch(path: str, *, size: int = 3, hidden: int = 0) -> None:
        """Not the command's: the library's."""

    got = {}

    @options_of(sketch)
    def command(options, loud: Annotated[bool, typer.Option("--loud")] = False) -> None:
        """Sketch it."""
        got.update(options, loud=loud)
        sketch(**options)

    cli = typer.Typer()
    cli.command()(command)
    cli.command("other")(lambda: None)
    r = runner.invoke(cli, ["command", "p.txt", "-s", "5"])
    assert r.exit_code == 0, r.output
    assert got == {"path": "p.txt", "size": 5, "loud": False}
    assert runner.invoke(cli, ["command"]).exit_code == 2  # the path has no default: required
    help_text = runner.invoke(cli, ["command", "--help"]).output
    assert "The size." in help_text and "[default: 3]" in help_text
    assert "hidden" not in help_text and help_text.index("--size") < help_text.index("--loud")


def test_options_several_commands_share_are_written_once():
    """--rubric and the verdicts of agree, calibrate and audit: serving/options.py's, one text."""
    from jurybox.serving.options import JUDGED, RUBRIC

    for command in ("agree", "calibrate", "audit"):
        text = " ".join(runner.invoke(app, [command, "--help"], terminal_width=200).output.split())
        for shared in (RUBRIC, JUDGED):
            assert " ".join(shared["cli"]["help"].split()[:8]) in text, command


def test_a_command_of_several_functions_takes_each_option_once():
    """calibrate's way: the options of several functions, a shared one from the first that has
    it; ``given_to`` hands each function its own values."""
    from jurybox.serving.cli.console import given_to
    from jurybox.serving.options import command_line

    shared = option("--seed", help="The seed.")

    @command_line(seed=shared, size=option(help="The size."))
    def first(*, seed: int = 0, size: int = 3) -> None:
        """One fit."""

    @command_line(alpha=option(help="The alpha."), seed=shared)
    def second(*, alpha: float = 0.1, seed: int = 0) -> None:
        """Another fit."""

    got = {}

    @options_of(first, second)
    def command(options) -> None:
        """Fit one."""
        got.update(first=given_to(first, options), second=given_to(second, options))

    cli = typer.Typer()
    cli.command()(command)
    cli.command("other")(lambda: None)
    r = runner.invoke(cli, ["command", "--seed", "7", "--alpha", "0.2"])
    assert r.exit_code == 0, r.output
    assert got == {"first": {"seed": 7, "size": 3}, "second": {"alpha": 0.2, "seed": 7}}
    help_text = runner.invoke(cli, ["command", "--help"]).output
    assert help_text.count("The seed.") == 1
    assert help_text.index("--seed") < help_text.index("--size") < help_text.index("--alpha")


def test_calibrate_s_options_are_its_fits_parameters():
    """Every option of calibrate but its own (--out, --json, --cascade, --conformal) is a
    parameter of fit_map, fit_cascade_jury, fit_cascade_jury_by_group or fit_conformal_map."""
    import inspect

    from jurybox.serving.cli.calibration import calibrate
    from jurybox.serving.runs import calibrate as fits

    marked = set()
    for fit in (
        fits.fit_map,
        fits.fit_cascade_jury,
        fits.fit_cascade_jury_by_group,
        fits.fit_conformal_map,
    ):
        marked |= set(fit.__command_line__) & set(inspect.signature(fit).parameters)
    own = {"out", "json_out", "cascade", "conformal"}
    assert set(inspect.signature(calibrate).parameters) == marked | own


def test_leaderboard_s_options_are_board_of_s_parameters():
    """Every option of leaderboard but --json and --html is a parameter of board_of."""
    import inspect

    from jurybox.serving.cli.leaderboard import leaderboard
    from jurybox.serving.runs.board import board_of

    assert set(board_of.__command_line__) == set(inspect.signature(board_of).parameters)
    assert set(inspect.signature(leaderboard).parameters) == set(board_of.__command_line__) | {
        "json_out",
        "html",
    }


def test_a_command_made_of_a_model_takes_a_nested_model_s_options_in_its_place():
    """A pydantic model marked with `command_line` (as ServiceConfig is): a `nested` field's
    model gives its options where the field stands, and its values come as one dict under the
    field's name; `place` moves an option of one source among another's."""
    from pydantic import BaseModel, Field

    from jurybox.serving.cli.console import given_to
    from jurybox.serving.options import command_line, nested

    @command_line(size=option(help="The size.", min=1), depth=option(help="The depth."))
    class Inner(BaseModel):
        depth: int = 2
        size: int = 3
        hidden: int = 0

    @command_line(
        name=option("--name", "-n", help="The name."),
        inner=nested(),
        tags=option("--tag", help="A tag (repeatable)."),
    )
    class Outer(BaseModel):
        name: str
        tags: list[str] = Field(default_factory=list)
        inner: Inner = Field(default_factory=Inner)

    @command_line(port=option(help="The port."))
    def run(outer: Outer, *, port: int = 80) -> None:
        """Run it."""

    got = {}

    @options_of(Outer, run, place={"port": "size"})
    def command(options) -> None:
        """Run an outer."""
        got.update(options)
        Outer(**given_to(Outer, options))  # the values are the model's own

    cli = typer.Typer()
    cli.command()(command)
    cli.command("other")(lambda: None)
    r = runner.invoke(cli, ["command", "-n", "x", "--size", "5", "--tag", "a", "--tag", "b"])
    assert r.exit_code == 0, r.output
    assert got == {"name": "x", "inner": {"size": 5, "depth": 2}, "tags": ["a", "b"], "port": 80}
    assert runner.invoke(cli, ["command", "-n", "x", "--size", "0"]).exit_code == 2
    assert runner.invoke(cli, ["command"]).exit_code == 2  # name has no default: required
    help_text = runner.invoke(cli, ["command", "--help"], terminal_width=200).output
    order = [help_text.index(flag) for flag in ("--name", "--port", "--size", "--depth", "--tag")]
    assert order == sorted(order), help_text
    assert "hidden" not in help_text and "[default: 2]" in help_text


def test_serve_s_options_are_its_service_config_s_and_serve_jury_s():
    """Every option of serve but --no-cache and --print-config is a field of ServiceConfig or
    of its Limits, or a parameter of serve_jury, and sets it."""
    import inspect

    import yaml

    from jurybox.serving.cli.serve import serve
    from jurybox.serving.service.config import Limits, ServiceConfig
    from jurybox.serving.service.foreground import serve_jury

    marked = {
        *(set(ServiceConfig.__command_line__) - {"limits"}),
        *Limits.__command_line__,
        *serve_jury.__command_line__,
    }
    assert set(inspect.signature(serve).parameters) == marked | {"no_cache", "print_config"}
    args = ["serve", "--jury", "tiny", "--max-items", "7", "--request-timeout", "50"]
    args += ["--cors-origin", "http://x", "--juror-checks", "--no-cache", "--print-config"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    config = ServiceConfig(**yaml.safe_load(r.output)["applications"][0]["args"])
    assert config == ServiceConfig(
        jury="tiny",
        cors_origins=["http://x"],
        juror_checks=True,
        limits=Limits(max_items=7, request_timeout_s=50.0),
    )


def test_agree_groups_s_options_are_group_agreement_with_humans_s_parameters():
    """Every option of agree-groups but --json is a parameter of group_agreement_with_humans."""
    import inspect

    from jurybox.serving.cli.groups import agree_groups
    from jurybox.serving.runs.agree_groups import group_agreement_with_humans as agreement

    assert set(agreement.__command_line__) == set(inspect.signature(agreement).parameters)
    assert set(inspect.signature(agree_groups).parameters) == set(agreement.__command_line__) | {
        "json_out"
    }


def test_exploits_options_are_audit_exploits_parameters():
    """Every option of exploits but --url, --json, --html and --quiet is a parameter of
    audit_exploits (--url gives its jury too)."""
    import inspect

    from jurybox.serving.cli.exploits import exploits
    from jurybox.serving.runs.exploits import audit_exploits

    assert set(audit_exploits.__command_line__) <= set(inspect.signature(audit_exploits).parameters)
    assert set(inspect.signature(exploits).parameters) == set(audit_exploits.__command_line__) | {
        "url",
        "json_out",
        "html",
        "quiet",
    }


def test_label_s_options_are_start_session_s_and_serve_session_s():
    """Every option of label but its files and --rubric (what judged_items reads) is a
    parameter of start_session or of serve_session."""
    import inspect

    from jurybox.serving.cli.label import label
    from jurybox.serving.labelling.foreground import serve_session
    from jurybox.serving.labelling.start import start_session

    marked = {*start_session.__command_line__, *serve_session.__command_line__}
    for function in (start_session, serve_session):
        assert set(function.__command_line__) <= set(inspect.signature(function).parameters)
    assert set(inspect.signature(label).parameters) == marked | {"paths", "rubric"}


def test_checklists_options_are_draft_file_s_and_import_file_s_parameters():
    """Every option of `checklists draft` but --show-prompt is a parameter of draft_file, and
    every option of `checklists import` one of import_file."""
    import inspect

    from jurybox.serving.cli.checklists import draft_cmd, import_cmd
    from jurybox.serving.runs.checklist_draft import draft_file, import_file

    for function in (draft_file, import_file):
        assert set(function.__command_line__) == set(inspect.signature(function).parameters)
    assert set(inspect.signature(draft_cmd).parameters) == set(draft_file.__command_line__) | {
        "show_prompt"
    }
    assert set(inspect.signature(import_cmd).parameters) == set(import_file.__command_line__)


def test_cache_clear_s_options_are_clear_cache_s_parameters():
    import inspect

    from jurybox.serving.cli.catalog import cache_clear
    from jurybox.serving.runs.catalog import clear_cache

    assert set(clear_cache.__command_line__) == set(inspect.signature(clear_cache).parameters)
    assert set(inspect.signature(cache_clear).parameters) == set(clear_cache.__command_line__)


def test_models_list_s_options_are_model_states_parameters():
    import inspect

    from jurybox.serving.cli.catalog import models_list
    from jurybox.serving.runs.catalog import model_states

    assert set(model_states.__command_line__) == set(inspect.signature(model_states).parameters)
    assert set(inspect.signature(models_list).parameters) == set(model_states.__command_line__)
