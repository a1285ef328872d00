"""The values of records held back (`spark_jobs.merge.transactions`), byte for byte.

The parsed batch keeps no payload for a change event its source can give again by
position (`records.parse`): holding records back is the exception (a batch that ends
inside a transaction), so their values are read again from the source, in the ranges of
positions they span, rather than carried through the cache for every record. The rest
(records without a position, such as those held back by an earlier batch; records that
name their schema by reference; transaction boundaries and releases) keep theirs.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_core.errors import TidemarkError
from spark_jobs.merge.cutting import value_text
from spark_jobs.merge.records import POSITION

# Per (topic, partition or None), the lowest and highest offsets of the held records.
Ranges = dict[tuple[str, int | None], tuple[int, int]]
# Records (`topic, key, value` and their position columns) of the source within `Ranges`.
Reread = Callable[[Ranges], DataFrame]


def position_columns(frame: DataFrame) -> list[str]:
    """The `POSITION` columns `frame` has, with its topic: what names a record of the source."""
    return ["topic", *(c for c in POSITION if c in frame.columns)]


def in_ranges(records: DataFrame, ranges: Ranges) -> DataFrame:
    """`records` within `ranges`: what a source that cannot seek gives again (a cached
    batch, a file read again)."""
    wanted = None
    for (topic, partition), (low, high) in sorted(ranges.items(), key=lambda r: (r[0][0], r[0][1] or 0)):
        this = (F.col("topic") == topic) & F.col("offset").between(low, high)
        if partition is not None:
            this = this & (F.col("partition") == partition)
        wanted = this if wanted is None else wanted | this
    return records.where(wanted if wanted is not None else F.lit(False))


def held_values(held: DataFrame, texts: dict[int, str], reread: Reread) -> DataFrame:
    """`topic, key, value` of the held records: from their parse where it kept the
    payload (`value_text` puts the value together again), else from `reread` by position."""
    kept = held.where(F.col("payload").isNotNull() | ~F.col("present"))
    values = kept.select("topic", "key", value_text(texts).alias("value"))
    again = held.where(F.col("payload").isNull() & F.col("present"))
    if "offset" not in held.columns:
        return values
    names = position_columns(held)
    spans = again.groupBy(*names[:-1]).agg(
        F.min("offset").alias("low"), F.max("offset").alias("high"), F.count_distinct("offset").alias("n")
    )
    ranges: Ranges = {}
    expected = 0
    for r in spans.collect():
        ranges[(r.topic, r.partition if "partition" in names else None)] = (r.low, r.high)
        expected += r.n
    if not ranges:
        return values
    source = reread(ranges).select(*names, "key", "value").dropDuplicates(names)
    found = source.join(again.select(*names).distinct(), names, "left_semi")
    got = found.count()
    if got != expected:
        raise TidemarkError(
            f"{expected} record(s) of incomplete transactions are to be held back, but their source gave "
            f"{got} of them again at their positions ({sorted(ranges)}): nothing was held, and the batch's "
            "offsets are not committed, so it runs again"
        )
    return values.unionByName(found.select("topic", "key", "value"))
