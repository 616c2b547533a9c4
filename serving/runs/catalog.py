"""What the catalog's commands call: the verdict cache cleared, the judge models checked.

``jurybox cache clear`` is `clear_cache` and ``jurybox models list`` is `model_states`; their
command-line options are declared here, on the parameters they set (`command_line`): the
functions they wrap (`jurybox.judges.cache.VerdictCache.clear`, `jurybox.judges.weights.resolve`)
sit below ``serving``, which alone knows the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jurybox.serving.options import command_line, option

if TYPE_CHECKING:
    from jurybox.judges import JurySpec


@dataclass(frozen=True)
class Cleared:
    """What `clear_cache` deleted: ``deleted`` verdicts from the cache at ``path``."""

    path: Path
    deleted: int


@command_line(
    provenance=option(help="Only the verdicts of this provenance hash.", show_default=False),
    jury=option(
        "--jury", "-j", help="Only the verdicts of this jury (its name).", show_default=False
    ),
)
def clear_cache(provenance: str | None = None, jury: str | None = None) -> Cleared:
    """Delete verdicts from the verdict cache (`jurybox.judges.cache.VerdictCache`).

    Args:
        provenance: Only the verdicts of this provenance hash (a rubric and jury configuration).
        jury: Only the verdicts of this jury (its name).

    Returns:
        The cache's file and how many verdicts were deleted (every one when neither is given).
    """
    from jurybox.judges.cache import VerdictCache

    cache = VerdictCache()
    return Cleared(cache.path, cache.clear(provenance=provenance, jury=jury))


@dataclass(frozen=True)
class ModelState:
    """Where one judge's model loads from here (``where``), or why it cannot (``missing``)."""

    judge: str
    model: str
    where: str | None = None
    missing: str | None = None


@command_line(jury=option(type=str, help="Jury whose models to check."))
def model_states(jury: str | JurySpec = "tiny") -> list[ModelState]:
    """Each judge's model of ``jury`` (a name, a jury file or a `JurySpec`), and whether it is here.

    Args:
        jury: The jury whose models to check.

    Returns:
        One state per judge, in the jury's order: its model's directory (or the hub, where it is
        downloaded on first use), or why it is not available.
    """
    from jurybox.judges import ModelNotAvailable, load_jury_spec
    from jurybox.judges.weights import resolve

    spec = load_jury_spec(jury) if isinstance(jury, str) else jury
    states = []
    for j in spec.judges:
        try:
            src = resolve(j.model, j.revision)
        except ModelNotAvailable as exc:
            states.append(ModelState(j.name, j.model, missing=str(exc)))
            continue
        where = src.directory if src.is_local else "hub (downloaded on first use)"
        states.append(ModelState(j.name, j.model, where=str(where)))
    return states
