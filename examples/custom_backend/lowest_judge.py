"""A judge backend outside jurybox: every criterion gets its scale's lowest point.

It shows the whole contract (jurybox.judges.backends.protocol): a factory that takes the
judge's spec, ``generate(requests, cancelled=None)`` giving one Generation per request in
order, and ``close()``. A real backend would send ``request.messages`` (the rubric's chat
messages) to its model and constrain the answer to ``request.schema``; the judging path parses
the answer text as it parses any judge's.

The entry point names ``BACKEND``, which says what the backend is as well as how to make one:
its judges' ``model`` names no weights (it needs none), so its kind is ``remote``, a model known
by its name only. An entry point that names the factory itself makes a ``local`` kind, whose
models are weights on this machine.
"""

from __future__ import annotations

import json

from jurybox.judges.backends.protocol import CancelCheck, Generation, GenerationCancelled, Request
from jurybox.judges.backends.registry import BackendKind


class LowestJudge:
    def __init__(self, spec) -> None:  # the judge's JudgeSpec (name, model, engine_kwargs, ...)
        self.name = spec.name

    def generate(
        self, requests: list[Request], cancelled: CancelCheck | None = None
    ) -> list[Generation]:
        out = []
        for request in requests:
            if cancelled is not None and cancelled():  # nobody waits for these any more
                raise GenerationCancelled(f"judge {self.name}: cancelled")
            answer = {
                name: prop["enum"][0]  # each criterion's first point
                for name, prop in request.schema["properties"].items()
            }
            out.append(Generation(text=json.dumps(answer)))
        return out

    def close(self) -> None:
        pass


# What the entry point names: the factory, and the kind (the name is the entry point's).
BACKEND = BackendKind("lowest", LowestJudge, kind="remote")
