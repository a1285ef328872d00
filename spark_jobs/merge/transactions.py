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
    per_txn: DataFrame  # per transaction: `_txn, _complete, _key, _events`, cached
    per_table: DataFrame  # per table: `_table, first, last`, the order keys it merges now
    kept: tuple[DataFrame, ...]  # the small frames cached until `release`
    complete: bool  # every transaction in hand is complete: nothing is held

    def release(self) -> None:
        for frame in self.kept:
            frame.unpersist()

    def positions(self) -> tuple[list[int] | None, dict[str, tuple[list[int], list[int]]]]:
        """(the order key (epoch, rank) up to which every transaction in hand is merged,
        or None; per table, the lowest and highest order keys merged now). Small: one row
        per table, and two looks at the cached per-transaction frame."""
        with_events = self.per_txn.where(F.col("_events"))
        [[held]] = with_events.where(~F.col("_complete")).agg(F.min("_key")).collect()
        done = with_events.where(F.col("_complete"))
        if held is not None:
            done = done.where(F.col("_key") < F.lit(held))
        [[upto]] = done.agg(F.max("_key")).collect()
        merged = {r._table: (list(r.first), list(r.last)) for r in self.per_table.collect()}
        return (list(upto) if upto is not None else None), merged


# A transaction numbers its events 1..N (`total_order`, N its END's count): up to this N,
# which of them are in hand is one bit each of a long, OR-ed together.
MASKED = 63


def split_complete(parsed: DataFrame, prefix: str) -> Split:
    """Parsed records (`spark_jobs.merge.records.parse`) to merge now and to hold back.
    BEGIN/END records of complete transactions are dropped; those of incomplete ones are
    held with their events. Records without a transaction (tombstones, events without
    transaction metadata) and standalone changes pass.

    A transaction is complete when its END is in hand with every event it numbers: each
    event's `total_order` (1..N across the transaction's tables, release records
    included; N is the sum of the END's per-table counts) sets its bit, so an event
    delivered twice counts once and one aggregation by transaction, partly done before
    the shuffle, decides. Transactions of more than MASKED events, when a batch has any,
    are counted exactly on their own events. Only the incomplete transactions — usually
    none or the last few — are joined back to the records."""
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
    order = F.col("p_total_order")
    bit = F.when(order.between(1, MASKED), F.expr("shiftleft(1L, cast(p_total_order - 1 AS INT))"))
    none = F.lit(0).cast("long")
    numbered = F.coalesce(
        F.aggregate(F.col("p_data_collections"), none, lambda n, c: n + c.event_count), none
    )
    totals = (
        tagged.where(is_event | is_end)
        .groupBy("_txn")
        .agg(
            F.bit_or(F.when(is_event, bit)).alias("_seen"),
            F.max(F.when(is_end, numbered)).alias("_count"),
            F.max(is_end).alias("_end"),
            F.max(standalone).alias("_alone"),
            F.min("p_epoch").alias("_epoch"),
            F.min("p_rank").alias("_rank"),
            F.max(is_event).alias("_events"),
        )
        .persist()
    )
    # the low `_count` bits set (a shift, not 2^N - 1: no overflow at N = 63)
    full = F.when(F.col("_count") == 0, none).otherwise(
        F.expr("shiftrightunsigned(-1L, cast(64 - _count AS INT))")
    )
    in_hand = F.coalesce(F.col("_seen"), none).bitwiseAND(full) == full
    counted = totals
    exact = _exact_counts(tagged.where(is_event), totals)
    if exact is not None:
        counted = totals.join(F.broadcast(exact), "_txn", "left")
        in_hand = F.when(
            F.col("_count") > MASKED, F.coalesce(F.col("_distinct") >= F.col("_count"), F.lit(False))
        ).otherwise(in_hand)
    per_txn = counted.select(
        "_txn",
        (F.col("_alone") | (F.col("_end") & in_hand)).alias("_complete"),
        F.array(F.col("_epoch"), F.col("_rank")).alias("_key"),
        "_events",
    ).persist()
    incomplete = per_txn.where(~F.col("_complete")).select("_txn", F.lit(True).alias("_held"))
    nothing_held = incomplete.isEmpty()
    if nothing_held:  # the usual case: no join, every record passes but BEGIN/END
        flagged = tagged.withColumn("_held", F.lit(None).cast("boolean"))
    else:
        flagged = tagged.join(F.broadcast(incomplete), "_txn", "left")
    passes = F.col("_held").isNull() & F.col("_status").isNull()
    now = flagged.where(passes).drop("_txn", "_status", "_held")
    held = flagged.where(F.col("_held").isNotNull()).drop("_txn", "_status", "_held")
    # Every event carries its transaction's order key (epoch, rank).
    key = F.array(F.col("p_epoch"), F.col("p_rank"))
    per_table = (
        flagged.where(passes & is_event)
        .groupBy(table.alias("_table"))
        .agg(F.min(key).alias("first"), F.max(key).alias("last"))
    )
    return Split(now, held, per_txn, per_table, (totals, per_txn), nothing_held)


def _exact_counts(events: DataFrame, totals: DataFrame) -> DataFrame | None:
    """Distinct events in hand (`_distinct`) of each transaction numbering more than
    MASKED, or None when the batch has none (a look at the small per-transaction frame)."""
    large = totals.where(F.col("_count") > MASKED).select("_txn", "_count")
    if large.isEmpty():
        return None
    order = F.col("p_total_order")
    return (
        events.join(F.broadcast(large), "_txn")
        .where(order.between(F.lit(1), F.col("_count")))
        .select("_txn", order.alias("_order"))
        .distinct()
        .groupBy("_txn")
        .agg(F.count("*").alias("_distinct"))
    )


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
