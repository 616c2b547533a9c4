"""The output file of a bulk run: one JSON line per judged item, appended as items complete.

A run killed mid-way leaves at most one incomplete last line, which the next run removes before
it appends; items already there (same id, same provenance) are not judged again. So a killed
run resumes with nothing lost and nothing duplicated. A lock keeps two runs from writing the
same file at once.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any


RECORD_START = b'{"id": '


class ResultsError(RuntimeError):
    """The output file cannot be appended to safely."""


class ResultsFile:
    def __init__(self, path: str | Path, provenance: str, calibration: str | None = None) -> None:
        self.path = Path(path)
        self.provenance = provenance
        self.calibration = calibration
        self.records: dict[str, dict[str, Any]] = {}
        self.repaired = False
        self._fh = None

    def __enter__(self) -> ResultsFile:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a+b")
        try:
            fcntl.flock(self._fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._fh.close()
            raise ResultsError(f"{self.path}: another jurybox run is writing this file") from None
        try:
            self._load()
        except BaseException:
            self._fh.close()  # releases the lock too
            self._fh = None
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._fh is not None
        self._fh.flush()
        os.fsync(self._fh.fileno())
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()
        self._fh = None

    def _load(self) -> None:
        assert self._fh is not None
        self._fh.seek(0)
        data = self._fh.read()
        end = data.rfind(b"\n") + 1
        # Check every complete line before touching anything: a file this tool did not write
        # (say, the predictions themselves passed as --out) must be left exactly as it is.
        for n, line in enumerate(data[:end].split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                item_id, prov = record["id"], record["provenance"]
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
                raise ResultsError(
                    f"{self.path}: line {n} is not a jurybox result; refusing to append to a "
                    "file this tool did not write (choose another --out)"
                ) from None
            if prov != self.provenance:
                raise ResultsError(
                    f"{self.path}: line {n} was judged with a different rubric/jury configuration "
                    f"(provenance {prov}, this run {self.provenance}); choose another --out so "
                    "results of different configurations do not mix"
                )
            if record.get("calibration") != self.calibration:
                raise ResultsError(
                    f"{self.path}: line {n} was written with calibration map "
                    f"{record.get('calibration')}, this run uses {self.calibration}; choose "
                    "another --out so calibrated and uncalibrated results do not mix"
                )
            self.records[str(item_id)] = record
        tail = data[end:]
        if tail.strip():
            # Every record this tool writes starts with its id; anything else is not ours.
            if not tail.startswith(RECORD_START):
                raise ResultsError(
                    f"{self.path}: the last line is not a jurybox result; refusing to append to a "
                    "file this tool did not write (choose another --out)"
                )
            # An interrupted write: the tail after the last newline is an incomplete record.
            self._fh.truncate(end)
            self.repaired = True

    def done(self) -> set[str]:
        return set(self.records)

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Write records, each as one line in one write, and make them durable."""
        assert self._fh is not None
        for record in records:
            line = json.dumps({"id": record["id"], **record}, ensure_ascii=False, allow_nan=False) + "\n"
            self._fh.write(line.encode("utf-8"))
            self.records[str(record["id"])] = record
        self._fh.flush()
        os.fsync(self._fh.fileno())
