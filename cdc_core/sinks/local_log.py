"""The embedded local event log: Kafka-like topics as append-only files on local disk.

It holds exactly the records a Kafka topic would (key, value, headers, dense offsets) so
the demo and small installations need no broker, and Spark reads it like a topic (see
`spark_jobs/local_log_source.py`). Layout:

    <root>/<topic>/<20-digit base offset>.log     JSON Lines, one record per line:
        {"offset":N,"ts":MS,"key":<key JSON or null>,"value":<value JSON or null>,"headers":{...}}
    <root>/.writer.lock                            one writer at a time (flock)
    <root>/.consumers/<group>.json                 committed read positions per consumer group
    <root>/_cut.json                               where no source transaction is open
                                                   (`cdc_core.sinks.log_cuts`)

Keys and values are already JSON, so they are embedded raw (no re-escaping: this is the
streamer's hot path). A record is durable once `flush()` returned (fsync); only then may
the streamer acknowledge it. A crash can leave a torn last line; reopening for writing
cuts it off, so complete lines are never lost or renumbered.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from cdc_core.durable import fsync_dir, replace_file
from cdc_core.errors import TidemarkError
from cdc_core.events.envelope import Record
from cdc_core.sinks.log_cuts import CutTracker

SEGMENT_BYTES = 64 * 1024 * 1024
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_SEGMENT = re.compile(r"(\d{20})\.log")


class LocalLogError(TidemarkError):
    """The local event log cannot be opened or written."""


@dataclass(frozen=True)
class LogRecord:
    topic: str
    offset: int
    ts: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes] = field(default_factory=dict)


def is_topic(name: str) -> bool:
    return bool(_TOPIC.fullmatch(name)) and name not in (".", "..")


def check_topic(topic: str) -> str:
    if not is_topic(topic):
        raise LocalLogError(f"invalid topic name {topic!r}: use letters, digits, '.', '_' and '-' (max 249)")
    return topic


def _segments(directory: Path) -> list[tuple[int, Path]]:
    found = []
    for p in directory.iterdir() if directory.is_dir() else ():
        m = _SEGMENT.fullmatch(p.name)
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found)


class _TopicWriter:
    __slots__ = ("base", "directory", "fd", "next_offset", "path", "size", "touched")

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        segments = _segments(directory)
        if segments:
            self.base, self.path = segments[-1]
            self.next_offset = self.base + _recover(self.path)
        else:
            self.base, self.next_offset = 0, 0
            self.path = directory / f"{0:020d}.log"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.touched = not segments  # a new file: its directory entry needs an fsync

    def roll(self, base: int) -> None:
        """Start a new segment whose first record is `base`."""
        os.fsync(self.fd)
        os.close(self.fd)
        self.base = base
        self.path = self.directory / f"{self.base:020d}.log"
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = 0
        self.touched = True


def _recover(path: Path) -> int:
    """Cut a torn final line off `path`; return its number of complete lines."""
    with open(path, "r+b") as f:
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
        return data.count(b"\n", 0, end)


class WriterLock:
    """One writer per log folder, whatever its format (an flock, released on exit)."""

    def __init__(self, root: Path) -> None:
        self._fd = os.open(root / ".writer.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise LocalLogError(
                f"another process is writing the event log {root} (lock {root}/.writer.lock)"
            ) from None

    def release(self) -> None:
        os.close(self._fd)


def json_end_offset(directory: Path) -> int:
    """The next offset after a topic's JSON-lines segments (0 without any)."""
    segments = _segments(directory)
    if not segments:
        return 0
    base, path = segments[-1]
    with open(path, "rb") as f:
        return base + f.read().count(b"\n")


