"""Sending a signal through the source channel: a row in the connector's signal
collection (Debezium's `signal.data.collection`), written the way the chunk readers write
their watermark rows, so one writer and one size check serve both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc_core.errors import ConfigError

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig
    from cdc_core.connector import Connector


def send_signal(
    connector: Connector, config: ConnectorConfig, signal_id: str, kind: str, data: dict[str, Any]
) -> None:
    """Insert signal `signal_id` of type `kind` into the connector's signal collection."""
    if not config.get("signal.data.collection"):
        raise ConfigError("signal.data.collection", "is needed to send signals through the source")
    session = connector.open_session(config)
    try:
        session.write_watermark(kind, signal_id, data)
    finally:
        session.close()
