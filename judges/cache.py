"""The verdict cache: judging the same item with the same configuration again costs nothing.

Verdicts are keyed by (provenance hash, input hash): the provenance covers everything a verdict
depends on (rubric, judges, weights, aggregation, cascade, prompt version) and the input hash
every field of the item, its id included, so a changed item or configuration is a miss and
never returns another's verdict. A hit gives back the very verdict judged before (same scores,
votes, latencies), so its record is identical.

The store is SQLite (Python's standard library, so nothing to install or run): one file, safe
for several processes at once (write-ahead log, a single writer at a time, readers never see a
half-written row), and fast keyed lookups for a chunk of items in one query. It lives in
``$JURYBOX_VERDICT_CACHE`` or ``~/.cache/jurybox/verdicts.sqlite`` (``$JURYBOX_CACHE`` moves the
folder; ``off`` turns the cache off, as ``--no-cache`` does) and is bounded: past ``max_bytes``
(default 1 GiB, ``$JURYBOX_CACHE_MAX_BYTES``) the least recently used verdicts are evicted.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from jurybox.rubrics import Item, Verdict, input_hash

DEFAULT_MAX_BYTES = 1 << 30
_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    provenance TEXT NOT NULL,
    input TEXT NOT NULL,
    jury TEXT NOT NULL,
    verdict TEXT NOT NULL,
    size INTEGER NOT NULL,
    used REAL NOT NULL,
    PRIMARY KEY (provenance, input)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS verdicts_used ON verdicts (used);
"""


def enabled() -> bool:
    """False when ``$JURYBOX_VERDICT_CACHE`` is ``off``."""
    return os.environ.get("JURYBOX_VERDICT_CACHE", "").strip().lower() != "off"


def default_path() -> Path:
    """The cache file.

    It is ``$JURYBOX_VERDICT_CACHE`` when set, else ``verdicts.sqlite`` in jurybox's cache folder
    (``$JURYBOX_CACHE`` or ``~/.cache/jurybox``, made if missing).
    """
    explicit = os.environ.get("JURYBOX_VERDICT_CACHE")
    if explicit:
        return Path(explicit)
    from .weights import cache_dir

    return cache_dir() / "verdicts.sqlite"


@dataclass
class CacheStats:
    """What a cache holds.

    That is its file, how many verdicts and their size in bytes, the size bound, and the verdict
    count per jury.
    """

    path: str
    entries: int
    bytes: int
    max_bytes: int
    by_jury: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """The stats as a plain dict, by field name."""
        return dict(self.__dict__)


_F = TypeVar("_F", bound=Callable[..., Any])


class CacheBusy(RuntimeError):
    """The cache could not be read or written within its ``busy_s``.

    Another process holds the file's lock (a long write, ``jurybox cache clear``'s VACUUM), or other
    calls of this one are queued ahead. The caller judges (or answers) without it.
    """


def _serialized(method: _F) -> _F:
    """One call at a time on the cache's connection.

    The scoring service calls it from worker threads; a connection must not run two statements
    or transactions at once. A call waits at most ``busy_s`` for it and for SQLite's lock
    (`CacheBusy` beyond).
    """

    @functools.wraps(method)
    def call(self: VerdictCache, *args: Any, **kwargs: Any) -> Any:
        if not self._lock.acquire(timeout=self.busy_s):
            raise CacheBusy(
                f"the verdict cache {self.path} is busy (other calls queued for "
                f"more than {self.busy_s:g} s)"
            )
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            raise CacheBusy(
                f"the verdict cache {self.path} is locked by another process "
                f"for more than {self.busy_s:g} s ({exc})"
            ) from None
        finally:
            self._lock.release()

    return call  # type: ignore[return-value]


