"""The census and order keys of a batch of typed files, read on the driver
(`spark_jobs.merge.typed_figures`), are those Spark's aggregations give over the same
records: the merge takes its counts, its check of unknown records and each table's
positions from them."""

from __future__ import annotations

import json

import pytest

from tests.support.events import event, row, tombstone, transaction, truncate
from tests.support.merge_forms import parquet_log

pytestmark = pytest.mark.integration

OTHER = "tm.shop.others"


def _elsewhere(record: dict) -> dict:
    return {**record, "topic": OTHER}


def _boundary(status: str, rank: int, counts: dict[str, int] | None = None) -> dict:
    """A BEGIN or END with its Connect schema, as the streamer writes them (typed files)."""
    from cdc_core.transactions import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA

    record = transaction(status, rank, counts)
    key = {"schema": TRANSACTION_KEY_SCHEMA, "payload": json.loads(record["key"])}
    value = {"schema": TRANSACTION_VALUE_SCHEMA, "payload": json.loads(record["value"])}
    return {**record, "key": json.dumps(key), "value": json.dumps(value)}


def _records() -> list[dict]:
    """Two tables over two epochs, where a later epoch restarts its ranks (order keys
    compare epoch first), with tombstones; then a run of changes in no transaction, which
    the log writes to one file, out of order."""
    out = []
    for epoch, rank in ((0, 7), (0, 9), (1, 2), (1, 3)):
        out.append(_boundary("BEGIN", rank))
        out.append(event("u", (epoch, rank, 1), before=row(rank, "a"), after=row(rank, "b")))
        out.append(_elsewhere(event("c", (epoch, rank, 2), after=row(rank, "c"))))
        out.append(_boundary("END", rank, {"shop.accounts": 1, "shop.others": 1}))
    out.append(event("d", (0, 8, 1), before=row(8, "x")))
    out.append(tombstone(8))
    for epoch, rank in ((1, 4), (0, 12), (1, 1), (0, 6), (0, 5)):
        out.append(event("c", (epoch, rank, 1), after=row(rank, "s"), standalone=True))
    out.append(tombstone(5))
    out.append(truncate((0, 6, 2)))  # (standalone: inside the range of order keys)
    return out


def _counted(census) -> dict:
    """A census's counts, and the key columns each of its keys names (without values: a
    typed file's is its key schema alone, with no payload)."""
    from spark_jobs.merge.changes import key_columns

    return {at: (n, bad, {key_columns(k, at[0]) for k in keys}) for at, (n, bad, keys) in census.items()}


def _spark_figures(parsed, prefix: str):
    from spark_jobs.merge.census import census
    from spark_jobs.merge.transactions import split_whole

    split = split_whole(parsed, prefix)
    try:
        return census(parsed), split.positions()
    finally:
        split.release()


@pytest.mark.parametrize(
    "after,until",
    [(None, None), ({"tm.shop.accounts": 1, "tm.transaction": 2}, {"tm.shop.accounts": 10, OTHER: 3})],
    ids=["whole log", "a range"],
)
def test_the_files_figures_are_sparks(spark, tmp_path, after, until):
    from spark_jobs.local_log_source import read_local_log
    from spark_jobs.merge.records import Shapes
    from spark_jobs.merge.transactions import split_whole
    from spark_jobs.merge.typed_records import typed_batch

    topics = parquet_log(_records(), tmp_path / "log")
    if until is not None:
        until = {t: until.get(t, 100) for t in topics}
    _, parts = read_local_log(spark, tmp_path / "log", topics, after, until=until)
    assert {p.topic for p in parts} == set(topics)
    parsed, _, figures = typed_batch(parts, {"tm.transaction"}, Shapes())
    counts, (upto, merged) = _spark_figures(parsed, "tm")

    assert _counted(figures.census) == _counted(counts)
    assert figures.truncating == ({"tm.shop.accounts"} if until is None else set())
    assert figures.orders is not None
    split = split_whole(parsed, "tm", figures.orders)
    assert split.positions() == (upto, merged)
    assert split.per_table is None  # no Spark job for them
    if until is None:
        assert merged == {"shop.accounts": ([0, 5], [1, 4]), "shop.others": ([0, 7], [1, 3])}
    else:  # the range ends before the last change and its tombstone
        assert merged["shop.accounts"] == ([0, 6], [1, 4])
    assert sum(n for n, _, _ in counts.values()) > 0


def test_an_order_key_without_its_epoch_is_left_to_spark_and_a_record_not_an_event_is_counted(
    spark, tmp_path
):
    from spark_jobs.local_log_source import read_local_log
    from spark_jobs.merge.records import Shapes
    from spark_jobs.merge.typed_records import typed_batch

    record = event("c", (0, 4, 1), after=row(4, "n"))
    value = json.loads(record["value"])
    value["payload"]["transaction"]["transaction_epoch"] = None
    x = {"type": "int32", "optional": True, "field": "x"}
    stranger = {"schema": {"type": "struct", "fields": [x]}}
    # a status that could tell a boundary, but does not
    shy = {
        "schema": {"type": "struct", "fields": [{"type": "string", "optional": True, "field": "status"}, x]}
    }
    records = [
        record | {"value": json.dumps(value)},
        event("c", (0, 5, 1), after=row(5, "m")),
        # (on a table's topic, a schema that is not an event's is refused before this)
        record | {"topic": "tm.transaction", "value": json.dumps(stranger | {"payload": {"x": 1}})},
        record
        | {"topic": "tm.transaction", "value": json.dumps(shy | {"payload": {"status": None, "x": 2}})},
    ]
    topics = parquet_log(records, tmp_path / "log")
    _, parts = read_local_log(spark, tmp_path / "log", topics)
    parsed, _, figures = typed_batch(parts, {"tm.transaction"}, Shapes())

    assert figures.orders is None
    counts, _ = _spark_figures(parsed, "tm")
    assert _counted(figures.census) == _counted(counts)
    assert sorted((n, bad) for n, bad, _ in counts.values()) == [(1, 1), (1, 1), (2, 0)]


