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

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdc_core.events.topics import REPLACEMENT, VALID
from spark_jobs.hadoop_files import delete_tree, exists, subfolders, write_text
from spark_jobs.merge.records import RECORDS
from spark_jobs.merge.transaction_fingerprint import end_count
from spark_jobs.session import empty_frame


@dataclass(frozen=True)
class Split:
    now: DataFrame  # parsed records of complete transactions, and records without one
    held: DataFrame  # parsed records of incomplete transactions (with their BEGIN/END)
    per_table: DataFrame | None  # per table: `_table, first, last`, the order keys it merges now
    upto: list[int] | None  # the order key up to which every transaction in hand merges now
    kept: tuple[DataFrame, ...]  # the small frames cached until `release`
    complete: bool  # every transaction in hand is complete: nothing is held
    merged: dict[str, tuple[list[int], list[int]]] | None = None  # per_table, known beforehand

    def release(self) -> None:
        for frame in self.kept:
            frame.unpersist()

    def positions(self) -> tuple[list[int] | None, dict[str, tuple[list[int], list[int]]]]:
        """(the order key (epoch, rank) up to which every transaction in hand is merged,
        or None; per table, the lowest and highest order keys merged now). Small: one row
        per table, from one aggregation of the records merged now."""
        if self.merged is not None:
            return self.upto, self.merged
        assert self.per_table is not None
        merged = {r._table: (list(r.first), list(r.last)) for r in self.per_table.collect()}
        return self.upto, merged


# A transaction numbers its events 1..N (`total_order`, N its END's count). Which of
# them are in hand is kept as bits of longs, BLOCK numbers to a long: event n sets bit
# (n - 1) % BLOCK of block (n - 1) // BLOCK, OR-ed together.
BLOCK = 64


def _table(prefix: str) -> Column:
    """The table a record counts for: its topic's, or the one a release record releases
    (its name as its topic has it, `cdc_core.events.topics`: a character outside the Basic
    Multilingual Plane is two UTF-16 units, so two replacements)."""
    wide = F.regexp_replace(F.col("p_data_collection"), "[\\x{10000}-\\x{10FFFF}]", REPLACEMENT * 2)
    released = F.regexp_replace(wide, f"[^{VALID}]", REPLACEMENT)
    return F.when(F.col("topic") == f"{prefix}.snapshot_releases", released).otherwise(
        F.expr(f"substring(topic, {len(prefix) + 2})")
    )


def _order_key() -> Column:
    """The order key (epoch, rank) every event carries of its transaction."""
    return F.array(F.col("p_epoch"), F.col("p_rank"))


def split_complete(
    parsed: DataFrame, prefix: str, orders: dict[str, tuple[list[int], list[int]]] | None = None
) -> Split:
    """Parsed records (`spark_jobs.merge.records.parse`) to merge now and to hold back.
    BEGIN/END records of complete transactions are dropped; those of incomplete ones are
    held with their events. Records without a transaction (tombstones, events without
    transaction metadata) and standalone changes pass.

    A transaction is complete when its END is in hand with every event it numbers: each
    event's `total_order` (1..N across the transaction's tables, release records
    included; N is the sum of the END's per-table counts) sets its bit, so an event
    delivered twice counts once, whatever the transaction's size. One hash aggregation by
    transaction, partly done before the shuffle, settles every transaction of at most
    `BLOCK` events (their bits fit one long); a transaction whose END counts more is
    settled by a second aggregation, by block of numbers, over its own records only. The
    batch's figures come from the small per-transaction result. Each table's merged order
    keys: from `orders` (per topic, its events' first and last, as the batch's census
    took them) when nothing is held and no release is in the batch, else from one
    aggregation by table over the records that merge now. Only the incomplete
    transactions — usually none or the last few — are joined back to the records."""
    is_txn = F.col("topic") == f"{prefix}.transaction"
    table = _table(prefix)
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
    counted, kinds = tagged.where(is_event | is_end), (is_event, is_end, standalone)
    per_txn = _small_transactions(counted, kinds).persist()
    kept = [per_txn]
    figures = _figures(per_txn)
    if figures.large:  # transactions of more than BLOCK events: counted block by block
        large = per_txn.where("_large").select("_txn")
        settled = _per_transaction(_blocks(counted.join(large, "_txn"), kinds))
        settled = settled.withColumn("_large", F.lit(False))
        per_txn = per_txn.where("NOT _large").unionByName(settled).persist()
        kept.append(per_txn)
        figures = _figures(per_txn)
    if not figures.incomplete:  # the usual case: no join, every record passes but BEGIN/END
        flagged = tagged.withColumn("_held", F.lit(None).cast("boolean"))
    else:
        incomplete = per_txn.where(~F.col("_complete")).select("_txn", F.lit(True).alias("_held"))
        flagged = tagged.join(F.broadcast(incomplete), "_txn", "left")
    passes = F.col("_held").isNull() & F.col("_status").isNull()
    now = flagged.where(passes).drop("_txn", "_status", "_held")
    held = flagged.where(F.col("_held").isNotNull()).drop("_txn", "_status", "_held")
    upto = figures.upto(per_txn)
    complete = not figures.incomplete
    releases = f"{prefix}.snapshot_releases"
    if complete and orders is not None and releases not in orders:
        merged = {t[len(prefix) + 1 :]: keys for t, keys in orders.items() if t != f"{prefix}.transaction"}
        return Split(now, held, None, upto, tuple(kept), True, merged)
    key = _order_key()
    per_table = (
        now.where(is_event)
        .groupBy(table.alias("_table"))
        .agg(F.min(key).alias("first"), F.max(key).alias("last"))
    )
    return Split(now, held, per_table, upto, tuple(kept), complete)


