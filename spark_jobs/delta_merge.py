"""Change events into Delta Lake: one table per captured table, MERGEd by order key.

    spark-submit spark_jobs/delta_merge.py --config connector.yaml [--delta-root PATH_OR_S3A] \\
        [--checkpoint PATH] [--trigger available-now | --trigger 30s]

(the Delta root and checkpoint default to the connector file's `lakehouse.delta.root` and
`lakehouse.merge.checkpoint`, where the Airflow DAGs merge to)

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
import logging
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdc_core.config.connector_config import ConnectorConfig, load_config
from cdc_core.config.orchestration import lakehouse_locations
from cdc_core.connectors.registry import connector_of
from cdc_core.errors import TidemarkError
from cdc_core.pipeline.schema_references import references_enabled
from spark_jobs.merge import promoted
from spark_jobs.merge.batches import boundary_topics, data_topics, parsed_batch
from spark_jobs.merge.dropped_tables import Drops, kafka_drops, local_drops
from spark_jobs.merge.held_records import Ranges, Reread, held_values, in_ranges
from spark_jobs.merge.kafka_source import kafka_ranges, kafka_records
from spark_jobs.merge.known_schemas import KnownSchemas
from spark_jobs.merge.landing import TablePlan, land
from spark_jobs.merge.lease import merge_lease
from spark_jobs.merge.options import MergeOptions
from spark_jobs.merge.planning import table_plans
from spark_jobs.merge.records import REFERENCE, carried
from spark_jobs.merge.schema_catalogue import kafka_catalogue, local_catalogue
from spark_jobs.merge.table_pool import DEFAULT_PARALLEL_TABLES, merge_each
from spark_jobs.merge.transactions import PendingStore, split_complete, split_whole
from spark_jobs.merge.typed_records import TypedPart

log = logging.getLogger("spark_jobs.delta_merge")


def apply_batch(
    spark: SparkSession,
    records: DataFrame,
    root: str,
    prefix: str,
    reached: dict[str, Any],
    positions: dict[str, Any] | None = None,
    options: MergeOptions | None = None,
    typed: Sequence[TypedPart] = (),
    drops: Drops | None = None,
) -> int:
    """Merge one batch of records (`topic, key, value` as text, and `typed` parts of the
    Parquet log) without transaction alignment. Returns the number of tables touched."""
    columns = ("topic", "key", "value", *(c for c in carried(records) if c == REFERENCE))
    with parsed_batch(records.select(*columns), prefix, None, _patch_field(options), typed) as (
        parsed,
        shapes,
    ):
        topics = set(shapes.by_topic)
        plans = table_plans(spark, parsed, topics, shapes, root, prefix, reached, positions, options, drops)
        return land_all(spark, plans, options)


def apply_aligned(
    spark: SparkSession,
    records: DataFrame,
    root: str,
    prefix: str,
    reached: dict[str, Any] | None,
    pending: PendingStore,
    batch_id: int,
    options: MergeOptions | None = None,
    known: KnownSchemas | None = None,
    typed: Sequence[TypedPart] = (),
    whole: bool = False,
    drops: Drops | None = None,
    reread: Reread | None = None,
) -> int:
    """The records of complete source transactions (this batch's and those held back
    before) planned (`table_plans`) and landed; the rest is held for the next batch. `reached` None: the
    offsets reached are those of the records' `partition` and `offset` columns, taken
    by the parse's census (a Kafka batch is then read once). `whole`: the batch is known
    to hold whole transactions only, and nothing was held back before it
    (`spark_jobs.merge.log_range`): there is nothing to count, as for a batch whose census
    finds every transaction in hand complete (`transaction_fingerprint`). `drops`: the source's
    dropped tables (`spark_jobs.merge.dropped_tables`). `reread`: the source's records in
    ranges of positions, for the values of records held back (`held_records`; default:
    `records` filtered)."""
    combined = records.select("topic", "key", "value", *carried(records)).unionByName(
        pending.read(batch_id), allowMissingColumns=True
    )
    started = time.monotonic()
    with parsed_batch(combined, prefix, known, _patch_field(options), typed, not whole) as (parsed, shapes):
        records_in = sum(shapes.records.values())
        _phase("parse", started, "batch %d: %d records parsed", batch_id, records_in)
        if reached is None:
            reached = shapes.reached or {}  # records without Kafka's positions reach none
        started = time.monotonic()
        split = (
            split_whole(parsed, prefix, shapes.orders)
            if whole or shapes.whole
            else split_complete(parsed, prefix, shapes.orders)
        )
        try:
            upto, merged = split.positions()
            _phase("align", started, "batch %d: transactions aligned", batch_id)
            positions = {"upto": upto, "merged": merged}
            topics = {f"{prefix}.{table}" for table in merged}
            # A table without merged transactions may still have events without one.
            unsure = [t for t in shapes.by_topic if t not in topics | boundary_topics(prefix)]
            if unsure:
                present = split.now.where(F.col("topic").isin(unsure) & F.col("present"))
                topics |= {r.topic for r in present.select("topic").distinct().collect()}
            plans = table_plans(
                spark, split.now, topics, shapes, root, prefix, reached, positions, options, drops
            )
            touched = land_all(spark, plans, options)
            started = time.monotonic()
            if split.complete:
                pending.write(batch_id, None)
            else:
                again = reread or (lambda ranges: in_ranges(records, ranges))
                pending.write(batch_id, held_values(split.held, shapes.texts(), again))
            _phase("hold", started, "batch %d: incomplete transactions held back", batch_id)
            return touched
        finally:
            split.release()


def _patch_field(options: MergeOptions | None) -> str | None:
    return options.patches.field if options is not None and options.patches is not None else None


def _phase(phase: str, started: float, message: str, *args: Any) -> None:
    """Log a step's time; `phase` and `seconds` ride along for whoever collects them (the
    merge benchmark prints each phase)."""
    seconds = time.monotonic() - started
    log.info(f"{message} in %.1fs", *args, seconds, extra={"phase": phase, "seconds": seconds})


def land_all(spark: SparkSession, plans: list[TablePlan], options: MergeOptions | None) -> int:
    """Each table's plan landed (`spark_jobs.merge.planning` made them, every table checked
    first); returns the number of tables touched."""
    parallel = (options or MergeOptions()).parallel_tables
    merge_each(spark, plans, lambda session, plan: land(session, plan, _phase), parallel)
    return len(plans)


def configured(options: MergeOptions | None, config: ConnectorConfig) -> MergeOptions:
    """`options` with what the connector's file says of its tables' landing (promoted
    document fields, the key of tables without one) and how its source's change-only
    updates apply, so the DAGs' merges and a hand-run one land the same tables."""
    return replace(
        options or MergeOptions(),
        promoted=promoted.parse(config.get(promoted.PROPERTY) or []),
        key_columns=config.get("message.key.columns"),
        patches=connector_of(config).document_patches,
        document_ids=connector_of(config).document_ids,
    )


