"""What a parsed batch holds per topic and schema, and the check that every record is an
event the merge knows: merging around a record it cannot read would lose it."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdc_core.errors import TidemarkError
from spark_jobs.merge.key_sets import key_shape

# (topic, schema id) -> (records, unrecognised, the records' keys without values: one per
# key schema, `key_sets.key_shape`)
Census = dict[tuple[str, int], tuple[int, int, tuple[str, ...]]]


def recognised() -> Column:
    """The payload parsed as a record the merge knows: a change event (`op`), a
    transaction boundary (`status`) or a release (`data_collection`). Malformed JSON
    parses to all-null fields, so it is not."""
    return F.coalesce(F.col("p_op"), F.col("p_status"), F.col("p_data_collection")).isNotNull()


def census(parsed: DataFrame) -> Census:
    """Per (topic, schema id) of the records that have a payload: how many, how many of
    them are not a recognised event, and their keys' shapes (each names key columns: taken
    from the batch itself, so a primary key changed since an earlier batch, or within
    this one, is seen). One aggregation; it also fills the cache."""
    rows = (
        parsed.where(F.col("present"))
        .groupBy("topic", "schema_id")
        .agg(
            F.count("*").alias("n"),
            F.count(F.when(~recognised(), 1)).alias("bad"),
            F.collect_set(key_shape(F.col("key"))).alias("keys"),
        )
        .collect()
    )
    return {(r.topic, r.schema_id): (r.n, r.bad, tuple(sorted(r.keys))) for r in rows}


def joined_census(one: Census, other: Census) -> Census:
    """Both counts, summed where a (topic, schema) is in both."""
    joined = dict(one)
    for at, (n, bad, keys) in other.items():
        m, worse, found = joined.get(at, (0, 0, ()))
        joined[at] = (m + n, worse + bad, tuple(sorted({*found, *keys})))
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
