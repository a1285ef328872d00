"""The embedded event log in Parquet: the same topics, offsets and records as the JSON-lines
log (`cdc_core.sinks.local_log`), in files Spark reads without parsing JSON.

Layout, per topic folder:

    <first offset:020d>-<last offset:020d>.<schema digest>.parquet

Each flush writes the records it made durable as one file per topic and schema (written
to a hidden temporary name, fsynced, then renamed: a crash leaves no torn file, only a
temporary one that the next writer deletes, and nothing is renumbered). A file holds one
Connect schema pair, named in its footer (`tidemark.*` metadata):
- `typed` files hold the value as the envelope's own columns (`arrow_schema`), the key as
  a struct, and the schemas in the footer. Values keep Debezium's wire form, so a reader
  gives back the very JSON the converter would have written (`read_file`).
- `json` files hold key and value as their JSON text: records with no Connect schema
  (snapshot releases, schema changes, heartbeats) and rows with nested columns.

The streamer hands over each value's payload and its schema apart (`Record.value_schema`),
so the typed path never builds or parses the schema text, and the payloads of a file are
parsed at once by Arrow's JSON reader. Small files (a quiet table flushes a few records at
a time) are compacted into one covering file once `COMPACT_FILES` of them follow each
other; readers take the widest file covering a range, and the covered ones are deleted
after `GRACE_SECONDS`, when no reader that listed them can still be reading them.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from cdc_core.durable import fsync_dir
from cdc_core.events.envelope import Record, with_schema
from cdc_core.sinks.local_log import LocalLogError, WriterLock, check_topic, is_topic, json_end_offset
from cdc_core.sinks.log_cuts import Cut, CutTracker
from cdc_core.sinks.parquet_kinds import FileKind, file_kind

FILE_NAME = re.compile(r"(\d{20})-(\d{20})\.([0-9a-f]{16})\.parquet")
COMPACT_FILES = 16
COMPACTED_BYTES = 64 * 1024 * 1024
GRACE_SECONDS = 3600.0
# How much nicer than the streamer the landing thread runs (`_yield_cpu`).
LANDING_NICE = 10
HEADERS = pa.map_(pa.string(), pa.binary())
_JSON_COLUMNS = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("value", pa.string()),
        pa.field("headers", HEADERS),
    ]
)


@dataclass(frozen=True)
class Segment:
    first: int
    last: int
    digest: str
    path: Path


def parquet_segments(directory: Path) -> list[Segment]:
    found = []
    for p in directory.iterdir() if directory.is_dir() else ():
        m = FILE_NAME.fullmatch(p.name)
        if m:
            found.append(Segment(int(m.group(1)), int(m.group(2)), m.group(3), p))
    return found


def covering(segments: Iterable[Segment]) -> list[Segment]:
    """The files to read, in offset order: of files covering the same offsets (small ones
    and the file they were compacted into), the widest."""
    chosen: list[Segment] = []
    upto = -1
    for s in sorted(segments, key=lambda s: (s.first, -s.last)):
        if s.first > upto:
            chosen.append(s)
            upto = s.last
    return chosen


def wrap(schema: bytes | None, body: bytes | None) -> bytes | None:
    """A Connect JSON value from its payload and, when it goes with it, its schema."""
    return body if body is None or schema is None else with_schema(schema, body)


@dataclass
class _Run:
    """Consecutive records of a topic with one kind, waiting for `flush`."""

    kind: FileKind
    first: int
    key_schema: bytes | None
    value_schema: bytes | None
    lines: list[bytes] = field(default_factory=list)  # typed
    keys: list[bytes | None] = field(default_factory=list)  # json
    values: list[bytes | None] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)
    header_sets: list[tuple[tuple[str, bytes], ...]] = field(default_factory=list)
    header_index: list[int] = field(default_factory=list)
    seen_headers: dict[int, int] = field(default_factory=dict)


class ParquetEventLog:
    """The writer (one per root, enforced by the same lock as the JSON-lines log)."""

    def __init__(
        self,
        root: Path,
        key_schemas: bool = True,
        value_schemas: bool = True,
        fsync: bool = True,
        compact_files: int = COMPACT_FILES,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.key_schemas, self.value_schemas = key_schemas, value_schemas
        self.compact_files = compact_files
        self._lock = WriterLock(self.root)
        self._next: dict[str, int] = {}
        self._kinds: dict[tuple[str, bytes | None, bytes | None], FileKind] = {}
        self._runs: dict[str, list[_Run]] = {}
        # The files at each topic's end that compaction may still take, with their sizes.
        self._tail: dict[str, list[tuple[Segment, int]]] = {}
        self._failed: BaseException | None = None  # a landing that failed: nothing lands after it
        self._landing = ThreadPoolExecutor(1, thread_name_prefix="parquet-log", initializer=_yield_cpu)
        topics = [p.name for p in self.root.iterdir() if p.is_dir() and is_topic(p.name)]
        self._cuts = CutTracker(self.root, {t: self.end_offset(t) for t in topics})

    # ------------------------------------------------------------------ writing

    def _open_topic(self, topic: str) -> int:
        directory = self.root / check_topic(topic)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob(".*.tmp"):
            stale.unlink()  # a file a crash left before its rename: its records were never acknowledged
        segments = covering(parquet_segments(directory))
        end = segments[-1].last + 1 if segments else 0
        tail: list[tuple[Segment, int]] = []
        for segment in reversed(segments[-self.compact_files :]):  # the small files after the last large one
            size = segment.path.stat().st_size
            if size >= COMPACTED_BYTES:
                break
            tail.insert(0, (segment, size))
        self._tail[topic] = tail
        return max(end, json_end_offset(directory))

    def end_offset(self, topic: str) -> int:
        if topic not in self._next:
            self._next[topic] = self._open_topic(topic)
        return self._next[topic]

    def append(self, records: Iterable[Record]) -> list[tuple[str, int]]:
        """Queue records; durable only after `flush()`."""
        now = int(time.time() * 1000)
        placed = []
        for record in records:
            topic = record.topic
            offset = self._next.get(topic)
            if offset is None:
                offset = self.end_offset(topic)
            self._next[topic] = offset + 1
            run = self._run(topic, record, offset)
            self._add(run, record, offset, now)
            if record.boundary is not None:
                self._cuts.observe(record.boundary)
            placed.append((topic, offset))
        return placed

    def _run(self, topic: str, record: Record, offset: int) -> _Run:
        runs = self._runs.setdefault(topic, [])
        if runs:
            last = runs[-1]
            if last.key_schema is record.key_schema and last.value_schema is record.value_schema:
                return last
        kind = self._kind(topic, record.key_schema, record.value_schema)
        run = _Run(kind, offset, record.key_schema, record.value_schema)
        runs.append(run)
        return run

    def _kind(self, topic: str, key_schema: bytes | None, value_schema: bytes | None) -> FileKind:
        cache = (topic, key_schema, value_schema)
        kind = self._kinds.get(cache)
        if kind is None:
            kind = self._kinds[cache] = file_kind(
                topic, key_schema, value_schema, self.key_schemas, self.value_schemas
            )
        return kind

    def _add(self, run: _Run, record: Record, offset: int, now: int) -> None:
        if run.kind.typed:
            run.lines.append(
                b'{"o":%d,"t":%d,"k":%b,"v":%b}'
                % (offset, now, record.key if record.key is not None else b"null", record.value or b"null")
            )
        else:
            run.stamps.append(now)
            run.keys.append(wrap(record.key_schema if self.key_schemas else None, record.key))
            run.values.append(wrap(record.value_schema if self.value_schemas else None, record.value))
        headers = record.headers
        index = run.seen_headers.get(id(headers))
        if index is None or run.header_sets[index] is not headers:
            index = run.seen_headers[id(headers)] = len(run.header_sets)
            run.header_sets.append(headers)
        run.header_index.append(index)

    def submit(self) -> Future[None]:
        """Hand the queued records to the landing thread, which writes them durably (one
        file per topic and schema) while the caller goes on: Arrow parses and writes
        without holding the GIL. Landings run one after the other, in order."""
        runs, self._runs = self._runs, {}
        return self._landing.submit(self._land, runs, self._cuts.cut(self._next))

    def flush(self) -> None:
        """Write every queued record durably."""
        self.submit().result()

    def _land(self, runs: dict[str, list[_Run]], cut: Cut | None = None) -> None:
        """`cut`: recorded once the records are durable (`cdc_core.sinks.log_cuts`). A landing
        that fails lands nothing, and none lands after it: later offsets and cuts would
        leave a hole before them that no writer fills."""
        if self._failed is not None:
            if runs:
                raise LocalLogError(f"the event log stopped at a failed landing: {self._failed}")
            return
        try:
            tables = {
                topic: [(run, self._table(run)) for run in topic_runs] for topic, topic_runs in runs.items()
            }
            self._write_landing(tables, cut)
        except BaseException as error:
            self._failed = error
            raise

    def _write_landing(self, tables: dict[str, list[tuple[_Run, pa.Table]]], cut: Cut | None) -> None:
        for topic, topic_tables in tables.items():
            directory = self.root / topic
            for run, table in topic_tables:
                last = run.first + table.num_rows - 1
                name = f"{run.first:020d}-{last:020d}.{run.kind.digest}.parquet"
                self._write(directory, name, table)
                segment = Segment(run.first, last, run.kind.digest, directory / name)
                size = segment.path.stat().st_size
                # The tail: the small files after the last large one, neighbours all.
                self._tail[topic] = self._tail[topic] + [(segment, size)] if size < COMPACTED_BYTES else []
            if self.fsync:
                fsync_dir(directory)
            while self._compact(topic):
                pass
        if tables and self.fsync:
            fsync_dir(self.root)
        if cut is not None:
            self._cuts.record(cut)

    def _table(self, run: _Run) -> pa.Table:
        headers = pa.array([list(h) for h in run.header_sets], type=HEADERS).take(pa.array(run.header_index))
        if run.kind.typed:
            block = max(1 << 22, max(map(len, run.lines)) + 1)  # a line never straddles two blocks
            try:
                parsed = pa_json.read_json(
                    pa.BufferReader(b"\n".join(run.lines)),
                    read_options=pa_json.ReadOptions(use_threads=False, block_size=block),
                    parse_options=pa_json.ParseOptions(
                        explicit_schema=run.kind.parse, unexpected_field_behavior="error"
                    ),
                )
            except pa.ArrowInvalid as error:
                raise LocalLogError(
                    f"records of {run.kind.metadata[b'tidemark.topic'].decode()} do not match their "
                    f"Connect schema: {error}"
                ) from None
            columns = [parsed.column(c) for c in ("o", "t", "k", "v")]
            names = ["offset", "ts", "key", "value", "headers"]
            return pa.Table.from_arrays([*columns, headers], names=names).replace_schema_metadata(
                run.kind.metadata
            )
        offsets = pa.array(range(run.first, run.first + len(run.values)), type=pa.int64())
        arrays = [offsets, pa.array(run.stamps, pa.int64()), pa.array(run.keys, pa.string()), pa.array(run.values, pa.string()), headers]  # fmt: skip
        return pa.Table.from_arrays(arrays, schema=_JSON_COLUMNS.with_metadata(run.kind.metadata))

    def _write(self, directory: Path, name: str, table: pa.Table) -> None:
        temporary = directory / f".{name}.tmp"
        with open(temporary, "wb") as f:
            pq.write_table(table, f, compression="none", write_statistics=["offset"])
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(temporary, directory / name)

    def _compact(self, topic: str) -> bool:
        """One file for the last `compact_files` files at the topic's end when they share a
        schema and a size tier (under 1 MB, under 16 MB, larger): a quiet table's many small
        flushes become few files, and each record is written again a few times at most.
        The covered files go after `GRACE_SECONDS`. Returns whether it compacted."""
        tail = self._tail[topic]
        if len(tail) < self.compact_files:
            return False
        run = tail[-self.compact_files :]
        last, size = run[-1]
        if any(s.digest != last.digest or _tier(n) != _tier(size) for s, n in run):
            return False
        directory = self.root / topic
        name = f"{run[0][0].first:020d}-{last.last:020d}.{last.digest}.parquet"
        temporary = directory / f".{name}.tmp"
        with open(temporary, "wb") as f:
            writer = None
            for segment, _ in run:  # one file in memory at a time
                table = pq.read_table(segment.path, use_threads=False)
                if writer is None:
                    writer = pq.ParquetWriter(
                        f, table.schema, compression="none", write_statistics=["offset"]
                    )
                writer.write_table(table)
            assert writer is not None
            writer.close()
            if self.fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(temporary, directory / name)
        if self.fsync:
            fsync_dir(directory)
        merged = Segment(run[0][0].first, last.last, last.digest, directory / name)
        size = merged.path.stat().st_size
        self._tail[topic] = tail[: -self.compact_files] + [(merged, size)] if size < COMPACTED_BYTES else []
        _delete_covered(directory, time.time() - GRACE_SECONDS)
        return True

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._landing.shutdown()
            self._lock.release()


def _yield_cpu() -> None:
    """On busy CPUs the source's reading, which bounds the stream, goes before the landing
    (`LANDING_NICE` nicer), which catches up in larger batches when the reader waits; `send`
    bounds the queue. Arrow works on this thread alone (no `use_threads`)."""
    thread = threading.get_native_id()
    with contextlib.suppress(OSError):  # a platform that refuses: the landing keeps the default
        os.setpriority(
            os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + LANDING_NICE)
        )


def _tier(size: int) -> int:
    return 0 if size < 1 << 20 else 1 if size < 16 << 20 else 2


def _delete_covered(directory: Path, before: float) -> None:
    """Delete the files a wider file has covered since before `before`."""
    segments = parquet_segments(directory)
    wide = covering(segments)
    for s in segments:
        if s in wide:
            continue
        cover = next((w for w in wide if w.first <= s.first and s.last <= w.last), None)
        if cover is not None and cover.path.stat().st_mtime < before:
            s.path.unlink(missing_ok=True)
