"""Properties every connector understands (Debezium names where Debezium has one)."""

from __future__ import annotations

import re

from cdc_core.config.properties import Property

_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")


def _topic_prefix(value: str) -> str | None:
    if not _TOPIC_CHARS.fullmatch(value):
        return "may contain only letters, digits, '.', '_' and '-' (it is used in topic names)"
    return None


def _key_columns(value: str) -> str | None:
    for part in filter(None, (p.strip() for p in value.split(";"))):
        table, sep, cols = part.partition(":")
        if not sep or "." not in table or not cols.strip():
            return f"expected 'db.table:col1,col2;db.other:col', got {part!r}"
    return None


def _channels(value: list[str]) -> str | None:
    bad = [v for v in value if v not in ("source", "kafka", "file")]
    if bad:
        return f"channels must be among source, kafka, file; got {bad}"
    return None


def _skipped_ops(value: list[str]) -> str | None:
    bad = [v for v in value if v not in ("c", "u", "d", "t", "none")]
    if bad:
        return f"operations must be among c, u, d, t or none; got {bad}"
    return None


COMMON_PROPERTIES: list[Property] = [
    Property("name", "str", required=True, description="Unique connector name; keys its offsets and state."),
    Property(
        "connector.class",
        "str",
        required=True,
        description="Source connector, by its short name or Debezium's class name (the names are those "
        "`cdc_core/connectors/registry.py` registers).",
    ),
    Property(
        "topic.prefix",
        "str",
        required=True,
        check=_topic_prefix,
        description="Logical server name; prefix of every topic (`<prefix>.<db>.<table>`).",
    ),
    # Required of every connector that does not declare it otherwise (MongoDB names its
    # hosts in `mongodb.connection.string`); the reference shows which connectors need it.
    Property("database.hostname", "str", required=True, description="Source database host."),
    Property("database.user", "str", required=True, description="Source database user."),
    Property(
        "database.password",
        "str",
        secret=True,
        description="Never in the file: the password comes from the environment variable named by "
        "`database.password.env`, or from an Airflow connection.",
    ),
    Property(
        "database.password.env",
        "str",
        default="TIDEMARK_DB_PASSWORD",
        description="Environment variable holding the source database password.",
    ),
    Property("database.include.list", "regex-list", description="Databases to capture (anchored regexes)."),
    Property("database.exclude.list", "regex-list", description="Databases not to capture."),
    Property("table.include.list", "regex-list", description="Tables to capture, as `db.table` regexes."),
    Property("table.exclude.list", "regex-list", description="Tables not to capture."),
    Property(
        "column.include.list", "regex-list", description="Columns to keep, as `db.table.column` regexes."
    ),
    Property("column.exclude.list", "regex-list", description="Columns to drop from events."),
    Property(
        "column.mask.with.N.chars",
        "regex-list",
        pattern=r"column\.mask\.with\.(\d+)\.chars",
        description="Columns whose values are replaced by N `*` characters.",
    ),
    Property(
        "column.mask.hash.ALG.with.salt.SALT",
        "regex-list",
        pattern=r"column\.mask\.hash\.([A-Za-z0-9-]+)\.with\.salt\.(.+)",
        description=(
            "Columns replaced by the hex hash (ALG: SHA-256, SHA-512, MD5, ...) of salt + the value's "
            "event form (text as is, other values as their JSON text)."
        ),
    ),
    Property(
        "column.truncate.to.N.chars",
        "regex-list",
        pattern=r"column\.truncate\.to\.(\d+)\.chars",
        description="Character columns (text, ENUM, SET, JSON) truncated to N characters; others are left alone.",
    ),
    Property(
        "message.key.columns",
        "str",
        check=_key_columns,
        description="Key columns per table, overriding the primary key: `db.t:c1,c2;db.u:c`.",
    ),
    Property(
        "skipped.operations",
        "list",
        default=["t"],
        check=_skipped_ops,
        description='Operations not emitted: any of c, u, d, t; `none` emits all. Set `none` to land TRUNCATEs in Delta (see "Delta merge").',
    ),
    Property(
        "tombstones.on.delete",
        "bool",
        default=True,
        description="Emit a null-value tombstone after a delete.",
    ),
    Property(
        "provide.transaction.metadata",
        "bool",
        default=True,
        description="BEGIN/END events on `<prefix>.transaction` and the `transaction` block with the order "
        "key in every event. On by default: the Delta merge orders events by it.",
    ),
    Property(
        "topic.transaction", "str", default="transaction", description="Suffix of the transaction topic."
    ),
    Property(
        "include.schema.changes",
        "bool",
        default=True,
        description="Schema-change events on the `<prefix>` topic.",
    ),
    Property(
        "heartbeat.interval.ms",
        "int",
        default=0,
        minimum=0,
        description="Emit a heartbeat on `__debezium-heartbeat.<prefix>` this often (0: off).",
    ),
    Property(
        "topic.heartbeat.prefix", "str", default="__debezium-heartbeat", description="Heartbeat topic prefix."
    ),
    Property(
        "max.batch.size", "int", default=2048, minimum=1, description="Events per batch handed to the sink."
    ),
    Property(
        "max.queue.size",
        "int",
        default=8192,
        minimum=1,
        description="Events buffered between the log reader and the sink; the reader blocks when full.",
    ),
    Property(
        "signal.data.collection",
        "str",
        description="The signal table, `db.table` (Debezium-compatible: id, type, data).",
    ),
    Property(
        "signal.enabled.channels",
        "list",
        default=["source"],
        check=_channels,
        description="Where signals come from: any of source (the signal table), kafka, file.",
    ),
    Property(
        "signal.kafka.topic",
        "str",
        description="Signal topic (kafka channel); message keys must equal `topic.prefix`.",
    ),
    Property(
        "signal.kafka.bootstrap.servers",
        "str",
        description="Brokers of the signal topic (default: `sink.kafka.bootstrap.servers`).",
    ),
    Property(
        "signal.file",
        "str",
        description="JSON-lines signal file (file channel): one `{id, type, data}` per line.",
    ),
    Property(
        "signal.poll.interval.ms",
        "int",
        default=1000,
        minimum=10,
        description="How often the kafka and file channels look for signals.",
    ),
    Property(
        "incremental.snapshot.chunk.size",
        "int",
        default=1024,
        minimum=1,
        description="Rows per snapshot window (chunk).",
    ),
    Property(
        "read.only",
        "bool",
        default=False,
        description="Incremental snapshots without writing to the source: log positions read before and after "
        "each chunk stand in for watermark rows (MySQL/MariaDB with GTIDs).",
    ),
    Property(
        "snapshot.mode",
        "enum",
        default="no_data",
        choices=("no_data", "initial"),
        description="`initial`: at first start, snapshot every captured table incrementally while streaming "
        "(streaming never waits); `no_data`: schema only.",
    ),
    Property(
        "event.processing.failure.handling.mode",
        "enum",
        default="fail",
        choices=("fail", "warn", "skip", "ignore"),
        description="An event that cannot be decoded or processed (MySQL/MariaDB: rows a session logged "
        "without some columns or as a statement) stops the streamer (fail), is logged and skipped (warn), or "
        "is skipped (skip; `ignore`, Debezium's transitional name, is the same).",
    ),
    Property(
        "schema.history.internal.skip.unparseable.ddl",
        "bool",
        default=False,
        description="Skip DDL the parser cannot read (with a warning) instead of stopping.",
    ),
    Property(
        "schema.history.internal.store.only.captured.tables.ddl",
        "bool",
        default=False,
        description="Keep only the DDL of captured tables in the schema history.",
    ),
    Property(
        "schema.history.internal.checkpoint.interval",
        "int",
        default=100,
        minimum=1,
        description="Write a full schema checkpoint after this many DDL statements.",
    ),
    Property(
        "state.directory",
        "str",
        description="Folder for offsets, schema history and locks (default `.local/state/<name>`).",
    ),
    Property(
        "offset.storage",
        "enum",
        default="file",
        choices=("file", "kafka"),
        description="Where offsets live: a local file (fsync + atomic rename) or a compacted Kafka topic.",
    ),
    Property("offset.storage.topic", "str", description="Compacted topic for `offset.storage=kafka`."),
    Property(
        "offset.flush.interval.ms",
        "int",
        default=1000,
        minimum=0,
        description="Commit acknowledged offsets at most this often.",
    ),
    Property(
        "sink.type",
        "enum",
        default="local",
        choices=("local", "kafka"),
        description="`local`: the embedded event log on disk; `kafka`: a Kafka cluster.",
    ),
    Property(
        "sink.local.directory",
        "str",
        description="Embedded event log folder (default `.local/eventlog/<name>`).",
    ),
    Property(
        "sink.local.format",
        "enum",
        default="parquet",
        choices=("parquet", "json"),
        description="The embedded event log's files: `parquet` (typed columns that the Delta merge reads "
        "without parsing JSON) or `json` (JSON lines). A log written in one format is read in both; a "
        "JSON-lines log continues in Parquet, not back.",
    ),
    Property(
        "sink.local.linger.ms",
        "int",
        default=100,
        minimum=0,
        description="`parquet`: records wait up to this long to land together, so a slow stream writes fewer, "
        "larger files (each landing is one file per topic); a busy one lands as fast as it writes. "
        "Acknowledgements (committed offsets) wait as long.",
    ),
    Property(
        "sink.kafka.bootstrap.servers", "str", description="Kafka bootstrap servers for `sink.type=kafka`."
    ),
    Property(
        "sink.kafka.producer.*",
        "str",
        pattern=r"sink\.kafka\.producer\.(.+)",
        description="Extra librdkafka producer settings (e.g. `sink.kafka.producer.compression.type`; "
        "`security.protocol`, `sasl.*`, `ssl.*` reach the offset store and topic checks too). No password: "
        "see `sink.kafka.sasl.password`.",
    ),
    Property(
        "sink.kafka.sasl.password",
        "str",
        secret=True,
        description="Never in the file: Kafka's SASL password comes from the environment variable named by "
        "`sink.kafka.sasl.password.env`.",
    ),
    Property(
        "sink.kafka.sasl.password.env",
        "str",
        default="TIDEMARK_KAFKA_SASL_PASSWORD",
        description="Environment variable holding Kafka's SASL password.",
    ),
    Property(
        "key.converter.schemas.enable",
        "bool",
        default=True,
        description="Include the Connect schema in keys.",
    ),
    Property(
        "value.converter.schemas.enable",
        "bool",
        default=True,
        description="Include the Connect schema in values.",
    ),
    Property(
        "tidemark.schema.references",
        "bool",
        default=True,
        description=(
            "With `value.converter.schemas.enable: false`: each value names its Connect schema in the"
            " header `__tidemark.schema`, and each schema is written once per run to `<prefix>.schemas`,"
            " so the Delta merge lands schemaless JSON with exact types."
        ),
    ),
    Property(
        "errors.max.retries",
        "int",
        default=-1,
        minimum=-1,
        description="Reconnect attempts after the database or broker goes away (-1: forever).",
    ),
    Property(
        "errors.retry.delay.initial.ms", "int", default=300, minimum=1, description="First reconnect delay."
    ),
    Property(
        "errors.retry.delay.max.ms", "int", default=10000, minimum=1, description="Longest reconnect delay."
    ),
]
