"""Debezium change-event envelopes and the records that carry them.

The dispatcher builds `ChangeEvent`s (already typed, filtered and masked) and turns each
into one or more `Record`s for a sink: the event itself, a tombstone after a delete
(`tombstones.on.delete`), and for a primary-key change a delete of the old key plus a
create of the new key, linked by the `__debezium.newkey` / `__debezium.oldkey` headers.
Serialisation is JSON with or without the Kafka Connect `schema` part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

OP_CREATE = "c"
OP_UPDATE = "u"
OP_DELETE = "d"
OP_READ = "r"
OP_TRUNCATE = "t"
OPS = (OP_CREATE, OP_UPDATE, OP_DELETE, OP_READ, OP_TRUNCATE)

NEWKEY_HEADER = "__debezium.newkey"
OLDKEY_HEADER = "__debezium.oldkey"
# A schemaless value's Connect schema, by reference: its digest, the key of the record on
# `<prefix>.schemas` that holds it (`tidemark.schema.references`).
SCHEMA_HEADER = "__tidemark.schema"
# A schema change's place among the transactions, `epoch,rank` (`SchemaChange.order`): a
# header, so the record's value stays Debezium's.
ORDER_HEADER = "__tidemark.order"
# The tables whose rows a schema change ends (dropped, renamed away, replaced), as a JSON
# list of [database, table], beside its order.
ENDS_HEADER = "__tidemark.ends"
CONTEXT_HEADERS = (
    "__debezium.context.connectorLogicalName",
    "__debezium.context.taskId",
    "__debezium.context.connectorName",
    "__debezium.context.runId",
)


@dataclass(slots=True)
class ChangeEvent:
    """One row change, ready to serialise.

    `key` holds the key columns (None for a truncate or a table without key);
    `source` is the connector's source block in Debezium's field order; `transaction` the
    transaction block (None when transaction metadata is off); `ts_ns` the time the
    streamer processed the event.
    """

    topic: str
    op: str
    key: dict[str, Any] | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    source: dict[str, Any]
    transaction: dict[str, Any] | None
    ts_ns: int
    extra: dict[str, Any] | None = None  # the source's own envelope fields (see `RowChange.extra`)

    def payload(self) -> dict[str, Any]:
        ts_ns = self.ts_ns
        return {
            "before": self.before,
            "after": self.after,
            "source": self.source,
            "transaction": self.transaction,
            "op": self.op,
            "ts_ms": ts_ns // 1_000_000,
            "ts_us": ts_ns // 1_000,
            "ts_ns": ts_ns,
        }


@dataclass(slots=True)
class Record:
    """One message for a topic: what a sink writes. `value` None is a tombstone.

    `key_schema`/`value_schema`: set when `key`/`value` hold the payload alone and the
    schema goes apart (`schemas_apart`): a sink that stores schemas once per file (the
    Parquet event log) gets them without the JSON text around every payload.

    `boundary`: "BEGIN" or "END" on a transaction's boundary record, so a log's writer
    knows where no transaction is open (`cdc_core.sinks.log_cuts`)."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    key_schema: bytes | None = None
    value_schema: bytes | None = None
    boundary: str | None = None


class EventSerializer:
    """Renders events as Kafka Connect JSON, with or without the `schema` part.

    Schemas are passed in already serialised (the caller caches them per table schema
    version), so the hot path only serialises payloads.
    """

    def __init__(self, schemas_enable: bool = True) -> None:
        self.schemas_enable = schemas_enable

    def wrap(self, schema_json: bytes | None, payload: Any) -> bytes:
        body = orjson.dumps(payload, option=orjson.OPT_PASSTHROUGH_DATACLASS)
        if not self.schemas_enable or schema_json is None:
            return body
        return with_schema(schema_json, body)


def with_schema(schema_json: bytes, body: bytes) -> bytes:
    """A Connect JSON value: the payload's JSON with its schema's in front."""
    return b'{"schema":' + schema_json + b',"payload":' + body + b"}"


def dumps(value: Any) -> bytes:
    """The project's JSON encoding (compact, UTF-8)."""
    return orjson.dumps(value)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)
