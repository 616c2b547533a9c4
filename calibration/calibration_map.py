"""Calibration maps fitted on human labels: per judge and criterion, combined into a jury value.

A :class:`CalibrationMap` holds, for every criterion,

* numeric scales: one calibrator per judge (isotonic or ordinal cumulative-logit) mapping the
  judge's score onto the human scale, and jury weights proportional to each judge's inverse
  out-of-fold error variance against the human mean (reliable judges count more);
* labelled scales (yes/no, ...): a Dawid-Skene model (per-judge confusion matrices and class
  priors) fitted with human labels clamped as truth; the jury value is the posterior.

It records the provenance hash of the jury + rubric it was fitted for; applying it to verdicts
of another configuration raises :class:`ProvenanceMismatchError` unless ``force=True``.
Cross-validated before/after agreement (``cv_``) tells whether calibration helps at all.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from jurybox.rubrics import Scale, VerdictRecord

from .joined import CriterionData, join
from .labels import HumanLabels
from .verdicts import JudgeOutput, ValueKind
from .errors import InputDataError, NotFittedError, ProvenanceMismatchError
from .calibrators import CALIBRATORS, Output, calibrator_from_dict

if TYPE_CHECKING:  # rubrics stays out of `import jurybox.calibration`
    from jurybox.rubrics import Formula

FORMAT = "jurybox.calibration_map/1"
Method = Literal["isotonic", "ordinal"]


@dataclass
class CriterionMap:
    """The learned map for one criterion (see module docstring)."""

    criterion: str
    scale: Scale
    kind: Literal["numeric", "categorical"]
    calibrators: dict[str, Any] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    priors: np.ndarray | None = None
    confusion: dict[str, np.ndarray] = field(default_factory=dict)
    n_items: int = 0
    notes: list[str] = field(default_factory=list)  # fit warnings (e.g. EM not converged)

    def predict(self, values: dict[str, np.ndarray], output: str) -> np.ndarray:
        """Calibrated jury value per item from each judge's raw values (NaN = no vote)."""
        if self.kind == "categorical":
            return self._predict_categorical(values, output)
        num = den = None
        for judge, cal in self.calibrators.items():
            if judge not in values:
                continue
            pred = cal.predict(values[judge])
            w = np.where(np.isnan(pred), 0.0, self.weights[judge])
            term = np.where(np.isnan(pred), 0.0, pred) * w
            num = term if num is None else num + term
            den = w if den is None else den + w
        if num is None or den is None:
            length = len(next(iter(values.values()))) if values else 0
            return np.full(length, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        if output == "round":
            out = self.scale.snap(out)
        return out

    def _predict_categorical(self, values: dict[str, np.ndarray], output: str) -> np.ndarray:
        assert self.priors is not None
        scale = np.asarray(self.scale.values)
        length = len(next(iter(values.values()))) if values else 0
        log_post = np.tile(np.log(self.priors), (length, 1))
        any_vote = np.zeros(length, dtype=bool)
        for judge, conf in self.confusion.items():
            if judge not in values:
                continue
            x = np.asarray(values[judge], dtype=float)
            code, voted = _scale_codes(x, scale, judge, self.criterion)
            log_post += np.where(voted[:, None], np.log(conf[:, code].T), 0.0)
            any_vote |= voted
        log_post -= log_post.max(axis=1, keepdims=True)
        post = np.exp(log_post)
        post /= post.sum(axis=1, keepdims=True)
        out = scale[post.argmax(axis=1)] if output == "round" else post @ scale
        return np.where(any_vote, out, np.nan)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "scale": self.scale.compact(),
                               "n_items": self.n_items}
        if self.kind == "numeric":
            out["weights"] = dict(self.weights)
            out["judges"] = {j: c.to_dict() for j, c in self.calibrators.items()}
        else:
            assert self.priors is not None
            out["model"] = "dawid_skene"
            out["priors"] = self.priors.tolist()
            out["confusion"] = {j: m.tolist() for j, m in self.confusion.items()}
        return out

    @classmethod
    def from_dict(cls, criterion: str, d: dict[str, Any]) -> CriterionMap:
        scale = Scale.coerce(d["scale"])
        if d["kind"] == "numeric":
            cals = {j: calibrator_from_dict(c) for j, c in d["judges"].items()}
            weights = {j: float(w) for j, w in d["weights"].items()}
            if set(weights) != set(cals):
                raise InputDataError(f"{criterion}: weights and judges do not match")
            return cls(criterion, scale, "numeric", cals, weights, n_items=d.get("n_items", 0))
        if d["kind"] == "categorical":
            conf = {j: np.asarray(m, dtype=float) for j, m in d["confusion"].items()}
            return cls(criterion, scale, "categorical", priors=np.asarray(d["priors"], float),
                       confusion=conf, n_items=d.get("n_items", 0))
        raise InputDataError(f"{criterion}: unknown map kind {d['kind']!r}")


