"""Read the embedded local event log for the merge.

Records as Spark's Kafka source gives them: `topic, offset, key, value, headers` with
key/value as JSON text (null for a tombstone), what `CAST(key AS STRING), CAST(value AS
STRING)` gives from Kafka, and the schema a schemaless value names by reference
(`schema_ref`), so the merge treats both sources alike. A JSON line still being written
is not valid JSON; it is dropped here and read next time.

Parquet files (`sink.local.format: parquet`) are read by Spark's own reader, only those
holding records after the offsets already merged. A typed file of row change events, or
of transaction boundaries, is a `TypedPart`, which the merge takes without parsing
(`spark_jobs.merge.typed_records`); the other files (records without a Connect schema,
documents, or every file when `typed` is off) give text records, a typed file's payloads
rendered as the JSON the converter writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_core.events.envelope import SCHEMA_HEADER
from spark_jobs.merge.records import document_envelope
from spark_jobs.merge.typed_figures import FileSpan
from spark_jobs.merge.typed_records import TypedPart, connect_json
from spark_jobs.session import empty_frame

if TYPE_CHECKING:
    from cdc_core.sinks.parquet_log import Segment

_EMPTY = "topic STRING, offset LONG, key STRING, value STRING, headers MAP<STRING,STRING>, schema_ref STRING"


def read_local_log(
    spark: SparkSession,
    root: str | Path,
    topics: Iterable[str],
    after: Mapping[str, int] | None = None,
    typed: bool = True,
    until: Mapping[str, int] | None = None,
) -> tuple[DataFrame, list[TypedPart]]:
    """The records of `topics` after the offsets `after` (a topic it does not name: all of
    it; no `after`: everything) and before `until` (per topic, the first offset not read:
    a cut, `cdc_core.sinks.log_cuts`; a topic it does not name: none of it; no `until`:
    up to the log's end): as text, and as typed parts where the log has them (with
    `typed`)."""
    topics = list(topics)
    if after is not None:
        after = {topic: after.get(topic, -1) for topic in topics}
    after = after or {}
    frames: list[DataFrame] = []
    parts: list[TypedPart] = []
    for topic in topics:
        directory, done = Path(root) / topic, after.get(topic, -1)
        frames += _json_lines(spark, directory, topic)
        end = None if until is None else until.get(topic, 0)
        texts, typed_parts = _parquet(spark, directory, topic, done, typed, end)
        frames += texts
        parts += typed_parts
    if not frames:
        return empty_frame(spark, _EMPTY), parts
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    if after:
        result = result.where(_bounded(after, lambda offset, bound: offset > bound))
    if until is not None:
        result = result.where(
            _bounded({t: until.get(t, 0) for t in topics}, lambda offset, bound: offset < bound)
        )
    return result, parts


def spark_read_local_log(spark: SparkSession, root: str | Path, topics: Iterable[str]) -> DataFrame:
    """Every record of `topics` as text."""
    return read_local_log(spark, root, topics, typed=False)[0]


def _bounded(bounds: Mapping[str, int], within: Callable[[Column, Column], Column]) -> Column:
    """Records of the topics `bounds` names whose offset is `within` the topic's bound."""
    kept = F.lit(False)
    for topic, bound in bounds.items():
        kept = kept | ((F.col("topic") == topic) & within(F.col("offset"), F.lit(bound)))
    return kept


# A JSON line's members as the writer (`cdc_core.sinks.local_log`) puts them. Read in one
# pass by `from_json`: a JSON object or array read as a STRING comes back as its text, so
# each line is parsed once, where a `get_json_object` per member parsed it four times.
_LINE = "offset LONG, key STRING, value STRING, headers MAP<STRING,STRING>"


def _json_lines(spark: SparkSession, directory: Path, topic: str) -> list[DataFrame]:
    files = sorted(str(p) for p in directory.glob("*.log"))
    if not files:
        return []
    line = F.from_json("value", _LINE)  # a torn last line: every member null
    return [
        spark.read.text(files)
        .select(line.alias("line"))
        .select(F.lit(topic).alias("topic"), "line.offset", "line.key", "line.value", "line.headers")
        .where(F.col("offset").isNotNull())
        .withColumn("schema_ref", F.try_element_at("headers", F.lit(SCHEMA_HEADER)))
    ]


def reached_without_reading(
    root: str | Path, topics: Iterable[str], after: Mapping[str, int] | None = None
) -> dict[str, int] | None:
    """The last offset of each of `topics` that `read_local_log` reads (after `after`),
    from the Parquet files' names, with no Spark job; None when a topic has JSON-lines
    files, whose offsets only a scan of them tells."""
    reached = {}
    for topic in topics:
        directory = Path(root) / topic
        if next(directory.glob("*.log"), None) is not None:
            return None
        segments = _segments_after(directory, (after or {}).get(topic, -1))
        if segments:
            reached[topic] = max(s.last for s in segments)
    return reached


def _segments_after(directory: Path, done: int) -> list[Segment]:
    """The Parquet files to read for the records after offset `done`."""
    from cdc_core.sinks import parquet_log

    return [s for s in parquet_log.covering(parquet_log.parquet_segments(directory)) if s.last > done]


def _parquet(
    spark: SparkSession, directory: Path, topic: str, done: int, typed: bool, end: int | None = None
) -> tuple[list[DataFrame], list[TypedPart]]:
    """`end`: the first offset not read (None: read to the end)."""
    from cdc_core.sinks import parquet_kinds, parquet_log_reader

    by_digest: dict[str, list[Path]] = {}
    for segment in _segments_after(directory, done):
        if end is None or segment.first < end:
            by_digest.setdefault(segment.digest, []).append(segment.path)
    texts, parts = [], []
    for paths in by_digest.values():
        meta = parquet_log_reader.log_format_metadata(paths[0])
        files = spark.read.parquet(*(str(p) for p in paths)).where(F.col("offset") > F.lit(done))
        if end is not None:
            files = files.where(F.col("offset") < F.lit(end))
        part = None
        if meta["tidemark.kind"] == parquet_kinds.TYPED:
            part = TypedPart(
                topic,
                files,
                meta["tidemark.key.schema"],
                meta["tidemark.value.schema"],
                meta["tidemark.key.schemas.enable"] == "true",
                meta["tidemark.value.schemas.enable"] == "true",
                FileSpan(tuple(str(p) for p in paths), done, end),
            )
        if part is not None and typed and not document_envelope(json.loads(part.value_schema)):
            parts.append(part)
            continue
        key, value = F.col("key"), F.col("value")
        if part is not None:
            if part.key_schema:  # (a table without a key has null keys)
                key = connect_json(key, part.key_schema, part.key_schemas)
            value = connect_json(value, part.value_schema, part.value_schemas)
        headers = F.map_from_entries(
            F.transform(F.map_entries("headers"), lambda e: F.struct(e.key, e.value.cast("string")))
        )
        texts.append(
            files.select(
                F.lit(topic).alias("topic"),
                "offset",
                key.alias("key"),
                value.alias("value"),
                headers.alias("headers"),
            ).withColumn("schema_ref", F.try_element_at("headers", F.lit(SCHEMA_HEADER)))
        )
    return texts, parts
