"""Delta merge throughput against a bare Delta MERGE, on tables of two sizes.

1,000,000 change events (30% inserts, 60% updates, 10% deletes, as the streamer writes
them: JSON with the Connect schema) are merged in one batch into a Delta table holding
1,000,000 and then 10,000,000 rows (each a shallow clone of a prepared table, so every
run starts equal). The events come in source transactions (5 events each by default)
with their BEGIN and END records, as the streamer writes them. In one run, for each size:
seconds and events/s of the Tidemark merge (parsing, transaction alignment, newest per
key, MERGE guarded by order key, tombstones) and of its MERGE statement alone, next to a
bare Delta MERGE of the same batch already parsed and deduplicated (update, delete,
insert: the floor), as ratios; then how batch time grows from the small table to the
large one. Also the JSON floor: reading the records and parsing every payload into the
merge's types, each cut out at its schema's known length, and nothing else. Every merge
of these records has to read and parse them, so the bare MERGE plus that floor is the
least any of them could take here; the benchmark prints that lowest possible ratio
beside the one reached. `--source kafka` writes the events to Kafka first and reads the
batch from there, as the merge job does (the bare MERGE still reads its prepared input).

    python -m bench merge [--events N] [--sizes 1000000,10000000] [--rounds 2] [--work DIR]
                          [--source parquet|kafka] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench import straightforward_merge
from bench.merge_kafka import to_kafka
from cdc_core.events.connect_schema import envelope_schema, field, key_schema, row_schema, struct
from cdc_core.transactions import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA

PREFIX = "benchmerge"
TOPIC = f"{PREFIX}.bench.t"
FIELDS = [
    field("int32", "id", optional=False),
    field("int32", "counter"),
    field("string", "name"),
    field("string", "city"),
    field("double", "amount"),
    field("int64", "seen", logical="io.debezium.time.Timestamp", version=1),
    field("int16", "flag"),
    field("string", "note"),
    field("int64", "big"),
    field("string", "code"),
]
SOURCE = struct(
    "source", [field("int64", "ts_ms"), field("string", "db"), field("string", "table")], field_name="source"
)
# The row's columns as Spark SQL over a generated id `k` and a version `v`.
ROW_SQL = {
    "id": "k",
    "counter": "CAST(v % 1000 AS INT)",
    "name": "concat('name-', k, '-', v)",
    "city": "concat('city-', k % 50)",
    "amount": "CAST(k * 1.5 + v AS DOUBLE)",
    "seen": "1704067200000 + v * 1000",
    "flag": "CAST(k % 2 AS SMALLINT)",
    "note": "concat('note ', v)",
    "big": "CAST(k AS BIGINT) * 7",
    "code": "concat('x', k % 13)",
}


def row_struct(alias: str) -> str:
    return "named_struct(" + ", ".join(f"'{c}', {e}" for c, e in ROW_SQL.items()) + f") AS {alias}"


def base_table(spark, path: str, rows: int) -> None:
    """`rows` rows as the merge would have left them after a snapshot."""
    from pyspark.sql import functions as F

    from spark_jobs.merge.delta_apply import create_table

    frame = (
        spark.range(1, rows + 1)
        .selectExpr("CAST(id AS INT) AS k", "0L AS v")
        .selectExpr(row_struct("r"))
        .select("r.*")
    )
    frame = frame.selectExpr(
        "*", "CAST(0 AS BIGINT) AS _cdc_epoch", "CAST(0 AS BIGINT) AS _cdc_rank", "CAST(id AS BIGINT) AS _cdc_total_order",
        "'r' AS _cdc_op", "timestamp_millis(1704067200000) AS _cdc_source_ts", "'snapshot' AS _cdc_txn_id",
        "false AS _cdc_deleted",
    )  # fmt: skip
    frame = frame.withColumn("seen", F.timestamp_millis(F.col("seen")).cast("timestamp_ntz"))
    create_table(spark, path, frame.limit(0))
    frame.write.format("delta").mode("append").save(path)


def value_schema_text() -> str:
    """The change events' Connect schema as the streamer writes it (compact JSON)."""
    return json.dumps(envelope_schema(TOPIC, row_schema(TOPIC, FIELDS), SOURCE), separators=(",", ":"))


def transaction_schema_text() -> str:
    return json.dumps(TRANSACTION_VALUE_SCHEMA, separators=(",", ":"))


