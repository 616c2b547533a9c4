"""What the catalog's commands call: the verdict cache cleared, the judge models checked.

``jurybox cache clear`` is `clear_cache` and ``jurybox models list`` is `model_states`; their
command-line options are declared here, on the parameters they set (`command_line`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jurybox.serving.options import command_line, option


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
