"""The binlog `source` block: its Connect schema, Debezium's for the server it reads
(`io.debezium.connector.mysql.Source` or `io.debezium.connector.mariadb.Source`, version 1:
Debezium 3 has a connector of its own for MariaDB)."""

from __future__ import annotations

from importlib import metadata

from cdc_core.events.connect_schema import field, struct

try:
    TIDEMARK_VERSION = metadata.version("tidemark")
except metadata.PackageNotFoundError:  # running from a source tree that was not installed
    TIDEMARK_VERSION = "0.0.0+unknown"


def source_schema(flavor: str) -> dict:
    """The `source` schema for a `mysql` or `mariadb` server."""
    return struct(f"io.debezium.connector.{flavor}.Source", _FIELDS, field_name="source", version=1)


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
    field("string", "table"),
    field("int64", "server_id", optional=False),
    field("string", "gtid"),
    field("string", "file", optional=False),
    field("int64", "pos", optional=False),
    field("int32", "row", optional=False),
    field("int64", "thread"),
    field("string", "query"),
]
