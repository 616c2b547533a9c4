"""What every adapter shares: items from a client's fields, verdicts from a running service or
an in-process jury, and rewards from verdicts (:mod:`jurybox.rubrics.reward`).

:class:`JuryRewards` is the whole of it: ``rewards(rows)`` judges a batch (split into as few
requests as the service's limits allow, sent concurrently; an in-process jury judges it in
one call, its verdict cache on) and returns one reward per row, with the count of unscored
ones kept in ``stats`` and logged.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from jurybox.rubrics import Item, Rubric, load_rubric
from jurybox.rubrics.errors import InputError
from jurybox.rubrics.reward import Reward, RewardSpec

logger = logging.getLogger("jurybox.integrations")

#: Item fields an adapter fills from its client's fields, and the client fields it reads
#: them from when not told otherwise (``fields={"reference": "answer"}`` reads the reference
#: from a dataset column named answer).
ITEM_FIELDS = ("question", "response", "reference", "context")


def message_text(value: Any) -> str:
    """The text of a prompt or completion as clients give it: a string, a chat message
    (``{"role", "content"}``), or a conversation (its last message's text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        content = value.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):  # content parts: the text ones, joined
            return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        return "" if content is None else str(content)
    if isinstance(value, Sequence) and value:
        return message_text(value[-1])
    return "" if value is None else str(value)


def conversation_context(value: Any) -> str | None:
    """The turns of a conversation before its last one, as ``role: text`` lines (the item's
    context); None for a plain string."""
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) < 2:
        return None
    lines = [f"{m.get('role', 'user')}: {message_text(m)}" for m in value[:-1]
             if isinstance(m, Mapping)]
    return "\n".join(lines) or None


@dataclass
class RewardStats:
    """What the adapter has done so far: rows judged, unscored rewards, requests sent."""

    rows: int = 0
    unscored: int = 0
    requests: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"rows": self.rows, "unscored": self.unscored, "requests": self.requests}