class LocalEventLog:
    """The writer (one per root, enforced by a lock) and, through `read`, a reader."""

    def __init__(self, root: Path, segment_bytes: int = SEGMENT_BYTES, fsync: bool = True) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self._lock = WriterLock(self.root)
        parquet = next((t for t in self.topics() if any((self.root / t).glob("*.parquet"))), None)
        if parquet is not None:  # its offsets run on in Parquet files this writer does not count
            self._lock.release()
            raise LocalLogError(
                f"the event log {self.root} continues in Parquet (topic {parquet}): it cannot go back "
                "to JSON lines; set sink.local.format: parquet (both formats stay readable)"
            )
        self._writers: dict[str, _TopicWriter] = {}
        self._dirty: set[str] = set()
        # Every topic's end as found (a torn last line not counted, as reopening cuts it
        # off); a topic's writer keeps its own once opened.
        self._found = {t: json_end_offset(self.root / t) for t in self.topics()}
        self._cuts = CutTracker(self.root, self._found)

    @staticmethod
    def open_reader(root: Path) -> LocalEventLogReader:
        return LocalEventLogReader(root)

    def _writer(self, topic: str) -> _TopicWriter:
        writer = self._writers.get(topic)
        if writer is None:
            writer = _TopicWriter(self.root / check_topic(topic))
            self._writers[topic] = writer
        return writer

    def append(self, records: Iterable[Record]) -> list[tuple[str, int]]:
        """Write records (buffered per call); durable only after `flush()`."""
        now = int(time.time() * 1000)
        pending: dict[str, list[bytes]] = {}
        placed: list[tuple[str, int]] = []
        observe = self._cuts.observe
        for record in records:
            writer = self._writer(record.topic)
            offset = writer.next_offset
            writer.next_offset += 1
            observe(record.boundary)
            headers = (
                b"{"
                + b",".join(
                    orjson.dumps(k) + b":" + orjson.dumps(v.decode("utf-8", "replace"))
                    for k, v in record.headers
                )
                + b"}"
                if record.headers
                else b"{}"
            )
            line = b"".join(
                (
                    b'{"offset":',
                    str(offset).encode(),
                    b',"ts":',
                    str(now).encode(),
                    b',"key":',
                    record.key if record.key is not None else b"null",
                    b',"value":',
                    record.value if record.value is not None else b"null",
                    b',"headers":',
                    headers,
                    b"}\n",
                )
            )
            pending.setdefault(record.topic, []).append(line)
            placed.append((record.topic, offset))
        for topic, lines in pending.items():
            self._write(topic, lines)
        return placed

    def _write(self, topic: str, lines: list[bytes]) -> None:
        writer = self._writers[topic]
        offset = writer.next_offset - len(lines)
        chunk: list[bytes] = []
        for line in lines:
            if writer.size >= self.segment_bytes:
                _write_all(writer.fd, b"".join(chunk))
                chunk = []
                writer.roll(offset)
            chunk.append(line)
            writer.size += len(line)
            offset += 1
        _write_all(writer.fd, b"".join(chunk))
        self._dirty.add(topic)

    def flush(self) -> None:
        """fsync every segment written since the last flush (and new directory entries);
        then, if no source transaction is open, record the log's ends as a cut."""
        for topic in self._dirty:
            writer = self._writers[topic]
            if self.fsync:
                os.fsync(writer.fd)
                if writer.touched:
                    fsync_dir(writer.directory)
                    fsync_dir(self.root)
            writer.touched = False
        self._dirty.clear()
        cut = self._cuts.cut({**self._found, **{t: w.next_offset for t, w in self._writers.items()}})
        if cut is not None:
            self._cuts.record(cut)

    def close(self) -> None:
        self.flush()
        for writer in self._writers.values():
            os.close(writer.fd)
        self._writers.clear()
        self._lock.release()

    def end_offset(self, topic: str) -> int:
        return self._writer(topic).next_offset

    def topics(self) -> list[str]:
        return LocalEventLogReader(self.root).topics()

    def read(self, topic: str, start_offset: int = 0, max_records: int | None = None) -> Iterator[LogRecord]:
        return LocalEventLogReader(self.root).read(topic, start_offset, max_records)


class LocalEventLogReader:
    """Reads topics while a writer may be appending: only complete lines are returned."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def topics(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def read(self, topic: str, start_offset: int = 0, max_records: int | None = None) -> Iterator[LogRecord]:
        """Records from `start_offset`, from JSON-lines segments and, after them (a log
        whose format changed to Parquet), Parquet files."""
        directory = self.root / check_topic(topic)
        for count, record in enumerate(self._records(directory, topic, start_offset), 1):
            yield record
            if max_records is not None and count >= max_records:
                return

    def _records(self, directory: Path, topic: str, start_offset: int) -> Iterator[LogRecord]:
        yield from _json_records(directory, topic, start_offset)
        from cdc_core.sinks import parquet_log, parquet_log_reader

        for segment in parquet_log.covering(parquet_log.parquet_segments(directory)):
            if segment.last >= start_offset:
                yield from parquet_log_reader.read_file(topic, segment.path, start_offset)

    def end_offset(self, topic: str) -> int:
        from cdc_core.sinks import parquet_log_reader

        directory = self.root / check_topic(topic)
        return max(parquet_log_reader.parquet_end_offset(directory), json_end_offset(directory))


def _json_records(directory: Path, topic: str, start_offset: int) -> Iterator[LogRecord]:
    segments = _segments(directory)
    # Start at the last segment whose base offset is <= start_offset.
    first = 0
    for i, (base, _) in enumerate(segments):
        if base <= start_offset:
            first = i
    for _, path in segments[first:]:
        with open(path, "rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    return  # being written
                doc = orjson.loads(line)
                if doc["offset"] < start_offset:
                    continue
                yield LogRecord(
                    topic,
                    doc["offset"],
                    doc["ts"],
                    None if doc["key"] is None else orjson.dumps(doc["key"]),
                    None if doc["value"] is None else orjson.dumps(doc["value"]),
                    {k: v.encode() for k, v in doc.get("headers", {}).items()},
                )


class ConsumerPositions:
    """Committed read positions of one consumer group: `{topic: next_offset}`."""

    def __init__(self, root: Path, group: str) -> None:
        if not _TOPIC.fullmatch(group):
            raise LocalLogError(f"invalid consumer group name {group!r}")
        self.path = Path(root) / ".consumers" / f"{group}.json"

    def load(self) -> dict[str, int]:
        try:
            return orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}

    def get(self, topic: str) -> int:
        return self.load().get(topic, 0)

    def commit(self, positions: dict[str, int]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(self.path, orjson.dumps({**self.load(), **positions}))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
