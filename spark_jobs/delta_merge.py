"""Change events into Delta Lake: one table per captured table, MERGEd by order key.

    spark-submit spark_jobs/delta_merge.py --config connector.yaml --delta-root PATH_OR_S3A \\
        --checkpoint PATH [--trigger available-now | --trigger 30s]

Events come from the connector's sink: Kafka (`sink.type: kafka`; Spark's Kafka source
as Structured Streaming with a checkpoint, `availableNow` for scheduled runs or a
processing-time trigger for continuous ones) or the embedded event log (read from the
offsets kept under `--checkpoint` up to its end). Each batch: events parsed with the
Connect schema they carry, the newest per key by order key, then a MERGE that replaces a
stored row only with a newer event (`spark_jobs.merge.delta_apply`). Replaying a batch,
or the whole log, changes nothing; each Delta commit records the source offsets it reached
in its user metadata.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_core.config.connector_config import ConnectorConfig, load_config
from cdc_core.errors import TidemarkError
from spark_jobs.merge.changes import newest_per_key, table_changes
from spark_jobs.merge.delta_apply import merge_changes

log = logging.getLogger("spark_jobs.delta_merge")


def table_path(root: str, prefix: str, topic: str) -> str:
    """`<root>/<db>.<table>` for topic `<prefix>.<db>.<table>`."""
    return f"{root.rstrip('/')}/{topic[len(prefix) + 1 :]}"


def data_topics(prefix: str) -> str:
    """The regex of the connector's per-table topics (not `.transaction`, `.snapshot_releases`
    or the schema-change topic named after the prefix itself)."""
    return rf"{re.escape(prefix)}\.[^.]+\.[^.]+"


def apply_batch(
    spark: SparkSession, records: DataFrame, root: str, prefix: str, reached: dict[str, Any]
) -> int:
    """Merge one batch of records (`topic, key, value` as text); returns the tables touched."""
    records = records.persist()
    try:
        tables = table_changes(records)
        for changes in tables:
            started = time.monotonic()
            merge_changes(
                spark,
                table_path(root, prefix, changes.topic),
                newest_per_key(changes.rows, changes.key_columns),
                changes.key_columns,
                {"tidemark": {"topic": changes.topic, "reached": reached.get(changes.topic)}},
            )
            log.info("%s merged in %.1fs", changes.topic, time.monotonic() - started)
        return len(tables)
    finally:
        records.unpersist()


# ---------------------------------------------------------------------------- Kafka


def run_kafka(spark: SparkSession, config: ConnectorConfig, root: str, checkpoint: str, trigger: str) -> None:
    servers = config.get("sink.kafka.bootstrap.servers")
    if not servers:
        raise TidemarkError("sink.type is kafka but sink.kafka.bootstrap.servers is not set")
    prefix = config.topic_prefix
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", servers)
        .option("subscribePattern", data_topics(prefix))
        .option("startingOffsets", "earliest")
        .load()
        .select(
            "topic",
            "partition",
            "offset",
            F.col("key").cast("string").alias("key"),
            F.col("value").cast("string").alias("value"),
        )
    )

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        reached: dict[str, Any] = {}
        for row in batch.groupBy("topic", "partition").agg(F.max("offset").alias("offset")).collect():
            reached.setdefault(row.topic, {})[str(row.partition)] = row.offset
        touched = apply_batch(spark, batch.select("topic", "key", "value"), root, prefix, reached)
        log.info("batch %d: %d table(s)", batch_id, touched)

    writer = stream.writeStream.foreachBatch(each_batch).option("checkpointLocation", checkpoint)
    if trigger == "available-now":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        writer.trigger(processingTime=trigger).start().awaitTermination()


# ---------------------------------------------------------------------------- embedded log


def run_local(spark: SparkSession, config: ConnectorConfig, root: str, checkpoint: str) -> int:
    """One batch: everything after the offsets under `checkpoint` up to the log's end.
    The offsets are saved only after every table merged, so a crash repeats the batch,
    which the order-key guard makes harmless."""
    from cdc_core.pipeline.streamer import local_log_directory
    from spark_jobs.local_log_source import spark_read_local_log

    log_root = local_log_directory(config)
    prefix = config.topic_prefix
    pattern = re.compile(data_topics(prefix))
    topics = (
        sorted(p.name for p in log_root.iterdir() if p.is_dir() and pattern.fullmatch(p.name))
        if log_root.is_dir()
        else []
    )
    state_file = Path(checkpoint) / "local-offsets.json"
    done: dict[str, int] = json.loads(state_file.read_text()) if state_file.exists() else {}
    records = spark_read_local_log(spark, log_root, topics)
    after = F.lit(False)
    for topic in topics:
        after = after | ((F.col("topic") == topic) & (F.col("offset") > F.lit(done.get(topic, -1))))
    batch = records.where(after).persist()
    try:
        reached = {
            r.topic: r.offset for r in batch.groupBy("topic").agg(F.max("offset").alias("offset")).collect()
        }
        if not reached:
            return 0
        touched = apply_batch(spark, batch.select("topic", "key", "value"), root, prefix, reached)
    finally:
        batch.unpersist()
    state_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({**done, **reached}, sort_keys=True))
    tmp.replace(state_file)
    return touched


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the connector's YAML file")
    parser.add_argument("--delta-root", required=True, help="folder of the Delta tables: a path or s3a://")
    parser.add_argument("--checkpoint", required=True, help="the merge's checkpoint folder")
    parser.add_argument(
        "--trigger",
        default="available-now",
        help="available-now (process what is there, then stop) or a processing-time interval such as 30s",
    )
    parser.add_argument("--master", help="Spark master (default: spark-submit's, or local[*])")
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session

    config = load_config(args.config)
    spark = build_session("tidemark-delta-merge", args.master)
    if config.get("sink.type") == "kafka":
        run_kafka(spark, config, args.delta_root, args.checkpoint, args.trigger)
    else:
        if args.trigger != "available-now":
            raise SystemExit("the embedded event log is merged in available-now runs only")
        run_local(spark, config, args.delta_root, args.checkpoint)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(main())
