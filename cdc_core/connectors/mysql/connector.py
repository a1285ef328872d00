"""The MySQL/MariaDB connector (`cdc_core.connector.Connector`): its own properties and
the entry points to its log reader, its session and its Spark reader. Importing it loads
no driver: config validation reads the properties alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.config.properties import Property
from cdc_core.schema.history import SchemaHistory

PROPERTIES: list[Property] = [
    Property("database.port", "int", default=3306, minimum=1, description="Source database port."),
    Property(
        "database.server.id",
        "int",
        required=True,
        minimum=1,
        description="Replication client id; unique among every replica and CDC client of the server.",
    ),
    Property(
        "decimal.handling.mode",
        "enum",
        default="precise",
        choices=("precise", "string", "double"),
        description="DECIMAL as Connect Decimal (exact), as a string, or as a double.",
    ),
    Property(
        "bigint.unsigned.handling.mode",
        "enum",
        default="long",
        choices=("long", "precise"),
        description="BIGINT UNSIGNED as int64 (values over 2^63-1 wrap, as in Debezium) or as Decimal.",
    ),
    Property(
        "time.precision.mode",
        "enum",
        default="adaptive_time_microseconds",
        choices=(
            "adaptive_time_microseconds",
            "adaptive",
            "connect",
            "isostring",
            "microseconds",
            "nanoseconds",
        ),
        description="Temporal types: Debezium's adaptive types keeping fractional seconds, Connect's "
        "millisecond types, ISO 8601 text (`isostring`), or micro- or nanosecond counts for every TIME and DATETIME.",
    ),
    Property(
        "binary.handling.mode",
        "enum",
        default="bytes",
        choices=("bytes", "base64", "base64-url-safe", "hex"),
        description="BINARY/VARBINARY/BLOB as bytes (base64 in JSON), or as base64 / base64-url-safe / hex strings.",
    ),
]


class MySqlConnector:
    """`cdc_core.connector.Connector` for MySQL and MariaDB (binlog)."""

    name = "mysql"
    title = "MySQL/MariaDB"
    system_databases = frozenset({"mysql", "sys", "performance_schema", "information_schema"})
    initial_snapshot_in_log = False  # `snapshot.mode: initial` is an incremental snapshot
    document_patches = None  # its events carry whole rows
    document_ids = None  # its tables have columns, not documents
    properties = PROPERTIES

    def initial_snapshot_done(self, position: Mapping[str, Any]) -> bool:
        return True  # its initial snapshot is an incremental one, not in the log

    def create_source(self, config: ConnectorConfig, history: SchemaHistory) -> Any:
        # Imported here so reading the properties (config validation) needs no driver.
        from cdc_core.connectors.mysql.binlog_source import BinlogSource

        return BinlogSource(config, history)

    def open_session(self, config: ConnectorConfig) -> Any:
        from cdc_core.connectors.mysql import server
        from cdc_core.connectors.mysql.chunk_reader import MySqlChunkSource
        from cdc_core.connectors.mysql.types import TypeModes

        return MySqlChunkSource(
            server.connection_params(config),
            config.get("signal.data.collection"),
            TypeModes.from_config(config),
        )

    def describe_source(self, config: ConnectorConfig) -> str:
        return f"{config.get('database.hostname')}:{config.get('database.port')}"

    def describe_position(self, position: Mapping[str, Any]) -> str:
        text = f"{position.get('file')}:{position.get('pos')}"
        if position.get("gtids"):
            text += f" gtids={position['gtids']}"
        return text

    def spark_reader(self, config: ConnectorConfig) -> Any:
        from cdc_core.connectors.mysql import server
        from cdc_core.connectors.mysql.spark_reader import MySqlSparkReader

        return MySqlSparkReader(server.connection_params(config))


CONNECTOR = MySqlConnector()