# ---------------------------------------------------------------------------- Kafka


def run_kafka(
    spark: SparkSession,
    config: ConnectorConfig,
    root: str,
    checkpoint: str,
    trigger: str,
    options: MergeOptions | None = None,
    min_partitions: int | None = None,
) -> None:
    """`min_partitions`: see `kafka_records` (default: the session's parallelism)."""
    servers = config.get("sink.kafka.bootstrap.servers")
    if not servers:
        raise TidemarkError("sink.type is kafka but sink.kafka.bootstrap.servers is not set")
    prefix = config.topic_prefix
    stream = kafka_records(
        spark.readStream,
        servers,
        min_partitions,
        # The schema-change topic too: a drop with nothing after it still starts a batch.
        # Anchored: the pattern is searched for in each topic name, not matched whole.
        subscribePattern=f"^(?:{data_topics(prefix)}|{re.escape(prefix)})$",
        startingOffsets="earliest",
    )

    pending = PendingStore(spark, f"{checkpoint.rstrip('/')}/held-back")
    known = KnownSchemas.load(spark, checkpoint)
    options = configured(options, config)

    def reread(ranges: Ranges) -> DataFrame:
        return kafka_ranges(spark, servers, min_partitions, ranges)

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        if references_enabled(config):
            known.refer(kafka_catalogue(spark, servers, prefix))
        rows, drops = batch.where(F.col("topic") != prefix), kafka_drops(spark, servers, prefix)
        touched = apply_aligned(
            spark, rows, root, prefix, None, pending, batch_id, options, known, drops=drops, reread=reread
        )
        known.save(spark, checkpoint)
        log.info("batch %d: %d table(s)", batch_id, touched)

    writer = stream.writeStream.foreachBatch(each_batch).option("checkpointLocation", checkpoint)
    if trigger == "available-now":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        writer.trigger(processingTime=trigger).start().awaitTermination()


# ---------------------------------------------------------------------------- embedded log


