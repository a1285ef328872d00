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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from cdc_core.events.ordering import OrderKey


@dataclass(frozen=True)
class Release:
    data_collection: str
    staged: str
    key_columns: tuple[str, ...]
    excluded_keys: list[dict[str, Any]]
    order: tuple[int, int, int]
    txn_id: str
    ts_ms: int


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
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TidemarkError(f"a snapshot release record is incomplete ({exc!r}): {value[:300]}") from None


def release_rows(spark: SparkSession, release: Release, like: T.StructType | None) -> DataFrame:
    """The window's staged rows minus its excluded keys, with the bookkeeping of a
    snapshot read at the HW's order key; columns cast to `like` (the table's types) where
    it has them."""
    staged = spark.read.parquet(release.staged)
    types = {f.name: f.dataType for f in like.fields} if like is not None else {}
    staged = staged.select(
        *[F.col(f"`{c}`").cast(types[c]).alias(c) if c in types else F.col(f"`{c}`") for c in staged.columns]
    )
    if release.excluded_keys:
        key_types = T.StructType([staged.schema[k] for k in release.key_columns])
        excluded = spark.createDataFrame(
            [tuple(k[c] for c in release.key_columns) for k in release.excluded_keys], key_types
        )
        staged = staged.join(excluded, list(release.key_columns), "left_anti")
    epoch, rank, total = release.order
    return staged.select(
        *[F.col(f"`{c}`") for c in staged.columns],
        F.lit(epoch).cast("long").alias("_cdc_epoch"),
        F.lit(rank).cast("long").alias("_cdc_rank"),
        F.lit(total).cast("long").alias("_cdc_total_order"),
        F.lit("r").alias("_cdc_op"),
        F.timestamp_millis(F.lit(release.ts_ms)).alias("_cdc_source_ts"),
        F.lit(release.txn_id).alias("_cdc_txn_id"),
        F.lit(False).alias("_cdc_deleted"),
    )
