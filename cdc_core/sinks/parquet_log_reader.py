"""Reading the Parquet event log (`cdc_core.sinks.parquet_log`) as the JSON-lines log
reads: the same records, key and value as the Connect JSON the converter writes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from cdc_core.sinks.local_log import LocalLogError, LogRecord
from cdc_core.sinks.parquet_kinds import TYPED, VERSION
from cdc_core.sinks.parquet_log import covering, parquet_segments, wrap

# Rendered files, newest use last. A log file never changes once it has its name, so
# readers that poll a log (the CLI's tail, status figures, tests waiting for an event)
# render each file once instead of on every poll; the key's size, inode and mtime make a
# file replaced under the same name (a log deleted and written again) a new entry.
CACHED_RECORDS = 200_000
_rendered: OrderedDict[tuple[str, str, int, int, int], list[LogRecord]] = OrderedDict()
_cached = 0
_lock = threading.Lock()


def read_file(topic: str, path: Path, start_offset: int = 0) -> Iterator[LogRecord]:
    """A file's records as the JSON-lines log gives them: key and value as the Connect
    JSON the converter writes (a typed file's payloads rendered again, byte for byte)."""
    global _cached
    stat = Path(path).stat()
    entry = (topic, str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _lock:
        records = _rendered.get(entry)
        if records is not None:
            _rendered.move_to_end(entry)
    if records is None:
        source = pq.ParquetFile(path)
        if source.metadata.num_rows > CACHED_RECORDS // 4:  # a large file streams, uncached
            yield from (r for r in _render(topic, path, source) if r.offset >= start_offset)
            return
        records = list(_render(topic, path, source))
        with _lock:
            if entry not in _rendered:
                _rendered[entry] = records
                _cached += len(records)
                while _cached > CACHED_RECORDS:
                    _cached -= len(_rendered.popitem(last=False)[1])
    yield from (r for r in records if r.offset >= start_offset)


def _render(topic: str, path: Path, source: pq.ParquetFile) -> Iterator[LogRecord]:
    meta = source.schema_arrow.metadata or {}
    if meta.get(b"tidemark.log.version") != VERSION.encode():
        raise LocalLogError(f"{path} is not a Tidemark log file of version {VERSION}")
    typed = meta.get(b"tidemark.kind") == TYPED.encode()
    key_schema = meta[b"tidemark.key.schema"] if meta.get(b"tidemark.key.schemas.enable") == b"true" else b""
    value_schema = (
        meta[b"tidemark.value.schema"] if meta.get(b"tidemark.value.schemas.enable") == b"true" else b""
    )
    for batch in source.iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            key, value = row["key"], row["value"]
            if typed:
                key = wrap(key_schema or None, None if key is None else orjson.dumps(key))
                value = wrap(value_schema or None, None if value is None else orjson.dumps(value))
            else:
                key = None if key is None else key.encode()
                value = None if value is None else value.encode()
            yield LogRecord(topic, row["offset"], row["ts"], key, value, dict(row["headers"] or ()))


def parquet_end_offset(directory: Path) -> int:
    segments = covering(parquet_segments(directory))
    return segments[-1].last + 1 if segments else 0


def log_format_metadata(path: Path) -> dict[str, Any]:
    """A file's `tidemark.*` footer entries, as text."""
    meta = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items() if k.startswith(b"tidemark.")}
