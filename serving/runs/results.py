"""Where a bulk run writes its verdicts: a JSONL file, or a directory of shards, and a manifest.

The output is one JSONL file appended line by line, or a directory of JSONL or Parquet shards;
beside either, a manifest (``OUT.manifest.json``: configuration, status, rejected rows,
summary).

Only jurybox's own output is ever appended to. A file is taken for a results file when its first
complete line is a jurybox verdict or, while it has no complete line yet, when its manifest says
so; a directory when its manifest says so (or it is empty). Anything else is refused and left
exactly as it is. A run killed mid-write leaves at most one incomplete last line of the file (cut
at any byte), which the next run removes, or a hidden temporary shard, which it deletes: shards
appear only whole, by rename. Items already written (same id, same provenance) are not judged
again, so a killed run resumes with nothing lost and nothing duplicated. Resuming keeps only the
ids and input hashes in memory, never the records. A lock keeps two runs from writing at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from jurybox.rubrics import VerdictRecord
from jurybox.rubrics.errors import InputError

# Every record is written as one line that starts with these bytes; a line torn by a kill is
# a prefix of such a line.
RECORD_START = b'{"id": '
SHARD_FORMATS = ("jsonl", "parquet")
# Verdict fields stored as JSON text in Parquet shards (nested and shaped per rubric/jury).
PARQUET_JSON_COLUMNS = ("votes", "disagreement")


class ResultsError(InputError):
    """The output cannot be appended to safely."""


def manifest_path(out: Path) -> Path:
    """The manifest's path beside ``out``: ``OUT.manifest.json``."""
    return out.with_name(out.name + ".manifest.json")


