"""The MySQL/MariaDB connector's entry point: its own properties and its log reader."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.config.properties import Property
from cdc_core.errors import ConfigError
from cdc_core.schema.history import SchemaHistory
from cdc_core.signals.actions import ExecuteSnapshot

if TYPE_CHECKING:
    from cdc_core.connectors.mysql.binlog_source import BinlogSource

PROPERTIES: list[Property] = [
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


def create_source(config: ConnectorConfig, history: SchemaHistory) -> BinlogSource:
    # Imported here so reading the properties (config validation) needs no driver.
    from cdc_core.connectors.mysql.binlog_source import BinlogSource

    return BinlogSource(config, history)


def connect(config: ConnectorConfig) -> Any:
    """A plain connection to the source, as the connector's user."""
    from cdc_core.connectors.mysql import server

    return server.connect(server.connection_params(config))


def check_snapshot_request(config: ConnectorConfig, action: ExecuteSnapshot) -> list[dict[str, Any]]:
    """The tables, keys and filters an execute-snapshot request will read (see
    `snapshot_request`); raises what the streamer would refuse it for."""
    from cdc_core.connectors.mysql.snapshot_request import check_snapshot_request as check

    return check(config, action)


def send_signal(config: ConnectorConfig, signal_id: str, kind: str, data: dict[str, Any]) -> None:
    """Insert a signal into the connector's signal table (Debezium's source channel),
    through the same writer the chunk readers use for their watermark rows."""
    from cdc_core.connectors.mysql import server
    from cdc_core.connectors.mysql.chunk_reader import MySqlChunkSource

    table = config.get("signal.data.collection")
    if not table:
        raise ConfigError("signal.data.collection", "is needed to send signals through the source")
    source = MySqlChunkSource(server.connection_params(config), table)
    try:
        source.write_watermark(kind, signal_id, data)
    finally:
        source.close()
