"""Read the embedded local event log as Spark rows shaped like Spark's Kafka source.

Columns `topic, offset, key, value, headers` with key/value as JSON text (null for a
tombstone), i.e. what `CAST(key AS STRING), CAST(value AS STRING)` gives from Kafka, and
the schema a schemaless value names by reference (`schema_ref`), so the merge job treats
both sources alike. A JSON line still being written is not valid JSON; it is dropped here
and read next time. Parquet files (`sink.local.format: parquet`) are read by Spark's own
reader, a typed file's payloads rendered as the Connect JSON its footer describes.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_core.events.envelope import SCHEMA_HEADER

_EMPTY = "topic STRING, offset LONG, key STRING, value STRING, headers MAP<STRING,STRING>, schema_ref STRING"


def spark_read_local_log(spark: SparkSession, root: str | Path, topics: Iterable[str]) -> DataFrame:
    frames = []
    for topic in topics:
        frames += _json_lines(spark, Path(root) / topic, topic)
        frames += _parquet(spark, Path(root) / topic, topic)
    if not frames:
        return spark.createDataFrame([], _EMPTY)
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _json_lines(spark: SparkSession, directory: Path, topic: str) -> list[DataFrame]:
    files = sorted(str(p) for p in directory.glob("*.log"))
    if not files:
        return []
    lines = spark.read.text(files)
    return [
        lines.select(
            F.lit(topic).alias("topic"),
            F.get_json_object("value", "$.offset").cast("long").alias("offset"),
            F.get_json_object("value", "$.key").alias("key"),
            F.get_json_object("value", "$.value").alias("value"),
            F.from_json(F.get_json_object("value", "$.headers"), "map<string,string>").alias("headers"),
        )
        .where(F.col("offset").isNotNull())
        .withColumn("schema_ref", F.try_element_at("headers", F.lit(SCHEMA_HEADER)))
    ]


def _parquet(spark: SparkSession, directory: Path, topic: str) -> list[DataFrame]:
    from cdc_core.sinks import parquet_log, parquet_log_reader

    by_digest: dict[str, list[Path]] = {}
    for segment in parquet_log.covering(parquet_log.parquet_segments(directory)):
        by_digest.setdefault(segment.digest, []).append(segment.path)
    frames = []
    for paths in by_digest.values():
        meta = parquet_log_reader.log_format_metadata(paths[0])
        files = spark.read.parquet(*(str(p) for p in paths))
        typed = meta["tidemark.kind"] == parquet_log.TYPED
        key, value = F.col("key"), F.col("value")
        if typed and meta["tidemark.key.schema"]:  # (a table without a key has null keys)
            key = _connect_json(key, meta["tidemark.key.schema"], meta["tidemark.key.schemas.enable"])
        if typed:
            value = _connect_json(value, meta["tidemark.value.schema"], meta["tidemark.value.schemas.enable"])
        headers = F.map_from_entries(
            F.transform(F.map_entries("headers"), lambda e: F.struct(e.key, e.value.cast("string")))
        )
        frames.append(
            files.select(
                F.lit(topic).alias("topic"),
                "offset",
                key.alias("key"),
                value.alias("value"),
                headers.alias("headers"),
            ).withColumn("schema_ref", F.try_element_at("headers", F.lit(SCHEMA_HEADER)))
        )
    return frames


def _connect_json(column: Column, schema: str, enabled: str) -> Column:
    """A typed payload as the JSON converter writes it (nulls kept, as Connect writes them)."""
    payload = F.to_json(column, {"ignoreNullFields": "false"})
    if enabled != "true" or not schema:
        return F.when(column.isNotNull(), payload)
    return F.when(
        column.isNotNull(), F.concat(F.lit('{"schema":' + schema + ',"payload":'), payload, F.lit("}"))
    )
