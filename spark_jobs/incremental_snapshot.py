"""Parallel chunk reader for incremental snapshots: many DBLog windows at once, on Spark.

    spark-submit spark_jobs/incremental_snapshot.py --config connector.yaml \\
        --signal SIGNAL_ID --staging /path/or/s3a://bucket/prefix [--parallelism 8]

The snapshot is the one the execute-snapshot signal SIGNAL_ID asked for, with
`"tidemark.reader": "spark"`: the job reads that signal back from the signal table and
validates it exactly as the streamer does (tables in the capture list, the filter
grammar, the surrogate key). The driver asks the database for every table's chunk
boundaries in one pass and saves the plan next to the staged files, so a second run of
the same snapshot reads the same windows and skips those the streamer already released
(read from the connector's committed offsets). Each task, on an executor: writes a
window's low watermark, reads its rows `(lo, hi]`, stages them as Parquet under
`--staging`, and writes the high watermark naming the file. The streamer does the rest in
log order (DESIGN.md §4): dedup against changes inside each window, then release as
`op=r` events or, in lakehouse mode, as release records for the Delta merge.

Executors need the project's Python packages (local mode: the same virtualenv) and the
password in the environment variable the connector names.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from itertools import pairwise
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig, load_config
from cdc_core.connectors.mysql import server
from cdc_core.connectors.mysql.chunk_reader import MySqlChunkSource, table_name
from cdc_core.connectors.mysql.ddl import parse_create_table
from cdc_core.errors import TidemarkError
from cdc_core.filters import ColumnRules, TableFilter
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.signals.actions import (
    WINDOW_CLOSE,
    WINDOW_OPEN,
    ExecuteSnapshot,
    RawSignal,
    matching_tables,
    parse_signal,
)
from cdc_core.signals.conditions import parse_condition
from cdc_core.snapshot.chunks import ChunkPlan, snapshot_key
from cdc_core.snapshot.context import SnapshotContext
from cdc_core.snapshot.keycodec import decode_key, encode_key
from cdc_core.snapshot.staging import write_parquet


def read_signal(source: MySqlChunkSource, signal_table: str, signal_id: str) -> ExecuteSnapshot:
    with source.conn.cursor() as cur:
        cur.execute(
            f"SELECT id, type, data FROM {table_name(TableId.parse(signal_table))} WHERE id = %s",
            (signal_id,),
        )
        row = cur.fetchone()
    if row is None:
        raise TidemarkError(f"no signal {signal_id!r} in {signal_table}")
    action = parse_signal(RawSignal(row[0], row[1], row[2], "source"))
    if not isinstance(action, ExecuteSnapshot) or action.reader != "spark":
        raise TidemarkError(
            f'signal {signal_id!r} is not an execute-snapshot with "tidemark.reader": "spark"'
        )
    return action


def table_schema(source: MySqlChunkSource, table: TableId) -> TableSchema:
    return parse_create_table(
        server.show_create_table(source.conn, table.database, table.table), table.database
    )


def plan_windows(
    config: ConnectorConfig, source: MySqlChunkSource, action: ExecuteSnapshot, chunk_size: int
) -> list[dict[str, Any]]:
    """Every window of every table: the same validation as the streamer, then boundaries
    from the database in one pass per table."""
    captured = TableFilter(config)
    rules = ColumnRules(config)
    tables, problems = matching_tables(
        action.collections, [TableId(*t) for t in server.list_tables(source.conn)], captured.captures
    )
    if problems:
        raise TidemarkError("; ".join(problems))
    windows: list[dict[str, Any]] = []
    for table in tables:
        schema = table_schema(source, table)
        key = snapshot_key(schema, action.surrogate_key, rules.key_for(schema))
        text = action.condition_for(table)
        condition = parse_condition(text, schema.column_names) if text else None
        plan = ChunkPlan(schema, key, condition)
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


def done_windows(config: ConnectorConfig, signal_id: str) -> dict[str, set[int]]:
    """Windows of this snapshot the streamer has already released (committed offsets)."""
    from cdc_core.pipeline.streamer import StateLayout, open_offset_store

    store = open_offset_store(config, StateLayout(config))
    try:
        offset = store.load() or {}
    finally:
        store.close()
    snapshot = SnapshotContext.from_json(offset.get("snapshot")).find(signal_id)
    if snapshot is None:
        return {}
    return {t.table: set(t.done_windows) for t in snapshot.tables}


def run_windows(
    windows: list[dict[str, Any]], params: dict[str, Any], signal_table: str, signal_id: str, staging: str
) -> list[dict[str, Any]]:
    """On an executor: LW, read, stage, HW for each window of this partition."""
    source = MySqlChunkSource(params, signal_table)
    results = []
    try:
        schemas: dict[str, TableSchema] = {}
        for w in windows:
            table = TableId.parse(w["table"])
            schema = schemas.get(w["table"]) or table_schema(source, table)
            schemas[w["table"]] = schema
            condition = parse_condition(w["condition"], schema.column_names) if w["condition"] else None
            plan = ChunkPlan(schema, tuple(w["key"]), condition)
            window_id = uuid.uuid4().hex[:20]
            source.write_watermark(
                WINDOW_OPEN,
                f"{window_id}-open",
                {
                    "snapshot": signal_id,
                    "window": window_id,
                    **{k: w[k] for k in ("table", "key", "lo", "hi", "exact", "index", "of")},
                },
            )
            rows = source.read_chunk(plan, decode_key(w["lo"]), decode_key(w["hi"]))
            uri = f"{staging.rstrip('/')}/{signal_id}/{table.database}.{table.table}/{w['index']:06d}-{window_id}.parquet"
            write_parquet(uri, list(schema.column_names), rows)
            source.write_watermark(
                WINDOW_CLOSE,
                f"{window_id}-close",
                {
                    "snapshot": signal_id,
                    "window": window_id,
                    "columns": list(schema.column_names),
                    "rows": len(rows),
                    "staged": uri,
                },
            )
            results.append({"table": w["table"], "index": w["index"], "rows": len(rows), "staged": uri})
    finally:
        source.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the connector's YAML file")
    parser.add_argument("--signal", required=True, help="id of the execute-snapshot signal")
    parser.add_argument("--staging", required=True, help="where windows are staged: a path, file://, s3a://")
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--master", help="Spark master (default: spark-submit's, or local[*])")
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session

    config = load_config(args.config)
    signal_table = config.get("signal.data.collection")
    if not signal_table:
        raise SystemExit("the connector has no signal.data.collection: incremental snapshots need it")
    params = server.connection_params(config)
    driver = MySqlChunkSource(params, signal_table)
    try:
        action = read_signal(driver, signal_table, args.signal)
        chunk_size = action.chunk_size or config.get("incremental.snapshot.chunk.size")
        plan_path = f"{args.staging.rstrip('/')}/{args.signal}/plan.json"
        windows = _load_plan(plan_path)
        if windows is None:
            windows = plan_windows(config, driver, action, chunk_size)
            _save_plan(plan_path, windows)
    finally:
        driver.close()
    done = done_windows(config, args.signal)
    todo = [w for w in windows if w["index"] not in done.get(w["table"], set())]
    spark = build_session("tidemark-incremental-snapshot", master=args.master)
    staging, signal_id = args.staging, args.signal
    results = (
        spark.sparkContext.parallelize(todo, max(1, min(args.parallelism, len(todo) or 1)))
        .mapPartitions(lambda part: run_windows(list(part), params, signal_table, signal_id, staging))
        .collect()
    )
    summary = {
        "signal": args.signal,
        "windows_planned": len(windows),
        "windows_skipped": len(windows) - len(todo),
        "windows_written": len(results),
        "rows_staged": sum(r["rows"] for r in results),
    }
    print(json.dumps(summary))
    return 0


def _load_plan(uri: str) -> list[dict[str, Any]] | None:
    from cdc_core.snapshot.staging import filesystem_for

    filesystem, path = filesystem_for(uri)
    try:
        with filesystem.open_input_stream(path) as f:
            return json.loads(f.read())
    except (FileNotFoundError, OSError):
        return None


def _save_plan(uri: str, windows: list[dict[str, Any]]) -> None:
    from cdc_core.snapshot.staging import filesystem_for

    filesystem, path = filesystem_for(uri)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as f:
        f.write(json.dumps(windows).encode())


if __name__ == "__main__":
    sys.exit(main())
