"""The merge issue 22 measures Tidemark's against: what a data engineer would write first.

`from_json` of each whole value (`{"schema":..., "payload":...}`) with the payload's
schema derived once from the Delta table (its columns in the JSON types the events carry
them in), the newest event per key by `max_by` over the order key, one MERGE that
replaces a row only with a newer event and turns deletes into tombstones. No
transaction alignment, no schema evolution, no check of what the records are: all the
rest Tidemark does, which is why it is the baseline to be at least as fast as.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

ORDER = ("_cdc_epoch", "_cdc_rank", "_cdc_total_order")


def _json_type(data_type: Any) -> Any:
    """The type a Delta column's values have in the events' JSON (Debezium's time types
    are numbers)."""
    from pyspark.sql import types as T

    if isinstance(data_type, (T.TimestampNTZType, T.TimestampType)):
        return T.LongType()
    if isinstance(data_type, T.DateType):
        return T.IntegerType()
    return data_type


def merge(
    spark: Any, read: Callable[[], Any], path: str, topic: str, keys: tuple[str, ...] = ("id",)
) -> float:
    """Seconds to merge the change events of `topic` among `read()`'s records into the
    Delta table at `path`."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from spark_jobs.merge.delta_apply import newer_condition
    from spark_jobs.merge.records import TRANSACTION_BLOCK

    started = time.perf_counter()
    stored = spark.read.format("delta").load(path).schema
    columns = [f for f in stored.fields if not f.name.startswith("_cdc_")]
    row = T.StructType([T.StructField(f.name, _json_type(f.dataType)) for f in columns])
    payload = T.StructType(
        [
            T.StructField("before", row),
            T.StructField("after", row),
            T.StructField("op", T.StringType()),
            T.StructField("source", T.StructType([T.StructField("ts_ms", T.LongType())])),
            T.StructField("transaction", TRANSACTION_BLOCK),
        ]
    )
    p = (
        read()
        .where(F.col("topic") == topic)
        .select(F.from_json("value", T.StructType([T.StructField("payload", payload)])).alias("v"))
        .select("v.payload.*")
    )
    image = F.when(F.col("op") == "d", F.col("before")).otherwise(F.col("after"))

    def landed(field: Any) -> Any:
        value = F.col(f"_r.`{field.name}`")
        if isinstance(field.dataType, T.TimestampNTZType):
            value = F.timestamp_millis(value).cast(T.TimestampNTZType())
        elif isinstance(field.dataType, T.DateType):
            value = F.date_add(F.lit("1970-01-01").cast("date"), value)
        return value.alias(field.name)

    rows = p.select(image.alias("_r"), "op", "source", "transaction").select(
        *[landed(f) for f in columns],
        F.col("transaction.transaction_epoch").alias(ORDER[0]),
        F.col("transaction.transaction_rank").alias(ORDER[1]),
        F.col("transaction.total_order").alias(ORDER[2]),
        F.col("op").alias("_cdc_op"),
        F.timestamp_millis("source.ts_ms").alias("_cdc_source_ts"),
        F.col("transaction.id").alias("_cdc_txn_id"),
        (F.col("op") == "d").alias("_cdc_deleted"),
    )
    others = [c for c in rows.columns if c not in keys]
    newest = (
        rows.groupBy(*keys)
        .agg(F.max_by(F.struct(*others), F.struct(*ORDER)).alias("_e"))
        .select(*keys, "_e.*")
    )
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(newest.alias("s"), on)
        .whenMatchedUpdateAll(condition=newer_condition())
        .whenNotMatchedInsertAll()
        .execute()
    )
    return time.perf_counter() - started


def same_table(spark, ours: str, theirs: str) -> bool:
    """Whether two merged tables hold the same rows (bookkeeping but the transaction id
    included: the straightforward merge keeps tombstones too)."""
    a = spark.read.format("delta").load(ours)
    b = spark.read.format("delta").load(theirs).select(*a.columns)
    return a.exceptAll(b).isEmpty() and b.exceptAll(a).isEmpty()