class VerdictCache:
    """Verdicts by (provenance, input hash) in a bounded SQLite file.

    It is safe to share between threads and processes. A call waits at most ``busy_s`` seconds for
    the file's lock (`CacheBusy` beyond): a bulk run can wait (60 s), the service must not.
    """

    def __init__(
        self, path: str | Path | None = None, max_bytes: int | None = None, busy_s: float = 60.0
    ) -> None:
        self.path = Path(path) if path is not None else default_path()
        env = os.environ.get("JURYBOX_CACHE_MAX_BYTES")
        self.max_bytes = (
            max_bytes if max_bytes is not None else (int(env) if env else DEFAULT_MAX_BYTES)
        )
        if self.max_bytes < 0:
            raise ValueError(f"max_bytes must be 0 or more, got {self.max_bytes}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.busy_s = busy_s
        self._db = sqlite3.connect(
            self.path, timeout=busy_s, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    @_serialized
    def get(self, provenance: str, inputs: Sequence[str]) -> dict[str, Verdict]:
        """The cached verdicts among ``inputs`` (input hashes), by input hash."""
        found: dict[str, Verdict] = {}
        now = time.time()
        for start in range(0, len(inputs), 500):  # SQLite's bound-parameter limit
            part = list(inputs[start : start + 500])
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"SELECT input, verdict FROM verdicts WHERE provenance = ? AND input IN ({marks})",
                [provenance, *part],
            ).fetchall()
            for key, blob in rows:
                found[key] = Verdict.model_validate_json(blob)
            if rows:
                self._db.execute(
                    f"UPDATE verdicts SET used = ? WHERE provenance = ? AND input IN "
                    f"({','.join('?' * len(rows))})",
                    [now, provenance, *(k for k, _ in rows)],
                )
        return found

    @_serialized
    def contains(self, provenance: str, inputs: Sequence[str]) -> set[str]:
        """Which of ``inputs`` are cached (without touching their last use)."""
        found: set[str] = set()
        for start in range(0, len(inputs), 500):
            part = list(inputs[start : start + 500])
            rows = self._db.execute(
                f"SELECT input FROM verdicts WHERE provenance = ? AND input IN "
                f"({','.join('?' * len(part))})",
                [provenance, *part],
            ).fetchall()
            found.update(key for (key,) in rows)
        return found

    def put(self, provenance: str, entries: Iterable[tuple[str, Verdict]]) -> None:
        """Store verdicts (input hash, verdict).

        Then the least recently used past the size bound are evicted.
        """
        entries = list(entries)
        if entries:  # (one provenance is one jury's)
            self.put_json(
                provenance,
                entries[0][1].jury,
                [(key, verdict.model_dump_json()) for key, verdict in entries],
            )

    @_serialized
    def put_json(self, provenance: str, jury: str, entries: Iterable[tuple[str, str]]) -> None:
        """`put` for verdicts already as JSON (``Verdict.model_dump_json``).

        They are of the jury named ``jury``, as the Ray engine's driver receives them, and are
        stored as they are.
        """
        now = time.time()
        rows = [(provenance, key, jury, blob, len(blob), now) for key, blob in entries]
        if not rows:
            return
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?)", rows)
            self._evict()

    def _evict(self) -> None:
        (total,) = self._db.execute("SELECT COALESCE(SUM(size), 0) FROM verdicts").fetchone()
        if total <= self.max_bytes:
            return
        goal = int(self.max_bytes * 0.9)  # some room, so the next chunk does not evict again
        cut, running = None, total
        for used, size in self._db.execute("SELECT used, size FROM verdicts ORDER BY used"):
            running -= size
            cut = used
            if running <= goal:
                break
        if cut is not None:
            self._db.execute("DELETE FROM verdicts WHERE used <= ?", (cut,))

    @_serialized
    def stats(self) -> CacheStats:
        """The cache's current `CacheStats` (juries listed by most verdicts first)."""
        entries, size = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM verdicts"
        ).fetchone()
        by_jury = dict(
            self._db.execute(
                "SELECT jury, COUNT(*) FROM verdicts GROUP BY jury ORDER BY COUNT(*) DESC"
            )
        )
        return CacheStats(str(self.path), entries, size, self.max_bytes, by_jury)

    @_serialized
    def clear(self, provenance: str | None = None, jury: str | None = None) -> int:
        """Delete every verdict (or those of one provenance or jury); returns how many."""
        where, args = [], []
        if provenance is not None:
            where.append("provenance = ?")
            args.append(provenance)
        if jury is not None:
            where.append("jury = ?")
            args.append(jury)
        sql = "DELETE FROM verdicts" + (" WHERE " + " AND ".join(where) if where else "")
        with self._transaction():
            deleted = self._db.execute(sql, args).rowcount
        if not where:
            self._db.execute("VACUUM")
        return deleted

    def _transaction(self) -> Any:
        db = self._db

        class _Tx:
            def __enter__(self) -> None:
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, kind: Any, *_: Any) -> None:
                db.execute("ROLLBACK" if kind is not None else "COMMIT")

        return _Tx()

    def close(self) -> None:
        """Close the SQLite connection."""
        self._db.close()

    def __getstate__(self) -> dict[str, Any]:  # a connection cannot travel; the path can
        return {"path": self.path, "max_bytes": self.max_bytes, "busy_s": self.busy_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["path"],
            state["max_bytes"],
            state.get("busy_s", 60.0),
        )


@dataclass
class CacheLookup:
    """A chunk of items looked up in the verdict cache.

    This is the shared step of every way of judging: before rendering, look the chunk up; after
    deciding, `store` the rest. ``found``: the cached verdicts by position; ``todo``: the
    positions still to judge.
    """

    cache: VerdictCache | None
    provenance: str
    keys: list[str]
    found: dict[int, Verdict]
    todo: list[int]

    @classmethod
    def of(cls, cache: VerdictCache | None, provenance: str, items: Sequence[Item]) -> CacheLookup:
        """Look ``items`` up (with no cache, every item is to judge)."""
        if cache is None:
            return cls(None, provenance, [], {}, list(range(len(items))))
        keys = [input_hash(it) for it in items]
        cached = cache.get(provenance, keys)
        found = {k: cached[key] for k, key in enumerate(keys) if key in cached}
        return cls(cache, provenance, keys, found, [k for k in range(len(items)) if k not in found])

    def store(self, fresh: Sequence[Verdict]) -> None:
        """Store the verdicts just judged (one per position of ``todo``, in order)."""
        if self.cache is not None and fresh:
            self.cache.put(self.provenance, [(self.keys[k], v) for k, v in zip(self.todo, fresh)])

    def merged(self, fresh: Sequence[Verdict]) -> list[Verdict]:
        """Every verdict of the chunk in order: the cached ones and ``fresh`` (for ``todo``)."""
        if len(fresh) != len(self.todo):
            raise RuntimeError(f"{len(fresh)} verdicts for {len(self.todo)} items to judge")
        if not self.found:
            return list(fresh)
        out = dict(self.found)
        out.update(zip(self.todo, fresh))
        return [out[k] for k in range(len(out))]
