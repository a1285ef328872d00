"""One table's deduplicated changes MERGEd into its Delta table, guarded by order key.

A stored row is replaced only by a strictly newer event (epoch, then rank, then
total_order), so a replayed batch changes nothing and a late, older event loses. A delete
becomes a tombstone (`_cdc_deleted`, the row's last values kept) rather than a removed
row: an older update arriving after it finds a newer order key and cannot bring the row
back. Tombstones go when the housekeeping job's retention has passed; `live_rows` hides
them from readers.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from spark_jobs.merge.changes import ORDER_KEY
from spark_jobs.session import session_settings
from spark_jobs.sql_names import columns, quoted
from spark_jobs.table_checksum import BOOKKEEPING_PREFIX

USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
# Delta reads a MERGE's source twice (to find the files it touches, then to rewrite them)
# and so materialises it first, by default on disk only. The source of a merge is one
# batch's newest rows per key: memory first, spilling to disk when short.
MATERIALIZED_SOURCE_LEVEL = {
    "spark.databricks.delta.merge.materializeSource.rddStorageLevel": "MEMORY_AND_DISK"
}


def newer_condition(source: str = "s", target: str = "t") -> str:
    """SQL: the source row's order key is greater than the target's."""
    e, r, o = ORDER_KEY
    s, t = source, target
    return (
        f"({s}.{e} > {t}.{e}) OR ({s}.{e} = {t}.{e} AND {s}.{r} > {t}.{r}) "
        f"OR ({s}.{e} = {t}.{e} AND {s}.{r} = {t}.{r} AND {s}.{o} > {t}.{o})"
    )


def table_exists(spark: SparkSession, path: str) -> bool:
    from delta.tables import DeltaTable

    return bool(DeltaTable.isDeltaTable(spark, path))


def merge_changes(
    spark: SparkSession,
    path: str,
    changes: DataFrame,
    keys: tuple[str, ...],
    commit_metadata: dict[str, Any] | None = None,
    partition_by: tuple[str, ...] = (),
    cluster_by: tuple[str, ...] = (),
    broadcast: bool = False,
    documents: tuple[str, ...] = (),
    derived: dict[str, str] | None = None,
    tombstones: bool = True,
) -> None:
    """MERGE `changes` (at most one row per key) into the Delta table at `path`, creating
    it on first use; columns new to the table are added (schema evolution). The commit
    carries `commit_metadata` (e.g. the source position reached) as its user metadata.
    `broadcast`: the batch is small enough to send to every task whole, so the table is
    joined with it where it lies instead of being shuffled by key (both of the MERGE's
    passes; the table's size then costs a scan, not a shuffle). `documents`: a document
    source's document column, which an event without its document leaves as stored.
    `derived`: columns computed
    from a document column (column -> its document), which keep their stored values
    where the event's document is missing, as the document does. `tombstones` False: a
    delete of a key the table lacks inserts nothing (`rekeying`: rows older than the
    table's key)."""
    from delta.tables import DeltaTable

    if not table_exists(spark, path):
        # A table's first batch has nothing to merge with: the table is created holding it,
        # in one commit and one pass, where a MERGE would read the batch twice after a
        # commit of its own. A merge that created it meanwhile makes this one a MERGE.
        if cluster_by:
            create_table(spark, path, changes.limit(0), partition_by, cluster_by)
        elif create_with_rows(spark, path, changes, commit_metadata, partition_by):
            return
    on = " AND ".join(f"t.{quoted(k)} = s.{quoted(k)}" for k in keys)
    source = F.broadcast(changes) if broadcast else changes
    builder = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), on).withSchemaEvolution()
    if documents:
        # An event without its document (a MongoDB delete without pre-images, an update
        # whose lookup found the document gone) keeps the stored one: a tombstone keeps
        # the row's last values, and a later event of the key supersedes it anyway.
        assignments = {c: f"s.{quoted(c)}" for c in changes.columns}
        assignments.update({c: f"coalesce(s.{quoted(c)}, t.{quoted(c)})" for c in documents})
        assignments.update(
            {
                c: f"CASE WHEN s.{quoted(d)} IS NULL THEN t.{quoted(c)} ELSE s.{quoted(c)} END"
                for c, d in (derived or {}).items()
            }
        )
        builder = builder.whenMatchedUpdate(condition=newer_condition(), set=assignments)
    else:
        builder = builder.whenMatchedUpdateAll(condition=newer_condition())
    builder = builder.whenNotMatchedInsertAll(condition=None if tombstones else "NOT s._cdc_deleted")
    with commit_settings(spark, commit_metadata):
        builder.execute()


# Deletion vectors: a MERGE marks replaced rows instead of rewriting whole files, so a
# batch costs about its own size, not the table's. Type widening: see `evolution`.
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "true", "delta.enableTypeWidening": "true"}
# Delta refuses these characters in column names unless the table maps its columns by
# name (column mapping), and a source may use them (MySQL: `order date`, `a,b`, `x=y`).
# Only such tables get it: their Parquet files then name columns by id, which engines
# reading the files without Delta's log, or without column mapping support, cannot follow.
_UNMAPPED = frozenset(" ,;{}()\n\t=")
NAME_MAPPING = {"delta.columnMapping.mode": "name"}


def _names(schema: T.StructType) -> list[str]:
    """Every field name in `schema`, nested struct fields included."""
    names = []
    for part in schema.fields:
        names.append(part.name)
        if isinstance(part.dataType, T.StructType):
            names += _names(part.dataType)
    return names