def test_a_text_batchs_census_tells_known_key_heads_and_order_keys_as_the_slow_way(spark):
    """A batch of JSON text: the census that tells keys by the heads sampled before it
    (the tables' key schema; the BEGIN/END keys and a key of a wider key schema are cut)
    and takes each topic's first and last order keys gives what cutting every key and
    aggregating by table give, so a complete batch needs no aggregation by table."""
    from pyspark.sql import functions as F

    from spark_jobs.merge.batches import parsed_batch
    from spark_jobs.merge.census import key_head, tally
    from spark_jobs.merge.key_sets import key_shape
    from spark_jobs.merge.transactions import split_complete

    # Every transaction complete: the delete of rank 8 has no END.
    records = [r for r in _records() if '"op":"d"' not in (r["value"] or "")]
    wider = event("c", (1, 9, 1), after=row(9, "w"), standalone=True)
    key = json.loads(wider["key"])
    key["schema"]["fields"].append({"type": "string", "optional": False, "field": "name"})
    key["payload"]["name"] = "w"
    wide_key = json.dumps(key, separators=(",", ":"))
    records.append(wider | {"key": wide_key})
    frame = spark.createDataFrame(records, "topic STRING, key STRING, value STRING")
    heads = [key_head(records[1]["key"]), f"{key_head(wide_key)}x"]  # the second matches none
    assert heads[0] is not None and records[1]["topic"] == "tm.shop.accounts"

    with parsed_batch(frame, "tm") as (parsed, shapes):
        counts, orders, truncating, reached, _ = tally(parsed, heads)
        assert reached is None  # the records carry no Kafka positions
        slow = {
            (r.topic, r.schema_id): tuple(sorted(r.keys))
            for r in parsed.where("present")
            .groupBy("topic", "schema_id")
            .agg(F.collect_set(key_shape(parsed.key)).alias("keys"))
            .collect()
        }
        assert {at: keys for at, (_, _, keys) in counts.items()} == slow
        assert len(counts[next(at for at in counts if at[0] == "tm.shop.accounts")][2]) == 2
        assert shapes.orders == orders
        assert shapes.truncating == truncating == {"tm.shop.accounts"}
        per_table = split_complete(parsed, "tm")
        fast = split_complete(parsed, "tm", orders)
        try:
            assert fast.per_table is None  # no aggregation by table
            assert fast.positions() == per_table.positions()
            assert fast.positions()[1] == {
                "shop.accounts": ([0, 5], [1, 9]),
                "shop.others": ([0, 7], [1, 3]),
            }
        finally:
            per_table.release()
            fast.release()


def test_a_kafka_batchs_parse_keeps_no_key_it_can_read_again_and_counts_alike(spark):
    """Records with Kafka's positions: the parse drops the key text of each change event
    whose key starts with a head it knows (its head's index stands in), keeps those of
    BEGIN/END and tombstones, and the census tells the same key shapes and counts as for
    the same records without positions, where every key is kept."""
    from pyspark.sql import functions as F

    from spark_jobs.merge.batches import parsed_batch
    from spark_jobs.merge.key_sets import KEY_HEAD

    records = _records()
    plain = spark.createDataFrame(records, "topic STRING, key STRING, value STRING")
    placed = spark.createDataFrame(
        [(r["topic"], 0, n, r["key"], r["value"]) for n, r in enumerate(records)],
        "topic STRING, partition INT, offset LONG, key STRING, value STRING",
    )
    with parsed_batch(plain, "tm") as (parsed, shapes):
        assert parsed.where("key IS NULL AND present AND p_op != 't'").count() == 0  # a truncate has none
        expected = shapes.by_topic, shapes.records
    with parsed_batch(placed, "tm") as (parsed, shapes):
        events = parsed.where(F.col("topic") != "tm.transaction").where("present AND p_op IN ('c', 'u', 'd')")
        assert events.where("key IS NOT NULL").count() == 0
        assert events.where(F.col(KEY_HEAD).isNull()).count() == 0
        assert parsed.where("NOT present AND key IS NULL").count() == 0  # tombstones
        boundaries = parsed.where(F.col("topic") == "tm.transaction")
        assert boundaries.where("key IS NULL").count() == 0
        assert (shapes.by_topic, shapes.records) == expected
        last = {r["topic"]: n for n, r in enumerate(records)}
        assert shapes.reached == {topic: {"0": n} for topic, n in last.items()}


def test_a_text_batchs_census_is_taken_in_the_pass_that_fills_its_cache(spark):
    """One Spark job builds the parsed batch's cache and takes its census. With adaptive
    execution Spark built the cache in a job of its own and read it again for the census
    (README: "Changed on 2026-12-06 at night")."""
    from pyspark.sql import functions as F

    from spark_jobs.merge.batches import parsed_batch
    from spark_jobs.merge.census import tally

    records = _records()
    frame = spark.createDataFrame(records, "topic STRING, key STRING, value STRING")
    with parsed_batch(frame, "tm") as (parsed, _):
        fresh = parsed.withColumn("_again", F.lit(True)).persist()  # a cache not built yet
        group = "census-in-the-cache-pass"
        spark.sparkContext.setJobGroup(group, "the census of a new cache")
        try:
            counts = tally(fresh)[0]
            jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
            assert sum(n for n, _, _ in counts.values()) == sum(1 for r in records if r["value"])
            assert len(jobs) == 1, jobs
            assert fresh.count() == len(records)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
            fresh.unpersist()