def write_manifest(out: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as JSON to the manifest beside ``out``.

    It goes through a temporary file renamed into place, so a reader never sees half a manifest.
    """
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


def open_results(
    out: str | Path,
    provenance: str,
    calibration: str | None = None,
    format: str | None = None,
    shard_size: int | None = None,
) -> Results:
    """The results store of ``out``: a ``.jsonl`` file, or a directory of shards.

    A directory of shards is a directory that exists, a path without a suffix, or any path with
    ``format='parquet'``.

    Raises:
        ResultsError: An unknown ``format``, or Parquet asked for in a file.
    """
    out = Path(out)
    if format is not None and format not in SHARD_FORMATS:
        raise ResultsError(
            f"--format {format}: expected one of {list(SHARD_FORMATS)}", field="format"
        )
    if out.is_dir() or (not out.suffix and not out.exists()):
        return ResultsDir(out, provenance, calibration, format or "jsonl", shard_size or 1000)
    if out.suffix.lower() == ".parquet" or format == "parquet":
        raise ResultsError(
            f"--out {out}: Parquet output is a directory of shards; give a "
            "directory (a path without a suffix)",
            field="out",
        )
    return ResultsFile(out, provenance, calibration)


class Results(ABC):
    """What both kinds of output share.

    The lock, ownership and configuration checks, and the ids (with input hashes) already
    written.
    """

    def __init__(self, path: Path, provenance: str, calibration: str | None) -> None:
        self.path = path
        self.provenance = provenance
        self.calibration = calibration
        # id -> input hash of what was written before this run (resume checks); what this run
        # appends is not added: a million-row run would hold a million hashes for nothing.
        self.inputs: dict[str, str | None] = {}
        self.repaired = False
        self._lock: IO[bytes] | None = None

    def _acquire(self, lock_path: Path) -> None:
        self._lock = open(lock_path, "a+b")  # noqa: SIM115 (held for the run: the lock is the open file)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise ResultsError(f"{self.path}: another jurybox run is writing this output") from None

    def _release(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def _foreign(self, what: str) -> ResultsError:
        return ResultsError(
            f"{self.path}: {what} is not a jurybox result; refusing to touch output this tool "
            "did not write (choose another --out)"
        )

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

    def _note(self, where: str, record: dict[str, Any], first: bool) -> None:
        """Take one written record into account.

        The first proves the output is jurybox's (full validation); the rest need only what
        resuming reads.
        """
        if first:
            try:
                VerdictRecord.from_record(record)
            except InputError:
                raise self._foreign(where) from None
        elif not (
            isinstance(record, dict)
            and isinstance(record.get("id"), str)
            and isinstance(record.get("provenance"), str)
        ):
            raise self._foreign(where)
        self._check(where, record["provenance"], record.get("calibration"))
        self.inputs[record["id"]] = record.get("input")

    def done(self) -> set[str]:
        """The ids written before this run (loaded on entering).

        A resumed run does not judge them again.
        """
        return set(self.inputs)

    @abstractmethod
    def __enter__(self) -> Results: ...

    @abstractmethod
    def __exit__(self, *exc: object) -> None: ...

    @abstractmethod
    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Write records durably (or, for shards, buffer them until a shard is full)."""

    def iter_records(self) -> Iterator[VerdictRecord]:
        """Every record written, streamed from disk (for the summary)."""
        from jurybox.rubrics.rows import RowError, read_rows

        if not any(self._files()):
            return
        for n, row in read_rows(self.path):
            if isinstance(row, RowError):
                raise ResultsError(f"{self.path}: {row}")
            yield VerdictRecord.from_record(row, f"row {n}")

    @abstractmethod
    def _files(self) -> Iterator[Path]:
        """The files holding the records written so far."""


class ResultsFile(Results):
    """One JSONL file, appended line by line."""

    def __init__(self, path: str | Path, provenance: str, calibration: str | None = None) -> None:
        super().__init__(Path(path), provenance, calibration)
        self._fh: IO[bytes] | None = None

    def __enter__(self) -> ResultsFile:
        if self.path.is_dir():
            raise ResultsError(
                f"--out {self.path} is a directory; give the path of a results file (.jsonl)"
            )
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
        """Check every complete line, line by line, before touching anything.

        A file this tool did not write, say the predictions passed as --out, must be left
        exactly as it is.
        """
        assert self._fh is not None
        self._fh.seek(0)
        end = 0
        tail = b""
        for n, line in enumerate(self._fh, start=1):
            if not line.endswith(b"\n"):
                tail = line
                break
            end += len(line)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise self._foreign(f"line {n}") from None
            self._note(f"line {n}", record, first=not self.inputs)
        if not tail:
            return
        if not self.inputs:
            # No complete line says whose file this is: only the manifest of a run that was
            # killed during its first write can.
            manifest = read_manifest(self.path)
            if manifest is None:
                raise self._foreign(
                    "the file holds no complete line, has no jurybox manifest, and its content"
                )
            self._check("its manifest", manifest["provenance"], manifest.get("calibration"))
        # A write torn by a kill is a prefix of a record line, cut at any byte.
        if not (RECORD_START.startswith(tail) or tail.startswith(RECORD_START)):
            raise self._foreign("the last line")
        self._fh.truncate(end)
        self.repaired = True

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Write records, each as one line in one write, and make them durable."""
        assert self._fh is not None
        for record in records:
            line = (
                json.dumps({"id": record["id"], **record}, ensure_ascii=False, allow_nan=False)
                + "\n"
            )
            self._fh.write(line.encode("utf-8"))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def _files(self) -> Iterator[Path]:
        if self.path.is_file() and self.path.stat().st_size:
            yield self.path


class ResultsDir(Results):
    """A directory of shards (``part-000001.jsonl`` or ``.parquet``), each written whole.

    Records are buffered and written ``shard_size`` at a time (and at the end) to a hidden
    temporary file that is renamed into place, so a reader never sees half a shard.
    """

    # A slow run still persists what it judged at least this often (a shard per interval).
    FLUSH_EVERY_S = 30.0

    def __init__(
        self,
        path: str | Path,
        provenance: str,
        calibration: str | None = None,
        format: str = "jsonl",
        shard_size: int = 1000,
    ) -> None:
        super().__init__(Path(path), provenance, calibration)
        self.format = format
        self.shard_size = shard_size
        self._buffer: list[dict[str, Any]] = []
        self._next = 1
        self._flushed = time.monotonic()

    def __enter__(self) -> ResultsDir:
        if self.path.exists() and not self.path.is_dir():
            raise ResultsError(f"--out {self.path} is a file; a directory of shards was asked for")
        self.path.mkdir(parents=True, exist_ok=True)
        entries = [p for p in self.path.iterdir() if p.name != ".lock"]
        if entries and read_manifest(self.path) is None:  # before anything is written in it
            raise self._foreign("the directory has no jurybox manifest beside it, so its content")
        self._acquire(self.path / ".lock")
        try:
            self._load()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.flush()  # every buffered verdict is whole: kept, also when the run failed
        except Exception:
            if exc[0] is None:
                raise
            # the run's own error is the one to report; these verdicts are judged again
        finally:
            self._release()

    def _load(self) -> None:
        for p in (p for p in self.path.iterdir() if p.name != ".lock"):
            if p.name.startswith(".part-") and p.name.endswith(".tmp"):
                p.unlink()  # a shard a killed run did not finish: its items are judged again
                self.repaired = True
            elif not (p.name.startswith("part-") and p.suffix[1:] in SHARD_FORMATS):
                raise self._foreign(f"{p.name} in the directory")
        shards = sorted(self._files())
        formats = {p.suffix[1:] for p in shards}
        if formats and formats != {self.format}:
            raise ResultsError(
                f"{self.path}: holds {', '.join(sorted(formats))} shards; this run "
                f"writes {self.format} (pass --format {formats.pop()})"
            )
        for shard in shards:
            self._next = max(self._next, int(shard.stem.removeprefix("part-")) + 1)
            for n, record in enumerate(_shard_ids(shard), start=1):
                self._note(f"{shard.name} row {n}", record, first=not self.inputs)

    def _files(self) -> Iterator[Path]:
        return (p for p in sorted(self.path.glob("part-*")) if p.suffix[1:] in SHARD_FORMATS)

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        """Buffer ``records``, writing a shard each time ``shard_size`` are buffered.

        What is left is written too once ``FLUSH_EVERY_S`` have passed since the last shard.
        """
        for record in records:
            self._buffer.append(record)
            if len(self._buffer) >= self.shard_size:
                self.flush()
        if self._buffer and time.monotonic() - self._flushed >= self.FLUSH_EVERY_S:
            self.flush()

    def flush(self) -> None:
        """Write the buffered records as one new shard, whole or not at all."""
        if not self._buffer:
            return
        name = f"part-{self._next:06d}.{self.format}"
        tmp = self.path / f".{name}.tmp"
        if self.format == "jsonl":
            with tmp.open("wb") as fh:
                for record in self._buffer:
                    fh.write(
                        (
                            json.dumps(
                                {"id": record["id"], **record}, ensure_ascii=False, allow_nan=False
                            )
                            + "\n"
                        ).encode("utf-8")
                    )
                fh.flush()
                os.fsync(fh.fileno())
        else:
            _write_parquet(tmp, self._buffer)
        tmp.rename(self.path / name)
        dir_fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)
        self._next += 1
        self._buffer = []
        self._flushed = time.monotonic()


def _write_parquet(path: Path, records: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from jurybox.rubrics.rows import JSON_COLUMNS_KEY

    rows = []
    for record in records:
        row = dict(record)
        for column in PARQUET_JSON_COLUMNS:
            if column in row:
                row[column] = json.dumps(row[column], ensure_ascii=False, allow_nan=False)
        rows.append(row)
    table = pa.Table.from_pylist(rows)
    table = table.replace_schema_metadata({JSON_COLUMNS_KEY: ",".join(PARQUET_JSON_COLUMNS)})
    with path.open("wb") as fh:
        pq.write_table(table, fh)
        fh.flush()
        os.fsync(fh.fileno())


def _shard_ids(shard: Path) -> Iterator[Any]:
    """What resuming needs of each record of a shard.

    The first record in full (to check it is a verdict), then id, provenance, calibration and
    input only.
    """
    if shard.suffix == ".parquet":
        import pyarrow.parquet as pq

        from jurybox.rubrics.rows import RowError, read_rows

        first = next(row for _, row in read_rows(shard))
        yield None if isinstance(first, RowError) else first
        names = pq.ParquetFile(shard).schema_arrow.names
        columns = [c for c in ("id", "provenance", "calibration", "input") if c in names]
        yield from pq.read_table(shard, columns=columns).to_pylist()[1:]
        return
    with shard.open("rb") as fh:
        for line in fh:
            if line.strip():
                try:
                    yield json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    yield None
