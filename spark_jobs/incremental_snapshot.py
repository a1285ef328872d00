"""Parallel chunk reader for incremental snapshots: many DBLog windows at once, on Spark.

    spark-submit spark_jobs/incremental_snapshot.py --config connector.yaml \\
        --signal SIGNAL_ID --staging /path/or/s3a://bucket/prefix [--parallelism 8]
    python -m spark_jobs.incremental_snapshot ... --remote sc://HOST:15002

With `--remote` (or TIDEMARK_SPARK_REMOTE) the job runs on a Spark Connect server that
outlives it (`spark_jobs/connect_server.py`) and starts no JVM of its own.

The snapshot is the one the execute-snapshot signal SIGNAL_ID asked for, with
`"tidemark.reader": "spark"`: the job reads that signal back from the signal table and
validates it exactly as the streamer does (tables in the capture list, the filter
grammar, the surrogate key). While the JVM starts, the driver asks the database for every
table's chunk boundaries and saves the plan next to the staged files, so a second run of
the same snapshot reads the same windows and skips those the streamer already released
(read from the connector's committed offsets).

Windows are read in batches: the driver writes the batch's low watermarks, Spark's JDBC
reader reads the batch with one partition per window (rows decoded in the JVM) and writes
each window's rows as Parquet in a folder of its own under `--staging` (as read for a
stream release; for a lakehouse release as the Delta merge would land their events,
`spark_jobs/staged_types.py`), and the driver
writes the high watermarks naming those folders. Tables with a column Spark cannot give
back exactly (spatial types, DECIMAL wider than 38 digits) are read by Python on the
executors instead, one window at a time per task (`--read-with` forces either reader).
The streamer does the rest in log order (DESIGN.md §4): dedup against changes inside each
window, then release as `op=r` events or, in lakehouse mode, as release records for the
Delta merge.

Executors need the project's Python packages (local mode: the same virtualenv) and the
password in the environment variable the connector names.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from itertools import groupby, pairwise
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig, load_config
from cdc_core.connector import SourceSession
from cdc_core.connectors.registry import connector_of
from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId
from cdc_core.signals.actions import ExecuteSnapshot, parse_signal
from cdc_core.snapshot.chunks import ChunkPlan
from cdc_core.snapshot.context import SnapshotContext
from cdc_core.snapshot.keycodec import encode_key
from cdc_core.snapshot.requests import Shaping, requested_tables
from spark_jobs.connect_server import REMOTE_ENV
from spark_jobs.python_reader import PythonReads
from spark_jobs.snapshot_jvm_batches import JvmBatches
from spark_jobs.snapshot_plan import check_unplanned, load_plan, plan_uri, save_plan
from spark_jobs.staged_rules import staged_expressions

log = logging.getLogger(__name__)


def read_signal(session: SourceSession, signal_table: str, signal_id: str) -> ExecuteSnapshot:
    raw = session.read_signal(signal_id)
    if raw is None:
        raise TidemarkError(f"no signal {signal_id!r} in {signal_table}")
    action = parse_signal(raw)
    if not isinstance(action, ExecuteSnapshot) or action.reader != "spark":
        raise TidemarkError(
            f'signal {signal_id!r} is not an execute-snapshot with "tidemark.reader": "spark"'
        )
    return action


def plan_windows(
    config: ConnectorConfig, source: SourceSession, action: ExecuteSnapshot, chunk_size: int, shaping: Shaping
) -> list[dict[str, Any]]:
    """Every window of every table (of every partition of a table, for a sharded source):
    the same validation as the streamer, then each table's and partition's boundaries from
    the database (`ChunkSource.boundaries`), all before any window opens."""
    windows: list[dict[str, Any]] = []
    for requested in requested_tables(config, source, action, shaping):
        table, key, text = requested.table, requested.key, requested.condition_text
        for partition in source.partitions(requested.schema):
            plan = ChunkPlan(requested.schema, key, requested.condition, partition)
            bounds: list[Any] = [
                None,
                *source.boundaries(plan, chunk_size),
                None,
            ]  # the last window runs to the end
            spans = list(pairwise(bounds))
            for index, (lo, hi) in enumerate(spans):
                windows.append(
                    {
                        "table": str(table),
                        **({"partition": partition} if partition is not None else {}),
                        "key": list(key),
                        "condition": text,
                        "lo": encode_key(lo),
                        "hi": encode_key(hi),
                        "index": index,
                        "of": len(spans),
                        "exact": source.exact_key_order(plan),
                    }
                )
    return windows


def done_windows(config: ConnectorConfig, signal_id: str) -> dict[tuple[str, str | None], set[int]]:
    """Windows of this snapshot the streamer has already released (committed offsets)."""
    from cdc_core.pipeline.state import StateLayout, open_offset_store

    store = open_offset_store(config, StateLayout(config))
    try:
        offset = store.load() or {}
    finally:
        store.close()
    snapshot = SnapshotContext.from_json(offset.get("snapshot")).find(signal_id)
    if snapshot is None:
        return {}
    return {(t.table, t.partition): set(t.done_windows) for t in snapshot.tables}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the connector's YAML file")
    parser.add_argument(
        "--signal",
        required=True,
        help="id of the execute-snapshot signal (a MongoDB `_id` that is not a string: its Extended JSON, "
        'e.g. \'{"$oid": "..."}\', as `tidemark status` shows it)',
    )
    parser.add_argument("--staging", required=True, help="where windows are staged: a path, file://, s3a://")
    parser.add_argument("--parallelism", type=int, default=4, help="windows read at once")
    parser.add_argument(
        "--windows-per-batch",
        type=int,
        help="windows open at once per table with the JDBC reader (default: 4 x parallelism)",
    )
    parser.add_argument(
        "--read-with",
        choices=("auto", "jdbc", "python"),
        default="auto",
        help="Spark's JDBC reader, or Python on the executors; auto: JDBC where every column reads exactly",
    )
    parser.add_argument("--master", help="Spark master (default: spark-submit's, or local[*])")
    parser.add_argument(
        "--remote",
        default=os.environ.get(REMOTE_ENV) or None,
        help=f"a Spark Connect server to run on (sc://HOST:PORT; default: ${REMOTE_ENV}) instead of a Spark of its own",
    )
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session, remote_session

    config = load_config(args.config)
    signal_table = config.get("signal.data.collection")
    if not signal_table:
        raise SystemExit("the connector has no signal.data.collection: incremental snapshots need it")
    # The JVM (about 5 s) starts, or the remote session opens, while the signal is read and
    # the database plans the windows; where every window is read by Python, the reader's
    # executor tasks start meanwhile too (`spark_jobs/python_reader.py`).
    began = time.monotonic()
    start = (
        partial(remote_session, args.remote)
        if args.remote
        else partial(build_session, "tidemark-incremental-snapshot", args.master)
    )
    ready: list[float] = []

    def start_spark() -> Any:
        spark = start()
        ready.append(time.monotonic())
        return spark

    runner = ThreadPoolExecutor(1)
    starting = runner.submit(start_spark)
    staging = args.staging if "://" in args.staging else os.path.abspath(args.staging)
    connector = connector_of(config)
    jvm_reader = connector.spark_reader(config)
    driver = connector.open_session(config)
    early: PythonReads | None = None
    try:
        action = read_signal(driver, signal_table, args.signal)
        # From here on the signal is named by its one text (a MongoDB signal whose `_id` is
        # not a string may have been given in another Extended JSON form): the snapshot
        # state, the watermarks and the plan name it so.
        args.signal = action.id
        shaping = Shaping(config, driver.type_mapper())
        lakehouse = action.release == "lakehouse"
        if jvm_reader is None or args.read_with == "python":
            early = PythonReads(
                runner, starting, args.parallelism, config, args.signal, staging, shaping, lakehouse
            )
        chunk_size = action.chunk_size or config.get("incremental.snapshot.chunk.size")
        plan_path = plan_uri(staging, args.signal)
        windows = load_plan(plan_path, args.signal)
        done = done_windows(config, args.signal)
        if windows is None:
            check_unplanned(plan_path, args.signal, done)
            started = time.monotonic()
            windows = plan_windows(config, driver, action, chunk_size, shaping)
            save_plan(plan_path, args.signal, windows)
            log.info("planned %d windows in %.1fs", len(windows), time.monotonic() - started)
        todo = [w for w in windows if w["index"] not in done.get((w["table"], w.get("partition")), set())]
        if early is not None:
            why = (
                "--read-with python" if jvm_reader else f"the {connector.name} connector has no Spark reader"
            )
            results = read_by_python(early, todo, why)
        else:
            starting.result()
            log.info("Spark ready %.1fs after the job's start", ready[0] - began)
            results = jvm_and_python_reads(
                starting, runner, todo, args, driver, jvm_reader, shaping, lakehouse, config, staging
            )
    except BaseException as e:
        if early is not None:
            early.abort(f"the driver failed: {type(e).__name__}")
        raise
    finally:
        driver.close()
        runner.shutdown(wait=False)
    if early is not None and ready:
        log.info("Spark ready %.1fs after the job's start", ready[0] - began)
    log.info("read %d windows; done %.1fs after the job's start", len(results), time.monotonic() - began)
    summary = {
        "signal": args.signal,
        "windows_planned": len(windows),
        "windows_skipped": len(windows) - len(todo),
        "windows_written": len(results),
        "rows_staged": sum(r["rows"] for r in results),
    }
    print(json.dumps(summary))
    return 0


def read_by_python(reads: PythonReads, todo: list[dict[str, Any]], why: str) -> list[dict[str, Any]]:
    """Every window handed to the Python reader's tasks, which started during the plan."""
    for table in dict.fromkeys(w["table"] for w in todo):
        log.info("reading %s with Python on the executors: %s", table, why)
    return reads.hand_over(todo)


def jvm_and_python_reads(
    starting: Future,
    runner: ThreadPoolExecutor,
    todo: list[dict[str, Any]],
    args: argparse.Namespace,
    driver: SourceSession,
    jvm_reader: Any,
    shaping: Shaping,
    lakehouse: bool,
    config: ConnectorConfig,
    staging: str,
) -> list[dict[str, Any]]:
    """Each table's windows by Spark's JDBC reader where it reads every column exactly,
    the rest by the Python reader once those are done. `starting`: the Spark session,
    ready."""
    spark = starting.result()
    for name, value in jvm_reader.sql_conf.items():
        spark.conf.set(name, value)
    per_batch = max(1, args.windows_per_batch or 4 * args.parallelism)
    read_with = args.read_with
    if not args.remote and not spark_can_write(spark, staging):  # a server's classes are its own
        if read_with == "jdbc":
            raise TidemarkError(f"Spark cannot write to {staging}: {S3A_HINT}")
        log.warning("Spark cannot write to %s (%s); windows are read by Python", staging, S3A_HINT)
        read_with = "python"
    results: list[dict[str, Any]] = []
    by_python: list[dict[str, Any]] = []
    for (table, partition), group in groupby(todo, key=lambda w: (w["table"], w.get("partition"))):
        table_windows = list(group)
        form = shaping.form(driver.table_schema(TableId.parse(table)), table_windows[0]["key"])
        unreadable = jvm_reader.unreadable(form, lakehouse) + staged_expressions(form)[1]
        if read_with == "jdbc" and unreadable:
            raise TidemarkError(f"Spark's reader cannot read {table} exactly: {', '.join(unreadable)}")
        if read_with == "python" or unreadable:
            if unreadable:
                log.info("reading %s with Python on the executors: %s", table, ", ".join(unreadable))
            by_python.extend(table_windows)
            continue
        jobs = JvmBatches(spark, driver, jvm_reader, form, args.signal, staging, lakehouse, partition)
        results += jobs.run(table_windows, per_batch)
    if by_python:
        tasks = min(args.parallelism, len(by_python))
        reads = PythonReads(runner, starting, tasks, config, args.signal, staging, shaping, lakehouse)
        results += reads.hand_over(by_python)
    return results


S3A_HINT = "s3a:// needs hadoop-aws on Spark's classpath (spark-submit --packages org.apache.hadoop:hadoop-aws:VERSION)"


def spark_can_write(spark: Any, staging: str) -> bool:
    """Whether Spark has a filesystem for the staging location (pyarrow, which the Python
    reader writes with, reaches S3 on its own)."""
    if not staging.startswith("s3a://"):
        return True
    try:
        spark._jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem")
    except Exception:  # py4j's error for a missing class
        return False
    return True


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(main())
