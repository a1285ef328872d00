"""Whether every transaction in a batch is complete, told by the batch's census.

Aligning a batch to source transactions (`transactions.split_complete`) counts every
transaction's events against its END in an aggregation by transaction: at 1,000,000
events, about 1 s of a 12 s batch. Most batches hold whole transactions only, and for
them that count finds nothing to hold back. The census (`census.tally`) reads every
record once anyway, so it also folds two figures into its aggregation:

- the balance: the events that belong to a transaction, less the sum of the ENDs' counts;
- the fingerprint: the XOR of every such event's mark, h(id, n) ^ h(id, n - 1) for the
  event numbered n (`total_order`) of transaction id, and of every END's, h(id, N) ^
  h(id, 0) for an END counting N; h is Spark's 64-bit xxhash64.

The marks of events 1..N of a transaction XOR to its END's mark (each h(id, n) between
appears twice), so a batch of whole transactions has both figures 0, and is split as
whole (`transactions.split_whole`) with no count by transaction. Otherwise, XOR sees
which (id, n) are in hand an odd number of times where the ENDs say once: events with
that parity and the balance 0 are exactly the ENDs' events, each once. An END still to
come, an event missing, one delivered twice (its marks cancel, and the balance is off),
an END twice: each leaves a figure nonzero, and the batch is aligned by the exact count
as before, which also settles what is held back. The figures can be wrong only one way,
a batch taken as whole that is not, and only if distinct hashes XOR to 0: a chance of
2^-64 per batch, for inputs no one chose to collide.

Standalone changes (an ordered block without an id) and records without transaction
metadata are complete by themselves and stay out of both figures, as the count leaves
them. An END without an id, or with a count below 0, cannot be fingerprinted: the batch
is then aligned by the count.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F


def _zero() -> Column:
    return F.lit(0).cast("long")


def end_count() -> Column:
    """An END record's event count: the sum of its per-table counts."""
    counts = F.aggregate(F.col("p_data_collections"), _zero(), lambda n, c: n + c.event_count)
    return F.coalesce(counts, _zero())


def marks(prefix: str) -> list[Column]:
    """Per record (with its `present`, `topic` and `FLAT` fields): its mark, its part of
    the balance and whether it cannot be fingerprinted, for `figures` to aggregate."""
    present = F.col("present")
    is_txn = F.col("topic") == f"{prefix}.transaction"
    event = present & ~is_txn & F.col("p_total_order").isNotNull() & F.col("p_txn_id").isNotNull()
    end = present & is_txn & (F.col("p_status") == "END")
    count = F.when(end, end_count())
    txn, number, end_id = F.col("p_txn_id"), F.col("p_total_order").cast("long"), F.col("p_id")
    mark = (
        F.when(event, F.xxhash64(txn, number).bitwiseXOR(F.xxhash64(txn, number - 1)))
        .when(end, F.xxhash64(end_id, count).bitwiseXOR(F.xxhash64(end_id, _zero())))
        .otherwise(_zero())
    )
    return [
        mark.alias("_fp_mark"),
        F.when(event, 1).when(end, -count).otherwise(0).alias("_fp_balance"),
        (end & (end_id.isNull() | (count < 0))).alias("_fp_unfit"),
    ]


def figures() -> list[Column]:
    """The census's aggregate columns over `marks`."""
    return [
        F.bit_xor("_fp_mark").alias("_fp_xor"),
        F.sum("_fp_balance").alias("_fp_balance"),
        F.max("_fp_unfit").alias("_fp_unfit"),
    ]


def whole(rows: Iterable[Any]) -> bool:
    """Whether the census's rows (each with `figures`' columns) prove every transaction
    in hand complete."""
    xor, balance = 0, 0
    for r in rows:
        if r._fp_unfit:
            return False
        xor ^= r._fp_xor or 0
        balance += r._fp_balance or 0
    return xor == 0 and balance == 0
