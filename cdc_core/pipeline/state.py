"""Where a connector keeps its state and sends its records: the lease that keeps it to one
streamer, its state folder, its offset store and its sink (the embedded log or Kafka)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.errors import TidemarkError
from cdc_core.offsets.store import FileOffsetStore, KafkaOffsetStore, OffsetStore
from cdc_core.pipeline.schema_references import references_enabled, schemas_topic
from cdc_core.sinks.base import Sink


class LeaseError(TidemarkError):
    """Another streamer for this connector holds its lease."""


class Lease:
    """One streamer per connector: an exclusive lock on a file in its state folder.

    The kernel drops the lock when the process dies, however it dies, so a crashed
    streamer never blocks its successor.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip()
            os.close(self._fd)
            raise LeaseError(
                f"another streamer for this connector is running (pid {holder or 'unknown'}; lease {path})"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        os.close(self._fd)


class StateLayout:
    """Where a connector keeps its state: offsets, schema history, lease, status."""

    def __init__(self, config: ConnectorConfig) -> None:
        self.root = config.state_directory()
        self.offsets = self.root / "offsets.json"
        self.history = self.root / "schema_history"
        self.lease = self.root / "streamer.lock"
        self.status = self.root / "status.json"
        self.staging = self.root / "snapshot_staging"


def kafka_settings(config: ConnectorConfig) -> dict[str, Any]:
    """The librdkafka settings `sink.kafka.producer.*` gives, and the SASL password from
    its secret (never in the file)."""
    settings: dict[str, Any] = {groups[0]: value for groups, value in config.family("sink.kafka.producer.*")}
    password = config.secret("sink.kafka.sasl.password")
    if password is not None:
        settings["sasl.password"] = password.reveal()
    return settings


def open_offset_store(config: ConnectorConfig, layout: StateLayout) -> OffsetStore:
    if config.get("offset.storage") == "kafka":
        topic = config.get("offset.storage.topic") or f"{config.topic_prefix}.offsets"
        servers = config.get("sink.kafka.bootstrap.servers")
        if not servers:
            raise TidemarkError("offset.storage=kafka needs sink.kafka.bootstrap.servers")
        from cdc_core.sinks.kafka_topics import connection_settings

        # The same cluster as the sink's: its security settings (SASL, TLS) reach it too.
        return KafkaOffsetStore(
            servers, topic, config.name, extra=connection_settings(kafka_settings(config))
        )
    return FileOffsetStore(layout.offsets, config.name)


def open_sink(config: ConnectorConfig, on_ack: Callable[[int], None]) -> Sink:
    if config.get("sink.type") == "kafka":
        from cdc_core.sinks.kafka_sink import KafkaSink

        servers = config.get("sink.kafka.bootstrap.servers")
        if not servers:
            raise TidemarkError("sink.type=kafka needs sink.kafka.bootstrap.servers")
        extra = kafka_settings(config)
        if references_enabled(config):
            from cdc_core.sinks.kafka_topics import connection_settings, ensure_compacted

            topic = schemas_topic(config.topic_prefix)
            ensure_compacted(servers, topic, "schemas", TidemarkError, extra=connection_settings(extra))
        return KafkaSink(servers, on_ack, extra)
    from cdc_core.sinks.local_sink import LocalLogSink

    return LocalLogSink(
        local_log_directory(config),
        on_ack,
        parquet=config.get("sink.local.format") == "parquet",
        key_schemas=config.get("key.converter.schemas.enable"),
        value_schemas=config.get("value.converter.schemas.enable"),
        linger=config.get("sink.local.linger.ms") / 1000,
    )


def local_log_directory(config: ConnectorConfig) -> Path:
    configured = config.get("sink.local.directory")
    if configured:
        return Path(configured)
    return config.state_directory().parent.parent / "eventlog" / config.name
