"""A hardened rubric: the response fenced and declared data.

(Interface committed first for #62.)
"""

from __future__ import annotations

from .rubric import Rubric


def harden(rubric: Rubric) -> Rubric:
    """``rubric`` with its response fenced and declared data, named ``<name>+hardened``."""
    raise NotImplementedError
