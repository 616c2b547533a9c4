"""Calibration maps fitted on human labels: per judge and criterion, combined into a jury value.

A `CalibrationMap` holds, for every criterion,

* numeric scales: one calibrator per judge (isotonic or ordinal cumulative-logit) mapping the
  judge's score onto the human scale, and jury weights proportional to each judge's inverse
  out-of-fold error variance against the human mean (reliable judges count more);
* labelled scales (yes/no, ...): a Dawid-Skene model (per-judge confusion matrices and class
  priors) fitted with human labels clamped as truth; the jury value is the posterior.

It records the provenance hash of the jury + rubric it was fitted for; applying it to verdicts
of another configuration raises `ProvenanceMismatchError` unless ``force=True``.
A checklist verdict judged point by point is calibrated point by point: the map's ``met``
(fitted over pooled points) maps each point's votes, and the item's score is HealthBench's rule on
the calibrated points.
Cross-validated before/after agreement (``cv_``) tells whether calibration helps at all.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from jurybox.rubrics import Rubric, VerdictRecord
from jurybox.rubrics.checklist import points_score
from jurybox.rubrics.errors import InputError

from ..data.joined import join
from ..data.labels import HumanLabels
from ..data.points import MET, SCORE, record_point_judged, record_points
from ..data.verdicts import JudgeOutput, ValueKind
from ..errors import InputDataError, NotFittedError, ProvenanceMismatchError
from .calibrators import CALIBRATORS, Output
from .conformal import ConformalMap
from .crossval import cross_validate, cv_verdict, format_cv
from .fitting import CriterionMap, fit_criterion

if TYPE_CHECKING:
    from jurybox.rubrics import Formula

FORMAT = "jurybox.calibration_map/1"
Method = Literal["isotonic", "ordinal"]


class CalibrationMap:
    """Per-judge calibration onto the human scale plus learned jury weights (sklearn style).

    ```python
    cmap = CalibrationMap(method="isotonic").fit("humans.csv", "verdicts.jsonl")
    cmap.save("accuracy-map.yaml")
    cmap = CalibrationMap.load("accuracy-map.yaml")
    cmap.apply_to_record(verdict)["calibrated"]
    ```

    Args:
        method: The calibrator per judge on numeric scales: ``isotonic`` or ``ordinal``
            (cumulative logit).
        output: ``"clip"`` for continuous values within the scale's range, or ``"round"`` for the
            nearest scale value.
        value: Which value of each vote is calibrated: ``score`` or ``expected``
            (logprob-expected).
        cv_folds: Folds of the cross-validation (at least 2).
        seed: Seed of the folds and the bootstrap.
    """

    # Set by fit / from_dict / load: the configuration it was fitted for, and (load) the file's
    # identity that calibrated records carry (from_dict: its ``source``).
    provenance_: str
    identity_: str

    def __init__(
        self,
        method: Method = "isotonic",
        output: Output = "clip",
        value: ValueKind = "score",
        cv_folds: int = 5,
        seed: int = 0,
    ) -> None:
        self.method = method
        self.output = output
        self.value = value
        self.cv_folds = cv_folds
        self.seed = seed

    # ------------------------------------------------------------------ fit

    def fit(
        self,
        human_labels: HumanLabels | str | Path,
        judge_output: JudgeOutput | str | Path,
        *,
        scales: Any = None,
        criteria: list[str] | None = None,
        provenance: str | None = None,
    ) -> CalibrationMap:
        """Fit a map per criterion on ``human_labels`` joined with ``judge_output``; cross-validate.

        A criterion that cannot be fitted is skipped with a note.

        Args:
            human_labels: Human labels, or the path of a labels file.
            judge_output: Judge output, or the path of a ``jurybox judge`` output file.
            scales: A rubric or {criterion: scale} to validate the human labels with.
            criteria: The criteria to fit (default: all the judge output has).
            provenance: The configuration the map is for, when the records carry none.

        Returns:
            This map, fitted.

        Raises:
            InputDataError: A bad parameter, no criterion can be fitted, or the records carry no
                provenance and ``provenance`` is not given (and the join's errors).
            JoinError: Labels and verdicts have no id or criterion in common.
        """
        self._check_params()
        joined = join(
            human_labels, judge_output, scales=scales, value=self.value, criteria=criteria
        )
        prov = provenance or joined.provenance
        if not isinstance(prov, str) or not prov:
            raise InputDataError(
                "the judge output records carry no provenance; pass "
                "provenance=... so the map can refuse other configurations"
            )
        self.provenance_ = prov
        self.identity_ = "<fitted, not loaded from a file>"
        self.criteria_: dict[str, CriterionMap] = {}
        self.notes_: list[str] = []
        for name, data in joined.criteria.items():
            try:
                self.criteria_[name] = fit_criterion(data, self._params())
            except InputDataError as exc:
                self.notes_.append(f"{name}: not calibrated ({exc})")
                continue
            self.notes_.extend(f"{name}: {note}" for note in self.criteria_[name].notes)
        if not self.criteria_:
            raise InputDataError("no criterion could be calibrated: " + "; ".join(self.notes_))
        self.cv_ = {
            name: cross_validate(data, self._params())
            for name, data in joined.criteria.items()
            if name in self.criteria_
        }
        self.fitted_on_ = {
            "join": joined.summary.to_dict(),
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        }
        return self

    def _check_params(self) -> None:
        if self.method not in CALIBRATORS:
            raise InputDataError(f"method must be one of {list(CALIBRATORS)}; got {self.method!r}")
        if self.output not in ("clip", "round"):
            raise InputDataError(f"output must be 'clip' or 'round'; got {self.output!r}")
        if self.value not in ("score", "expected"):
            raise InputDataError(f"value must be 'score' or 'expected'; got {self.value!r}")
        if self.cv_folds < 2:
            raise InputDataError(f"cv_folds must be at least 2; got {self.cv_folds}")

    def _params(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "output": self.output,
            "cv_folds": self.cv_folds,
            "seed": self.seed,
            "value": self.value,
        }

    def _check_fitted(self) -> None:
        if not hasattr(self, "criteria_"):
            raise NotFittedError("CalibrationMap is not fitted; call fit(...) or load(path)")

    # ------------------------------------------------------------------ apply

    @property
    def criteria(self) -> list[str]:
        """The calibrated criteria; NotFittedError before ``fit`` or ``load``."""
        self._check_fitted()
        return list(self.criteria_)

    def predict(self, criterion: str, judge_values: dict[str, Any]) -> np.ndarray:
        """Calibrated jury values for arrays of raw judge values (judge -> per-item values).

        Args:
            criterion: The calibrated criterion.
            judge_values: Judge -> its raw values per item (NaN where it did not vote).

        Returns:
            The calibrated jury value per item.

        Raises:
            InputDataError: The map has no such criterion.
            NotFittedError: The map is neither fitted nor loaded.
        """
        self._check_fitted()
        if criterion not in self.criteria_:
            raise InputDataError(f"no map for criterion {criterion!r} (have {self.criteria})")
        values = {j: np.atleast_1d(np.asarray(v, dtype=float)) for j, v in judge_values.items()}
        return self.criteria_[criterion].predict(values, self.output)

    def apply_to_record(
        self,
        record: dict[str, Any] | VerdictRecord,
        force: bool = False,
        *,
        formula: Formula | None = None,
    ) -> dict[str, Any]:
        """A copy of a ``jurybox judge`` record with ``"calibrated": {criterion: value}`` added.

        Original scores are kept. A criterion the jury left unscored (below quorum) stays ``None``;
        so does one where no calibrated judge voted. A checklist verdict judged point by point is
        calibrated point by point with the map's ``met``: ``calibrated`` holds each point's key
        and the item's score (HealthBench's rule on the calibrated points; ``None`` when a point
        is unscored).

        Args:
            record: The verdict record.
            force: Apply the map even to a record of another configuration (provenance).
            formula: The rubric's formula (e.g. MIRAGE's weighted sum), evaluated on the
                calibrated values and stored under its name; it is ``None`` when a criterion it
                uses has no calibrated value (not calibrated by this map, or unscored): raw and
                calibrated scores are never mixed.

        Returns:
            The record as plain data with ``calibrated`` added.

        Raises:
            ProvenanceMismatchError: The record is of another configuration and ``force`` is not
                set.
            InputDataError: A checklist verdict judged point by point, and the map has no
                ``met`` (it was fitted for another rubric).
            NotFittedError: The map is neither fitted nor loaded.
        """
        self._check_fitted()
        rec = VerdictRecord.from_record(record)
        if rec.provenance != self.provenance_ and not force:
            raise ProvenanceMismatchError(self.provenance_, rec.provenance)
        if record_point_judged(rec):
            calibrated = self._calibrate_points(rec)
        else:
            calibrated = {
                name: self._jury_value(rec, cmap, name) for name, cmap in self.criteria_.items()
            }
        if formula is not None:
            calibrated[formula.name] = formula.evaluate(dict(calibrated))
        out = dict(record) if isinstance(record, Mapping) else rec.to_dict()
        out["calibrated"] = calibrated
        return out

    def _jury_value(self, rec: VerdictRecord, cmap: CriterionMap, criterion: str) -> float | None:
        """The calibrated jury value of the votes on ``criterion``; None where it is unscored."""
        if rec.scores.get(criterion) is None:
            return None
        values: dict[str, np.ndarray] = {}
        field_name = "score" if cmap.kind == "categorical" else self.value
        for vote in rec.votes:
            if vote.criterion == criterion and vote.scored:
                x = getattr(vote, field_name)
                if x is not None:
                    values[vote.judge] = np.array([float(x)])
        pred = cmap.predict(values, self.output) if values else np.array([np.nan])
        return None if np.isnan(pred[0]) else float(pred[0])

    def _calibrate_points(self, rec: VerdictRecord) -> dict[str, float | None]:
        """Each point's calibrated met, and the item's score by HealthBench's rule on them.

        For a checklist verdict judged point by point. The map's ``met`` (fitted over the
        pooled points, `jurybox.calibration.data.points`) maps each point's votes; an unscored
        point stays ``None``, and so does the item's score.
        """
        if MET not in self.criteria_:
            raise InputDataError(
                f"this calibration map calibrates {', '.join(self.criteria_)} (fitted for "
                f"{self._fitted_for()}); a checklist rubric's points are calibrated on {MET}: "
                "fit a map on its verdicts and point labels with `jurybox calibrate`"
            )
        assert rec.points is not None  # a point-judged record
        cmap = self.criteria_[MET]
        calibrated = {key: self._jury_value(rec, cmap, key) for key in rec.points}
        name = next((k for k in rec.scores if k not in rec.points), SCORE)
        calibrated[name], _ = points_score(record_points(rec), calibrated)
        return calibrated

    def _fitted_for(self) -> str:
        """The rubric (where the map recorded it) and provenance the map was fitted for."""
        rubric = self.fitted_on_.get("rubric") if isinstance(self.fitted_on_, dict) else None
        on = f" (on rubric {rubric}'s verdicts)" if rubric else ""
        return f"provenance {self.provenance_}{on}"

    def apply_to_records(
        self,
        records: list[dict[str, Any] | VerdictRecord],
        force: bool = False,
        *,
        formula: Formula | None = None,
    ) -> list[dict[str, Any]]:
        """`apply_to_record` on each record, in order.

        Args:
            records: The verdict records.
            force: Apply the map even to records of another configuration (provenance).
            formula: The rubric's formula, evaluated on the calibrated values.

        Returns:
            The records with ``calibrated`` added.

        Raises:
            ProvenanceMismatchError: A record is of another configuration and ``force`` is not
                set.
            NotFittedError: The map is neither fitted nor loaded.
        """
        return [self.apply_to_record(r, force=force, formula=formula) for r in records]

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """The map as plain data (the file `save` writes).

        It holds the format, provenance, parameters, what it was fitted on, the per-criterion maps,
        cross-validation and notes.

        Returns:
            The data `from_dict` reads.

        Raises:
            NotFittedError: The map is neither fitted nor loaded.
        """
        self._check_fitted()
        return {
            "format": FORMAT,
            "provenance": self.provenance_,
            "params": {
                "method": self.method,
                "output": self.output,
                "value": self.value,
                "cv_folds": self.cv_folds,
                "seed": self.seed,
            },
            "fitted_on": self.fitted_on_,
            "criteria": {c: m.to_dict() for c, m in self.criteria_.items()},
            "cross_validation": self.cv_,
            "notes": list(self.notes_),
        }

    def save(self, path: str | Path) -> Path:
        """Write YAML (``.yaml``/``.yml``) or JSON (anything else); both are human-readable.

        Args:
            path: The file to write.

        Returns:
            The path written.

        Raises:
            NotFittedError: The map is neither fitted nor loaded.
        """
        return write_document(self.to_dict(), path)

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "<dict>") -> CalibrationMap:
        """A map from `to_dict`'s data.

        Args:
            d: The data `to_dict` wrote.
            source: What messages and the map's identity call the data.

        Returns:
            The map, fitted.

        Raises:
            InputDataError: Naming ``source``, when the data is not a calibration map, has no
                provenance, bad parameters or a malformed criteria section.
        """
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise InputDataError(
                f"{source}: not a jurybox calibration map (expected format: {FORMAT})"
            )
        prov = d.get("provenance")
        if not isinstance(prov, str) or not prov:
            raise InputDataError(f"{source}: calibration map has no provenance string")
        params = d.get("params", {})
        self = cls(
            **{
                k: params[k]
                for k in ("method", "output", "value", "cv_folds", "seed")
                if k in params
            }
        )
        self._check_params()
        self.provenance_ = prov
        try:
            self.criteria_ = {c: CriterionMap.from_dict(c, m) for c, m in d["criteria"].items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise InputDataError(f"{source}: malformed criteria section ({exc!r})") from None
        self.cv_ = d.get("cross_validation", {})
        self.fitted_on_ = d.get("fitted_on", {})
        self.notes_ = list(d.get("notes", []))
        self.identity_ = source
        return self

    @classmethod
    def load(cls, path: str | Path) -> CalibrationMap:
        """A map read from a YAML (``.yaml``/``.yml``) or JSON file, its identity from the file.

        Args:
            path: The map's file.

        Returns:
            The map, fitted.

        Raises:
            InputDataError: A missing file, text that is not UTF-8 or does not parse, or not a map.
        """
        path = Path(path)
        if not path.exists():
            raise InputDataError(f"{path}: no such file")
        content = path.read_bytes()
        try:
            text = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputDataError(
                f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); not a calibration map"
            ) from None
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
                raise InputDataError(
                    f"{path}:{where} invalid YAML "
                    f"({getattr(exc, 'problem', None) or exc}); not a "
                    "calibration map"
                ) from None
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputDataError(f"{path}: not JSON ({exc.msg})") from None
        cmap = cls.from_dict(data, source=str(path))
        cmap.identity_ = file_identity(path, content)
        return cmap

    @classmethod
    def load_for(cls, path: str | Path, provenance: str, force: bool = False) -> AppliedCalibration:
        """A map to apply while judging the configuration ``provenance`` (of a rubric and jury).

        A map fitted for another configuration is refused unless ``force``.

        Args:
            path: The map's file.
            provenance: The provenance of the rubric and jury about to judge.
            force: Apply the map even though it was fitted for another configuration.

        Returns:
            The map with the identity its records will carry.

        Raises:
            InputError: The file cannot be read, or the map was fitted for another configuration and
                ``force`` is not set.
            InputDataError: The file is not a calibration map.
        """
        path = Path(path)
        try:
            cmap = cls.load(path)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        if cmap.provenance_ != provenance and not force:
            raise InputError(
                f"{path} was fitted for {cmap._fitted_for()}, but this rubric and jury "
                f"give {provenance}; refit it, or pass --force-calibration to apply it anyway"
            )
        return AppliedCalibration(cmap, cmap.identity_, force)

    def hurting(self) -> list[str]:
        """Criteria whose cross-validation shows calibration moves values away from humans.

        Returns:
            The criteria's names.

        Raises:
            NotFittedError: The map is neither fitted nor loaded.
        """
        self._check_fitted()
        return [name for name, cv in self.cv_.items() if cv_verdict(cv) == "hurts"]

    def warnings(self) -> list[str]:
        """What a user should know before applying the map.

        Those are the criteria not calibrated, fits that did not converge, and each criterion's
        cross-validated verdict when it is not 'helps'.

        Returns:
            One line per warning.

        Raises:
            NotFittedError: The map is neither fitted nor loaded.
        """
        self._check_fitted()
        notes = list(self.notes_)
        for name, cv in self.cv_.items():
            verdict = cv_verdict(cv)
            if verdict == "skipped":
                notes.append(f"{name}: no cross-validated check ({cv.get('skipped', 'no result')})")
            elif verdict == "hurts":
                gain = cv["improvement"]
                lo, hi = gain["ci"]
                notes.append(
                    f"{name}: calibration hurts: the cross-validated {gain['metric']} is "
                    f"{gain['value']:+.3f} [{lo:+.3f}, {hi:+.3f}], below 0 (the jury's "
                    f"own scores are closer to the humans); do not apply the map to "
                    f"{name}"
                )
            elif verdict == "unclear":
                notes.append(
                    f"{name}: cross-validation shows no clear improvement; applying the "
                    f"map may not be worth it"
                )
        return notes

    def describe(self) -> str:
        """A readable summary: per criterion the map kind, weights and the CV verdict.

        Returns:
            The summary, one line per criterion and cross-validation line.

        Raises:
            NotFittedError: The map is neither fitted nor loaded.
        """
        self._check_fitted()
        lines = [
            f"calibration map for provenance {self.provenance_} "
            f"({self.method}, output={self.output}, value={self.value})"
        ]
        for name, cmap in self.criteria_.items():
            if cmap.kind == "numeric":
                w = ", ".join(f"{j}={x:.2f}" for j, x in cmap.weights.items())
                lines.append(f"  {name}: {self.method} per judge; jury weights {w}")
            else:
                assert cmap.priors is not None  # a categorical map always has its priors
                acc = ", ".join(
                    f"{j}={float(np.dot(cmap.priors, np.diag(m))):.2f}"
                    for j, m in cmap.confusion.items()
                )
                lines.append(f"  {name}: Dawid-Skene; judge accuracy {acc}")
            lines.extend("    " + line for line in format_cv(self.cv_.get(name, {})))
        lines.extend(f"  note: {n}" for n in self.notes_)
        return "\n".join(lines)


def file_identity(path: Path, content: bytes) -> str:
    """What a calibration map's records carry to say which map calibrated them.

    That is the file's name and the start of the SHA-256 of its bytes (a refit map is another
    identity).
    """
    return f"{path.name}:{hashlib.sha256(content).hexdigest()[:12]}"


def conformal_identity(path: Path, content: bytes) -> str:
    """What records carry to say which conformal map gave their intervals."""
    return "conformal " + file_identity(path, content)


@dataclass(frozen=True)
class AppliedCalibration:
    """A calibration map and/or a conformal map applied while judging, with its records' identity.

    The identity its records carry makes sure one results file never mixes calibrated and
    uncalibrated records (or two maps). The conformal map adds each criterion's interval and, with
    ``route_width``, sends items with wider intervals to a human.

    Attributes:
        map: The calibration map, or ``None`` for a conformal map alone.
        identity: What each record carries under ``calibration``.
        force: Whether the calibration map is applied to records of another configuration.
        conformal: The conformal map, or ``None``.
        route_width: The widest interval kept from a human; ``None``: no routing.
    """

    map: CalibrationMap | None
    identity: str
    force: bool = False
    conformal: ConformalMap | None = None
    route_width: float | None = None

    def apply(self, record: dict[str, Any], rubric: Rubric, item: Any = None) -> dict[str, Any]:
        """The record with its calibrated scores (and formula over them), intervals and route.

        The formula is the rubric's.

        Args:
            record: The verdict record, as plain data.
            rubric: The rubric judged (its formula and scales).
            item: The `Item` judged: it gives the group of a conformal map
                fitted per group, its field named by the map's ``group_column`` (an item without it,
                or of a group the map has no threshold for, gets the overall threshold).

        Returns:
            The record with ``calibrated``, ``interval``, ``route`` where they apply, and
            ``calibration`` (the identity).

        Raises:
            ProvenanceMismatchError: The record is of another configuration and ``force`` is not
                set.
        """
        out = record
        if self.map is not None:
            out = self.map.apply_to_record(out, force=self.force, formula=rubric.formula)
        if self.conformal is not None:
            from ..data.labels import scales_from

            out = self.conformal.apply_to_record(
                out, scales_from(rubric), self.route_width, self.group_of(item)
            )
        return {**out, "calibration": self.identity}

    def group_of(self, item: Any) -> str | None:
        """The conformal map's group of ``item`` (None: no groups, no item, or no value).

        Args:
            item: The item judged, or ``None``.

        Returns:
            The group's name, or ``None``.
        """
        column = self.conformal.group_column if self.conformal is not None else None
        if column is None or item is None:
            return None
        value = item.fields().get(column)
        return None if value is None or value == "" else str(value)

    def to_wire(self) -> tuple[Any, ...]:
        """Plain data for another process (the Ray engine's workers): `from_wire`.

        Returns:
            The maps as plain data, the identity, ``force`` and ``route_width``.
        """
        return (
            None if self.map is None else self.map.to_dict(),
            self.identity,
            self.force,
            None if self.conformal is None else self.conformal.to_dict(),
            self.route_width,
        )

    @classmethod
    def from_wire(cls, wire: tuple[Any, ...]) -> AppliedCalibration:
        """The applied calibration `to_wire` sent.

        Args:
            wire: What `to_wire` returned.

        Returns:
            The applied calibration, its maps rebuilt.
        """
        cmap, identity, force, conformal, width = wire
        return cls(
            None if cmap is None else CalibrationMap.from_dict(cmap),
            identity,
            force,
            None if conformal is None else ConformalMap.from_dict(conformal),
            width,
        )

    @classmethod
    def combine(
        cls,
        calibration: AppliedCalibration | None,
        conformal_path: str | Path | None,
        provenance: str,
        force: bool = False,
        route_width: float | None = None,
    ) -> AppliedCalibration | None:
        """``calibration`` (if any) with the conformal map at ``conformal_path`` (if any).

        The conformal map, like a calibration map, is refused for another configuration unless
        ``force``.

        Args:
            calibration: The calibration map applied, or ``None``.
            conformal_path: The conformal map's file, or ``None``.
            provenance: The provenance of the rubric and jury about to judge.
            force: Apply the conformal map even though it was fitted for another configuration.
            route_width: The widest interval kept from a human; ``None``: no routing.

        Returns:
            ``calibration`` alone without a conformal map, else both applied together (``None`` when
            neither).

        Raises:
            InputError: The conformal map's file cannot be read, or it was fitted for another
                configuration and ``force`` is not set.
            InputDataError: The file is not a conformal map.
        """
        if conformal_path is None:
            return calibration
        path = Path(conformal_path)
        try:
            content = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        conformal = ConformalMap.load(path)
        if conformal.provenance != provenance and not force:
            raise InputError(
                f"{path} was fitted for provenance {conformal.provenance}, but this rubric and "
                f"jury give {provenance}; refit it, or pass --force-calibration to apply it anyway"
            )
        return cls.joined(
            calibration, conformal, conformal_identity(path, content), route_width, force
        )

    @classmethod
    def joined(
        cls,
        calibration: AppliedCalibration | None,
        conformal: ConformalMap,
        identity: str,
        route_width: float | None = None,
        force: bool = False,
    ) -> AppliedCalibration:
        """``calibration`` (if any) and a conformal map, applied together.

        The records carry both identities; the conformal map's `conformal_identity` is
        ``identity``.

        Args:
            calibration: The calibration map applied, or ``None``.
            conformal: The conformal map.
            identity: The conformal map's identity.
            route_width: The widest interval kept from a human; ``None``: no routing.
            force: Whether the maps are applied to records of another configuration (the calibration
                map's own ``force`` wins when there is one).

        Returns:
            The two applied together.
        """
        if calibration is None:
            return cls(None, identity, force, conformal, route_width)
        return cls(
            calibration.map,
            f"{calibration.identity} + {identity}",
            calibration.force,
            conformal,
            route_width,
        )


def fit_calibration(
    human_labels: HumanLabels | str | Path,
    judge_output: JudgeOutput | str | Path,
    *,
    method: Method = "isotonic",
    output: Output = "clip",
    value: ValueKind = "score",
    scales: Any = None,
    criteria: list[str] | None = None,
    provenance: str | None = None,
    cv_folds: int = 5,
    seed: int = 0,
) -> CalibrationMap:
    """Fit a `CalibrationMap` from a human labels file and a ``jurybox judge`` file.

    Args:
        human_labels: Human labels, or the path of a labels file.
        judge_output: Judge output, or the path of a ``jurybox judge`` output file.
        method: The calibrator per judge on numeric scales: ``isotonic`` or ``ordinal``.
        output: ``"clip"`` for continuous values within the scale's range, or ``"round"`` for the
            nearest scale value.
        value: Which value of each vote is calibrated: ``score`` or ``expected``.
        scales: A rubric or {criterion: scale} to validate the human labels with.
        criteria: The criteria to fit (default: all the judge output has).
        provenance: The configuration the map is for, when the records carry none.
        cv_folds: Folds of the cross-validation (at least 2).
        seed: Seed of the folds and the bootstrap.

    Returns:
        The fitted map.

    Raises:
        InputDataError: A bad parameter, no criterion can be fitted, or the records carry no
            provenance and ``provenance`` is not given (and the join's errors).
        JoinError: Labels and verdicts have no id or criterion in common.
    """
    return CalibrationMap(
        method=method, output=output, value=value, cv_folds=cv_folds, seed=seed
    ).fit(human_labels, judge_output, scales=scales, criteria=criteria, provenance=provenance)


def write_document(data: dict[str, Any], path: str | Path) -> Path:
    """Write YAML (``.yaml``/``.yml``) or JSON (anything else); both are human-readable."""
    from ..stats.stat import jsonable

    path = Path(path)
    data = jsonable(data)
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    else:
        text = json.dumps(data, indent=2) + "\n"
    path.write_text(text, encoding="utf-8")
    return path
