"""jurybox: score long-form answers the way an expert panel would, with a jury of LLM judges.

The names a Python user needs are here; each is imported when first used, so ``import jurybox``
is cheap:

```python
from jurybox import Item, Jury, load_rubric

with Jury.load("tiny") as jury:
    verdicts = jury.score(load_rubric("mirage-mg"), [Item(id="1", question="...",
                          response="...", reference="...")])
```

Judging a whole prediction file resumably is `judge_file`; a running ``jurybox serve`` is
`Client`; every error jurybox raises on purpose is a `JuryboxError`
(`InputError` for bad input, `ExecutionError` when a judge cannot run). The
packages hold the rest: `jurybox.rubrics`, `jurybox.judges` (with the
`Backend` protocol), `jurybox.calibration`,
`jurybox.benchmarks`, `jurybox.serving`, `jurybox.integrations`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from jurybox._lazy import lazy

_EXPORTS = {
    "Jury": "jurybox.judges.jury",
    "JurySpec": "jurybox.judges.spec",
    "load_jury_spec": "jurybox.judges.spec",
    "list_juries": "jurybox.judges.spec",
    "Backend": "jurybox.judges.backends.protocol",
    "Rubric": "jurybox.rubrics",
    "Item": "jurybox.rubrics",
    "Vote": "jurybox.rubrics",
    "Verdict": "jurybox.rubrics",
    "VerdictRecord": "jurybox.rubrics",
    "load_rubric": "jurybox.rubrics",
    "list_rubrics": "jurybox.rubrics",
    "RewardSpec": "jurybox.rubrics.reward",
    "JuryboxError": "jurybox.rubrics.errors",
    "InputError": "jurybox.rubrics.errors",
    "ExecutionError": "jurybox.rubrics.errors",
    "judge_file": "jurybox.serving.runs.local",
    "Client": "jurybox.serving.service.client",
}
__all__ = [
    "Backend",
    "Client",
    "ExecutionError",
    "InputError",
    "Item",
    "Jury",
    "JurySpec",
    "JuryboxError",
    "RewardSpec",
    "Rubric",
    "Verdict",
    "VerdictRecord",
    "Vote",
    "__version__",
    "judge_file",
    "list_juries",
    "list_rubrics",
    "load_jury_spec",
    "load_rubric",
]
__getattr__, __dir__ = lazy(__name__, _EXPORTS)


def _version() -> str:
    for distribution in ("jurybox", "jurybox-client"):
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return "0+unknown"


__version__ = _version()

if TYPE_CHECKING:  # static tools see real imports; at run time names resolve on first use
    from jurybox.judges.backends.protocol import Backend
    from jurybox.judges.jury import Jury
    from jurybox.judges.spec import JurySpec, list_juries, load_jury_spec
    from jurybox.rubrics import (
        Item,
        Rubric,
        Verdict,
        VerdictRecord,
        Vote,
        list_rubrics,
        load_rubric,
    )
    from jurybox.rubrics.errors import ExecutionError, InputError, JuryboxError
    from jurybox.rubrics.reward import RewardSpec
    from jurybox.serving.runs.local import judge_file
    from jurybox.serving.service.client import Client
