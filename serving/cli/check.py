"""``jurybox check-reward``: one well-formed probe to a trainer's reward URL, before the run.

The probe is ``jurybox.serving.runs.reward_check.check_reward``'s; this prints its notes as they
come and its problems, exiting 1 on any.
"""

from __future__ import annotations

from typing import Any

import typer

from jurybox.serving.cli.console import note, options_of
from jurybox.serving.runs.reward_check import check_reward as probe_reward


@options_of(probe_reward)
def check_reward(options: dict[str, Any]) -> None:
    """Send one well-formed probe to a reward URL and check the answer, before training.

    It checks what a trainer meets only mid-run: the service is reachable, the token is taken,
    the rubric is the service's, an unscored policy is said (OpenRLHF's ?unscored=), the rubric
    gets the fields it reads (the label: OpenRLHF's --data.label_key), and the answer is one
    finite reward for the probe. Each problem is said in plain words, then the command exits 1
    (OpenRLHF itself drops the error's body and fails the step on ``'NoneType' object has no
    attribute 'size'``; the service's log names the cause of each refused request).
    """
    found = probe_reward(**options, say=note)
    for line in found.problems:
        note(f"problem: {line}")
    if found.problems:
        raise typer.Exit(1)
