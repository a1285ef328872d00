"""What a parsed batch holds per topic and schema, and the check that every record is an
event the merge knows: merging around a record it cannot read would lose it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_core.errors import TidemarkError
from spark_jobs.merge import transaction_fingerprint
from spark_jobs.merge.key_sets import KEY_HEAD, PAYLOAD_CUT, WITH_SCHEMA, head_index, head_shape, key_shape
from spark_jobs.session import session_settings

# (topic, schema id) -> (records, unrecognised, the records' keys without values: one per
# key schema, `key_sets.key_shape`)
Census = dict[tuple[str, int], tuple[int, int, tuple[str, ...]]]
# Per topic, the order keys (epoch, rank) of its first and last events (those with a
# `total_order`), as `transactions.split_whole` takes them.
Orders = dict[str, tuple[list[int], list[int]]]
# Per topic and partition (as text), the highest offset of the batch's records that have
# one (records held back by an earlier batch have none): what a Kafka batch reached.
Reached = dict[str, dict[str, int]]


class Tally(NamedTuple):
    counts: Census
    orders: Orders | None
    truncating: frozenset[str]
    reached: Reached | None
    # Every transaction in hand is complete (`transaction_fingerprint`); None: not asked.
    whole: bool | None = None


def recognised() -> Column:
    """The payload parsed as a record the merge knows: a change event (`op`), a
    transaction boundary (`status`) or a release (`data_collection`). Malformed JSON
    parses to all-null fields, so it is not."""
    return F.coalesce(F.col("p_op"), F.col("p_status"), F.col("p_data_collection")).isNotNull()


def census(parsed: DataFrame) -> Census:
    """`tally`'s census alone."""
    return tally(parsed)[0]


def tally(
    parsed: DataFrame, heads: Sequence[str] = (), position: Sequence[str] = (), prefix: str | None = None
) -> Tally:
    """Per (topic, schema id) of the records that have a payload: how many, how many of
    them are not a recognised event, and their keys' shapes (each names key columns: taken
    from the batch itself, so a primary key changed since an earlier batch, or within
    this one, is seen); per topic its events' first and last order keys (None when an
    event's order key lacks a part, which only Spark's array ordering settles); the
    topics with a truncate; and, given the columns of Kafka's `position` (partition,
    offset), the offsets the batch reached (`Reached`); given the connector's `prefix`,
    whether every transaction in hand is complete (`transaction_fingerprint`). One
    aggregation; it also fills the cache.

    `heads`: key heads the batch's keys likely start with (`key_head`, from earlier keys;
    those the batch was parsed with, where it has a `KEY_HEAD` column). A key that starts
    with one and its cut is that head's shape, told by comparing bytes; only the others
    are cut for their shape."""
    key = F.col("key")
    head = head_index(key, heads)
    if KEY_HEAD in parsed.columns:  # a key the parse left out has its head's index
        head = F.when(key.isNull(), F.col(KEY_HEAD)).otherwise(head)
    # A struct, not an array, compares alike here (no part is null, or orders are not
    # used) and costs the aggregation less.
    order = F.struct(F.col("p_epoch"), F.col("p_rank"))
    present = F.col("present")
    event = present & F.col("p_total_order").isNotNull()
    # Every record counts for the offsets reached (tombstones too), only those with a
    # payload for the rest.
    placed = list(position)
    by = ["topic", "schema_id", *placed[:-1]]
    grouped = (
        parsed.select(
            *by,
            *placed[-1:],
            "present",
            "p_op",
            "p_status",
            "p_data_collection",
            "p_total_order",
            *(transaction_fingerprint.marks(prefix) if prefix is not None else ()),
            "key",
            order.alias("_order"),
            F.when(present, head).alias("_head"),
        )
        .groupBy(*by)
        .agg(
            F.count(F.when(present, 1)).alias("n"),
            F.count(F.when(present & ~recognised(), 1)).alias("bad"),
            F.collect_set("_head").alias("heads"),
            F.collect_set(F.when(present & F.col("_head").isNull(), key_shape(key))).alias("keys"),
            F.min(F.when(event, F.col("_order"))).alias("first"),
            F.max(F.when(event, F.col("_order"))).alias("last"),
            F.max(present & (F.col("p_op") == "t")).alias("truncates"),
            *([F.max(placed[-1]).alias("reached")] if placed else []),
            *(transaction_fingerprint.figures() if prefix is not None else []),
        )
    )
    # Adaptive execution builds a cache the plan reads in a job of its own and only then
    # runs the aggregation, which reads the cache again; without it the census is taken
    # in the pass that fills the cache. At 1,000,000 events, 1.5 s less CPU and about as
    # much less wall-clock time per batch (README: "Changed on 2026-12-06 at night").
    with session_settings(parsed.sparkSession, {"spark.sql.adaptive.enabled": "false"}):
        rows = grouped.collect()
    counts: Census = {}
    orders: Orders | None = {}
    truncating = frozenset(r.topic for r in rows if r.truncates)
    reached: Reached | None = {} if placed else None
    for r in rows:
        if reached is not None and r.reached is not None:
            at = reached.setdefault(r.topic, {})
            at[str(r.partition)] = max(at.get(str(r.partition), r.reached), r.reached)
        if not r.n:
            continue
        shapes = {*r.keys, *(head_shape(heads[n]) for n in r.heads)}
        n, bad, found = counts.get((r.topic, r.schema_id), (0, 0, ()))
        counts[(r.topic, r.schema_id)] = (n + r.n, bad + r.bad, tuple(sorted({*found, *shapes})))
        if r.first is None or orders is None:
            continue
        first, last = list(r.first), list(r.last)
        orders = None if None in first or None in last else _widened(orders, r.topic, first, last)
    whole = transaction_fingerprint.whole(rows) if prefix is not None else None
    return Tally(counts, orders, truncating, reached, whole)


