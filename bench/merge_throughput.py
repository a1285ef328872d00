"""Delta merge throughput against a bare Delta MERGE, on tables of two sizes.

1,000,000 change events (30% inserts, 60% updates, 10% deletes, as the streamer writes
them: JSON with the Connect schema) are merged in one batch into a Delta table holding
1,000,000 and then 10,000,000 rows (each a shallow clone of a prepared table, so every
run starts equal), after untimed rounds that warm the JVM (`--warmup`). The events come
in source transactions (5 events each by default) with their BEGIN and END records, as
the streamer writes them. In one run, for each size: seconds and events/s of the
Tidemark merge (parsing, transaction alignment, newest per key, MERGE guarded by order
key, tombstones) and of its MERGE statement alone, next to a bare Delta MERGE of the same
batch already parsed and deduplicated (update, delete, insert: the floor), as ratios; then how batch time grows from the small table to the
large one. Also the JSON floor: reading the records and parsing every payload into the
merge's types, each cut out at its schema's known length, and nothing else. Every merge
of these records has to read and parse them, so the bare MERGE plus that floor is the
least any of them could take here; the benchmark prints that lowest possible ratio
beside the one reached. Also Tidemark on the same events as the streamer writes them
with `value.converter.schemas.enable: false` (each value its payload alone, naming its
schema by reference; read from Parquet), and from the embedded event log in its Parquet
form (`sink.local.format: parquet`) and in its JSON-lines form (`sink.local.format:
json`), each written by the log's own writer and read between two of its cuts, their
tables checked equal. Beside the best of each merge's rounds, the median over rounds of
each round's own ratios (merges of one round run within minutes of each other, on the
machine's speed of the moment). `--source kafka` writes
the events to Kafka first and reads the batch from there, as the merge job does (the bare
MERGE still reads its prepared input).

    python -m bench merge [--events N] [--sizes 1000000,10000000] [--rounds 3] [--warmup 2]
                          [--work DIR] [--source parquet|kafka] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from functools import partial
from pathlib import Path

from bench.merge_inputs import PREFIX, TOPIC, binary_log, json_lines_log, prepared, schemaless
from bench.merge_kafka import to_kafka
from bench.merge_runs import Runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="1000000,10000000", help="table sizes, comma-separated")
    parser.add_argument("--txn-size", type=int, default=5, help="events per source transaction")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="runs of each merge; the best counts (3: this machine swings by a third from run to run)",
    )
    parser.add_argument(
        "--warmup", type=int, default=2, help="untimed rounds of every merge first, at the first size"
    )
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
    same_round: list[tuple[int, float, float, float, float]] = []
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
            loose_records = str(work / f"schemaless-{Path(records).name}")
            catalogue = schemaless(spark, records, loose_records)
            read_loose = partial(spark.read.parquet, loose_records)
            log = str(binary_log(loose_records, work / f"binary-log-{Path(records).name}"))
            lines_log = str(json_lines_log(records, work / f"json-lines-log-{Path(records).name}"))
            ours, ours_merge, ours_phases, bare, floor_json, plain, loose, binary, lines = (
                [] for _ in range(9)
            )
            runs = Runs(spark, work, base, read, read_loose, catalogue, log, lines_log, deduped)
            # Untimed rounds first: Tidemark's own code takes the JVM two or three rounds
            # of every merge to compile (48 s, 34 s, 28 s in its first rounds, the
            # straightforward merge 22 s, 20 s, 20 s), and a merge job lives on.
            for n in range(args.warmup if size == sizes[0] else 0):
                runs.once(size, f"w{n}")
                print(f"  warm-up round {n + 1} done", flush=True)
            # Alternating rounds on fresh clones: every merge runs with a warm JVM, and the
            # best of each counts (this machine's speed drifts from minute to minute).
            for n in range(args.rounds):
                took, merge_part, phases, others = runs.once(size, str(n), check=True)
                ours.append(took)
                ours_merge.append(merge_part)
                ours_phases.append(phases)
                for times, t in zip((loose, binary, lines, bare, plain, floor_json), others, strict=True):
                    times.append(t)
                print(
                    f"  round {n + 1}: Tidemark {took:.1f}s (MERGE {merge_part:.1f}s), schemaless {loose[-1]:.1f}s, "
                    f"binary log {binary[-1]:.1f}s, JSON-lines log {lines[-1]:.1f}s, "
                    "straightforward merge "
                    f"{plain[-1]:.1f}s, bare MERGE {bare[-1]:.1f}s, JSON floor {floor_json[-1]:.1f}s",
                    flush=True,
                )
            best = min(range(args.rounds), key=lambda i: ours[i])
            # Each round's merges run minutes apart at most, so a round's own ratio shares
            # the machine's speed of the moment, which best-of-rounds figures taken from
            # different rounds do not (this machine's speed swings by a third and more).
            same_round.append(
                (size, paired(ours, plain), paired(binary, bare), paired(loose, plain), paired(lines, plain))
            )
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
                    min(loose),
                    min(binary),
                    min(lines),
                )
            )
    finally:
        spark.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{args.events:,} events (30% inserts, 60% updates, 10% deletes) in transactions of {args.txn_size}, "
        f"with BEGIN/END records; one batch read from {args.source}; {args.master}; best of {args.rounds}"
        f" after {args.warmup} untimed rounds of every merge"
    )
    print(
        f"{'table rows':>12s} {'keys':>9s} {'Tidemark s':>11s} {'events/s':>10s} {'parse s':>8s} "
        f"{'align s':>8s} {'its MERGE s':>12s} {'bare MERGE s':>13s} {'ratio':>6s} {'MERGE ratio':>12s} "
        f"{'JSON floor s':>13s} {'lowest ratio':>13s} {'plain s':>8s} {'vs plain':>9s} "
        f"{'schemaless s':>13s} {'ratio':>6s} {'vs plain':>9s} {'binary s':>9s} {'ratio':>6s} {'vs plain':>9s} "
        f"{'JSON lines s':>13s} {'ratio':>6s} {'vs plain':>9s}"
    )
    for size, ours, merge_part, bare, keys, phases, floor, plain_s, loose_s, binary_s, lines_s in results:
        print(
            f"{size:12,d} {keys:9,d} {ours:11.1f} {args.events / ours:10,.0f} {phases.get('parse', 0):8.1f} "
            f"{phases.get('align', 0):8.1f} {merge_part:12.1f} {bare:13.1f} {ours / bare:6.2f}x "
            f"{merge_part / bare:11.2f}x {floor:13.1f} {(bare + floor) / bare:12.2f}x {plain_s:8.1f} "
            f"{ours / plain_s:8.2f}x {loose_s:13.1f} {loose_s / bare:5.2f}x {loose_s / plain_s:8.2f}x "
            f"{binary_s:9.1f} {binary_s / bare:5.2f}x {binary_s / plain_s:8.2f}x "
            f"{lines_s:13.1f} {lines_s / bare:5.2f}x {lines_s / plain_s:8.2f}x"
        )
    for size, json_plain, binary_bare, loose_plain, lines_plain in same_round:
        print(
            f"{size:12,d} rows, median of each round's own ratio: Tidemark {json_plain:.2f}x plain, binary "
            f"{binary_bare:.2f}x bare MERGE, schemaless {loose_plain:.2f}x plain, JSON lines {lines_plain:.2f}x plain"
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
        "same records); the binary log at most 1.5x the bare MERGE; batch time grows less than 1.5x from 1M "
        "to 10M rows"
    )
    print(
        "(parse: cut, parse and cache the records; align: transaction completeness; its MERGE: the "
        "guarded MERGE statement alone, from the commit's executionTimeMs; JSON floor: reading the records "
        "and parsing every payload (cut out at its schema's known length) into the merge's types, nothing else; "
        "lowest ratio: (bare MERGE + JSON floor) / bare MERGE, what even a merge that cost nothing but "
        "the bare MERGE and that reading and parsing would reach; schemaless: Tidemark on the same events "
        "as the streamer writes them with value.converter.schemas.enable false, each naming its schema; "
        "binary: Tidemark on the same events in the embedded log's Parquet form, sink.local.format parquet; "
        "JSON lines: the same in its JSON-lines form with their schemas, sink.local.format json, read between "
        "two of its cuts as the merge job reads it)"
    )
    return 0


def paired(ours: list[float], theirs: list[float]) -> float:
    """The median over rounds of the ratio of two merges timed in the same round."""
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


if __name__ == "__main__":
    sys.exit(main())
