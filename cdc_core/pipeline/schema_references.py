"""Schemaless values with their Connect schema by reference.

With `value.converter.schemas.enable: false` a value is its payload alone, which a
consumer cannot type exactly (a DECIMAL's bytes, a DATE's day count look like any other
text or number). With `tidemark.schema.references` (the default) each such value names its
schema in the header `__tidemark.schema` (a digest of its topic and schema text), and the
schema itself goes once per run to `<prefix>.schemas`, ahead of the first value naming
it, keyed by that digest (a compacted topic keeps one record per schema version). The
Delta merge reads that topic and parses the payloads with exact types, as if each value
carried its schema. Debezium's own consumers see only an extra header and topic.
"""

from __future__ import annotations

import hashlib

import orjson

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.events.envelope import SCHEMA_HEADER, Record

Headers = tuple[tuple[str, bytes], ...]


def schemas_topic(prefix: str) -> str:
    return f"{prefix}.schemas"


def references_enabled(config: ConnectorConfig) -> bool:
    """Whether the connector's values go without their schema, naming it instead."""
    return not config.get("value.converter.schemas.enable") and bool(config.get("tidemark.schema.references"))


def schema_digest(topic: str, schema: bytes) -> str:
    return hashlib.sha256(topic.encode() + b"\0" + schema).hexdigest()[:24]


def schema_record(prefix: str, digest: str, topic: str, schema: bytes) -> Record:
    key = orjson.dumps({"id": digest})
    value = (
        b'{"id":' + orjson.dumps(digest) + b',"topic":' + orjson.dumps(topic) + b',"schema":' + schema + b"}"
    )
    return Record(schemas_topic(prefix), key, value)


class SchemaReferences:
    """The header naming each (topic, value schema), and its record on `<prefix>.schemas`
    the first time this run names it."""

    def __init__(self, prefix: str, enabled: bool) -> None:
        self.prefix = prefix
        self.enabled = enabled
        self._digests: dict[tuple[str, bytes], tuple[str, tuple[str, bytes]]] = {}
        self._announced: set[str] = set()

    def refer(self, topic: str, schema: bytes | None, headers: Headers) -> tuple[Headers, Record | None]:
        """`headers` with the schema's reference, and the schema's record if it has not
        been written in this run (it goes out before the value, under the same offset)."""
        if not self.enabled or schema is None:
            return headers, None
        found = self._digests.get((topic, schema))
        if found is None:
            digest = schema_digest(topic, schema)
            found = self._digests[(topic, schema)] = (digest, (SCHEMA_HEADER, digest.encode()))
        digest, header = found
        announced = None
        if digest not in self._announced:
            self._announced.add(digest)
            announced = schema_record(self.prefix, digest, topic, schema)
        return (*headers, header), announced
