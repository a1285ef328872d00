"""SCD type 2: every version of a row kept, each with the order key where it ends.

A version is an event: its order key starts it, the next version's order key (by key)
ends it, and the newest version is current unless it is a delete. Versions are
identified by key and order key, so a replayed batch inserts nothing new, and a late
event lands in the middle of its key's history: the ends and the current flag are
recomputed over the whole history of every key the batch touched, in the same MERGE
that inserts the new versions (one commit per batch).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from spark_jobs.merge.changes import ORDER_KEY
from spark_jobs.merge.delta_apply import commit_settings, create_table, table_exists
from spark_jobs.sql_names import columns, quoted

END = ("_cdc_end_epoch", "_cdc_end_rank", "_cdc_end_total_order")
CURRENT = "_cdc_current"


def merge_history(
    spark: SparkSession,
    path: str,
    events: DataFrame,
    keys: tuple[str, ...],
    commit_metadata: dict[str, Any] | None = None,
    partition_by: tuple[str, ...] = (),
    cluster_by: tuple[str, ...] = (),
) -> None:
    """Add the batch's events (all of them, not only the newest per key) as versions."""
    from delta.tables import DeltaTable

    identity = [*keys, *ORDER_KEY]
    versions = events.dropDuplicates(identity)
    if not table_exists(spark, path):
        create_table(spark, path, versioned(versions).limit(0), partition_by, cluster_by)
    touched = versions.select(*columns(keys)).distinct()
    stored = spark.read.format("delta").load(path).join(touched, list(keys), "left_semi")
    history = (
        stored.drop(*END, CURRENT).unionByName(versions, allowMissingColumns=True).dropDuplicates(identity)
    )
    by_key = Window.partitionBy(*columns(keys)).orderBy(*ORDER_KEY)
    ends = [F.lead(F.col(c)).over(by_key).alias(e) for c, e in zip(ORDER_KEY, END, strict=True)]
    computed = history.select("*", *ends)
    computed = computed.withColumn(CURRENT, F.col(END[0]).isNull() & ~F.col("_cdc_deleted"))
    on = " AND ".join(f"t.{quoted(c)} = s.{quoted(c)}" for c in identity)
    changed = " OR ".join(f"NOT (t.{quoted(c)} <=> s.{quoted(c)})" for c in (*END, CURRENT))
    builder = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(computed.alias("s"), on)
        .withSchemaEvolution()
        .whenMatchedUpdate(condition=changed, set={c: f"s.{quoted(c)}" for c in (*END, CURRENT)})
        .whenNotMatchedInsertAll()
    )
    with commit_settings(spark, commit_metadata):
        builder.execute()


def versioned(events: DataFrame) -> DataFrame:
    """Events with the columns of a version not yet placed in its key's history."""
    return events.select("*", *[F.lit(None).cast("long").alias(c) for c in END], F.lit(False).alias(CURRENT))