def events(spark, out: str, count: int, table_rows: int, txn_size: int) -> None:
    """`count` events in streamer form: inserts of new keys, updates and deletes of
    existing ones (keys drawn with repeats, so deduplication matters), `txn_size` to a
    source transaction, each transaction with its BEGIN and END records."""
    value_schema = value_schema_text()
    key_schema_json = json.dumps(key_schema(TOPIC, [FIELDS[0]]), separators=(",", ":"))
    txn_schema = transaction_schema_text()
    txn_key_schema = json.dumps(TRANSACTION_KEY_SCHEMA, separators=(",", ":"))
    kind = "CASE WHEN n % 10 < 3 THEN 'c' WHEN n % 10 < 9 THEN 'u' ELSE 'd' END"
    existing = f"CAST(pmod(xxhash64(n), {table_rows}) + 1 AS INT)"
    frame = (
        spark.range(0, count)
        .selectExpr("id AS n")
        .selectExpr(
            "n",
            f"{kind} AS op",
            f"CASE WHEN {kind} = 'c' THEN CAST({table_rows} + n + 1 AS INT) ELSE {existing} END AS k",
            f"n DIV {txn_size} + 1 AS txn",
            f"n % {txn_size} + 1 AS total",
        )
    )
    frame = frame.selectExpr("n", "op", "k", "n AS v", "txn", "total").selectExpr(
        "n", "op", "k", "txn", "total", row_struct("r"), "named_struct('id', k) AS key_payload"
    )
    payload = (
        "named_struct('before', CASE WHEN op = 'c' THEN NULL ELSE r END, 'after', CASE WHEN op = 'd' THEN NULL ELSE r END, "
        "'source', named_struct('ts_ms', 1704067200000 + n, 'db', 'bench', 'table', 't'), "
        "'transaction', named_struct('id', concat('0-1-', txn), 'total_order', total, 'data_collection_order', total, "
        "'transaction_epoch', 1L, 'transaction_rank', txn), 'op', op, 'ts_ms', 1704067200000 + n)"
    )
    changes = frame.selectExpr(
        f"'{TOPIC}' AS topic",
        f"concat('{{\"schema\":', '{key_schema_json}', ',\"payload\":', to_json(key_payload), '}}') AS key",
        f"concat('{{\"schema\":', '{value_schema}', ',\"payload\":', to_json({payload}), '}}') AS value",
    )
    transactions = spark.range(1, (count + txn_size - 1) // txn_size + 1).selectExpr(
        "id AS txn", f"least({txn_size}, {count} - (id - 1) * {txn_size}) AS size"
    )
    status = transactions.selectExpr("txn", "size", "explode(array('BEGIN', 'END')) AS status")
    begin_end = (
        "named_struct('status', status, 'id', concat('0-1-', txn), "
        "'event_count', CASE WHEN status = 'END' THEN size END, "
        "'data_collections', CASE WHEN status = 'END' THEN "
        "array(named_struct('data_collection', 'bench.t', 'event_count', size)) END, 'ts_ms', 1704067200000 + txn)"
    )
    boundaries = status.selectExpr(
        f"'{PREFIX}.transaction' AS topic",
        f"concat('{{\"schema\":', '{txn_key_schema}', ',\"payload\":', to_json(named_struct('id', concat('0-1-', txn))), '}}') AS key",
        f"concat('{{\"schema\":', '{txn_schema}', ',\"payload\":', to_json({begin_end}), '}}') AS value",
    )
    changes.unionByName(boundaries).write.mode("overwrite").parquet(out)


def deduplicated(spark, records: str, out: str) -> None:
    """The same batch parsed and reduced to the newest event per key, in the table's
    types: the bare MERGE's input, prepared outside its timing."""
    from spark_jobs.merge.batches import parsed_batch
    from spark_jobs.merge.changes import newest_per_key, table_changes

    with parsed_batch(spark.read.parquet(records), PREFIX) as (parsed, shapes):
        (changes,) = table_changes(parsed, {TOPIC}, shapes)
        newest_per_key(changes.rows, changes.key_columns).write.mode("overwrite").parquet(out)


