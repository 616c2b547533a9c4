"""The leaderboard of judged systems as ``jurybox leaderboard`` builds it, for any caller.

The systems a user has judged: their judged files (or ``jurybox bench --out`` runs) are read,
each system named (by ``names``, else by the predictions file its manifest names),
configurations compared (systems judged with different rubrics or juries are refused unless
``allow_mixed``), human labels and answer lengths gathered, and the board computed
(`jurybox.calibration.reports.leaderboard.leaderboard`).

```python
from jurybox.serving.runs.board import board_of

board = board_of(["a.judged.jsonl", "b.judged.jsonl"], names=["a", "b"])
board.to_dict()["ranked_on"]     # the items the ranks stand on, per criterion
```
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jurybox.calibration.reports.leaderboard import Leaderboard
from jurybox.rubrics.errors import InputError
from jurybox.serving.options import argument, command_line, option


@command_line(
    judged=argument(
        type=list[Path],
        help="Judged files (or directories of shards) of `jurybox judge`, one per system, all "
        "judged on the same items with the same rubric and jury; or `jurybox bench --out` "
        "directories, one per system, of one benchmark (its per-item results).",
        exists=True,
        show_default=False,
    ),
    names=option(
        "--name",
        type=list[str],
        default=[],
        help="Each system's name, in the order of JUDGED (repeat). Default: the "
        "name of the predictions file its manifest names, else of the judged "
        "file.",
        show_default=False,
    ),
    criterion=option(
        "--criterion",
        "-c",
        help="The score to rank on (a criterion or the formula). "
        "Default: the rubric's formula, else its last criterion.",
        show_default=False,
    ),
    human=option(
        "--human",
        type=list[str],
        default=[],
        help="Human labels (JSONL/CSV: id, rater, one column per criterion, as "
        "`jurybox label` writes them) on some items of some systems: a file "
        "whose rows name their system in a `system` column, or SYSTEM=FILE "
        "for one system's labels (repeat). Adds each labelled system's "
        "PPI++ mean (as `jurybox agree --ppi`) and the pairs' corrected "
        "differences where both systems have labels on the same items.",
        show_default=False,
    ),
    length_control=option(
        "--length-control",
        help="Add each system's length-controlled mean (the correction of "
        "`jurybox judge --length-control`, lengths in words, at the "
        "reference answers' median length) and whether the order "
        "changes.",
    ),
    predictions=option(
        "--predictions",
        type=list[Path],
        default=[],
        help="With --length-control: the predictions file each system was "
        "judged from (repeat, in the order of JUDGED). Default: the one "
        "its manifest names.",
        exists=True,
        dir_okay=False,
        show_default=False,
    ),
    allow_mixed=option(
        "--allow-mixed",
        help="Compare systems judged with different rubrics or juries (by "
        "default refused: their scores are not on one footing).",
    ),
    exclude=option(
        "--exclude",
        type=list[str],
        default=[],
        help="Leave this system out of the common ground (repeat): listed apart with its "
        "own mean, not ranked, so one system with few scored items does not shrink "
        "every system's ranking to them.",
        show_default=False,
    ),
    min_items=option(
        "--min-items",
        help="Per criterion, leave out of the common ground (as --exclude) every system "
        "with fewer scored items than this.",
        min=0,
    ),
    confidence=option(help="Confidence of every interval.", min=0.5, max=0.999),
    resamples=option(help="Bootstrap resamples of the rank intervals.", min=100),
    seed=option(help="Random seed of the bootstrap."),
)
def board_of(
    judged: Sequence[Path | str],
    *,
    names: Sequence[str] = (),
    criterion: str | None = None,
    human: Sequence[str] = (),
    length_control: bool = False,
    predictions: Sequence[Path | str] = (),
    allow_mixed: bool = False,
    exclude: Sequence[str] = (),
    min_items: int = 0,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Leaderboard:
    """The leaderboard of ``judged``, one judged file, shard directory or bench run per system.

    The options are ``jurybox leaderboard``'s.

    Args:
        judged: One judged file (or directory of shards) of ``jurybox judge`` per system, all
            judged on the same items with the same rubric and jury; or one ``jurybox bench
            --out`` directory per system, of one benchmark.
        names: Each system's name, in the order of ``judged``. Default: the name of the
            predictions file its manifest names, else of the judged file.
        criterion: The score to rank on (a criterion or the formula). Default: the rubric's
            formula, else its last criterion (a bench run: the pack's primary metric).
        human: Human labels on some items of some systems: files whose rows name their system
            in a ``system`` column, or ``SYSTEM=FILE`` for one system's labels. Adds each
            labelled system's PPI++ mean and the pairs' corrected differences.
        length_control: Add each system's length-controlled mean and whether the order
            changes.
        predictions: With ``length_control``: the predictions file each system was judged
            from, in the order of ``judged``. Default: the one its manifest names.
        allow_mixed: Compare systems judged with different rubrics or juries (by default
            refused: their scores are not on one footing).
        exclude: Systems to leave out of the common ground (listed apart, not ranked).
        min_items: Per criterion, leave out the systems with fewer scored items than this.
        confidence: Confidence of every interval.
        resamples: Bootstrap resamples of the rank intervals.
        seed: Random seed of the bootstrap.

    Returns:
        The leaderboard (``to_dict()`` for its data; its ``notes`` say what to tell the user).

    Raises:
        InputError: An option or file at fault (``field`` names the option where there is
            one): counts of ``names`` or ``predictions`` that do not match ``judged``, files
            without verdicts or with pairwise ones, systems not judged alike without
            ``allow_mixed``, labels naming no system, bench runs mixed with judged files.
    """
    paths = [Path(p) for p in judged]
    lengths_from = [Path(p) for p in predictions]
    if names and len(names) != len(paths):
        raise InputError(
            f"{len(names)} --name for {len(paths)} judged files: give one per "
            "file, in the same order",
            field="name",
        )
    if lengths_from and len(lengths_from) != len(paths):
        raise InputError(
            f"{len(lengths_from)} --predictions for {len(paths)} judged "
            "files: give one per file, in the same order",
            field="predictions",
        )
    if lengths_from and not length_control:
        raise InputError(
            "--predictions gives the answers' lengths: add --length-control", field="predictions"
        )
    benches = [path.is_dir() and (path / "report.json").is_file() for path in paths]
    if any(benches):
        return _bench_board(
            paths,
            benches,
            names,
            criterion,
            human,
            length_control,
            confidence,
            resamples,
            seed,
            {"exclude": exclude, "min_items": min_items},
        )
    return _judged_board(
        paths,
        names,
        criterion,
        human,
        length_control,
        lengths_from,
        allow_mixed,
        confidence,
        resamples,
        seed,
        {"exclude": exclude, "min_items": min_items},
    )


def _bench_board(
    judged: Sequence[Path],
    benches: Sequence[bool],
    name: Sequence[str],
    criterion: str | None,
    human: Sequence[str],
    length_control: bool,
    confidence: float,
    resamples: int,
    seed: int,
    ground: Mapping[str, Any],
) -> Leaderboard:
    """The leaderboard of `jurybox bench --out` directories: each pack's per-item results.

    ``ground``: the ``exclude`` and ``min_items`` of the common ground.
    """
    from jurybox.benchmarks.report import read_item_results
    from jurybox.calibration.reports.leaderboard import System
    from jurybox.calibration.reports.leaderboard import leaderboard as build
    from jurybox.rubrics.errors import InputError

    if not all(benches):
        odd = next(p for p, b in zip(judged, benches) if not b)
        raise InputError(
            f"{odd}: not a `jurybox bench --out` directory, while others are: "
            "compare benchmark runs with benchmark runs, judged files with judged "
            "files"
        )
    if human or length_control:
        raise InputError("--human and --length-control take judged files, not benchmark runs")
    results = [read_item_results(path) for path in judged]
    kinds = sorted({r.benchmark for r in results})
    if len(kinds) > 1:
        raise InputError(
            f"the runs are of different benchmarks ({', '.join(kinds)}): compare "
            "runs of one benchmark"
        )
    names = list(name) or [path.name for path in judged]
    metrics = list(dict.fromkeys(m for r in results for m in r.values))
    board = build(
        [System(n, values=r.values, source=r.source) for n, r in zip(names, results)],
        metrics,
        {},
        rank_by=criterion or results[0].primary,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        **ground,
    )
    board.notes.insert(
        0,
        f"{kinds[0]}: per-item results of `jurybox bench`, counted as the pack "
        "counts them (an unanswered item is wrong or 0; an unscored one is "
        "left out and counted)",
    )
    return board


def _judged_board(
    judged: Sequence[Path],
    name: Sequence[str],
    criterion: str | None,
    human: Sequence[str],
    length_control: bool,
    predictions: Sequence[Path],
    allow_mixed: bool,
    confidence: float,
    resamples: int,
    seed: int,
    ground: Mapping[str, Any],
) -> Leaderboard:
    """The leaderboard of judged files (module help); ``ground`` as `_bench_board`'s."""
    from jurybox.calibration import load_judge_output
    from jurybox.calibration.data.labels import label_rows, scales_from
    from jurybox.calibration.data.verdicts import rubric_for
    from jurybox.calibration.reports.leaderboard import System
    from jurybox.calibration.reports.leaderboard import leaderboard as build
    from jurybox.rubrics.errors import InputError
    from jurybox.serving.runs.lengths import answer_lengths
    from jurybox.serving.runs.results import read_manifest

    notes: list[str] = []
    outputs = []
    for path in judged:
        output = load_judge_output(path)
        if not output.records:
            raise InputError(f"{path}: no verdicts")
        if output.pairwise:
            raise InputError(
                f"{path}: pairwise verdicts (two answers compared); rank "
                "systems from those with `jurybox compare`"
            )
        outputs.append(output)
    manifests = [read_manifest(path) for path in judged]
    names = list(name) or _default_names(judged, manifests)
    mixed = _mixed(names, outputs, manifests)
    if mixed and not allow_mixed:
        raise InputError(
            "the systems were not judged alike, so their scores are not on "
            f"one footing: {mixed}; judge them with one rubric and jury, or "
            "pass --allow-mixed"
        )
    if mixed:
        notes.append(f"compared although not judged alike: {mixed}")
    rubric_def, rubric_notes = rubric_for(outputs[0])
    notes.extend(rubric_notes)
    scales = scales_from(rubric_def) if rubric_def is not None else {}
    criteria = _criteria(outputs, rubric_def)
    labels = _labels(human, names, label_rows) if human else {}
    lengths: dict[str, dict[str, float]] = {}
    centre = None
    if length_control:
        if rubric_def is None:
            raise InputError(
                "the verdicts name no rubric jurybox knows, so their "
                "predictions cannot be read for --length-control"
            )
        for k, system in enumerate(names):
            source = (
                predictions[k] if predictions else _manifest_predictions(judged[k], manifests[k])
            )
            got, reference = answer_lengths(source, rubric_def)
            lengths[system] = got
            centre = reference if centre is None else centre
    board = build(
        [
            System(n, o, labels.get(n), lengths.get(n) if length_control else None)
            for n, o in zip(names, outputs)
        ],
        criteria,
        scales,
        rank_by=criterion,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        centre_length=centre,
        **ground,
    )
    board.notes[:0] = notes
    return board


def _default_names(
    judged: Sequence[Path], manifests: Sequence[Mapping[str, Any] | None]
) -> list[str]:
    from jurybox.rubrics.errors import InputError

    names = []
    for path, manifest in zip(judged, manifests):
        source = (manifest or {}).get("predictions")
        names.append(Path(source).stem if isinstance(source, str) else path.stem)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(
            f"two systems would both be called {twice[0]!r} (the name of their "
            "predictions file): name each with --name, in the order of JUDGED",
            field="name",
        )
    return names


def _mixed(
    names: Sequence[str], outputs: Sequence[Any], manifests: Sequence[Mapping[str, Any] | None]
) -> str:
    """What differs between the systems' configurations, in words ("" when nothing does)."""
    differences = []
    first = outputs[0].provenance
    for k in range(1, len(outputs)):
        if outputs[k].provenance == first:
            continue
        what = []
        a, b = manifests[0] or {}, manifests[k] or {}
        for key, words in (
            ("rubric", "the rubric"),
            ("jury", "the jury"),
            ("calibration", "the calibration map"),
        ):
            if a.get(key) != b.get(key):
                what.append(words + _named(a.get(key), b.get(key)))
        differences.append(
            f"{names[k]} differs from {names[0]} in "
            + (
                " and ".join(what)
                if what
                else f"its configuration (provenance {outputs[k].provenance} vs {first})"
            )
        )
    return "; ".join(differences)


def _named(a: Any, b: Any) -> str:
    def name(x: Any) -> str:
        return str(x.get("name")) if isinstance(x, Mapping) and x.get("name") else "?"

    return f" ({name(a)} vs {name(b)})" if name(a) != name(b) else ""


def _criteria(outputs: Sequence[Any], rubric: Any) -> list[str]:
    """The scores to show: the rubric's criteria and its formula, as the verdicts hold them."""
    seen = list(dict.fromkeys(k for o in outputs for r in o.records for k in r.scores))
    if rubric is None:
        return seen
    names = [c.name for c in rubric.criteria]
    if rubric.formula is not None:
        names.append(rubric.formula.name)
    return [n for n in names if n in seen] or seen


def _labels(
    options: Sequence[str], names: Sequence[str], read: Any
) -> dict[str, list[dict[str, Any]]]:
    """System name -> its label lines, from ``--human`` options (module help)."""
    from jurybox.rubrics.errors import InputError

    out: dict[str, list[dict[str, Any]]] = {}
    for given in options:
        system, _, rest = given.partition("=")
        if rest and system in names:
            out.setdefault(system, []).extend(read(Path(rest)))
            continue
        path = Path(given)
        if not path.is_file():
            raise InputError(
                f"--human {given}: no such file (SYSTEM=FILE takes one of {list(names)})",
                field="human",
            )
        for row in read(path):
            system = row.get("system")
            if system is None:
                raise InputError(
                    f"--human {given}: item {row.get('id')!r} has no `system` "
                    "column naming the system it labels; add one, or give the "
                    "file as SYSTEM=FILE",
                    field="system",
                )
            if str(system) not in names:
                raise InputError(
                    f"--human {given}: item {row.get('id')!r} names system "
                    f"{system!r}, not one of {list(names)}",
                    field="system",
                )
            out.setdefault(str(system), []).append(row)
    return out


def _manifest_predictions(judged: Path, manifest: Mapping[str, Any] | None) -> Path:
    from jurybox.rubrics.errors import InputError

    source = (manifest or {}).get("predictions")
    if not isinstance(source, str) or not Path(source).is_file():
        raise InputError(
            f"{judged}: --length-control needs the answers, and its manifest names "
            f"no predictions file that exists here ({source!r}): give "
            "--predictions",
            field="predictions",
        )
    return Path(source)