def _widened(orders: Orders, topic: str, first: list[int], last: list[int]) -> Orders:
    """`orders` with `topic`'s first and last order keys taking in `first` and `last`."""
    low, high = orders.get(topic, (first, last))
    orders[topic] = (min(low, first), max(high, last))
    return orders


def key_head(key: str | None) -> str | None:
    """A key's text before its payload, when it carries its Connect schema first (as
    `key_sets.key_shape` cuts it): the part every key of one key schema shares."""
    if key is None or not key.startswith(WITH_SCHEMA) or PAYLOAD_CUT not in key:
        return None
    return key[: key.index(PAYLOAD_CUT)]


def joined_census(one: Census, other: Census) -> Census:
    """Both counts, summed where a (topic, schema) is in both."""
    joined = dict(one)
    for at, (n, bad, keys) in other.items():
        m, worse, found = joined.get(at, (0, 0, ()))
        joined[at] = (m + n, worse + bad, tuple(sorted({*found, *keys})))
    return joined


def joined_orders(one: Orders | None, other: Orders | None) -> Orders | None:
    """Both parts' first and last order keys per topic (None if either part lacks them)."""
    if one is None or other is None:
        return None
    joined = dict(one)
    for topic, (first, last) in other.items():
        joined = _widened(joined, topic, first, last)
    return joined


def check_recognised(parsed: DataFrame, counts: Census | None = None) -> None:
    """Records whose payload is not a JSON event are an error naming the topic: merging
    around them would lose them."""
    counts = census(parsed) if counts is None else counts
    bad: dict[str, int] = {}
    for (topic, _), (_, n, _) in counts.items():
        if n:
            bad[topic] = bad.get(topic, 0) + n
    if bad:
        detail = ", ".join(f"{n} on {topic}" for topic, n in sorted(bad.items()))
        raise TidemarkError(
            f"records whose value is not a JSON event ({detail}): nothing of this batch was merged (a value"
            " without its schema must name one on <prefix>.schemas: the streamer's tidemark.schema.references)"
        )
