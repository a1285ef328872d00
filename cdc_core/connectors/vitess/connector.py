"""The Vitess connector (`cdc_core.connector.Connector`): VTGate's VStream over gRPC for
the log, VTGate's MySQL protocol for signals and snapshot chunks (seed 004). Importing it
loads neither gRPC nor a driver: config validation reads the properties alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.config.properties import Property
from cdc_core.config.snapshot_properties import OVERRIDES, REFUSED_MODES, overrides_properties
from cdc_core.schema.history import SchemaHistory


def _vgtid(value: Any) -> str | None:
    text = str(value).strip()
    if text == "current" or text.startswith("["):
        return None
    return 'expected "current" or a VGTID (a JSON array of {"keyspace", "shard", "gtid"} objects)'


_NO_SCHEMA_ONLY = {
    mode: "Vitess reads no schema at start (VStream describes each table with its rows): use never, which "
    "streams from vitess.gtid"
    for mode in ("no_data", "schema_only")
}


def _refuse_overrides(config: ConnectorConfig) -> str | None:
    given = config.get(OVERRIDES) or config.family(f"{OVERRIDES}.DB.TABLE")
    if given:
        return (
            "Vitess cannot filter its snapshots so: the initial snapshot is VStream's copy phase, which copies "
            "whole tables, and blocking snapshots need one log. Filter an incremental snapshot with its "
            "additional-conditions instead"
        )
    return None


PROPERTIES: list[Property] = [
    Property("database.port", "int", default=15991, minimum=1, description="VTGate's gRPC port."),
    Property("vitess.keyspace", "str", required=True, description="The keyspace to capture."),
    Property(
        "vitess.shard",
        "list",
        description="Shards to capture (e.g. `-80,80-`); all of the keyspace's shards when unset (recommended: "
        "a reshard is then followed).",
    ),
    Property(
        "vitess.gtid",
        "str",
        default="current",
        check=_vgtid,
        description="Where to start without offsets when `snapshot.mode` is `never`: `current`, or a VGTID "
        "(JSON, one entry per shard of `vitess.shard`).",
    ),
    Property(
        "vitess.tablet.type",
        "enum",
        default="MASTER",
        choices=("MASTER", "PRIMARY", "REPLICA", "RDONLY"),
        description="The tablets VStream reads: the primary, a replica or a read-only replica.",
    ),
    Property(
        "vitess.stop_on_reshard",
        "bool",
        default=False,
        description="Stop at a reshard (VStream's stop_on_reshard) instead of following it onto the new shards; "
        "the streamer then stops with the new shards' VGTID in its message.",
    ),
    Property(
        "vitess.stream.keyspace.heartbeats",
        "bool",
        default=False,
        description="Stream the tablets' `_vt.heartbeat` writes as `<keyspace>.heartbeat` rows (add the table "
        "to `table.include.list` to emit them).",
    ),
    Property(
        "vitess.mysql.hostname",
        "str",
        description="VTGate's MySQL protocol host, for signals and snapshot chunks (default: database.hostname).",
    ),
    Property(
        "vitess.mysql.port", "int", default=15306, minimum=1, description="VTGate's MySQL protocol port."
    ),
    Property(
        "vitess.grpc.headers",
        "str",
        description="gRPC headers sent with the VStream call: `key1:value1,key2:value2`.",
    ),
    Property(
        "vitess.grpc.max_inbound_message_size",
        "int",
        default=64 * 1024 * 1024,
        minimum=1024,
        description="The largest VStream response accepted, in bytes.",
    ),
    Property(
        "snapshot.mode",
        "enum",
        default="initial",
        choices=("initial", "never", "initial_only", "when_needed"),
        refused={**{m: r for m, r in REFUSED_MODES.items() if m != "never"}, **_NO_SCHEMA_ONLY},
        description="`initial`: at first start, VStream copies every table (its copy phase) and then streams; "
        "`never`: stream from `vitess.gtid`; `initial_only`: the copy phase, and the streamer stops (exit 0) "
        "once it is done and no incremental snapshot is running; `when_needed`: as `initial` at first start, "
        "and when the committed VGTID can no longer be resumed (purged binlogs, a shard without its GTIDs) "
        "the copy phase again from the current positions instead of failing, every shard's epoch above the "
        "lost position's.",
    ),
    *overrides_properties(
        _refuse_overrides,
        " Vitess refuses it: its initial snapshot is VStream's copy phase, which copies whole tables, and it "
        "has no blocking snapshots.",
    ),
    Property(
        "time.precision.mode",
        "enum",
        default="adaptive_time_microseconds",
        choices=("adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds"),
        description="Temporal types: Debezium's micro-precision types, Connect's millisecond types, ISO text, "
        "or micro- or nanosecond counts.",
    ),
    Property(
        "bigint.unsigned.handling.mode",
        "enum",
        default="string",
        choices=("string", "long", "precise"),
        description="BIGINT UNSIGNED as a string, an int64 (values over 2^63-1 wrap) or a Connect Decimal.",
    ),
    Property(
        "binary.handling.mode",
        "enum",
        default="bytes",
        choices=("bytes", "base64", "base64-url-safe", "hex"),
        description="BINARY/VARBINARY/BLOB as bytes (base64 in JSON), or as base64 / base64-url-safe / hex strings.",
    ),
]


class VitessConnector:
    """`cdc_core.connector.Connector` for Vitess (VTGate)."""

    name = "vitess"
    title = "Vitess"
    system_databases = frozenset({"_vt", "mysql", "sys", "performance_schema", "information_schema"})
    properties = PROPERTIES
    # The copy phase of VStream takes the initial snapshot: no watermark snapshot at first start.
    initial_snapshot_in_log = True
    document_patches = None  # its events carry whole rows
    document_ids = None  # its tables have columns, not documents

    def initial_snapshot_done(self, position: Mapping[str, Any]) -> bool:
        """Past the copy phase: no table left to copy, none in progress on any shard."""
        from cdc_core.connectors.vitess.vgtid import Vgtid

        text = position.get("vgtid")
        return bool(text) and position.get("copy") is None and not Vgtid.from_json(text).copying()

    def create_source(self, config: ConnectorConfig, history: SchemaHistory) -> Any:
        from cdc_core.connectors.vitess.source import VitessSource

        return VitessSource(config, history)

    def open_session(self, config: ConnectorConfig) -> Any:
        from cdc_core.connectors.vitess.session import VitessSession

        return VitessSession(config)

    def describe_source(self, config: ConnectorConfig) -> str:
        return f"VTGate {config.get('database.hostname')}:{config.get('database.port')}"

    def describe_position(self, position: Mapping[str, Any]) -> str:
        from cdc_core.connectors.vitess.vgtid import Vgtid

        text = position.get("vgtid")
        if not text:
            return "-"
        vgtid = Vgtid.from_json(text)
        parts = []
        for s in vgtid.shards:
            where = s.gtid if s.gtid not in ("", "current") else {"": "copy", "current": "current"}[s.gtid]
            copying = f" (copying {len(s.table_p_ks)} table(s))" if s.table_p_ks else ""
            parts.append(f"{s.keyspace}/{s.shard or '*'}@{where}{copying}")
        return " ".join(parts)

    def spark_reader(self, config: ConnectorConfig) -> None:
        return None  # the Spark chunk job reads Vitess windows with Python on its executors


CONNECTOR = VitessConnector()
