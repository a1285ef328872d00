"""Parallel chunk reader for incremental snapshots: many DBLog windows at once, on Spark.

    spark-submit spark_jobs/incremental_snapshot.py --config connector.yaml \\
        --signal SIGNAL_ID --staging /path/or/s3a://bucket/prefix [--parallelism 8]

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
import re
import sys
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import groupby, pairwise
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig, load_config
from cdc_core.connector import SourceSession, SparkWindowReader
from cdc_core.connectors.registry import connector_of
from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId
from cdc_core.signals.actions import WINDOW_CLOSE, WINDOW_OPEN, ExecuteSnapshot, parse_signal
from cdc_core.signals.conditions import condition_fields, parse_condition
from cdc_core.snapshot.chunks import ChunkPlan
from cdc_core.snapshot.context import SnapshotContext
from cdc_core.snapshot.keycodec import decode_key, encode_key
from cdc_core.snapshot.requests import Shaping, requested_tables
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import filesystem_for
from spark_jobs import staged_types
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
    the same validation as the streamer, then boundaries from the database in one pass per
    table and partition."""
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


def open_window(source: SourceSession, signal_id: str, w: dict[str, Any]) -> str:
    """Write window `w`'s low watermark; returns the window id its high watermark names."""
    window_id = uuid.uuid4().hex[:20]
    source.write_watermark(
        WINDOW_OPEN,
        f"{window_id}-open",
        {
            "snapshot": signal_id,
            "window": window_id,
            **{k: w[k] for k in ("table", "partition", "key", "lo", "hi", "exact", "index", "of") if k in w},
        },
        w.get("partition"),
    )
    return window_id


def close_window(
    source: SourceSession,
    signal_id: str,
    window_id: str,
    form: StagedForm,
    rows: int,
    staged: str,
    partition: str | None = None,
) -> None:
    """Write a window's high watermark: the table's columns (the streamer reads the chunk
    again if they changed) and the digest of the form its rows are staged in."""
    source.write_watermark(
        WINDOW_CLOSE,
        f"{window_id}-close",
        {
            "snapshot": signal_id,
            "window": window_id,
            "columns": list(form.schema.column_names),
            "shaped": form.digest,
            "rows": rows,
            "staged": staged,
        },
        partition,
    )


def run_windows(
    windows: list[dict[str, Any]],
    config: ConnectorConfig,
    signal_id: str,
    staging: str,
    shaping: Shaping,
    lakehouse: bool = False,
) -> list[dict[str, Any]]:
    """On an executor, for tables Spark's JDBC reader cannot read exactly (or whose column
    rules it cannot apply exactly): LW, read with Python, shape, stage, HW for each window
    of this partition. `lakehouse`: staged as the Delta table holds them (see
    `spark_jobs/staged_types.py`), not as read."""
    source = connector_of(config).open_session(config)
    results = []
    try:
        forms: dict[str, StagedForm] = {}
        for w in windows:
            table = TableId.parse(w["table"])
            form = forms.get(w["table"]) or shaping.form(source.table_schema(table), w["key"])
            forms[w["table"]] = form
            schema = form.schema
            condition = parse_condition(w["condition"], condition_fields(schema)) if w["condition"] else None
            partition = w.get("partition")
            plan = ChunkPlan(schema, tuple(w["key"]), condition, partition)
            window_id = open_window(source, signal_id, w)
            lo, hi = decode_key(w["lo"]), decode_key(w["hi"])
            folder = table_staging(staging, signal_id, table, partition)
            uri = f"{folder}/{w['index']:06d}-{window_id}.parquet"
            in_event_form = read_events(source, form, plan, lo, hi) if lakehouse else None
            if in_event_form is not None:
                count = staged_types.write_window_events(uri, form, in_event_form)
            else:
                rows = [form.shape(row) for row in source.read_chunk(plan, lo, hi)]
                staged_types.write_window(uri, form, rows, lakehouse)
                count = len(rows)
            close_window(source, signal_id, window_id, form, count, uri, partition)
            results.append({"table": w["table"], "index": w["index"], "rows": count, "staged": uri})
    finally:
        source.close()
    return results


def read_events(
    source: SourceSession, form: StagedForm, plan: ChunkPlan, lo: Any, hi: Any
) -> Mapping[str, list[Any]] | None:
    """A window in event form from a session that offers it (`EventFormChunks`), when no
    column rule shapes the staged values; None: read it with `read_chunk`."""
    read = getattr(source, "read_chunk_events", None)
    if read is None or form.shaped:
        return None
    values = read(plan, lo, hi)
    if values is None or not set(form.columns) <= set(values):
        return None
    return values


def table_staging(staging: str, signal_id: str, table: TableId, partition: str | None = None) -> str:
    part = "" if partition is None else f"@{partition}"
    return f"{staging.rstrip('/')}/{signal_id}/{table.database}.{table.table}{part}"


class JvmBatches:
    """One table's windows through the connector's Spark reader, a batch at a time, two batches in
    flight: while Spark reads batch k, the driver closes batch k-1 and opens batch k+1, so
    the executors never wait for the driver's watermark writes nor idle at a batch's tail.

    A batch is every LW, then one read with a partition per window (rows decoded in the
    JVM, written as one Parquet file per partition, which Spark names by partition number:
    no partitioned write, whose sort would cost a fifth of the read), then every HW naming
    its window's file. Windows stay open for their batch's read, which the protocol allows: each
    records only its own key range. Watermarks are written from this thread only, in batch
    order; Spark jobs are submitted from a worker thread."""

    def __init__(
        self,
        spark: Any,
        source: SourceSession,
        reader: SparkWindowReader,
        form: StagedForm,
        signal_id: str,
        staging: str,
        lakehouse: bool = False,
        partition: str | None = None,
    ) -> None:
        self.spark, self.source, self.form, self.signal_id = spark, source, form, signal_id
        self.lakehouse = lakehouse  # staged as the Delta table holds them, not as read
        self.schema = form.schema
        self.columns = list(self.schema.column_names)
        self.reader = reader
        self.partition = partition
        self.staging = table_staging(staging, signal_id, self.schema.id, partition)

    def run(self, windows: list[dict[str, Any]], per_batch: int) -> list[dict[str, Any]]:
        batches = [windows[i : i + per_batch] for i in range(0, len(windows), per_batch)]
        results: list[dict[str, Any]] = []
        in_flight: list[tuple[list[dict[str, Any]], list[str], str, float, Future[None]]] = []
        with ThreadPoolExecutor(2, thread_name_prefix="spark-read") as pool:
            try:
                for batch in batches:
                    if len(in_flight) == 2:
                        results += self._close(*in_flight.pop(0))
                    began = time.monotonic()
                    window_ids = [open_window(self.source, self.signal_id, w) for w in batch]
                    base = f"{self.staging}/batch-{uuid.uuid4().hex[:12]}"
                    in_flight.append((batch, window_ids, base, began, pool.submit(self._read, batch, base)))
                while in_flight:
                    results += self._close(*in_flight.pop(0))
            except BaseException:
                for *_, future in in_flight:  # no HW for a window whose read failed or was not awaited
                    future.cancel()
                raise
        return results

    def _read(self, batch: list[dict[str, Any]], base: str) -> None:
        text = batch[0]["condition"]
        condition = parse_condition(text, condition_fields(self.schema)) if text else None
        plan = ChunkPlan(self.schema, tuple(batch[0]["key"]), condition, self.partition)
        spans = [(decode_key(w["lo"]), decode_key(w["hi"])) for w in batch]
        frame = self.reader.read(self.spark, self.form, plan, spans)
        # Only the staged columns are read (Spark prunes the others from the query), and the
        # column rules apply in the JVM before anything is written.
        shaped, unsupported = staged_expressions(self.form)
        assert not unsupported, unsupported  # such tables go to the Python reader
        staged = [shaped[c] if c in shaped else self._staged(frame, c) for c in self.form.columns]
        frame.select(*staged).write.option("maxRecordsPerFile", 0).parquet(base)

    def _staged(self, frame: Any, name: str) -> Any:
        column = self.schema.column(name)
        assert column is not None
        return self.reader.staged_column(frame, column, self.form.mappings[name], self.lakehouse)

    def _close(
        self,
        batch: list[dict[str, Any]],
        window_ids: list[str],
        base: str,
        began: float,
        reading: Future[None],
    ) -> list[dict[str, Any]]:
        reading.result()
        staged = staged_files(base)
        results = []
        for index, (w, window_id) in enumerate(zip(batch, window_ids, strict=True)):
            uri, rows = staged.get(index, (f"{base}/part-{index:05d}-empty.parquet", 0))
            if index not in staged:  # Spark writes no file for an empty partition
                staged_types.write_window(uri, self.form, [], self.lakehouse)
            close_window(self.source, self.signal_id, window_id, self.form, rows, uri, self.partition)
            results.append({"table": w["table"], "index": w["index"], "rows": rows, "staged": uri})
        log.info(
            "%s: windows %d-%d, %d rows staged in %.1fs",
            self.schema.id,
            batch[0]["index"],
            batch[-1]["index"],
            sum(r["rows"] for r in results),
            time.monotonic() - began,
        )
        return results


def staged_files(base: str) -> dict[int, tuple[str, int]]:
    """Each partition's Parquet file under `base` and its row count (from the footer).
    Spark names a task's output `part-NNNNN-...` by its partition number; a file named
    otherwise, or a second file for one partition, is an error rather than a guess."""
    import pyarrow.parquet as pq
    from pyarrow import fs

    filesystem, path = filesystem_for(base)
    staged: dict[int, tuple[str, int]] = {}
    for info in filesystem.get_file_info(fs.FileSelector(path)):
        name = info.base_name
        if info.type != fs.FileType.File or name.startswith(("_", ".")):
            continue
        match = _PART_FILE.fullmatch(name)
        if match is None or int(match[1]) in staged:
            raise TidemarkError(f"unexpected file {name} among the staged windows in {base}")
        rows = pq.read_metadata(info.path, filesystem=filesystem).num_rows
        staged[int(match[1])] = (f"{base}/{name}", rows)
    return staged


_PART_FILE = re.compile(r"part-(\d{5,})-[^/]*\.parquet")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the connector's YAML file")
    parser.add_argument("--signal", required=True, help="id of the execute-snapshot signal")
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
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session

    config = load_config(args.config)
    signal_table = config.get("signal.data.collection")
    if not signal_table:
        raise SystemExit("the connector has no signal.data.collection: incremental snapshots need it")
    staging = args.staging if "://" in args.staging else os.path.abspath(args.staging)
    connector = connector_of(config)
    jvm_reader = connector.spark_reader(config)
    driver = connector.open_session(config)
    try:
        action = read_signal(driver, signal_table, args.signal)
        shaping = Shaping(config, driver.type_mapper())
        # The JVM starts while the database plans the windows.
        starting = ThreadPoolExecutor(1).submit(build_session, "tidemark-incremental-snapshot", args.master)
        chunk_size = action.chunk_size or config.get("incremental.snapshot.chunk.size")
        plan_path = f"{staging.rstrip('/')}/{args.signal}/plan.json"
        windows = _load_plan(plan_path)
        if windows is None:
            started = time.monotonic()
            windows = plan_windows(config, driver, action, chunk_size, shaping)
            _save_plan(plan_path, windows)
            log.info("planned %d windows in %.1fs", len(windows), time.monotonic() - started)
        done = done_windows(config, args.signal)
        todo = [w for w in windows if w["index"] not in done.get((w["table"], w.get("partition")), set())]
        spark = starting.result()
        for name, value in (jvm_reader.sql_conf if jvm_reader else {}).items():
            spark.conf.set(name, value)
        per_batch = max(1, args.windows_per_batch or 4 * args.parallelism)
        read_with = args.read_with
        if not spark_can_write(spark, staging):
            if read_with == "jdbc":
                raise TidemarkError(f"Spark cannot write to {staging}: {S3A_HINT}")
            log.warning("Spark cannot write to %s (%s); windows are read by Python", staging, S3A_HINT)
            read_with = "python"
        results: list[dict[str, Any]] = []
        python_windows: list[dict[str, Any]] = []
        lakehouse = action.release == "lakehouse"
        for (table, partition), group in groupby(todo, key=lambda w: (w["table"], w.get("partition"))):
            table_windows = list(group)
            form = shaping.form(driver.table_schema(TableId.parse(table)), table_windows[0]["key"])
            if jvm_reader is None:
                unreadable = [f"the {connector.name} connector has no Spark reader"]
            else:
                unreadable = jvm_reader.unreadable(form, lakehouse) + staged_expressions(form)[1]
            if read_with == "jdbc" and unreadable:
                raise TidemarkError(f"Spark's reader cannot read {table} exactly: {', '.join(unreadable)}")
            if read_with == "python" or unreadable:
                if unreadable:
                    log.info("reading %s with Python on the executors: %s", table, ", ".join(unreadable))
                python_windows.extend(table_windows)
                continue
            assert jvm_reader is not None
            jobs = JvmBatches(spark, driver, jvm_reader, form, args.signal, staging, lakehouse, partition)
            results += jobs.run(table_windows, per_batch)
        if python_windows:
            signal_id = args.signal
            results += (
                spark.sparkContext.parallelize(
                    python_windows, max(1, min(args.parallelism, len(python_windows)))
                )
                .mapPartitions(
                    lambda part: run_windows(list(part), config, signal_id, staging, shaping, lakehouse)
                )
                .collect()
            )
    finally:
        driver.close()
    summary = {
        "signal": args.signal,
        "windows_planned": len(windows),
        "windows_skipped": len(windows) - len(todo),
        "windows_written": len(results),
        "rows_staged": sum(r["rows"] for r in results),
    }
    print(json.dumps(summary))
    return 0


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


def _load_plan(uri: str) -> list[dict[str, Any]] | None:
    filesystem, path = filesystem_for(uri)
    try:
        with filesystem.open_input_stream(path) as f:
            return json.loads(f.read())
    except (FileNotFoundError, OSError):
        return None


def _save_plan(uri: str, windows: list[dict[str, Any]]) -> None:
    filesystem, path = filesystem_for(uri)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as f:
        f.write(json.dumps(windows).encode())


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(main())
