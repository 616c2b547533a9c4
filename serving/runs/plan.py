"""A judging run as ``jurybox judge`` plans it, for any caller.

What to judge (a prediction file, or two systems' files as pairs), with which jury (loaded here,
or a running service's), into which output, on which engine, with which maps; the rules between
those choices checked once, here, so that a Python caller gets the same errors as the command
line.

```python
from jurybox.serving.runs.plan import RunPlan

plan = RunPlan(rubric="mirage-mg", predictions="examples/mirage_mg.jsonl", jury="tiny")
report = plan.run()          # or plan.estimate(): what it would take, judging nothing
report.summary, plan.notes   # the summary table's data; what the plan wants said
```
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from jurybox.judges.jury import JuryLike
from jurybox.judges.spec import JurySpec
from jurybox.rubrics import Rubric, load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.item_fields import DEFAULT_MAX_FIELD_CHARS
from jurybox.serving.options import argument as argument  # (written in serving.options)
from jurybox.serving.options import option as option
from jurybox.serving.runs.run import RunReport

if TYPE_CHECKING:
    from jurybox.calibration import AppliedCalibration
    from jurybox.rubrics.images import ImagePolicy
    from jurybox.serving.runs.estimate import Estimate

Engine = Literal["local", "ray"]


def image_policy(
    predictions: str | Path | None, root: str | Path | None = None, allow_remote: bool = False
) -> ImagePolicy:
    """The image policy of a run: where its items' images are read from, and if http(s) too.

    Args:
        predictions: The prediction file, directory or glob.
        root: The folder relative image paths are read from; default: the predictions'
            folder (a directory itself, a glob's folder).
        allow_remote: Fetch http(s) images (never by default).

    Returns:
        The image policy of a run over ``predictions``.
    """
    from jurybox.rubrics.images import ImagePolicy

    if root is None and predictions is not None:
        path = Path(predictions)
        while any(c in path.name for c in "*?[") and path != path.parent:
            path = path.parent
        root = path if path.is_dir() else path.parent
    return ImagePolicy(root=None if root is None else str(root), allow_remote=allow_remote)


def default_jury() -> str:
    """The default jury's name: ``tiny`` (CPU, offline) unless a GPU is present: ``small-gpu``."""
    try:
        import torch

        return "small-gpu" if torch.cuda.is_available() else "tiny"
    except ImportError:
        return "tiny"


@dataclass
class RunPlan:
    """One judging run (see the module docstring); the fields are ``jurybox judge``'s options.

    Constructing it checks how they fit together (an ``InputError`` naming the option); ``run``
    and ``estimate`` load what they need. ``notes`` and ``warnings``: what a caller should tell
    its user (the default jury chosen, the pairs written, unpinned model revisions, ...).

    Attributes:
        rubric: A shipped rubric's name, a rubric YAML file, or a Rubric (a name or file is
            loaded when the plan is made).
        predictions: The prediction file (.jsonl, .json list, .csv, .tsv or .parquet), a
            directory of them, or a glob; for a pairwise rubric, rows with ``response_a`` and
            ``response_b``. Give it or ``pairs``, one of them.
        pairs: Pairwise rubrics: two prediction files (one system each) paired by id, A the
            first, B the second; the pairs are written beside the output
            (``OUT.pairs.jsonl``).
        jury: A shipped jury's name or a jury YAML file (default: ``tiny`` on CPU,
            ``small-gpu`` with a GPU), or a jury already made: a loaded ``Jury``, or a
            running service's (``RemoteJury(Client(url))``, what ``--url`` makes), which
            judges with the service's jury and maps (so no ``calibration``, ``conformal``,
            ``keep_raw`` or ray engine beside it).
        out: The output: a ``.jsonl`` file, or a directory (a path without a suffix) of
            shards; items already in it are not judged again. Default: named after the
            predictions (or the pair) and the rubric (``target``).
        engine: ``local`` (judge in this process) or ``ray`` (a Ray Data pipeline, one stage
            per judge).
        address: With the ray engine: the Ray cluster to join (default: ``$RAY_ADDRESS``,
            else a local Ray).
        mapping: Field -> column (``--map``): read a field from another column.
        limit: Judge only the first N valid items.
        chunk_size: Items judged (and written) per step on the local engine; default: the
            jury's.
        max_field_chars: Rows with a longer field are rejected.
        allow_empty: Judge rows whose response is empty instead of rejecting them.
        keep_raw: Keep each judge's raw output in every vote (by default only unscored votes
            keep it).
        calibration: A calibration map (from ``jurybox calibrate``) applied to every verdict.
        conformal: A conformal map (from ``jurybox calibrate --conformal``) applied to every
            verdict.
        force_calibration: Apply the maps even if they were fitted for another rubric/jury
            configuration.
        route_width: With ``conformal``: send an item to a human when a criterion's interval
            is wider than this (in the scale's units; 0: anything but a single level) or
            missing.
        length_control: Add each criterion's length-controlled score to the summary (scored
            rubrics only).
        human: With ``length_control``: the human labels to fit the length bias on.
        cache: Take verdicts this configuration judged before from the verdict cache, and
            store new ones.
        format: The shards of a directory output: ``jsonl`` (default) or ``parquet``.
        shard_size: Verdicts per shard of a directory output (default 1000).
        image_root: Where the items' relative image paths are read from (default: the folder
            of the predictions), for judges that see images.
        allow_remote_images: Fetch the items' http(s) images (never by default).
        notes: What a caller should tell its user (the default jury chosen, the pairs written,
            ...), added to as the plan is used.
        warnings: What a caller should warn its user of (unpinned model revisions, rows that
            did not pair, ...).

    Raises:
        InputError: The options do not fit together (``field`` names the option at fault),
            or the rubric cannot be loaded.
    """

    rubric: Rubric | str = field(
        metadata=option(
            "--rubric",
            "-r",
            type=str,
            help="Shipped rubric name (see `jurybox rubrics`) or a rubric YAML file.",
            show_default=False,
        )
    )
    predictions: str | None = field(
        default=None,
        metadata=argument(
            help="Prediction file (.jsonl, .json list, .csv, .tsv or .parquet), a directory of them, or a quoted glob such as 'preds/*.parquet'. For a pairwise rubric, rows with response_a and response_b (or give --pairs instead).",
            show_default=False,
        ),
    )
    pairs: tuple[str, str] | None = field(
        default=None,
        metadata=option(
            "--pairs",
            help="Pairwise rubrics: two prediction files (one system each: id, question, response ...) paired by id; A is the first, B the second. The pairs are written beside --out (OUT.pairs.jsonl, with model_a/model_b from the files' stems, which `jurybox compare` reads).",
            show_default=False,
        ),
    )
    jury: str | JuryLike | None = field(
        default=None,
        metadata=option(
            "--jury",
            "-j",
            type=str | None,
            help="Shipped jury name (see `jurybox juries`) or a jury YAML file. Default: tiny on CPU, small-gpu with a GPU.",
            show_default=False,
        ),
    )
    out: Path | str | None = field(
        default=None,
        metadata=option(
            "--out",
            "-o",
            type=Path | None,
            help="Output: a .jsonl file (one verdict per line), or a directory (a path without a suffix) of JSONL or Parquet shards (--format). Re-running with the same --out judges only the items not yet in it. Default: PREDICTIONS stem + .RUBRIC.judged.jsonl.",
            show_default=False,
        ),
    )
    # The rest by keyword only: their order follows the command's options, not earlier releases'.
    _: KW_ONLY
    format: str | None = field(
        default=None,
        metadata=option(
            "--format",
            help="Shards of a directory --out: jsonl (default) or parquet.",
            show_default=False,
        ),
    )
    shard_size: int | None = field(
        default=None,
        metadata=option(
            help="Verdicts per shard of a directory --out (default 1000; a shard is also written at least every 30 s, and with --engine ray after every batch).",
            min=1,
            show_default=False,
        ),
    )
    engine: Engine | str = field(  # local or ray (checked)
        default="local",
        metadata=option(
            type=str,
            help="local: judge in this process; ray: a Ray Data pipeline (one stage per judge) on a local Ray or the cluster of --address.",
        ),
    )
    address: str | None = field(
        default=None,
        metadata=option(
            help="With --engine ray: the Ray cluster to join (default: $RAY_ADDRESS, else a local Ray).",
            show_default=False,
        ),
    )
    limit: int | None = field(
        default=None,
        metadata=option(
            help="Judge only the first N valid items of the file.", min=1, show_default=False
        ),
    )
    mapping: Mapping[str, str] | None = field(
        default=None,
        metadata=option(
            "--map",
            "-m",
            type=list[str],
            default=[],
            help="Read a field from another column: FIELD=COLUMN (repeatable), e.g. --map reference=answer.",
            show_default=False,
        ),
    )
    chunk_size: int | None = field(
        default=None,
        metadata=option(
            help="Items judged (and written) per step. Default: 16 with transformers judges, 256 with vLLM/OpenAI judges (whose engines batch continuously).",
            min=1,
            show_default=False,
        ),
    )
    max_field_chars: int = field(
        default=DEFAULT_MAX_FIELD_CHARS,
        metadata=option(help="Reject rows with a longer field.", min=1),
    )
    allow_empty: bool = field(
        default=False,
        metadata=option(
            "--allow-empty",
            help="Judge rows whose response is empty (a model that answered nothing) instead of rejecting them; the summary counts them.",
        ),
    )
    keep_raw: bool = field(
        default=False,
        metadata=option(
            "--keep-raw",
            help="Keep each judge's raw output in every vote; by default only unscored votes keep it. (Reasoning text is kept when the jury sets reasoning.keep.)",
        ),
    )
    calibration: Path | str | None = field(
        default=None,
        metadata=option(
            type=Path | None,
            help="Calibration map (from `jurybox calibrate`) to apply: adds `calibrated` scores.",
            show_default=False,
        ),
    )
    force_calibration: bool = field(
        default=False,
        metadata=option(
            "--force-calibration",
            help="Apply the calibration map (or the conformal map) even if it was fitted for another rubric/jury configuration.",
        ),
    )
    conformal: Path | str | None = field(
        default=None,
        metadata=option(
            "--conformal",
            type=Path | None,
            help="Conformal map (from `jurybox calibrate --conformal`) to apply: adds each criterion's `interval`, the levels a human's label falls in with the map's probability.",
            show_default=False,
        ),
    )
    route_width: float | None = field(
        default=None,
        metadata=option(
            "--route-width",
            help="With --conformal: send an item to a human (`route` in its verdict, counted in the summary) when a criterion's interval is wider than this (in the scale's units; 0: anything but a single level) or missing.",
            min=0.0,
            show_default=False,
        ),
    )
    cache: bool = field(
        default=True,
        metadata=option(
            "--no-cache",
            negated=True,
            help="Judge every item even if this configuration judged it before (and store nothing). By default verdicts are cached by configuration and input (see `jurybox cache`).",
        ),
    )
    length_control: bool = field(
        default=False,
        metadata=option(
            "--length-control",
            help="Add to the summary each criterion's length-controlled score beside the raw one (the jury's score with the part explained by the answer's length in words removed, at the reference answers' median length; AlpacaEval-style). Fitted on the human labels of --human, with whether it raises agreement under 5-fold cross-validation; without them on the scores themselves, which assumes quality does not grow with length.",
        ),
    )
    human: Path | str | None = field(
        default=None,
        metadata=option(
            "--human",
            type=Path | None,
            help="With --length-control: human labels (JSONL/CSV: id, rater, one column per criterion) to fit the length bias on.",
            exists=True,
            dir_okay=False,
            show_default=False,
        ),
    )
    image_root: Path | str | None = field(
        default=None,
        metadata=option(
            "--image-root",
            type=Path | None,
            help="Where the items' relative image paths are read from, for judges that see images (vision). Default: the folder of the predictions.",
            show_default=False,
        ),
    )
    allow_remote_images: bool = field(
        default=False,
        metadata=option(
            "--allow-remote-images",
            help="Fetch items' http(s) image URLs (never by default: give paths, file:// or data: URLs).",
        ),
    )
    notes: list[str] = field(default_factory=list, init=False)
    warnings: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.engine not in ("local", "ray"):
            raise InputError(f"--engine {self.engine}: expected local or ray", field="engine")
        if (self.predictions is None) == (self.pairs is None):
            raise InputError(
                "give a prediction file, or --pairs A B (two files to compare), one of them",
                field="predictions",
            )
        if self.human is not None and not self.length_control:
            raise InputError(
                "--human is the labels --length-control fits on: add --length-control",
                field="human",
            )
        if self.route_width is not None and self.conformal is None:
            raise InputError(
                "--route-width routes by the conformal intervals: add --conformal MAP",
                field="route_width",
            )
        if self.served:
            if self.calibration is not None or self.conformal is not None or self.keep_raw:
                raise InputError(
                    "a service's jury (--url) judges with the service's "
                    "calibration maps, and the service keeps no raw outputs: drop "
                    "--calibration, --conformal and --keep-raw",
                    field="url",
                )
            if self.engine == "ray":
                raise InputError(
                    "--engine ray and a service (--url) are two ways to judge: pick one",
                    field="engine",
                )
        if isinstance(self.rubric, str):
            self.rubric = load_rubric(self.rubric)
        rubric = self.rubric
        if self.length_control and rubric.pairwise:
            raise InputError(
                "--length-control is for scored answers, not pairwise verdicts (a "
                "pairwise judge's length preference is in `jurybox audit`)",
                field="length_control",
            )
        if self.pairs is not None and not rubric.pairwise:
            raise InputError(
                f"--pairs compares two answers: the rubric {rubric.name} is not "
                "pairwise (try --rubric pairwise; see `jurybox rubrics`)",
                field="pairs",
            )

    # -- what the run is made of (loaded on first use) ---------------------------------------

    @property
    def served(self) -> bool:
        """Whether the jury is a running service's (a made jury that is not a ``Jury``)."""
        from jurybox.judges import Jury

        return self.jury is not None and not isinstance(self.jury, (str, Jury))

    @property
    def loaded_rubric(self) -> Rubric:
        """The rubric, loaded (a name or file is loaded when the plan is made)."""
        assert isinstance(self.rubric, Rubric)
        return self.rubric

    @property
    def image_policy(self) -> ImagePolicy:
        """Where the items' images are read from, and whether http(s) images are fetched.

        Images are read from ``image_root``, else the predictions' folder (a directory itself,
        a glob's folder).
        """
        return image_policy(
            self.predictions or (self.pairs[0] if self.pairs else None),
            self.image_root,
            self.allow_remote_images,
        )

    @cached_property
    def judges(self) -> JuryLike:
        """The jury that judges: the one given, or the one named, loaded here.

        Models load when the run needs them.
        """
        from jurybox.judges.weights import unpinned_warnings

        if self.jury is not None and not isinstance(self.jury, str):
            jury: JuryLike = self.jury
        else:
            from jurybox.judges import Jury, load_jury_spec
            from jurybox.judges import cache as verdict_cache

            name = self.jury or default_jury()
            if self.jury is None:
                self.notes.append(f"jury: {name} (default; pass --jury to choose)")
            spec = load_jury_spec(name)
            if spec.stages and not spec.cascaded:
                self.notes.append(
                    f"jury {spec.name}: its stages have no thresholds yet, so "
                    "every judge judges every item (what `jurybox calibrate "
                    "--cascade` fits them on)"
                )
            cache = verdict_cache.VerdictCache() if self.cache and verdict_cache.enabled() else None
            jury = Jury(spec, cache=cache, images=self.image_policy)
        self.warnings.extend(unpinned_warnings(jury.spec.judges))
        return jury

    @property
    def spec(self) -> JurySpec:
        """The jury's spec."""
        return self.judges.spec

    @cached_property
    def applied(self) -> AppliedCalibration | None:
        """The calibration and conformal maps every verdict gets (None without them).

        They are checked against this rubric and jury.
        """
        if self.served:
            return None
        from jurybox.calibration import AppliedCalibration, CalibrationMap

        prov = self.judges.provenance(self.loaded_rubric)
        cmap = (
            CalibrationMap.load_for(Path(self.calibration), prov, self.force_calibration)
            if self.calibration is not None
            else None
        )
        return AppliedCalibration.combine(
            cmap,
            Path(self.conformal) if self.conformal is not None else None,
            prov,
            self.force_calibration,
            self.route_width,
        )

    @cached_property
    def target(self) -> Path:
        """The output: ``out``, else named after the predictions (or the pair) and rubric."""
        if self.out is not None:
            return Path(self.out)
        name = self.loaded_rubric.name
        if self.pairs is not None:
            from jurybox.serving.runs.pairs import pair_names

            a, b = pair_names(*self.pairs)
            return Path(f"{a}-vs-{b}.{name}.judged.jsonl")
        assert self.predictions is not None
        return Path(f"{Path(self.predictions).stem}.{name}.judged.jsonl")

    def _predictions(self, scratch: bool = False) -> str:
        """The file to judge: the predictions, or the pairs written beside the output.

        The pairs go into a scratch folder when ``scratch``: an estimate writes nothing beside
        the output.
        """
        if self.pairs is None:
            assert self.predictions is not None
            return self.predictions
        from jurybox.serving.runs.pairs import pair_names, write_pairs

        names = pair_names(*self.pairs)
        pairs_file = self.target.with_name(self.target.name + ".pairs.jsonl")
        if scratch:
            pairs_file = Path(tempfile.mkdtemp(prefix="jurybox-pairs-")) / pairs_file.name
        paired = write_pairs(*self.pairs, pairs_file, names)
        self.notes.append(
            f"pairs: {paired.pairs} ids in both files, A = {names[0]}, B = "
            f"{names[1]} (written to {paired.path})"
        )
        self.warnings.extend(paired.problems)
        return str(paired.path)

    # -- doing it ----------------------------------------------------------------------------

    def run(
        self,
        progress: Callable[[float, int | None], Any] | None = None,
        notify: Callable[[str], Any] | None = None,
    ) -> RunReport:
        """Judge every item not yet in the output, on the plan's engine.

        Args:
            progress: ``progress(done, total)``, as ``RunOptions`` takes it: called when the run
                starts and as the work advances (``done`` items' worth; ``total`` an estimate,
                or None).
            notify: ``notify(message)``, as ``RunOptions`` takes it: what the run is doing
                meanwhile (each judge loaded, with its time).

        Returns:
            The report of what was done.

        Raises:
            InputError: The jury, maps, predictions or output cannot be used, or a judge model
                cannot be loaded (see ``judge_file``).
            ExecutionError: Judging failed although the input was valid (a judge could not
                judge a chunk, the service could not answer).
        """
        judges, applied = self.judges, self.applied
        predictions = self._predictions()
        options: dict[str, Any] = dict(
            mapping=self.mapping,
            limit=self.limit,
            max_field_chars=self.max_field_chars,
            keep_raw=self.keep_raw,
            allow_empty=self.allow_empty,
            calibration=applied,
            progress=progress,
            notify=notify,
            format=self.format,
            shard_size=self.shard_size,
            length_control=self.length_control,
            human=self.human,
        )
        try:
            if self.engine == "ray":
                from jurybox.serving.runs.ray import judge_with_ray

                return judge_with_ray(
                    predictions,
                    self.loaded_rubric,
                    self.spec,
                    self.target,
                    address=self.address or os.environ.get("RAY_ADDRESS"),
                    cache=judges.cache,
                    images=self.image_policy,
                    **options,
                )
            from jurybox.serving.runs.local import judge_file

            return judge_file(
                predictions,
                self.loaded_rubric,
                judges,
                self.target,
                chunk_size=self.chunk_size,
                **options,
            )
        except OSError as exc:  # e.g. a hub model that cannot be downloaded here
            raise InputError(f"cannot load a judge model: {exc}") from None

    def estimate(self) -> Estimate:
        """What the run would take, loading no model and writing nothing.

        Returns:
            The estimate: items to judge after the output and the cache, judge calls, prompt
                tokens, output budget.

        Raises:
            InputError: The plan judges through a service, or its input cannot be
                used.
        """
        if self.served:
            raise InputError(
                "--estimate counts what this machine's judges would do: drop --url", field="url"
            )
        from jurybox.serving.runs.estimate import estimate

        return estimate(
            self._predictions(scratch=True),
            self.loaded_rubric,
            self.spec,
            self.target,
            mapping=self.mapping,
            limit=self.limit,
            max_field_chars=self.max_field_chars,
            allow_empty=self.allow_empty,
            cache=self.judges.cache,
        )

    def close(self) -> None:
        """Release the jury (its models and cache), if one was loaded."""
        judges = self.__dict__.get("judges")
        if judges is not None:
            judges.close()