class JuryRewards:
    """Rewards from a jury: a running ``jurybox serve`` (``url``; the token from the
    environment variable ``token_env``) or an in-process jury (``jury``: a name, a jury file
    or a loaded :class:`jurybox.judges.Jury`; its verdict cache on unless ``cache=False``).

    ``reward`` (a :class:`RewardSpec`, or its fields as keyword arguments) says which number
    is the reward, on what range, and what an unscored item becomes. ``fields`` maps item
    fields to the client's field names (``{"reference": "answer"}``).
    """

    def __init__(self, rubric: str | Rubric, *, url: str | None = None,
                 token_env: str = "JURYBOX_TOKEN", jury: Any = None, cache: bool = True,
                 reward: RewardSpec | None = None, fields: Mapping[str, str] | None = None,
                 concurrency: int = 4, timeout: float = 900.0, **reward_fields: Any) -> None:
        if (url is None) == (jury is None):
            raise InputError("give the jury as url= (a running jurybox serve) or jury= (a jury "
                             "name, file or loaded Jury), one of the two", field="url")
        if reward is not None and reward_fields:
            raise InputError("give the reward as reward=RewardSpec(...) or as its fields "
                             f"({', '.join(reward_fields)}), not both", field="reward")
        self.spec = reward if reward is not None else RewardSpec(**reward_fields)
        unknown = sorted(set(fields or {}) - set(ITEM_FIELDS))
        if unknown:
            raise InputError(f"fields maps item fields {ITEM_FIELDS}; {unknown} is not one",
                             field="fields")
        self.fields = dict(fields or {})
        self.rubric = load_rubric(rubric) if isinstance(rubric, str) else rubric
        self.reward: Reward = self.spec.bind(self.rubric)
        self.stats = RewardStats()
        self.concurrency = max(1, concurrency)
        self._lock = threading.Lock()
        self.url = url
        self._client: Any = None  # the service's Client, with url
        if url is not None:
            from jurybox.serving.service.client import Client, RemoteJury

            token = os.environ.get(token_env) if token_env else None
            self._client = Client(url, token=token, timeout=timeout)
            self._jury: Any = RemoteJury(self._client)
            self._per_request = max(1, min(self._jury.max_items,
                                           self._jury.max_judge_calls // self.rubric.judge_calls))
        else:
            from jurybox.judges import Jury

            if isinstance(jury, (str, os.PathLike)):
                cached = None
                if cache:
                    from jurybox.judges.cache import VerdictCache

                    cached = VerdictCache()
                jury = Jury.load(os.fspath(jury), cache=cached)
            self._jury = jury
            self._per_request = 0
        self._pool = (ThreadPoolExecutor(self.concurrency, thread_name_prefix="jurybox-reward")
                      if self.concurrency > 1 else None)

    # -- items ----------------------------------------------------------------------------------

    def item(self, index: int, row: Mapping[str, Any]) -> Item:
        """The item a client's row holds: ``question`` from its prompt (a conversation's last
        turn; the turns before as ``context``), ``response`` from its completion, the others
        from the columns ``fields`` names (by default the item field's own name)."""
        prompt = row.get(self.fields.get("question", "prompt"), row.get("question"))
        completion = row.get(self.fields.get("response", "completion"), row.get("response"))
        values: dict[str, Any] = {"question": message_text(prompt),
                                  "response": message_text(completion)}
        context_key = self.fields.get("context", "context")
        context = row.get(context_key) if context_key in row else conversation_context(prompt)
        if context is not None:
            values["context"] = message_text(context)
        ref_key = self.fields.get("reference", "reference")
        if ref_key in row and row[ref_key] is not None:
            values["reference"] = message_text(row[ref_key])
        elif "reference" in self.rubric.inputs:
            raise InputError(f"rubric {self.rubric.name} needs a reference: pass a column "
                             f"{ref_key!r} (or map one with fields={{'reference': COLUMN}})",
                             field=f"rows[{index}].{ref_key}")
        return Item(id=str(index), **values)

    # -- judging --------------------------------------------------------------------------------

    def records(self, items: Sequence[Item]) -> list[dict[str, Any]]:
        """The verdict records of ``items``, in order (several requests at once to a service)."""
        if not items:
            return []
        if self._client is None:
            with self._lock:  # an in-process jury judges one batch at a time
                self.stats.requests += 1
                return self._jury.score_records(self.rubric, list(items))
        chunks = [list(items[k:k + self._per_request])
                  for k in range(0, len(items), self._per_request)]
        with self._lock:
            self.stats.requests += len(chunks)
        if self._pool is None or len(chunks) == 1:
            return [r for chunk in chunks for r in self._jury.score_records(self.rubric, chunk)]
        parts = list(self._pool.map(lambda c: self._jury.score_records(self.rubric, c), chunks))
        return [r for part in parts for r in part]

    def rewards_of(self, items: Sequence[Item]) -> tuple[list[float | None], list[dict[str, Any]]]:
        """Judge ``items``; their rewards (the unscored policy applied: ``error`` raises
        :class:`jurybox.rubrics.reward.UnscoredReward` after counting) and verdict records."""
        records = self.records(items)
        missing = [(r.get("id"), "; ".join(r.get("reasons") or []) or "unscored")
                   for r in records if self.reward.raw(r)[0] is None]
        with self._lock:
            self.stats.rows += len(records)
            self.stats.unscored += len(missing)
        if missing:
            logger.warning("%d of %d rewards (%s) unscored, e.g. item %s: %s", len(missing),
                           len(records), self.reward.name, missing[0][0], missing[0][1])
        return self.reward.values(records), records

    def rewards(self, rows: Sequence[Mapping[str, Any]]) -> list[float | None]:
        """One reward per row of the client's fields (see :meth:`item`)."""
        return self.rewards_of([self.item(k, row) for k, row in enumerate(rows)])[0]

    def close(self) -> None:
        """Close the service connection (an in-process jury is the caller's to close)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        if self._client is not None:
            self._client.close()