def run_local(
    spark: SparkSession,
    config: ConnectorConfig,
    root: str,
    checkpoint: str,
    options: MergeOptions | None = None,
) -> int:
    """One batch: everything after the offsets under `checkpoint` up to the log's end.
    The offsets are saved only after every table merged, so a crash repeats the batch,
    which the order-key guard makes harmless."""
    from cdc_core.pipeline.state import local_log_directory
    from spark_jobs.local_log_source import reached_without_reading, read_local_log
    from spark_jobs.merge.log_range import MergeState, plan_range

    log_root = local_log_directory(config)
    prefix = config.topic_prefix
    options = configured(options, config)
    pattern = re.compile(data_topics(prefix))
    topics = (
        sorted(p.name for p in log_root.iterdir() if p.is_dir() and pattern.fullmatch(p.name))
        if log_root.is_dir()
        else []
    )
    state = MergeState.load(checkpoint)
    done, batch_id = state.offsets, state.batch + 1
    drops, ddl = local_drops(log_root, prefix)  # ddl: {prefix: its last offset}, if any
    pending = PendingStore(spark, str(Path(checkpoint) / "held-back"))
    span = plan_range(log_root, topics, done, state.cut, pending.holds(batch_id))
    # Listed before the files are read: a file written in between is then read but not
    # counted as reached, and merged again next time (harmless), never the reverse.
    reached = span.reached(done)
    if reached is None:
        reached = reached_without_reading(log_root, topics, done)
    records, typed = read_local_log(spark, log_root, topics, done, until=span.until)
    batch = records.persist()
    try:
        if reached is None:  # JSON lines: the offsets they hold are known by reading them
            offsets = batch.select("topic", "offset")
            for part in typed:
                offsets = offsets.unionByName(part.frame.select(F.lit(part.topic).alias("topic"), "offset"))
            grouped = offsets.groupBy("topic").agg(F.max("offset").alias("offset"))
            reached = {r.topic: r.offset for r in grouped.collect()}
        if not reached and ddl.items() <= done.items():  # nothing new, not even a schema change
            return 0
        known = KnownSchemas.load(spark, checkpoint)
        if references_enabled(config):
            known.refer(local_catalogue(log_root, prefix))
        touched = apply_aligned(
            spark, batch, root, prefix, reached, pending, batch_id, options, known, typed, span.whole, drops
        )
        known.save(spark, checkpoint)
    finally:
        batch.unpersist()
    MergeState(batch_id, {**done, **reached, **ddl}, span.at).save(checkpoint)
    return touched


def merge_locations(
    config: ConnectorConfig, delta_root: str | None, checkpoint: str | None
) -> tuple[str, str]:
    """The Delta root and checkpoint: as given, else as the connector file names them
    (`lakehouse.delta.root`, `lakehouse.merge.checkpoint`, or their defaults), which is
    where the Airflow DAGs merge to."""
    located = lakehouse_locations(config)
    return delta_root or located["delta_root"], checkpoint or located["checkpoint"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the connector's YAML file")
    parser.add_argument(
        "--delta-root",
        help="folder of the Delta tables: a path or s3a:// (default: the connector file's lakehouse.delta.root)",
    )
    parser.add_argument(
        "--checkpoint",
        help="the merge's checkpoint folder (default: the connector file's lakehouse.merge.checkpoint)",
    )
    parser.add_argument(
        "--trigger",
        default="available-now",
        help="available-now (process what is there, then stop) or a processing-time interval such as 30s",
    )
    parser.add_argument("--scd2", metavar="REGEX", help="tables (db.table) kept as SCD type 2 history")
    parser.add_argument(
        "--partition-by", action="append", default=[], metavar="DB.TABLE=COLS", help="partition a new table"
    )
    parser.add_argument(
        "--cluster-by",
        action="append",
        default=[],
        metavar="DB.TABLE=COLS",
        help="cluster a new table (liquid)",
    )
    parser.add_argument(
        "--broadcast-mb",
        type=int,
        help="broadcast a table's batch in its MERGE when estimated at most this size (0: never; "
        "default: an eighth of the driver's and executors' memory)",
    )
    parser.add_argument(
        "--parallel-tables",
        type=int,
        default=DEFAULT_PARALLEL_TABLES,
        help=f"tables of a batch MERGEd at once (default {DEFAULT_PARALLEL_TABLES}; 1: one after another)",
    )
    parser.add_argument(
        "--kafka-min-partitions",
        type=int,
        help="read each Kafka batch in at least this many tasks (default: the session's parallelism)",
    )
    parser.add_argument("--master", help="Spark master (default: spark-submit's, or local[*])")
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session

    config = load_config(args.config)
    args.delta_root, args.checkpoint = merge_locations(config, args.delta_root, args.checkpoint)
    options = MergeOptions.from_args(
        args.scd2, args.partition_by, args.cluster_by, args.broadcast_mb, args.parallel_tables
    )
    if args.kafka_min_partitions is not None and args.kafka_min_partitions < 1:
        raise SystemExit(f"--kafka-min-partitions must be 1 or more, not {args.kafka_min_partitions}")
    if config.get("sink.type") != "kafka" and args.trigger != "available-now":
        raise SystemExit("the embedded event log is merged in available-now runs only")
    with merge_lease(args.checkpoint):
        spark = build_session("tidemark-delta-merge", args.master)
        if config.get("sink.type") == "kafka":
            run_kafka(
                spark,
                config,
                args.delta_root,
                args.checkpoint,
                args.trigger,
                options,
                args.kafka_min_partitions,
            )
        else:
            run_local(spark, config, args.delta_root, args.checkpoint, options)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(main())