def json_floor(spark, read: Callable[[], Any]) -> float:
    """Seconds to read the batch's records and parse every payload into the types the
    merge parses it into, and nothing else: each payload is cut out at its schema's known
    length (no search, no check), then parsed (no cache, no alignment, no deduplication,
    no MERGE). Any merge of these records has to read and parse them at least once, so no
    merge of them can take less than the bare MERGE plus this."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from spark_jobs.merge.connect_types import json_type
    from spark_jobs.merge.cutting import CUT, OPEN, bytes_between
    from spark_jobs.merge.records import PAYLOAD, envelope_type

    image = T.StructType([T.StructField(f["field"], json_type(f)) for f in FIELDS])
    change = F.col("topic") == TOPIC
    starts = [len((OPEN + text + CUT).encode()) for text in (value_schema_text(), transaction_schema_text())]
    at = F.when(change, F.lit(starts[0])).otherwise(F.lit(starts[1]))
    started = time.perf_counter()
    cut = read().select("topic", "value", at.alias("at"))
    payload = bytes_between("at + 1", "octet_length(value) - at - 1")
    parsed = cut.select("topic", payload.alias("payload")).select(
        F.when(change, F.from_json("payload", envelope_type(image))).alias("change"),
        F.when(~change, F.from_json("payload", PAYLOAD)).alias("boundary"),
    )
    parsed.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def clone(spark, source: str, target: str) -> None:
    spark.sql(f"CREATE TABLE delta.`{target}` SHALLOW CLONE delta.`{source}`")


class Phases(logging.Handler):
    """Seconds per phase of a merge (parse, align, merge, hold), from the merge's own log
    records (`spark_jobs.delta_merge._phase`)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        phase = getattr(record, "phase", None)
        if phase:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + float(getattr(record, "seconds", 0.0))


def tidemark_merge(spark, read: Callable[[], Any], root: str) -> tuple[float, float, dict[str, float]]:
    """Seconds for the whole batch, of them the MERGE statement's own (from the commit's
    metrics), and each phase's. The offsets reached come from the records when they carry
    them (Kafka), as in the merge job."""
    from delta.tables import DeltaTable

    from spark_jobs.delta_merge import apply_aligned
    from spark_jobs.merge.transactions import PendingStore

    phases = Phases()
    merge_log = logging.getLogger("spark_jobs.delta_merge")
    merge_log.setLevel(logging.INFO)
    merge_log.addHandler(phases)
    try:
        started = time.perf_counter()
        batch = read()
        reached = None if "offset" in batch.columns else {}
        apply_aligned(spark, batch, root, PREFIX, reached, PendingStore(spark, f"{root}/_held"), 1)
        took = time.perf_counter() - started
    finally:
        merge_log.removeHandler(phases)
    last = DeltaTable.forPath(spark, f"{root}/bench.t").history(1).collect()[0]
    return took, int(last.operationMetrics["executionTimeMs"]) / 1000, phases.seconds


def bare_merge(spark, deduped: str, path: str) -> float:
    from delta.tables import DeltaTable

    started = time.perf_counter()
    source = spark.read.parquet(deduped)
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s._cdc_op = 'd'")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll(condition="s._cdc_op <> 'd'")
        .execute()
    )
    return time.perf_counter() - started


