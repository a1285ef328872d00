"""Sending a signal through one of the connector's channels (`signal.enabled.channels`),
in the form its reader in the streamer takes (`cdc_core/signals/channels.py`):

- source: a row in the connector's signal collection (Debezium's
  `signal.data.collection`), written the way the chunk readers write their watermark
  rows, so one writer and one size check serve both;
- kafka: a message on `signal.kafka.topic` keyed by `topic.prefix`, value
  `{"type", "data"}`; the streamer names it `kafka-<partition>-<offset>`;
- file: one `{"id", "type", "data"}` line appended to `signal.file`.

Each returns the id the streamer will know the signal by.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from cdc_core.errors import ConfigError, TidemarkError

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig
    from cdc_core.connector import Connector

CHANNELS = ("source", "kafka", "file")


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


def send_through(
    channel: str,
    connector: Connector,
    config: ConnectorConfig,
    signal_id: str,
    kind: str,
    data: dict[str, Any],
) -> str:
    """Send through `channel` (one of `signal.enabled.channels`); the signal's id as the
    streamer will know it (the kafka channel names its signals by their place)."""
    enabled = config.get("signal.enabled.channels")
    if channel not in enabled:
        raise ConfigError(
            "signal.enabled.channels",
            f"does not include {channel} ({', '.join(enabled)}): the streamer would never read a signal sent there",
        )
    if channel == "source":
        send_signal(connector, config, signal_id, kind, data)
        return signal_id
    if channel == "file":
        return append_to_file(config, signal_id, kind, data)
    if channel == "kafka":
        return produce_to_topic(config, kind, data)
    raise ConfigError("signal.enabled.channels", f"unknown channel {channel!r}; known: {', '.join(CHANNELS)}")


def append_to_file(config: ConnectorConfig, signal_id: str, kind: str, data: dict[str, Any]) -> str:
    """One line appended whole (a single write in append mode), after a newline if the
    file's last line is unfinished: the file channel reads complete lines only."""
    path = config.get("signal.file")
    if not path:
        raise ConfigError("signal.file", "is required to send signals through the file channel")
    line = orjson.dumps({"id": signal_id, "type": kind, "data": data}) + b"\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    return signal_id


def produce_to_topic(config: ConnectorConfig, kind: str, data: dict[str, Any], timeout: float = 30.0) -> str:
    """The message the kafka channel reads: key `topic.prefix`, value `{"type", "data"}`."""
    from confluent_kafka import KafkaException, Producer

    topic = config.get("signal.kafka.topic")
    servers = config.get("signal.kafka.bootstrap.servers") or config.get("sink.kafka.bootstrap.servers")
    if not topic or not servers:
        raise ConfigError(
            "signal.kafka.topic",
            "signal.kafka.topic and signal.kafka.bootstrap.servers (or sink.kafka.bootstrap.servers) are "
            "required to send signals through the kafka channel",
        )
    delivered: dict[str, Any] = {}
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    value = orjson.dumps({"type": kind, "data": data})
    try:
        producer.produce(
            topic,
            key=config.topic_prefix.encode(),
            value=value,
            on_delivery=lambda err, msg: delivered.update(error=err, message=msg),
        )
        producer.flush(timeout)
    except KafkaException as exc:
        raise TidemarkError(f"cannot send the signal to Kafka topic {topic} at {servers}: {exc}") from None
    if not delivered:
        raise TidemarkError(
            f"Kafka at {servers} did not take the signal within {timeout:.0f}s (topic {topic})"
        )
    if delivered["error"] is not None:
        raise TidemarkError(f"Kafka refused the signal on topic {topic}: {delivered['error']}")
    message = delivered["message"]
    return f"kafka-{message.partition()}-{message.offset()}"
