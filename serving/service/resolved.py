"""The service's configuration as the deployments receive it, and the files it is read from.

`jurybox.serving.service.config.ServiceConfig.resolve` loads the jury, the rubrics and the
calibration maps with the functions here and returns a `ResolvedConfig`: plain data, so a cluster
needs none of the files the driver read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jurybox.judges import JurySpec
from jurybox.rubrics import Rubric
from jurybox.rubrics.errors import InputError
from jurybox.serving.service.limits import Limits


class ResolvedConfig(BaseModel):
    """The validated configuration as plain data (what crosses to the cluster)."""

    model_config = ConfigDict(frozen=True)

    jury: dict[str, Any]
    rubrics: dict[str, dict[str, Any]]
    calibration: list[dict[str, Any]]
    token_env: str | None
    conformal: list[dict[str, Any]] = Field(default_factory=list)
    route_width: float | None = None
    openrlhf_unscored: str | None = None
    cors_origins: list[str]
    limits: Limits
    health_timeout_s: float
    verdict_cache: str | None = None
    ingress_replicas: int = 1
    juror_checks: bool = False
    leave_out_flagged: bool = False
    sentinel_url: str | None = None
    sentinel_token_env: str | None = None
    sentinel_share: float = 0.05

    def jury_spec(self) -> JurySpec:
        """The jury, validated back into a `JurySpec`."""
        return JurySpec.model_validate(self.jury)

    def rubric_objects(self) -> dict[str, Rubric]:
        """The rubrics by name, validated back into `Rubric` objects."""
        return {n: Rubric.model_validate(r) for n, r in self.rubrics.items()}


def rubric_files(path: Path) -> list[Path]:
    """The rubric files ``--rubrics PATH`` names: the file, or a directory's YAML files.

    Raises:
        InputError: A directory with no ``.yaml`` or ``.yml`` file.
    """
    if path.is_dir():
        files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        if not files:
            raise InputError(
                f"--rubrics {path}: no .yaml rubric files in the directory", field="rubrics"
            )
        return files
    return [path]


def calibration_entry(path: Path, provenances: dict[str, str]) -> dict[str, Any]:
    """A calibration map as plain data: its identity, the map and the rubrics it applies to.

    Args:
        path: The map's file (from ``jurybox calibrate``).
        provenances: Each rubric's provenance with the service's jury, by rubric name.

    Raises:
        InputError: A map that cannot be read, or fitted for no rubric the service knows.
    """
    from jurybox.calibration import CalibrationMap

    cmap = CalibrationMap.load(path)
    return {
        "identity": cmap.identity_,
        "map": cmap.to_dict(),
        "rubrics": _fitted_rubrics("--calibration", path, cmap.provenance_, provenances),
    }


def conformal_entry(path: Path, provenances: dict[str, str]) -> dict[str, Any]:
    """A conformal map as plain data: its identity, the map and the rubrics it applies to.

    Args:
        path: The map's file (from ``jurybox calibrate --conformal``).
        provenances: Each rubric's provenance with the service's jury, by rubric name.

    Raises:
        InputError: A map that cannot be read, or fitted for no rubric the service knows.
    """
    from jurybox.calibration.maps.calibration_map import conformal_identity
    from jurybox.calibration.maps.conformal import ConformalMap

    try:
        content = path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"--conformal {path}: cannot read it: {exc.strerror or exc}", field="conformal"
        ) from None
    cmap = ConformalMap.load(path)
    return {
        "identity": conformal_identity(path, content),
        "map": cmap.to_dict(),
        "rubrics": _fitted_rubrics("--conformal", path, cmap.provenance, provenances),
    }


def _fitted_rubrics(
    option: str, path: Path, fitted: str | None, provenances: dict[str, str]
) -> list[str]:
    """The rubrics whose provenance with this jury is the one a map was fitted for.

    None: the map is refused, saying what to do.
    """
    fits = sorted(name for name, p in provenances.items() if p == fitted)
    if not fits:
        raise InputError(
            f"{option} {path}: fitted for provenance {fitted}, which no rubric this service "
            "knows has with this jury; add the rubric it was fitted for with --rubrics, or "
            "refit the map",
            field=option.lstrip("-"),
        )
    return fits


def one_per_rubric(option: str, entries: list[dict[str, Any]]) -> None:
    """Refuse two maps of one kind for the same rubric: which would apply is not for us to guess.

    Raises:
        InputError: Two entries of ``entries`` name the same rubric.
    """
    seen: dict[str, str] = {}
    for entry in entries:
        for rubric in entry["rubrics"]:
            if rubric in seen:
                raise InputError(
                    f"{option}: {seen[rubric]} and {entry['identity']} are both "
                    f"for rubric {rubric}; give one",
                    field=option.lstrip("-"),
                )
            seen[rubric] = entry["identity"]
