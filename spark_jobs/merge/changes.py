"""Change events (Kafka records or the embedded log's, as JSON text) to typed change rows.

Input: `topic, key, value` (strings; `value` null for a tombstone) plus the source's own
position columns. Output, per table: the row's columns (after-image, or before-image of a
delete) in their Delta types, and the bookkeeping of DESIGN.md §5 — `_cdc_epoch`,
`_cdc_rank`, `_cdc_total_order` (the order key), `_cdc_op`, `_cdc_source_ts`,
`_cdc_txn_id`, `_cdc_deleted`.

Row types come from the Connect schema each event carries (`schemas.enable`, the
default). Events of one table with different schemas (a column added mid-batch) are read
each with its own schema and unioned by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from spark_jobs.merge import connect_types

ORDER_KEY = ("_cdc_epoch", "_cdc_rank", "_cdc_total_order")

_ENVELOPE = (
    "op STRING, before STRING, after STRING, source STRUCT<ts_ms: BIGINT, db: STRING, `table`: STRING>, "
    "transaction STRUCT<id: STRING, total_order: BIGINT, transaction_epoch: BIGINT, transaction_rank: BIGINT>"
)
# A value with its Connect schema is `{"schema": ..., "payload": envelope}`; without, the envelope.
WRAPPED = "schema STRING, payload STRING"


@dataclass(frozen=True)
class TableChanges:
    """One table's change rows in a batch."""

    topic: str
    key_columns: tuple[str, ...]
    rows: DataFrame


def unwrapped(wrapped: Column) -> Column:
    """The envelope's JSON text, from `from_json(value, WRAPPED)`."""
    return F.when(wrapped["payload"].isNotNull(), wrapped["payload"]).otherwise(F.col("value"))


def envelopes(records: DataFrame) -> DataFrame:
    """Records -> `topic, schema, env` (the parsed envelope); tombstones dropped."""
    wrapped = records.where(F.col("value").isNotNull()).select(
        "topic", "key", F.from_json("value", WRAPPED).alias("w"), "value"
    )
    payload = unwrapped(F.col("w"))
    return wrapped.select(
        "topic",
        "key",
        F.col("w.schema").alias("schema"),
        F.from_json(payload, _ENVELOPE).alias("env"),
    ).where(F.col("env.op").isin("c", "u", "d", "r"))


def row_fields(value_schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's field schemas, from an envelope's Connect schema."""
    for part in value_schema.get("fields", []):
        if part.get("field") in ("after", "before") and part.get("type") == "struct":
            return list(part["fields"])
    raise TidemarkError("an event's schema has no before/after struct")


def key_columns(key_text: str | None, topic: str) -> tuple[str, ...]:
    if key_text is None:
        raise TidemarkError(
            f"events on {topic} have no key: a Delta MERGE needs one (a primary key or message.key.columns)"
        )
    key = json.loads(key_text)
    if isinstance(key, dict) and "schema" in key and "payload" in key:
        return tuple(f["field"] for f in key["schema"]["fields"])
    return tuple(key)


def table_changes(records: DataFrame) -> list[TableChanges]:
    """Every table's typed change rows in `records` (one small driver query for the
    distinct schemas and a key sample per topic)."""
    parsed = envelopes(records).withColumn("schema_id", F.xxhash64("schema"))
    shapes = parsed.groupBy("topic", "schema_id").agg(
        F.first("schema").alias("schema"), F.first("key").alias("key")
    )
    by_topic: dict[str, list[tuple[int, str | None, str | None]]] = {}
    for shape in shapes.collect():
        by_topic.setdefault(shape.topic, []).append((shape.schema_id, shape.schema, shape.key))
    out = []
    for topic, variants in sorted(by_topic.items()):
        keys = key_columns(variants[0][2], topic)
        frames = []
        for schema_id, schema_text, _ in variants:
            if schema_text is None:
                raise TidemarkError(
                    f"events on {topic} carry no schema: set value.converter.schemas.enable (the default) "
                    "so the merge knows each column's type"
                )
            fields = row_fields(json.loads(schema_text))
            frames.append(
                _typed(parsed.where((F.col("topic") == topic) & (F.col("schema_id") == schema_id)), fields)
            )
        rows = frames[0]
        for frame in frames[1:]:
            rows = rows.unionByName(frame, allowMissingColumns=True)
        missing = [k for k in keys if k not in rows.columns]
        if missing:
            raise TidemarkError(f"events on {topic}: key column(s) {missing} are not row columns")
        out.append(TableChanges(topic, keys, rows))
    return out


def _typed(parsed: DataFrame, fields: list[dict[str, Any]]) -> DataFrame:
    read_as = T.StructType([T.StructField(f["field"], connect_types.json_type(f)) for f in fields])
    image = F.when(F.col("env.op") == "d", F.col("env.before")).otherwise(F.col("env.after"))
    row = parsed.select(F.from_json(image, read_as).alias("row"), "env")
    columns: list[Column] = [
        connect_types.convert(F.col(f"row.`{f['field']}`"), f).alias(f["field"]) for f in fields
    ]
    return row.select(
        *columns,
        F.col("env.transaction.transaction_epoch").alias("_cdc_epoch"),
        F.col("env.transaction.transaction_rank").alias("_cdc_rank"),
        F.col("env.transaction.total_order").alias("_cdc_total_order"),
        F.col("env.op").alias("_cdc_op"),
        F.timestamp_millis(F.col("env.source.ts_ms")).alias("_cdc_source_ts"),
        F.col("env.transaction.id").alias("_cdc_txn_id"),
        (F.col("env.op") == "d").alias("_cdc_deleted"),
    )


def newest_per_key(rows: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """The newest event per key by order key (epoch, rank, total_order): one aggregation,
    no sort; the order of events in the batch does not matter."""
    others = [c for c in rows.columns if c not in keys]
    order = F.struct(*[F.col(c) for c in ORDER_KEY])
    newest = rows.groupBy(*keys).agg(F.max_by(F.struct(*others), order).alias("_e"))
    return newest.select(*keys, *[F.col(f"_e.`{c}`").alias(c) for c in others]).select(*rows.columns)
