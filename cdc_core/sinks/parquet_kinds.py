"""Which kind of file a Parquet event log's records of one topic, key schema and value
schema go to (`cdc_core.sinks.parquet_log`), and the footer that says how they read back.

A value schema that Arrow can type (`arrow_schema`) gives `typed` files of the envelope's
own columns; anything else (no schema, nested row columns) gives `json` files of the text.
The digest in a file's name stands for everything in its footer that changes how its
records read back, so compaction only ever joins files that read back alike."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson
import pyarrow as pa

from cdc_core.sinks.arrow_schema import Untyped, arrow_type, row_type

VERSION = "1"
TYPED, JSON = "typed", "json"


@dataclass
class FileKind:
    """How the records of one (topic, key schema, value schema) are stored."""

    typed: bool
    digest: str
    metadata: dict[bytes, bytes]
    parse: pa.Schema | None = None  # the typed lines' schema for Arrow's JSON reader


def file_kind(
    topic: str, key_schema: bytes | None, value_schema: bytes | None, key_schemas: bool, value_schemas: bool
) -> FileKind:
    metadata = {
        b"tidemark.log.version": VERSION.encode(),
        b"tidemark.topic": topic.encode(),
        b"tidemark.key.schema": key_schema or b"",
        b"tidemark.value.schema": value_schema or b"",
        b"tidemark.key.schemas.enable": b"true" if key_schemas else b"false",
        b"tidemark.value.schemas.enable": b"true" if value_schemas else b"false",
    }
    parse = None
    if value_schema is not None:
        try:
            value = arrow_type(orjson.loads(value_schema))
            key = row_type(orjson.loads(key_schema)) if key_schema is not None else pa.string()
            parse = pa.schema([("o", pa.int64()), ("t", pa.int64()), ("k", key), ("v", value)])
        except Untyped:
            parse = None
    kind = TYPED if parse is not None else JSON
    metadata[b"tidemark.kind"] = kind.encode()
    # Files of the default flags keep the digests they had before the flags were in it.
    flags = metadata[b"tidemark.key.schemas.enable"] + metadata[b"tidemark.value.schemas.enable"]
    parts = [kind.encode(), key_schema or b"", value_schema or b""] + (
        [flags] if flags != b"truetrue" else []
    )
    digest = hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]
    return FileKind(parse is not None, digest, metadata, parse)