def needs_name_mapping(schema: T.StructType, stored: T.StructType | None = None) -> bool:
    """Whether `schema` has a column name Delta takes only with column mapping (of those
    `stored` does not have yet, when given: a table that holds one already maps them)."""
    known = set(_names(stored)) if stored is not None else set()
    return any(_UNMAPPED & set(name) for name in _names(schema) if name not in known)


def table_properties(schema: T.StructType) -> dict[str, str]:
    """The properties a new table with `schema` is created with."""
    return {**TABLE_PROPERTIES, **(NAME_MAPPING if needs_name_mapping(schema) else {})}


def enable_name_mapping(spark: SparkSession, path: str) -> None:
    """Let the next MERGE add columns whose names Delta otherwise refuses (column mapping
    by name: the columns already there keep their physical names)."""
    mode = ", ".join(f"'{k}' = '{v}'" for k, v in NAME_MAPPING.items())
    spark.sql(f"ALTER TABLE delta.{quoted(path)} SET TBLPROPERTIES ({mode})")


def create_table(
    spark: SparkSession,
    path: str,
    empty: DataFrame,
    partition_by: tuple[str, ...] = (),
    cluster_by: tuple[str, ...] = (),
) -> None:
    """The table with `empty`'s schema, partitioned or clustered (liquid clustering) as
    configured, with `table_properties`. Two merges creating it at once: one wins, the
    other finds it there."""
    from delta.tables import DeltaTable

    check_layout(path, empty, partition_by, cluster_by)
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(empty.schema)
    for key, value in table_properties(empty.schema).items():
        builder = builder.property(key, value)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    if cluster_by:
        builder = builder.clusterBy(*cluster_by)
    builder.execute()


def create_with_rows(
    spark: SparkSession,
    path: str,
    rows: DataFrame,
    metadata: dict[str, Any] | None,
    partition_by: tuple[str, ...] = (),
) -> bool:
    """The table created holding `rows`, in one commit carrying `metadata` as its user
    metadata (a write option: `rows` may belong to another session than `spark`, whose
    settings the write would not see). False when another merge created the table first:
    the caller MERGEs into it instead. Clustered tables are created empty (`create_table`):
    Spark's writer leaves clustering out."""
    check_layout(path, rows, partition_by, ())
    writer = rows.write.format("delta").mode("errorifexists").options(**table_properties(rows.schema))
    if metadata:
        writer = writer.option("userMetadata", json.dumps(metadata, sort_keys=True))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    try:
        writer.save(path)
    except Exception:
        if table_exists(spark, path):
            return False
        raise
    return True


def check_layout(
    path: str, rows: DataFrame, partition_by: tuple[str, ...], cluster_by: tuple[str, ...]
) -> None:
    if partition_by and cluster_by:
        raise TidemarkError(f"{path}: a Delta table is partitioned or clustered, not both")
    missing = [c for c in (*partition_by, *cluster_by) if c not in rows.columns]
    if missing:
        raise TidemarkError(f"{path}: no column(s) {missing} to partition or cluster by")


def stored_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """The table's properties (the merge keeps its own there: `tidemark.*`)."""
    return {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES delta.{quoted(path)}").collect()}


def property_value(name: str, text: str, version: int) -> dict[str, Any]:
    """A property the merge keeps (versioned JSON), refused when of another version."""
    data = json.loads(text)
    if data.get("version") != version:
        raise TidemarkError(f"{name} {text!r}: version {data.get('version')!r} is not one this merge reads")
    return dict(data)


def set_property(spark: SparkSession, path: str, name: str, value: str) -> None:
    text = value.replace("\\", "\\\\").replace("'", "\\'")
    spark.sql(f"ALTER TABLE delta.{quoted(path)} SET TBLPROPERTIES ('{name}' = '{text}')")


def enable_type_widening(spark: SparkSession, path: str) -> None:
    """Let the next MERGE widen column types in place (Delta's type widening feature)."""
    spark.sql(f"ALTER TABLE delta.{quoted(path)} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")


def commit_settings(spark: SparkSession, metadata: dict[str, Any] | None) -> AbstractContextManager[None]:
    """The settings of a merge's commit for the block: its user metadata (when given) and
    where Delta keeps the materialised source; the session's own values come back after."""
    settings = dict(MATERIALIZED_SOURCE_LEVEL)
    if metadata:
        settings[USER_METADATA] = json.dumps(metadata, sort_keys=True)
    return session_settings(spark, settings)


def live_rows(spark: SparkSession, path: str, bookkeeping: bool = False) -> DataFrame:
    """The table as users should read it: tombstones hidden (of an SCD2 table, the
    current versions), bookkeeping columns dropped unless asked for."""
    frame = spark.read.format("delta").load(path)
    frame = frame.where(F.col("_cdc_current") if "_cdc_current" in frame.columns else ~F.col("_cdc_deleted"))
    if bookkeeping:
        return frame
    return frame.select(*columns(c for c in frame.columns if not c.startswith(BOOKKEEPING_PREFIX)))


def collect_tombstones(spark: SparkSession, path: str, retention_hours: float) -> int:
    """Delete tombstones whose delete is older than the retention (by source time); returns
    how many went. After this, an event older than the retention for such a key could
    insert it again: the retention must exceed any delivery delay."""
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, path)
    if "_cdc_current" in table.toDF().columns:
        return 0  # an SCD2 table's deletes are history, not tombstones
    cutoff = F.expr(f"current_timestamp() - make_dt_interval(0, 0, 0, {float(retention_hours) * 3600})")
    condition = F.col("_cdc_deleted") & (F.col("_cdc_source_ts") < cutoff)
    doomed = spark.read.format("delta").load(path).where(condition).count()
    if doomed:
        table.delete(condition)
    return doomed
