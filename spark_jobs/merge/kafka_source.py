"""Kafka records as the merge reads them, in a batch or as a stream."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_core.events.envelope import SCHEMA_HEADER
from spark_jobs.merge.held_records import Ranges
from spark_jobs.merge.records import REFERENCE


def kafka_records(reader: Any, servers: str, min_partitions: int | None, **options: str) -> DataFrame:
    """Kafka records as `topic, partition, offset, key, value` (texts) and the schema
    reference a schemaless value names (`REFERENCE`, else null) through `reader`
    (`spark.read` for a batch, `spark.readStream` for a stream), with the Kafka source's
    `options` (which topics, from and to which offsets).

    `min_partitions` (default: the session's parallelism): a batch is read in that many
    tasks at least, a topic partition's offsets split between them. Without it every topic partition is one task, and a batch
    of one busy table is parsed on one core. Splitting loses nothing: a batch is merged as
    a set, ordered by order key, not by arrival."""
    tasks = min_partitions or SparkSession.active().sparkContext.defaultParallelism
    frame = (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("minPartitions", str(tasks))
        .option("includeHeaders", "true")
        .options(**options)
        .load()
    )
    named = F.expr(f"try_element_at(filter(headers, h -> h.key = '{SCHEMA_HEADER}'), 1).value")
    return frame.select(
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        named.cast("string").alias(REFERENCE),
    )


def kafka_ranges(spark: SparkSession, servers: str, min_partitions: int | None, ranges: Ranges) -> DataFrame:
    """The records of `ranges` (per topic partition, first and last offsets) read again as
    a batch, and nothing around them: the values of records held back
    (`spark_jobs.merge.held_records`) are read from the broker, not kept in every batch's cache."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for (topic, partition), (low, high) in ranges.items():
        assert partition is not None, "a Kafka record has a partition"
        assign.setdefault(topic, []).append(partition)
        starting.setdefault(topic, {})[str(partition)] = low
        ending.setdefault(topic, {})[str(partition)] = high + 1
    return kafka_records(
        spark.read,
        servers,
        min_partitions,
        assign=json.dumps(assign),
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )
