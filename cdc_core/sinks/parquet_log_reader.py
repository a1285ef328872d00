"""Reading the Parquet event log (`cdc_core.sinks.parquet_log`) as the JSON-lines log
reads: the same records, key and value as the Connect JSON the converter writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from cdc_core.sinks.local_log import LocalLogError, LogRecord
from cdc_core.sinks.parquet_log import TYPED, VERSION, covering, parquet_segments, wrap


def read_file(topic: str, path: Path, start_offset: int = 0) -> Iterator[LogRecord]:
    """A file's records as the JSON-lines log gives them: key and value as the Connect
    JSON the converter writes (a typed file's payloads rendered again, byte for byte)."""
    source = pq.ParquetFile(path)
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
            if row["offset"] < start_offset:
                continue
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