class CalibrationMap:
    """Per-judge calibration onto the human scale plus learned jury weights (sklearn style).

    >>> cmap = CalibrationMap(method="isotonic").fit("humans.csv", "verdicts.jsonl")
    >>> cmap.save("accuracy-map.yaml"); cmap = CalibrationMap.load("accuracy-map.yaml")
    >>> cmap.apply_to_record(verdict)["calibrated"]
    """

    def __init__(self, method: Method = "isotonic", output: Output = "clip",
                 value: ValueKind = "score", cv_folds: int = 5, seed: int = 0) -> None:
        self.method = method
        self.output = output
        self.value = value
        self.cv_folds = cv_folds
        self.seed = seed

    # ------------------------------------------------------------------ fit

    def fit(self, human_labels: HumanLabels | str | Path, judge_output: JudgeOutput | str | Path,
            *, scales: Any = None, criteria: list[str] | None = None,
            provenance: str | None = None) -> CalibrationMap:
        self._check_params()
        joined = join(human_labels, judge_output, scales=scales, value=self.value,
                      criteria=criteria)
        prov = provenance or joined.provenance
        if not isinstance(prov, str) or not prov:
            raise InputDataError("the judge output records carry no provenance; pass "
                                 "provenance=... so the map can refuse other configurations")
        self.provenance_ = prov
        self.criteria_: dict[str, CriterionMap] = {}
        self.notes_: list[str] = []
        for name, data in joined.criteria.items():
            try:
                self.criteria_[name] = _fit_criterion(data, self._params())
            except InputDataError as exc:
                self.notes_.append(f"{name}: not calibrated ({exc})")
                continue
            self.notes_.extend(f"{name}: {note}" for note in self.criteria_[name].notes)
        if not self.criteria_:
            raise InputDataError("no criterion could be calibrated: " + "; ".join(self.notes_))
        self.cv_ = {name: _cross_validate(data, self._params())
                    for name, data in joined.criteria.items() if name in self.criteria_}
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
        return {"method": self.method, "output": self.output, "cv_folds": self.cv_folds,
                "seed": self.seed, "value": self.value}

    def _check_fitted(self) -> None:
        if not hasattr(self, "criteria_"):
            raise NotFittedError("CalibrationMap is not fitted; call fit(...) or load(path)")

    # ------------------------------------------------------------------ apply

    @property
    def criteria(self) -> list[str]:
        self._check_fitted()
        return list(self.criteria_)

    def predict(self, criterion: str, judge_values: dict[str, Any]) -> np.ndarray:
        """Calibrated jury values for arrays of raw judge values (judge -> per-item values)."""
        self._check_fitted()
        if criterion not in self.criteria_:
            raise InputDataError(f"no map for criterion {criterion!r} (have {self.criteria})")
        values = {j: np.atleast_1d(np.asarray(v, dtype=float)) for j, v in judge_values.items()}
        return self.criteria_[criterion].predict(values, self.output)

    def apply_to_record(self, record: dict[str, Any] | VerdictRecord, force: bool = False, *,
                        formula: Formula | None = None) -> dict[str, Any]:
        """A copy of a ``jurybox judge`` record with ``"calibrated": {criterion: value}`` added.

        Original scores are kept. A criterion the jury left unscored (below quorum) stays
        ``None``; so does one where no calibrated judge voted. ``formula`` (the rubric's, e.g.
        MIRAGE's weighted sum) is evaluated on the calibrated values and stored under its name;
        it is ``None`` when a criterion it uses has no calibrated value (not calibrated by this
        map, or unscored): raw and calibrated scores are never mixed.
        """
        self._check_fitted()
        rec = VerdictRecord.from_record(record)
        if rec.provenance != self.provenance_ and not force:
            raise ProvenanceMismatchError(self.provenance_, rec.provenance)
        calibrated: dict[str, float | None] = {}
        for name, cmap in self.criteria_.items():
            if rec.scores.get(name) is None:
                calibrated[name] = None
                continue
            values: dict[str, np.ndarray] = {}
            field_name = "score" if cmap.kind == "categorical" else self.value
            for vote in rec.votes:
                if vote.criterion == name and vote.scored:
                    x = getattr(vote, field_name)
                    if x is not None:
                        values[vote.judge] = np.array([float(x)])
            pred = cmap.predict(values, self.output) if values else np.array([np.nan])
            calibrated[name] = None if np.isnan(pred[0]) else float(pred[0])
        if formula is not None:
            calibrated[formula.name] = formula.evaluate(dict(calibrated))
        out = dict(record) if isinstance(record, Mapping) else rec.to_dict()
        out["calibrated"] = calibrated
        return out

    def apply_to_records(self, records: list[dict[str, Any] | VerdictRecord], force: bool = False, *,
                         formula: Formula | None = None) -> list[dict[str, Any]]:
        return [self.apply_to_record(r, force=force, formula=formula) for r in records]

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        self._check_fitted()
        return {
            "format": FORMAT,
            "provenance": self.provenance_,
            "params": {"method": self.method, "output": self.output, "value": self.value,
                       "cv_folds": self.cv_folds, "seed": self.seed},
            "fitted_on": self.fitted_on_,
            "criteria": {c: m.to_dict() for c, m in self.criteria_.items()},
            "cross_validation": self.cv_,
            "notes": list(self.notes_),
        }

    def save(self, path: str | Path) -> Path:
        """Write YAML (``.yaml``/``.yml``) or JSON (anything else); both are human-readable."""
        path = Path(path)
        data = self.to_dict()
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
        else:
            text = json.dumps(data, indent=2) + "\n"
        path.write_text(text, encoding="utf-8")
        return path

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "<dict>") -> CalibrationMap:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise InputDataError(f"{source}: not a jurybox calibration map (expected "
                                 f"format: {FORMAT})")
        prov = d.get("provenance")
        if not isinstance(prov, str) or not prov:
            raise InputDataError(f"{source}: calibration map has no provenance string")
        params = d.get("params", {})
        self = cls(**{k: params[k] for k in ("method", "output", "value", "cv_folds", "seed")
                      if k in params})
        self._check_params()
        self.provenance_ = prov
        try:
            self.criteria_ = {c: CriterionMap.from_dict(c, m) for c, m in d["criteria"].items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise InputDataError(f"{source}: malformed criteria section ({exc!r})") from None
        self.cv_ = d.get("cross_validation", {})
        self.fitted_on_ = d.get("fitted_on", {})
        self.notes_ = list(d.get("notes", []))
        return self

    @classmethod
    def load(cls, path: str | Path) -> CalibrationMap:
        path = Path(path)
        if not path.exists():
            raise InputDataError(f"{path}: no such file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputDataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                                 "not a calibration map") from None
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
                raise InputDataError(f"{path}:{where} invalid YAML "
                                     f"({getattr(exc, 'problem', None) or exc}); not a "
                                     "calibration map") from None
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputDataError(f"{path}: not JSON ({exc.msg})") from None
        return cls.from_dict(data, source=str(path))

    def hurting(self) -> list[str]:
        """Criteria whose cross-validation shows calibration moves values away from humans."""
        self._check_fitted()
        return [name for name, cv in self.cv_.items() if cv_verdict(cv) == "hurts"]

    def warnings(self) -> list[str]:
        """What a user should know before applying the map: criteria not calibrated, fits that
        did not converge, and each criterion's cross-validated verdict when it is not 'helps'."""
        self._check_fitted()
        notes = list(self.notes_)
        for name, cv in self.cv_.items():
            verdict = cv_verdict(cv)
            if verdict == "skipped":
                notes.append(f"{name}: no cross-validated check ({cv.get('skipped', 'no result')})")
            elif verdict == "hurts":
                gain = cv["improvement"]
                lo, hi = gain["ci"]
                notes.append(f"{name}: calibration hurts: the cross-validated {gain['metric']} is "
                             f"{gain['value']:+.3f} [{lo:+.3f}, {hi:+.3f}], below 0 (the jury's "
                             f"own scores are closer to the humans); do not apply the map to "
                             f"{name}")
            elif verdict == "unclear":
                notes.append(f"{name}: cross-validation shows no clear improvement; applying the "
                             f"map may not be worth it")
        return notes

    def describe(self) -> str:
        """A readable summary: per criterion the map kind, weights and the CV verdict."""
        self._check_fitted()
        lines = [f"calibration map for provenance {self.provenance_} "
                 f"({self.method}, output={self.output}, value={self.value})"]
        for name, cmap in self.criteria_.items():
            if cmap.kind == "numeric":
                w = ", ".join(f"{j}={x:.2f}" for j, x in cmap.weights.items())
                lines.append(f"  {name}: {self.method} per judge; jury weights {w}")
            else:
                acc = ", ".join(f"{j}={float(np.dot(cmap.priors, np.diag(m))):.2f}"
                                for j, m in cmap.confusion.items())
                lines.append(f"  {name}: Dawid-Skene; judge accuracy {acc}")
            lines.extend("    " + line for line in format_cv(self.cv_.get(name, {})))
        lines.extend(f"  note: {n}" for n in self.notes_)
        return "\n".join(lines)


def fit_calibration(human_labels: HumanLabels | str | Path,
                    judge_output: JudgeOutput | str | Path, *, method: Method = "isotonic",
                    output: Output = "clip", value: ValueKind = "score", scales: Any = None,
                    criteria: list[str] | None = None, provenance: str | None = None,
                    cv_folds: int = 5, seed: int = 0) -> CalibrationMap:
    """Fit a :class:`CalibrationMap` from a human labels file and a ``jurybox judge`` file."""
    return CalibrationMap(method=method, output=output, value=value, cv_folds=cv_folds,
                          seed=seed).fit(human_labels, judge_output, scales=scales,
                                         criteria=criteria, provenance=provenance)


# ---------------------------------------------------------------------- fitting internals


def _scale_codes(x: np.ndarray, scale: np.ndarray, judge: str, criterion: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Index of each judge value on the scale, and which items the judge voted on; a value off
    the scale is an error, never snapped to the nearest point."""
    voted = ~np.isnan(x)
    code = np.abs(np.nan_to_num(x)[:, None] - scale).argmin(axis=1)
    off = voted & ~np.isclose(scale[code], np.nan_to_num(x))
    if off.any():
        raise InputDataError(f"judge {judge!r} gave values {np.unique(x[off]).tolist()} on "
                             f"{criterion!r}, not on the scale {scale.tolist()}")
    return code, voted


def _pairs(judge: np.ndarray, human: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(judge value, human rating) for every human rating of an item the judge scored."""
    x = np.broadcast_to(judge, human.shape)
    keep = ~(np.isnan(x) | np.isnan(human))
    return x[keep], human[keep]


def _folds(n: int, k: int, seed: int) -> np.ndarray:
    """Fold number per item, balanced and shuffled."""
    rng = np.random.default_rng(seed)
    return rng.permutation(np.arange(n) % k)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _check_human_variation(data: CriterionData) -> None:
    """Refuse human labels that are all the same value.

    Every calibrator fitted on them maps any judge score to that value, which scores perfectly
    against those same labels in cross-validation ("MAE 3.0 -> 0.0, calibration helps") while
    carrying no information, and human-human agreement is undefined. Nothing to calibrate to.
    """
    labels = data.human[~np.isnan(data.human)]
    if labels.size == 0 or np.ptp(labels) > 0:
        return
    value = float(labels[0])
    names = [k for k, v in data.scale.labels.items() if v == value]
    shown = f"{names[0]!r}" if names else f"{value:g}"
    which = (f"the only human label on {data.criterion!r} is {shown}" if labels.size == 1 else
             f"all {labels.size} human labels on {data.criterion!r} are {shown}")
    raise InputDataError(f"{which}: with no variation to learn from, a map would give every "
                         f"item {shown} (and human-human agreement is undefined); label items "
                         f"that differ, or leave this criterion out")


def _fit_criterion(data: CriterionData, params: dict[str, Any]) -> CriterionMap:
    _check_human_variation(data)
    if data.categorical:
        return _fit_categorical(data)
    scale = list(data.scale.values)
    human_mean = data.human_mean
    cals: dict[str, Any] = {}
    mse: dict[str, float] = {}
    for judge, x in data.judges.items():
        xs, ys = _pairs(x, data.human)
        if xs.size < 2 or np.unique(xs).size < 2:
            continue  # too little to learn from; reported when no judge is left
        # Judges' maps stay continuous; rounding (output="round") happens once, on the jury value.
        cals[judge] = CALIBRATORS[params["method"]](scale, output="clip").fit(xs, ys)
        mse[judge] = _oof_mse(x, data.human, human_mean, scale, params)
    if not cals:
        hint = ("; the judges give (nearly) constant scores, so try their logprob-expected "
                "scores (value 'expected', --value expected) if the verdicts have them"
                if params.get("value") == "score" else "")
        raise InputDataError(f"no judge has two distinct scores paired with human labels on "
                             f"{data.criterion!r}{hint}")
    inv = {j: 1.0 / max(m, 1e-6) for j, m in mse.items()}
    total = sum(inv.values())
    weights = {j: v / total for j, v in inv.items()}
    n_items = int((~np.isnan(human_mean)).sum())
    return CriterionMap(data.criterion, data.scale, "numeric", cals, weights, n_items=n_items)


def _oof_mse(x: np.ndarray, human: np.ndarray, human_mean: np.ndarray, scale: list[float],
             params: dict[str, Any]) -> float:
    """Out-of-fold squared error of one judge's calibrated score against the human mean.

    In-sample error flatters isotonic maps (they can fit noise), which would over-weight the
    judges with the most erratic scores; cross-fitting avoids that.
    """
    usable = ~(np.isnan(x) | np.isnan(human_mean))
    idx = np.nonzero(usable)[0]
    k = min(params["cv_folds"], idx.size)
    errors = []
    if k >= 2:
        fold = _folds(idx.size, k, params["seed"] + 1)
        for f in range(k):
            train, test = idx[fold != f], idx[fold == f]
            xs, ys = _pairs(x[train], human[:, train])
            if xs.size < 2 or np.unique(xs).size < 2:
                continue
            cal = CALIBRATORS[params["method"]](scale, output="clip").fit(xs, ys)
            errors.append((cal.predict(x[test]) - human_mean[test]) ** 2)
    if errors:
        return float(np.mean(np.concatenate(errors)))
    resid = x[usable] - human_mean[usable]
    return float(np.mean(resid**2)) if resid.size else 1.0


def _fit_categorical(data: CriterionData) -> CriterionMap:
    from .dawid_skene import dawid_skene

    scale = np.asarray(data.scale.values)
    k = scale.size
    judges = list(data.judges)
    codes = np.full((len(judges), len(data.ids)), -1)
    for r, judge in enumerate(judges):
        code, voted = _scale_codes(data.judges[judge], scale, judge, data.criterion)
        codes[r, voted] = code[voted]
    # Human truth as class proportions per item (several humans -> a soft label).
    human_codes = np.abs(np.nan_to_num(data.human)[..., None] - scale).argmin(axis=-1)
    present = ~np.isnan(data.human)
    truth = np.zeros((len(data.ids), k))
    for c in range(k):
        truth[:, c] = np.sum(present & (human_codes == c), axis=0)
    truth[truth.sum(axis=1) == 0] = np.nan
    fit = dawid_skene(codes, k, truth=truth)
    confusion = {j: fit.confusion[r] for r, j in enumerate(judges)}
    n_items = int((~np.isnan(truth).any(axis=1)).sum())
    notes = [] if fit.converged else [
        f"Dawid-Skene EM did not converge in {_plural(fit.n_iter, 'step')} (its parameters "
        f"were still moving), so the judges' confusion matrices and calibrated labels may be off"]
    return CriterionMap(data.criterion, data.scale, "categorical", priors=fit.priors,
                        confusion=confusion, n_items=n_items, notes=notes)


def _subset(data: CriterionData, idx: np.ndarray) -> CriterionData:
    return CriterionData(data.criterion, [data.ids[i] for i in idx], data.human[:, idx],
                         data.human_raters, {j: v[idx] for j, v in data.judges.items()},
                         data.jury[idx], data.scale, data.categorical)


def _cross_validate(data: CriterionData, params: dict[str, Any]) -> dict[str, Any]:
    """K-fold before/after agreement of the jury (and each judge) with the human consensus.

    Numeric criteria compare with the human mean (MAE, RMSE, bias, Spearman, interval alpha);
    labelled criteria compare the jury's label and the calibrated posterior mode with the human
    majority (accuracy, Cohen's kappa). ``improvement`` is the paired bootstrap CI of the MAE
    reduction (numeric) or accuracy gain (labelled); ``helps`` is true when it lies above 0,
    ``hurts`` when it lies below 0 (calibrated values are further from the humans).
    """
    from .agreement import exact_agreement, mean_absolute_error, mean_difference, spearman
    from .alpha import krippendorff_alpha
    from .bootstrap import bootstrap_ci
    from .kappa import cohen_kappa

    human_mean = data.human_mean
    usable = np.nonzero(~np.isnan(human_mean))[0]
    k = min(params["cv_folds"], usable.size)
    if usable.size < 4 or k < 2:
        return {"skipped": f"only {_plural(int(usable.size), 'labelled item')}; need at "
                           f"least 4 for CV"}
    fold = _folds(usable.size, k, params["seed"])
    output = "round" if data.categorical else params["output"]
    after = np.full(len(data.ids), np.nan)
    after_judge = {j: np.full(len(data.ids), np.nan) for j in data.judges}
    failed = 0
    for f in range(k):
        train, test = usable[fold != f], usable[fold == f]
        try:
            cmap = _fit_criterion(_subset(data, train), params)
        except InputDataError:
            failed += 1
            continue
        pred = cmap.predict({j: v[test] for j, v in data.judges.items()}, output)
        after[test] = np.where(np.isnan(data.jury[test]), np.nan, pred)
        for j, cal in cmap.calibrators.items():
            after_judge[j][test] = cal.predict(data.judges[j][test])

    target = data.human_reference if data.categorical else human_mean
    before = data.jury
    both = ~(np.isnan(before) | np.isnan(after) | np.isnan(target))
    b, a, h = before[both], after[both], target[both]
    result: dict[str, Any] = {"folds": k, "n_items": int(both.sum()),
                              "n_folds_failed": failed,
                              "target": "human majority" if data.categorical else "human mean"}
    if both.sum() < 3:
        result["skipped"] = "fewer than 3 items with jury, calibrated and human values"
        return result
    scale = list(data.scale.values)

    if data.categorical:
        def summary(x: np.ndarray) -> dict[str, Any]:
            return {"accuracy": exact_agreement(x, h).to_dict(),
                    "kappa": cohen_kappa(x, h, labels=scale).to_dict()}

        def gain_fn(bb: np.ndarray, aa: np.ndarray, hh: np.ndarray) -> float:
            return float(np.mean(aa == hh) - np.mean(bb == hh))
        metric = "accuracy gain"
    else:
        def summary(x: np.ndarray) -> dict[str, Any]:
            return {
                "mae": mean_absolute_error(x, h).to_dict(),
                "rmse": float(np.sqrt(np.mean((x - h) ** 2))),
                "bias": mean_difference(x, h).to_dict(),
                "spearman": spearman(x, h).to_dict(),
                "alpha_interval": krippendorff_alpha(np.vstack([x, h]), "interval").to_dict(),
            }

        def gain_fn(bb: np.ndarray, aa: np.ndarray, hh: np.ndarray) -> float:
            return float(np.mean(np.abs(bb - hh)) - np.mean(np.abs(aa - hh)))
        metric = "MAE reduction"

    gain = bootstrap_ci(gain_fn, b, a, h, n_resamples=1000, seed=params["seed"])
    result["before"] = summary(b)
    result["after"] = summary(a)
    result["improvement"] = {"metric": metric, "value": gain.value,
                             "ci": list(gain.ci) if gain.ci else None}
    result["helps"] = bool(gain.ci is not None and gain.ci[0] > 0)
    result["hurts"] = bool(gain.ci is not None and gain.ci[1] < 0)
    per_judge = {}
    for j, x in data.judges.items():
        ok = ~(np.isnan(x) | np.isnan(after_judge[j]) | np.isnan(human_mean))
        if ok.sum() >= 1:
            per_judge[j] = {"n_items": int(ok.sum()),
                            "mae_before": float(np.mean(np.abs(x[ok] - human_mean[ok]))),
                            "mae_after": float(np.mean(np.abs(after_judge[j][ok]
                                                              - human_mean[ok])))}
    result["per_judge"] = per_judge
    return result


def cv_verdict(cv: dict[str, Any]) -> Literal["helps", "hurts", "unclear", "skipped"]:
    """What one criterion's cross-validation says: the improvement CI lies above 0 (helps),
    below 0 (hurts), or straddles it (unclear). Read from the CI, so maps saved before the
    ``hurts`` flag existed get the same answer."""
    if "before" not in cv:
        return "skipped"
    ci = (cv.get("improvement") or {}).get("ci")
    if ci and ci[0] > 0:
        return "helps"
    if ci and ci[1] < 0:
        return "hurts"
    return "unclear"


_VERDICT_TEXT = {
    "helps": "calibration helps",
    "hurts": "calibration hurts (calibrated values are further from the humans); do not apply "
             "it",
    "unclear": "no clear improvement",
}


def format_cv(cv: dict[str, Any]) -> list[str]:
    """Readable lines for one criterion's cross-validation result."""
    if not cv:
        return []
    if "before" not in cv:
        return [f"cross-validation skipped: {cv.get('skipped', 'no result')}"]

    def val(d: dict[str, Any]) -> str:
        v = d.get("value")
        return "undefined" if v is None else f"{v:.3f}"

    b, a = cv["before"], cv["after"]
    gain = cv["improvement"]
    ci = gain["ci"]
    ci_text = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
    verdict = _VERDICT_TEXT[cv_verdict(cv)]
    lines = [f"{cv['folds']}-fold CV on {_plural(cv['n_items'], 'item')} (jury vs "
             f"{cv['target']}):"]
    if "accuracy" in b:
        lines.append(f"  accuracy {val(b['accuracy'])} -> {val(a['accuracy'])}   kappa "
                     f"{val(b['kappa'])} -> {val(a['kappa'])}")
    else:
        lines += [
            f"  MAE   {val(b['mae'])} -> {val(a['mae'])}",
            f"  bias  {val(b['bias'])} -> {val(a['bias'])}   RMSE {b['rmse']:.3f} -> "
            f"{a['rmse']:.3f}",
            f"  alpha {val(b['alpha_interval'])} -> {val(a['alpha_interval'])}   spearman "
            f"{val(b['spearman'])} -> {val(a['spearman'])}",
        ]
    lines.append(f"  {gain['metric']} {gain['value']:+.3f}{ci_text}: {verdict}")
    for j, d in cv.get("per_judge", {}).items():
        lines.append(f"  {j}: MAE {d['mae_before']:.3f} -> {d['mae_after']:.3f} "
                     f"(n={d['n_items']})")
    return lines
