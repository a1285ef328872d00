"""Batches aligned to source transactions: a Delta commit never holds part of one.

A batch of records can end inside a transaction (a Kafka micro-batch is a range of
offsets). A transaction is complete once its END record (on `<prefix>.transaction`) is
in hand together with, for every table the END counts, that many distinct events (by
`total_order`; release records count for the table they release). A standalone change
(an ordered `transaction` block with a null id, as MongoDB writes outside a transaction
get) is complete by itself. Records of incomplete
transactions are held back and merged with a later batch. Holding back is safe for
ordering: the MERGE is guarded by order key, so a transaction merged later than a newer
one loses wherever they touch the same key.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.hadoop_files import delete_tree, exists, subfolders, write_text
from spark_jobs.merge.records import RECORDS


@dataclass(frozen=True)
class Split:
    now: DataFrame  # parsed records of complete transactions, and records without one
    held: DataFrame  # parsed records of incomplete transactions (with their BEGIN/END)
    transactions: DataFrame  # per transaction and table: `_txn, _table, _key, _complete`
    cached: DataFrame  # per transaction: complete or not, kept while the batch is merged

    def release(self) -> None:
        self.cached.unpersist()

    def holds_nothing(self) -> bool:
        """Whether every transaction in hand is complete (a look at the small cached
        per-transaction frame, not at the records)."""
        return self.cached.where(~F.col("_complete")).isEmpty()

    def positions(self) -> tuple[list[int] | None, dict[str, tuple[list[int], list[int]]]]:
        """(the order key (epoch, rank) up to which every transaction in hand is merged,
        or None; per table, the lowest and highest order keys merged now). Small: one row
        per table."""
        rows = (
            self.transactions.groupBy("_table")
            .agg(
                F.min(F.when(F.col("_complete"), F.col("_key"))).alias("first"),
                F.max(F.when(F.col("_complete"), F.col("_key"))).alias("last"),
                F.min(F.when(~F.col("_complete"), F.col("_key"))).alias("held"),
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


def split_complete(parsed: DataFrame, prefix: str) -> Split:
    """Parsed records (`spark_jobs.merge.records.parse`) to merge now and to hold back.
    BEGIN/END records of complete transactions are dropped; those of incomplete ones are
    held with their events. Records without a transaction (tombstones, events without
    transaction metadata) and standalone changes pass.

    The events in hand (distinct by table and total_order) are compared with each END's
    per-table counts after one shuffle of a few narrow columns by transaction id; only the
    incomplete transactions — usually none or the last few — are joined back to the
    records."""
    txn_topic, releases = f"{prefix}.transaction", f"{prefix}.snapshot_releases"
    is_txn = F.col("topic") == txn_topic
    table = F.when(F.col("topic") == releases, F.col("p_data_collection")).otherwise(
        F.expr(f"substring(topic, {len(prefix) + 2})")
    )
    is_event = ~is_txn & F.col("p_total_order").isNotNull()
    # A standalone change (an ordered block with a null id: a MongoDB write outside a
    # transaction) is complete by itself; the events of one, which share its order key,
    # count as one transaction that has ended.
    standalone = is_event & F.col("p_txn_id").isNull()
    tagged = parsed.select(
        "*",
        F.when(is_txn, F.col("p_id"))
        .when(standalone, F.format_string("standalone:%d:%d", F.col("p_epoch"), F.col("p_rank")))
        .otherwise(F.col("p_txn_id"))
        .alias("_txn"),
        F.when(is_txn, F.col("p_status")).alias("_status"),
    )
    is_end = is_txn & (F.col("_status") == "END")
    # One row per event (its table and total_order) and per table an END counts (with a
    # row of no table for an END that counts none), shuffled once by transaction: every
    # aggregation below stays within its partition.
    counts = F.explode_outer(F.when(is_end, F.col("p_data_collections")))
    marks = (
        tagged.where(is_event | is_end)
        .select(
            "_txn",
            F.when(is_event, table).alias("_table"),
            F.col("p_total_order").alias("_order"),
            F.col("p_epoch").alias("_epoch"),
            F.col("p_rank").alias("_rank"),
            is_end.alias("_end"),
            standalone.alias("_alone"),
            counts.alias("_c"),
        )
        .select(
            "_txn",
            F.coalesce(F.col("_table"), F.col("_c.data_collection")).alias("_table"),
            F.when(~F.col("_end"), F.col("_order")).alias("_order"),
            "_epoch",
            "_rank",
            F.col("_c.event_count").alias("_expected"),
            "_end",
            "_alone",
        )
        .repartition("_txn")
    )
    enough = F.col("_expected").isNull() | (F.col("_n") >= F.col("_expected"))
    per_txn = (
        marks.dropDuplicates(["_txn", "_table", "_order", "_end"])  # an event delivered twice counts once
        .groupBy("_txn", "_table")
        .agg(
            F.count("_order").alias("_n"),
            F.max("_expected").alias("_expected"),
            (F.max("_end") | F.max("_alone")).alias("_ended"),
            F.min("_epoch").alias("_epoch"),
            F.min("_rank").alias("_rank"),
        )
        .groupBy("_txn")
        .agg(
            (F.max("_ended") & F.bool_and(enough)).alias("_complete"),
            F.array(F.min("_epoch"), F.min("_rank")).alias("_key"),
            F.collect_set(F.when(F.col("_n") > 0, F.col("_table"))).alias("_tables"),
        )
        .persist()
    )
    incomplete = per_txn.where(~F.col("_complete")).select("_txn", F.lit(True).alias("_held"))
    flagged = tagged.join(F.broadcast(incomplete), "_txn", "left")
    passes = F.col("_held").isNull() & F.col("_status").isNull()
    now = flagged.where(passes).drop("_txn", "_status", "_held")
    held = flagged.where(F.col("_held").isNotNull()).drop("_txn", "_status", "_held")
    transactions = per_txn.select("_txn", F.explode("_tables").alias("_table"), "_key", "_complete")
    return Split(now, held, transactions, per_txn)


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

    def write(self, batch_id: int, held: DataFrame | None) -> None:
        """`held` None: the batch holds nothing back, which an empty folder records (no
        Spark job for it)."""
        if held is None:
            delete_tree(self.spark, self._path(batch_id))
            write_text(self.spark, f"{self._path(batch_id)}/_SUCCESS", "")
        else:
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
