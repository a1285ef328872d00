"""Batches aligned to source transactions: a Delta commit never holds part of one.

A batch of records can end inside a transaction (a Kafka micro-batch is a range of
offsets). A transaction is complete once its END record (on `<prefix>.transaction`) is
in hand together with, for every table the END counts, that many distinct events (by
`total_order`; release records count for the table they release). Records of incomplete
transactions are held back and merged with a later batch. Holding back is safe for
ordering: the MERGE is guarded by order key, so a transaction merged later than a newer
one loses wherever they touch the same key.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.hadoop_files import delete_tree, exists, subfolders
from spark_jobs.merge.changes import WRAPPED, unwrapped

_TXN = (
    "status STRING, id STRING, data_collections ARRAY<STRUCT<data_collection: STRING, event_count: BIGINT>>"
)
_REF = (
    "data_collection STRING, "
    "transaction STRUCT<id: STRING, total_order: BIGINT, transaction_epoch: BIGINT, transaction_rank: BIGINT>"
)
RECORDS = "topic STRING, key STRING, value STRING"


def _payload() -> F.Column:
    return unwrapped(F.from_json("value", WRAPPED))


@dataclass(frozen=True)
class Split:
    now: DataFrame  # records of complete transactions, and records without one
    held: DataFrame  # records of incomplete transactions (with their BEGIN/END)
    transactions: DataFrame  # per transaction and table: `_txn, _table, _key, _complete`

    def positions(self) -> tuple[list[int] | None, dict[str, tuple[list[int], list[int]]]]:
        """(the order key (epoch, rank) up to which every transaction in hand is merged,
        or None; per table, the lowest and highest order keys merged now). Small: one row
        per table."""
        rows = (
            self.transactions.groupBy("_table")
            .agg(
                F.min(F.when(F.col("_complete"), F.col("_key"))).alias("first"),
                F.max(F.when(F.col("_complete"), F.col("_key"))).alias("last"),
                F.min(F.when(F.col("_complete").isNull(), F.col("_key"))).alias("held"),
            )
            .collect()
        )
        held = [tuple(r.held) for r in rows if r.held is not None]
        done = [tuple(r.last) for r in rows if r.last is not None]
        if held:
            lowest = min(held)
            below = [k for k in done if k < lowest]
            upto = list(max(below)) if below else None
        else:
            upto = list(max(done)) if done else None
        return upto, {r._table: (list(r.first), list(r.last)) for r in rows if r.first is not None}


def split_complete(records: DataFrame, prefix: str) -> Split:
    """Records to merge now and records to hold back. `records`: `topic, key, value`.
    BEGIN/END records of complete transactions are dropped; those of incomplete ones are
    held with their events. Records without a transaction (tombstones, events without
    transaction metadata) pass."""
    txn_topic, releases = f"{prefix}.transaction", f"{prefix}.snapshot_releases"
    is_txn = F.col("topic") == txn_topic
    txn = F.from_json(_payload(), _TXN)
    ref = F.from_json(_payload(), _REF)
    table = F.when(F.col("topic") == releases, ref["data_collection"]).otherwise(
        F.expr(f"substring(topic, {len(prefix) + 2})")
    )
    tagged = records.select(
        "topic",
        "key",
        "value",
        F.when(is_txn, txn["id"]).otherwise(ref["transaction"]["id"]).alias("_txn"),
        F.when(is_txn, txn["status"]).alias("_status"),
        F.when(~is_txn, table).alias("_table"),
        F.when(~is_txn, ref["transaction"]["total_order"]).alias("_order"),
        F.when(
            ~is_txn, F.array(ref["transaction"]["transaction_epoch"], ref["transaction"]["transaction_rank"])
        ).alias("_key"),
        F.when(is_txn & (txn["status"] == "END"), txn["data_collections"]).alias("_counts"),
    )
    expected = (
        tagged.where(F.col("_counts").isNotNull())
        .select("_txn", F.explode("_counts").alias("c"))
        .select("_txn", F.col("c.data_collection").alias("_table"), F.col("c.event_count").alias("_expected"))
    )
    have = (
        tagged.where(F.col("_order").isNotNull() & F.col("value").isNotNull())
        .groupBy("_txn", "_table")
        .agg(F.countDistinct("_order").alias("_have"), F.min("_key").alias("_key"))
    )
    complete = (
        expected.join(have, ["_txn", "_table"], "left")
        .groupBy("_txn")
        .agg(F.min(F.coalesce(F.col("_have"), F.lit(0)) >= F.col("_expected")).alias("_done"))
        .where("_done")
        .select("_txn", F.lit(True).alias("_complete"))
    )
    flagged = tagged.join(F.broadcast(complete), "_txn", "left")
    passes = F.col("_txn").isNull() & F.col("_status").isNull()
    now = flagged.where(passes | (F.col("_complete") & F.col("_status").isNull()))
    held = flagged.where(F.col("_txn").isNotNull() & F.col("_complete").isNull())
    transactions = have.join(F.broadcast(complete), "_txn", "left").select(
        "_txn", "_table", "_key", "_complete"
    )
    return Split(now.select("topic", "key", "value"), held.select("topic", "key", "value"), transactions)


class PendingStore:
    """Held-back records between batches, one folder per batch id: a batch reads what the
    batch before it held and writes what it holds now, so running a batch again (after a
    crash before its checkpoint) reads the same input and writes the same output."""

    def __init__(self, spark: SparkSession, folder: str) -> None:
        self.spark, self.folder = spark, folder.rstrip("/")

    def _path(self, batch_id: int) -> str:
        return f"{self.folder}/batch={batch_id}"

    def read(self, batch_id: int) -> DataFrame:
        previous = self._latest_before(batch_id)
        if previous is None:
            return self.spark.createDataFrame([], RECORDS)
        return self.spark.read.schema(RECORDS).parquet(self._path(previous))

    def write(self, batch_id: int, held: DataFrame) -> None:
        held.write.mode("overwrite").parquet(self._path(batch_id))
        for old in self._ids():
            if old < batch_id - 1:
                delete_tree(self.spark, self._path(old))

    def _ids(self) -> list[int]:
        """Batches whose held-back records were written completely."""
        names = subfolders(self.spark, self.folder)
        done = [
            n for n in names if n.startswith("batch=") and exists(self.spark, f"{self.folder}/{n}/_SUCCESS")
        ]
        return sorted(int(n.split("=", 1)[1]) for n in done)

    def _latest_before(self, batch_id: int) -> int | None:
        earlier = [i for i in self._ids() if i < batch_id]
        return earlier[-1] if earlier else None