def split_whole(
    parsed: DataFrame, prefix: str, orders: dict[str, tuple[list[int], list[int]]] | None = None
) -> Split:
    """`split_complete`'s result for a batch known to hold whole transactions only (a
    range between two cuts of the embedded log, `cdc_core.sinks.log_cuts`): BEGIN/END
    records dropped, nothing held, and the order keys each table merges from one small
    aggregation by table instead of the count of every transaction's events. `orders`:
    per topic, its events' first and last order keys, where the batch's files told them
    (`records.Shapes.orders`): then there is no aggregation at all."""
    transactions, releases = f"{prefix}.transaction", f"{prefix}.snapshot_releases"
    now = parsed.where(F.col("topic") != transactions)
    held = parsed.limit(0)
    if orders is not None and releases not in orders:
        merged = {t[len(prefix) + 1 :]: keys for t, keys in orders.items() if t != transactions}
        upto = max((last for _, last in merged.values()), default=None)
        return Split(now, held, None, upto, (), True, merged)
    key = _order_key()
    per_table = (
        now.where(F.col("p_total_order").isNotNull())
        .groupBy(_table(prefix).alias("_table"))
        .agg(F.min(key).alias("first"), F.max(key).alias("last"))
        .persist()
    )
    [[upto]] = per_table.agg(F.max("last")).collect()
    return Split(now, held, per_table, list(upto) if upto is not None else None, (per_table,), True)


def _small_transactions(counted: DataFrame, kinds: tuple[Column, Column, Column]) -> DataFrame:
    """Per transaction: `_txn, _complete, _key, _events` and `_large` (its END counts more
    than `BLOCK` events: `_complete` is then settled by `_per_transaction`), from one
    aggregation by transaction (`_aggregated`: event n sets bit n - 1)."""
    is_event = kinds[0]
    numbered = is_event & (F.col("p_total_order") >= 1) & (F.col("p_total_order") <= BLOCK)
    bit = F.expr("shiftleft(1L, cast(p_total_order - 1 AS INT))")
    rows = _aggregated(counted, [F.col("_txn")], numbered, bit, kinds)
    count = F.col("_count")
    large = ~F.col("_alone") & F.col("_end") & (count > BLOCK)
    have = F.bit_count(F.coalesce(F.col("_seen"), F.lit(0).cast("long")).bitwiseAND(_low_bits(count)))
    return rows.select(
        "_txn",
        (F.col("_alone") | (F.col("_end") & (count <= BLOCK) & (have == count))).alias("_complete"),
        F.array(F.col("_epoch"), F.col("_rank")).alias("_key"),
        "_events",
        large.alias("_large"),
    )


def _blocks(counted: DataFrame, kinds: tuple[Column, Column, Column]) -> DataFrame:
    """The records of large transactions aggregated by transaction and block of `BLOCK`
    numbers: event n sets bit (n - 1) % BLOCK of block (n - 1) // BLOCK."""
    numbered = kinds[0] & (F.col("p_total_order") >= 1)
    bit = F.expr(f"shiftleft(1L, cast((p_total_order - 1) % {BLOCK} AS INT))")
    block = F.when(numbered, F.floor((F.col("p_total_order") - 1) / BLOCK)).alias("_block")
    return _aggregated(counted, [F.col("_txn"), block], numbered, bit, kinds)


def _aggregated(
    counted: DataFrame, by: list[Column], numbered: Column, bit: Column, kinds: tuple[Column, Column, Column]
) -> DataFrame:
    """A transaction's records (events and END, `kinds`: is an event, is an END, is a
    standalone change) aggregated `by` its id (and block): the bits of its `numbered`
    events, its END's count, and what the transaction carries. Fixed-width values only,
    so Spark aggregates by hash, partly before the shuffle."""
    is_event, is_end, standalone = kinds
    count = end_count()
    return counted.groupBy(*by).agg(
        F.bit_or(F.when(numbered, bit)).alias("_seen"),
        F.max(F.when(is_end, count)).alias("_count"),
        F.max(is_end).alias("_end"),
        F.max(standalone).alias("_alone"),
        F.min("p_epoch").alias("_epoch"),
        F.min("p_rank").alias("_rank"),
        F.max(is_event).alias("_events"),
    )


