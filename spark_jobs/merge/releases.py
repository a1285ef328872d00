"""The lakehouse fast path: snapshot windows merged straight from their staged Parquet.

A release record (on `<prefix>.snapshot_releases`) names a window's staged file, the keys
the stream changed while the window was open (those rows are stale in the file and are
left out), and the order key of the window's high watermark, which every released row
takes — exactly what the `op=r` events of the streaming mode would carry, so both modes
give the same table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from cdc_core.events.ordering import OrderKey
from cdc_core.events.topics import table_topic
from spark_jobs.merge import connect_types
from spark_jobs.sql_names import column, quoted


@dataclass(frozen=True)
class Release:
    data_collection: str
    staged: str
    key_columns: tuple[str, ...]
    excluded_keys: list[dict[str, Any]]  # event values
    order: tuple[int, int, int]
    txn_id: str
    ts_ms: int
    rows: int  # staged in the window (before the excluded keys are left out)
    key_schema: tuple[dict[str, Any], ...] | None = None  # the key fields' Connect schemas
    documents: bool = False  # a document collection's window: its document is JSON text

    def excluded_values(self) -> list[tuple[Any, ...]]:
        """The excluded keys as the values their Delta (and lakehouse-staged) columns hold:
        each event value through its field's Delta conversion, as a change event's row is
        (a record written before the key schemas were carried: the event values as they are)."""
        if self.key_schema is None:
            return [tuple(k[c] for c in self.key_columns) for k in self.excluded_keys]
        converters = [connect_types.delta_value(f) for f in self.key_schema]
        return [
            tuple(
                None if k[c] is None else f(k[c]) for c, f in zip(self.key_columns, converters, strict=True)
            )
            for k in self.excluded_keys
        ]


def parse_release(value: str) -> Release:
    """A release record's value (JSON, with or without the Connect wrapper)."""
    payload = json.loads(value)
    if isinstance(payload, dict) and "payload" in payload and "schema" in payload:
        payload = payload["payload"]
    try:
        block = payload["transaction"] or {}
        order = OrderKey.from_transaction_block(block)
        return Release(
            payload["data_collection"],
            payload["staged"],
            tuple(payload["key_columns"]),
            list(payload["excluded_keys"]),
            (order.epoch, order.rank, order.total_order),
            str(block.get("id")),
            int(payload.get("ts_ms") or 0),
            int(payload.get("rows") or 0),
            tuple(payload["key_schema"]) if payload.get("key_schema") is not None else None,
            bool(payload.get("documents", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TidemarkError(f"a snapshot release record is incomplete ({exc!r}): {value[:300]}") from None


def releases_by_table(parsed: DataFrame, prefix: str) -> dict[str, list[Release]]:
    """The batch's release records, per table as its events' topic names it (`order
    items` on `<prefix>.db.order_items`): `db.order_items`."""
    out: dict[str, list[Release]] = {}
    records = parsed.where((F.col("topic") == f"{prefix}.snapshot_releases") & F.col("payload").isNotNull())
    for row in records.select("payload").collect():
        release = parse_release(row.payload)
        out.setdefault(table_topic(prefix, release.data_collection)[len(prefix) + 1 :], []).append(release)
    return out


def path_part(staged: str) -> str:
    """The path of a staged file or folder without scheme or bucket, as it ends every
    `_metadata.file_path` Spark reads from it, whatever form it was written in."""
    return (urlparse(staged).path or staged).rstrip("/")


def release_rows(spark: SparkSession, releases: list[Release], like: T.StructType | None) -> DataFrame:
    """The staged rows of one table's released windows minus each window's excluded keys,
    with the bookkeeping of a snapshot read at its window's HW order key; columns cast to
    `like` (the table's types) where it has them. One scan of all the staged files, each
    row tagged with its window through the file it came from (a union of one frame per
    window is both slower and, with Spark 4.2's optimizer, wrong: it cast columns of one
    child to another's types)."""
    paths = [path_part(r.staged) for r in releases]
    # Windows staged before and after a column was added have different columns.
    staged = spark.read.option("mergeSchema", "true").parquet(*[r.staged for r in releases])
    columns = staged.columns
    types = {f.name: f.dataType for f in like.fields} if like is not None else {}

    def landed(c: str) -> Column:
        return column(c).cast(types[c]).alias(c) if c in types else column(c)

    staged = staged.select(*[landed(c) for c in columns], F.col("_metadata.file_path").alias("_path"))
    windows = spark.createDataFrame(
        [(p, *r.order, r.txn_id, r.ts_ms) for p, r in zip(paths, releases, strict=True)],
        "_file STRING, _cdc_epoch BIGINT, _cdc_rank BIGINT, _cdc_total_order BIGINT, _cdc_txn_id STRING, _ts BIGINT",
    )
    # A row's window: the release whose staged file it was read from, or whose folder.
    read_from = F.col("_path")
    from_window = read_from.endswith(F.col("_file")) | read_from.contains(
        F.concat(F.col("_file"), F.lit("/"))
    )
    tagged = staged.join(F.broadcast(windows), from_window).drop("_path")
    key_columns = list(releases[0].key_columns)
    excluded_rows = [(p, *key) for p, r in zip(paths, releases, strict=True) for key in r.excluded_values()]
    if excluded_rows:
        key_types = T.StructType(
            [T.StructField("_excluded_file", T.StringType()), *[tagged.schema[k] for k in key_columns]]
        )
        try:
            excluded = spark.createDataFrame(excluded_rows, key_types)
        except (TypeError, ValueError, PySparkException) as exc:
            raise TidemarkError(
                f"the keys a snapshot release of {releases[0].data_collection} leaves out do not fit its "
                f"staged key columns ({exc}); the release records were written by a Tidemark that did not "
                "carry their key schemas: run the snapshot again"
            ) from None
        tagged = tagged.join(
            F.broadcast(excluded),
            [
                tagged["_file"] == excluded["_excluded_file"],
                *[tagged[quoted(k)] == excluded[quoted(k)] for k in key_columns],
            ],
            "left_anti",
        )
    return tagged.select(
        *[column(c) for c in columns],
        "_cdc_epoch",
        "_cdc_rank",
        "_cdc_total_order",
        F.lit("r").alias("_cdc_op"),
        F.timestamp_millis(F.col("_ts")).alias("_cdc_source_ts"),
        "_cdc_txn_id",
        F.lit(False).alias("_cdc_deleted"),
    )
