"""What a streamer session builds around its source for snapshots and signals: the
snapshot stage, from the committed snapshot state, and the pollers of the kafka and file
signal channels. Kept apart from the streamer's loop, which only drives them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connectors.registry import connector_of
from cdc_core.errors import ConfigError, TidemarkError
from cdc_core.filters import ColumnRules, TableFilter
from cdc_core.pipeline.state import StateLayout
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.snapshot.context import DAY_MS, SnapshotContext
from cdc_core.snapshot.stage import SnapshotStage
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import LocalStaging
from cdc_core.source import Source


def signal_channels(config: ConnectorConfig, stage: SnapshotStage) -> list[Any]:
    """Pollers for the kafka and file channels, reading on from the committed positions."""
    from cdc_core.signals.channels import FileChannel, KafkaChannel

    enabled = config.get("signal.enabled.channels")
    interval = config.get("signal.poll.interval.ms") / 1000
    channels: list[Any] = []
    if "file" in enabled:
        path = config.get("signal.file")
        if not path:
            raise ConfigError("signal.file", "is required when signal.enabled.channels includes file")
        channels.append(
            FileChannel(Path(path), int(stage.context.channels.get("file", 0)), stage.submit, interval)
        )
    if "kafka" in enabled:
        topic = config.get("signal.kafka.topic")
        servers = config.get("signal.kafka.bootstrap.servers") or config.get("sink.kafka.bootstrap.servers")
        if not topic or not servers:
            raise ConfigError(
                "signal.kafka.topic",
                "signal.kafka.topic and signal.kafka.bootstrap.servers (or sink.kafka.bootstrap.servers) are "
                "required when signal.enabled.channels includes kafka",
            )
        positions = stage.context.channels.get("kafka", {})
        channels.append(KafkaChannel(servers, topic, config.topic_prefix, positions, stage.submit, interval))
    return channels


def _position_watermarks(config: ConnectorConfig, source: Source) -> Any:
    """Position helpers when the connector has them (GTIDs); read.only requires them."""
    try:
        return source.position_watermarks()
    except TidemarkError:
        if config.get("read.only"):
            raise
        return None


def snapshot_stage(
    config: ConnectorConfig, source: Source, committed: dict[str, Any] | None, layout: StateLayout
) -> SnapshotStage:
    """The snapshot stage for one reader session, from the committed snapshot state."""
    keep_ms = config.get("signal.refused.retention.days") * DAY_MS
    context = SnapshotContext.from_json((committed or {}).get("snapshot")).keep_refused(keep_ms)
    signal_table = config.get("signal.data.collection")
    tables = TableFilter(config)
    rules = ColumnRules(config)

    def key_columns(table_id: TableId) -> tuple[str, ...]:
        schema = source.current_tables().get(table_id)
        return () if schema is None else tuple(rules.key_for(schema))

    types = source.type_mapper()

    def staged_form(schema: TableSchema, snapshot_key: tuple[str, ...]) -> StagedForm:
        return StagedForm(schema, rules, types, snapshot_key)

    stage = SnapshotStage(
        context,
        source.current_tables(),
        tables.captures,
        TableId.parse(signal_table) if signal_table else None,
        LocalStaging(layout.staging),
        config.get("incremental.snapshot.chunk.size"),
        types.key_value,
        key_columns,
        source_signals="source" in config.get("signal.enabled.channels"),
        open_chunk_source=source.chunk_source,
        positions=_position_watermarks(config, source),
        staged_form=staged_form,
        partitions=source.partitions,
        refused_keep_ms=keep_ms,
        excluded_by=tables.excluded_by,
    )
    initial = (
        committed is None
        and config.get("snapshot.mode") == "initial"
        and not connector_of(config).initial_snapshot_in_log
    )
    watermarks = signal_table is not None or config.get("read.only")
    if initial and not watermarks:
        raise TidemarkError(
            "snapshot.mode=initial needs signal.data.collection (or read.only) for its watermarks"
        )
    if watermarks:
        stage.check_captured(initial)
    synthetic = (committed or {}).get("synthetic") if (committed or {}).get("in_txn") else None
    stage.resume_releases((committed or {}).get("source"), synthetic, bool(config.get("read.only")))
    return stage