def prepared(spark, work: Path, size: int, count: int, txn_size: int) -> tuple[str, str, str]:
    """The base table, the events and their deduplicated form (kept under `work` and
    reused when `--work` names a folder that has them)."""
    base = str(work / f"base-{size}")
    records, deduped = (
        str(work / f"events-{count}-{size}-{txn_size}"),
        str(work / f"dedup-{count}-{size}-{txn_size}"),
    )
    if not Path(base, "_delta_log").is_dir():
        base_table(spark, base, size)
    if not Path(records, "_SUCCESS").exists():
        events(spark, records, count, size, txn_size)
    if not Path(deduped, "_SUCCESS").exists():
        deduplicated(spark, records, deduped)
    return base, records, deduped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="1000000,10000000", help="table sizes, comma-separated")
    parser.add_argument("--txn-size", type=int, default=5, help="events per source transaction")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each merge; the best counts")
    parser.add_argument("--work", help="keep prepared tables and events here (reused by later runs)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--source",
        choices=("parquet", "kafka"),
        default="parquet",
        help="where the merge reads the events: a Parquet file, or Kafka topics as the merge job does",
    )
    parser.add_argument("--bootstrap", default=os.environ.get("TIDEMARK_KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    from spark_jobs.session import build_session

    spark = build_session("bench-merge", args.master, {"spark.driver.memory": "8g"})
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="tidemark-mergebench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for size in sizes:
            print(f"preparing a {size:,}-row table and {args.events:,} events ...", flush=True)
            base, records, deduped = prepared(spark, work, size, args.events, args.txn_size)
            deduped_rows = spark.read.parquet(deduped).count()
            if args.source == "kafka":
                print(f"writing the events to Kafka at {args.bootstrap} ...", flush=True)
                read = to_kafka(spark, records, args.bootstrap, [TOPIC, f"{PREFIX}.transaction"])
            else:
                read = partial(spark.read.parquet, records)
            ours, ours_merge, ours_phases, bare, floor_json, plain = [], [], [], [], [], []
            # Alternating rounds on fresh clones: both merges run with a warm JVM, and the
            # best of each counts (this machine's speed drifts from minute to minute).
            shutil.rmtree(work / "run", ignore_errors=True)  # left by an interrupted run
            for n in range(args.rounds):
                ours_root, bare_path = str(work / f"run/ours-{size}-{n}"), str(work / f"run/bare-{size}-{n}")
                plain_path = str(work / f"run/plain-{size}-{n}")
                clone(spark, base, f"{ours_root}/bench.t")
                clone(spark, base, bare_path)
                clone(spark, base, plain_path)
                took, merge_part, phases = tidemark_merge(spark, read, ours_root)
                ours.append(took)
                ours_merge.append(merge_part)
                ours_phases.append(phases)
                bare.append(bare_merge(spark, deduped, bare_path))
                plain.append(straightforward_merge.merge(spark, read, plain_path, TOPIC))
                floor_json.append(json_floor(spark, read))
                print(
                    f"  round {n + 1}: Tidemark {took:.1f}s (MERGE {merge_part:.1f}s), straightforward merge "
                    f"{plain[-1]:.1f}s, bare MERGE {bare[-1]:.1f}s, JSON floor {floor_json[-1]:.1f}s",
                    flush=True,
                )
                live = (
                    spark.read.format("delta").load(f"{ours_root}/bench.t").where("NOT _cdc_deleted").count()
                )
                floor = spark.read.format("delta").load(bare_path).count()
                if live != floor:
                    print(f"  WARNING: the merged table has {live:,} live rows, the bare MERGE's {floor:,}")
                if not straightforward_merge.same_table(spark, f"{ours_root}/bench.t", plain_path):
                    print("  WARNING: Tidemark's table and the straightforward merge's differ")
                shutil.rmtree(work / "run", ignore_errors=True)
            best = min(range(args.rounds), key=lambda i: ours[i])
            results.append(
                (
                    size,
                    ours[best],
                    ours_merge[best],
                    min(bare),
                    deduped_rows,
                    ours_phases[best],
                    min(floor_json),
                    min(plain),
                )
            )
    finally:
        spark.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{args.events:,} events (30% inserts, 60% updates, 10% deletes) in transactions of {args.txn_size}, "
        f"with BEGIN/END records; one batch read from {args.source}; {args.master}; best of {args.rounds}"
    )
    print(
        f"{'table rows':>12s} {'keys':>9s} {'Tidemark s':>11s} {'events/s':>10s} {'parse s':>8s} "
        f"{'align s':>8s} {'its MERGE s':>12s} {'bare MERGE s':>13s} {'ratio':>6s} {'MERGE ratio':>12s} "
        f"{'JSON floor s':>13s} {'lowest ratio':>13s} {'plain s':>8s} {'vs plain':>9s}"
    )
    for size, ours, merge_part, bare, keys, phases, floor, plain_s in results:
        print(
            f"{size:12,d} {keys:9,d} {ours:11.1f} {args.events / ours:10,.0f} {phases.get('parse', 0):8.1f} "
            f"{phases.get('align', 0):8.1f} {merge_part:12.1f} {bare:13.1f} {ours / bare:6.2f}x "
            f"{merge_part / bare:11.2f}x {floor:13.1f} {(bare + floor) / bare:12.2f}x {plain_s:8.1f} "
            f"{ours / plain_s:8.2f}x"
        )
    if len(results) > 1:
        (small, ours_small, _, bare_small, *_), (large, ours_large, _, bare_large, *_) = (
            results[0],
            results[-1],
        )
        print(
            f"batch time from {small:,} to {large:,} rows: Tidemark x{ours_large / ours_small:.2f}, "
            f"bare MERGE x{bare_large / bare_small:.2f}"
        )
    print(
        "targets (issue 22): at most 1.0x the straightforward merge (plain: bench/straightforward_merge.py, "
        "same records); batch time grows less than 1.5x from 1M to 10M rows"
    )
    print(
        "(parse: cut, parse and cache the records; align: transaction completeness; its MERGE: the "
        "guarded MERGE statement alone, from the commit's executionTimeMs; JSON floor: reading the records "
        "and parsing every payload (cut out at its schema's known length) into the merge's types, nothing else; "
        "lowest ratio: (bare MERGE + JSON floor) / bare MERGE, what even a merge that cost nothing but "
        "the bare MERGE and that reading and parsing would reach)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
