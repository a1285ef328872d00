"""Read the embedded local event log as Spark rows shaped like Spark's Kafka source.

Columns `topic, offset, key, value, headers` with key/value as JSON text (null for a
tombstone), i.e. what `CAST(key AS STRING), CAST(value AS STRING)` gives from Kafka, and
the schema a schemaless value names by reference (`schema_ref`), so the merge job treats
both sources alike. A line still being written is not valid JSON;
it is dropped here and read next time.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_core.events.envelope import SCHEMA_HEADER


def spark_read_local_log(spark: SparkSession, root: str | Path, topics: Iterable[str]) -> DataFrame:
    frames = []
    for topic in topics:
        files = sorted(str(p) for p in (Path(root) / topic).glob("*.log"))
        if not files:
            continue
        lines = spark.read.text(files)
        frames.append(
            lines.select(
                F.lit(topic).alias("topic"),
                F.get_json_object("value", "$.offset").cast("long").alias("offset"),
                F.get_json_object("value", "$.key").alias("key"),
                F.get_json_object("value", "$.value").alias("value"),
                F.from_json(F.get_json_object("value", "$.headers"), "map<string,string>").alias("headers"),
            )
            .where(F.col("offset").isNotNull())
            .withColumn("schema_ref", F.try_element_at("headers", F.lit(SCHEMA_HEADER)))
        )
    if not frames:
        return spark.createDataFrame(
            [],
            "topic STRING, offset LONG, key STRING, value STRING, headers MAP<STRING,STRING>, schema_ref STRING",
        )
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result
