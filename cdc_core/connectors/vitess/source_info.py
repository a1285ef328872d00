"""The Vitess `source` block: Debezium's `io.debezium.connector.vitess.Source`, version 1.

`db` is always the empty string (the keyspace has a field of its own), `shard` is the
shard of the row, and `vgtid` the VGTID of the transaction: every shard's position
after it, as Debezium's Vitess connector writes it."""

from __future__ import annotations

from typing import Any

from cdc_core.connectors.mysql.source_info import TIDEMARK_VERSION
from cdc_core.events.connect_schema import Schema, field, struct

CONNECTOR = "vitess"

_FIELDS = [
    field("string", "version", optional=False),
    field("string", "connector", optional=False),
    field("string", "name", optional=False),
    field("int64", "ts_ms", optional=False),
    field(
        "string",
        "snapshot",
        logical="io.debezium.data.Enum",
        version=1,
        parameters={
            "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
        },
        default="false",
    ),
    field("string", "db", optional=False),
    field("string", "sequence"),
    field("int64", "ts_us"),
    field("int64", "ts_ns"),
    field("string", "keyspace", optional=False),
    field("string", "table", optional=False),
    field("string", "shard", optional=False),
    field("string", "vgtid", optional=False),
]


def source_schema() -> Schema:
    return struct("io.debezium.connector.vitess.Source", _FIELDS, field_name="source", version=1)


def source_block(name: str, keyspace: str, table: str, shard: str, vgtid: str, ts_ms: int) -> dict[str, Any]:
    return {
        "version": TIDEMARK_VERSION,
        "connector": CONNECTOR,
        "name": name,
        "ts_ms": ts_ms,
        "snapshot": "false",
        "db": "",
        "sequence": None,
        "ts_us": ts_ms * 1000,
        "ts_ns": ts_ms * 1_000_000,
        "keyspace": keyspace,
        "table": table,
        "shard": shard,
        "vgtid": vgtid,
    }
