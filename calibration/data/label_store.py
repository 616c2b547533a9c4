"""The human labels file a labelling session writes, kept safe while it grows.

It is the format ``jurybox agree`` and ``jurybox calibrate`` read (one JSON line per item and
rater, a key per criterion; see `jurybox.calibration.data.labels`).

Each label is one line, written in one write and fsync'd before it is acknowledged, so a server
killed at any moment loses no label it said it saved; a last line torn by such a kill (never
acknowledged) is cut off when the file is opened again, as results files are. A lock file beside
it keeps a second server from writing the same file. A relabel, an undo or a skip appends a
newer line for the same item and rater, and the latest line wins (the readers take it): an undo
line (``"undone": true``) and a skip line (``"skipped": "<reason>"``) carry no values, so the
item then has no label from that rater.

Besides the criteria, each line records ``rater``, ``labelled_at`` (UTC, ISO 8601) and
``selection``: how its item was chosen (``{"strategy": ..., "probability": ...}``; see
`jurybox.calibration.estimates.selection`), so that estimates can weight actively chosen
items.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ..errors import InputDataError

# Every label line starts with these bytes; a line torn by a kill is a prefix of such a line.
LINE_START = b'{"id": '
# Keys of a label line that are not criteria (the readers skip them).
META_KEYS = frozenset({"id", "rater", "labelled_at", "selection", "skipped", "undone"})


class LabelStore:
    """A labels file opened for appending by one labelling server (see the module's text).

    ```python
    store = LabelStore("human.jsonl")
    store.append({"id": "7", "rater": "ana", "accuracy": 3, "selection": {...}})
    store.latest()[("7", "ana")]["accuracy"]  # 3
    ```
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.repaired = False
        self._lock = _locked(self.path)
        self._lines: list[dict[str, Any]] = []
        self._fh: IO[bytes] = open(self.path, "a+b")  # noqa: SIM115 - held open until close()
        self._read()

    def _read(self) -> None:
        self._fh.seek(0)
        self._lines, end = _parse(self.path, self._fh.read())
        if end is not None:  # a write torn by a kill (never acknowledged): cut it
            self._fh.truncate(end)
            self.repaired = True

    @property
    def lines(self) -> list[dict[str, Any]]:
        """Every line, in the order written."""
        return list(self._lines)

    def latest(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The latest line per (item id, rater): what the readers take."""
        return _latest(self._lines)

    def append(self, line: dict[str, Any]) -> dict[str, Any]:
        """Write ``line`` (with ``labelled_at`` added) as one line in one write, durable on return.

        Returns:
            The line as written.
        """
        record = {
            "id": line["id"],
            **line,
            "labelled_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        data = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        self._fh.seek(0, os.SEEK_END)
        self._fh.write(data)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._lines.append(record)
        return record

    def close(self) -> None:
        """Close the file and release the lock."""
        self._fh.close()
        self._lock.close()


def read_latest(path: str | Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The latest line per (item id, rater) of the labels file at ``path`` as it is on disk.

    For a reader: no lock (a labelling server may be writing it), nothing repaired (a torn last
    line, which no server acknowledged, is left out).
    """
    path = Path(path)
    return _latest(_parse(path, path.read_bytes())[0])


def _latest(lines: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for line in lines:
        out[(str(line["id"]), str(line.get("rater", "")))] = line
    return out


def _parse(path: Path, data: bytes) -> tuple[list[dict[str, Any]], int | None]:
    """The label lines of ``data`` (a labels file's bytes), and where a torn last line starts.

    Where it starts is None when there is none.
    """
    end = data.rfind(b"\n") + 1
    tail = data[end:]
    lines = []
    for number, raw in enumerate(data[:end].splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise InputDataError(
                f"{path}, line {number}: not a JSON line; a labels "
                "file holds one JSON object per line"
            ) from None
        if not isinstance(line, dict) or "id" not in line:
            raise InputDataError(f"{path}, line {number}: a label line is a JSON object with an id")
        lines.append(line)
    if not tail:
        return lines, None
    if not (LINE_START.startswith(tail) or tail.startswith(LINE_START)):
        raise InputDataError(
            f"{path}: its last line is neither a label nor a label "
            "cut short; is this a labels file?"
        )
    return lines, end


def _locked(path: Path) -> IO[str]:
    """An exclusive lock on ``path``'s lock file, held while the returned file is open."""
    import fcntl

    lock = open(path.with_name(path.name + ".lock"), "a+")  # noqa: SIM115 - the lock's lifetime
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise InputDataError(
            f"{path} is being written by another labelling server (its lock "
            f"{path.name}.lock is held); stop that one, or give another "
            "--labels file"
        ) from None
    return lock