def _low_bits(numbers: Column) -> Column:
    """A long whose lowest `numbers` (0..64) bits are set (a shift by 64 would be one by 0)."""
    shifted = F.call_function("shiftrightunsigned", F.lit(-1).cast("long"), (64 - numbers).cast("int"))
    return F.when(numbers <= 0, F.lit(0).cast("long")).otherwise(shifted)


def _per_transaction(blocks: DataFrame) -> DataFrame:
    """Per transaction: `_txn, _complete, _key, _events`, from its rows per block of
    numbers (`_blocks`). A block's numbers beyond the END's count do not count: the low
    bits up to it."""
    total = F.max("_count").over(Window.partitionBy("_txn"))
    numbers = F.least(F.greatest(total - F.col("_block") * BLOCK, F.lit(0)), F.lit(BLOCK))
    seen = F.coalesce(F.col("_seen"), F.lit(0).cast("long"))
    counted = blocks.withColumn("_have", F.bit_count(seen.bitwiseAND(_low_bits(numbers))))
    totals = counted.groupBy("_txn").agg(F.sum("_have").alias("_have"), *_carried())
    return totals.select(
        "_txn",
        (F.col("_alone") | (F.col("_end") & (F.col("_have") == F.col("_count")))).alias("_complete"),
        F.array(F.col("_epoch"), F.col("_rank")).alias("_key"),
        "_events",
    )


# What a transaction's rows carry up to the transaction, and how they combine.
_CARRIED = (
    ("_count", F.max),
    ("_end", F.max),
    ("_alone", F.max),
    ("_epoch", F.min),
    ("_rank", F.min),
    ("_events", F.max),
)


def _carried() -> list[Column]:
    return [combine(name).alias(name) for name, combine in _CARRIED]


@dataclass(frozen=True)
class _Figures:
    """What the merge needs to know of the transactions in hand, in one look: whether any
    is incomplete (an END whose events are all still to come is one), the order key of
    the first incomplete one with events and the highest of the complete ones."""

    incomplete: bool
    held: list[int] | None
    done: list[int] | None
    large: bool = False  # a transaction is still to be counted block by block

    def upto(self, per_txn: DataFrame) -> list[int] | None:
        """The order key up to which every transaction in hand is merged: the highest
        complete one, below the first held one when one is held."""
        if self.held is None:
            return self.done
        complete = per_txn.where(F.col("_events") & F.col("_complete") & (F.col("_key") < F.lit(self.held)))
        [[upto]] = complete.agg(F.max("_key")).collect()
        return list(upto) if upto is not None else None


def _figures(per_txn: DataFrame) -> _Figures:
    with_events = F.col("_events")
    [row] = per_txn.agg(
        F.max(~F.col("_complete")).alias("incomplete"),
        F.min(F.when(with_events & ~F.col("_complete"), F.col("_key"))).alias("held"),
        F.max(F.when(with_events & F.col("_complete"), F.col("_key"))).alias("done"),
        F.max("_large").alias("large"),
    ).collect()
    return _Figures(
        bool(row.incomplete),
        list(row.held) if row.held is not None else None,
        list(row.done) if row.done is not None else None,
        bool(row.large),
    )


# Marks a batch folder of a batch that held nothing back.
_NOTHING = "_NOTHING_HELD"


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
            return empty_frame(self.spark, RECORDS)
        return self.spark.read.schema(RECORDS).parquet(self._path(previous))

    def write(self, batch_id: int, held: DataFrame | None) -> None:
        """`held` None: the batch holds nothing back, which an empty folder records (no
        Spark job for it)."""
        if held is None:
            delete_tree(self.spark, self._path(batch_id))
            write_text(self.spark, f"{self._path(batch_id)}/{_NOTHING}", "")
            write_text(self.spark, f"{self._path(batch_id)}/_SUCCESS", "")
        else:
            held.write.mode("overwrite").parquet(self._path(batch_id))
        for old in self._ids():
            if old < batch_id - 1:
                delete_tree(self.spark, self._path(old))

    def holds(self, batch_id: int) -> bool:
        """Whether the batch before `batch_id` held records back (a folder written before
        the `_NOTHING` marker existed counts as holding: the batch after it aligns)."""
        previous = self._latest_before(batch_id)
        return previous is not None and not exists(self.spark, f"{self._path(previous)}/{_NOTHING}")

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
