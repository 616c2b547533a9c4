"""The output file of a bulk run: one JSON line per judged item, appended as items complete, and
its manifest (``OUT.manifest.json``: configuration, status, rejected rows, summary).

A file is taken for a jurybox results file only when its first complete line is a jurybox
result, or, while it has no complete line yet, when its manifest says so. Anything else is
refused and left exactly as it is. A run killed mid-write leaves at most one incomplete last
line, cut at any byte; the next run removes it before it appends, and items already there (same
id, same provenance) are not judged again. So a killed run resumes with nothing lost and
nothing duplicated. A lock keeps two runs from writing the same file at once.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jurybox.rubrics import VerdictRecord
from jurybox.rubrics.errors import InputError

# Every record is written as one line that starts with these bytes; a line torn by a kill is
# a prefix of such a line.
RECORD_START = b'{"id": '


class ResultsError(InputError):
    """The output file cannot be appended to safely."""


def manifest_path(out: Path) -> Path:
    return out.with_name(out.name + ".manifest.json")


def write_manifest(out: Path, payload: dict[str, Any]) -> None:
    path = manifest_path(out)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    tmp.replace(path)


def read_manifest(out: Path) -> dict[str, Any] | None:
    """The manifest jurybox wrote beside ``out``, or None if there is none (or it is not ours)."""
    try:
        data = json.loads(manifest_path(out).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and "jurybox" in data and isinstance(data.get("provenance"), str):
        return data
    return None


class ResultsFile:
    def __init__(self, path: str | Path, provenance: str, calibration: str | None = None) -> None:
        self.path = Path(path)
        self.provenance = provenance
        self.calibration = calibration
        self.records: dict[str, VerdictRecord] = {}
        self.repaired = False
        self._fh = None

    def __enter__(self) -> ResultsFile:
        if self.path.is_dir():
            raise ResultsError(f"--out {self.path} is a directory; give the path of a results "
                               "file (.jsonl)")
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

    def _foreign(self, what: str) -> ResultsError:
        return ResultsError(
            f"{self.path}: {what} is not a jurybox result; refusing to touch a file this tool "
            "did not write (choose another --out)"
        )

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
                record = VerdictRecord.from_record(json.loads(line))
            except (ValueError, UnicodeDecodeError):  # not JSON, or not a verdict
                raise self._foreign(f"line {n}") from None
            self._check(f"line {n}", record.provenance, record.calibration)
            self.records[record.id] = record
        tail = data[end:]
        if not tail:
            return
        if not self.records:
            # No complete line says whose file this is: only the manifest of a run that was
            # killed during its first write can.
            manifest = read_manifest(self.path)
            if manifest is None:
                raise self._foreign("the file holds no complete line, has no jurybox manifest, "
                                    "and its content")
            self._check("its manifest", manifest["provenance"], manifest.get("calibration"))
        # A write torn by a kill is a prefix of a record line, cut at any byte.
        if not (RECORD_START.startswith(tail) or tail.startswith(RECORD_START)):
            raise self._foreign("the last line")
        self._fh.truncate(end)
        self.repaired = True

    def _check(self, where: str, provenance: str, calibration: str | None) -> None:
        if provenance != self.provenance:
            raise ResultsError(
                f"{self.path}: {where} was judged with a different rubric/jury configuration "
                f"(provenance {provenance}, this run {self.provenance}); choose another --out so "
                "results of different configurations do not mix"
            )
        if calibration != self.calibration:
            raise ResultsError(
                f"{self.path}: {where} was written with calibration map {calibration}, this run "
                f"uses {self.calibration}; choose another --out so calibrated and uncalibrated "
                "results do not mix"
            )

    def done(self) -> set[str]:
        return set(self.records)

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Write records, each as one line in one write, and make them durable."""
        assert self._fh is not None
        for record in records:
            line = json.dumps({"id": record["id"], **record}, ensure_ascii=False, allow_nan=False) + "\n"
            self._fh.write(line.encode("utf-8"))
            self.records[str(record["id"])] = VerdictRecord.from_record(record)
        self._fh.flush()
        os.fsync(self._fh.fileno())
