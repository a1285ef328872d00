"""A snapshot window on the Spark chunk job's side: its low and high watermarks, where it
is staged, and the Python reader that executors run for tables Spark's JDBC reader cannot
read exactly (`run_windows`): read with the connector's session, shape, stage, close.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connector import SourceSession
from cdc_core.connectors.registry import connector_of
from cdc_core.schema.model import TableId
from cdc_core.signals.actions import WINDOW_CLOSE, WINDOW_OPEN
from cdc_core.signals.conditions import condition_fields, parse_condition
from cdc_core.snapshot.chunks import ChunkPlan
from cdc_core.snapshot.keycodec import decode_key
from cdc_core.snapshot.requests import Shaping
from cdc_core.snapshot.staged_form import StagedForm
from spark_jobs import staged_types
from spark_jobs.snapshot_plan import signal_folder


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
    `spark_jobs/staged_types.py`), not as read. Each result says how long its window took
    to read (from its low watermark to its rows in hand) and to stage (the file written
    and its high watermark), for the job's log."""
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
            began = time.monotonic()
            window_id = open_window(source, signal_id, w)
            lo, hi = decode_key(w["lo"]), decode_key(w["hi"])
            folder = table_staging(staging, signal_id, table, partition)
            uri = f"{folder}/{w['index']:06d}-{window_id}.parquet"
            in_event_form = read_events(source, form, plan, lo, hi) if lakehouse else None
            if in_event_form is not None:
                read = time.monotonic()
                count = staged_types.write_window_events(uri, form, in_event_form)
            else:
                rows = [form.shape(row) for row in source.read_chunk(plan, lo, hi)]
                read = time.monotonic()
                staged_types.write_window(uri, form, rows, lakehouse)
                count = len(rows)
            close_window(source, signal_id, window_id, form, count, uri, partition)
            seconds = {"read": read - began, "stage": time.monotonic() - read}
            results.append(
                {"table": w["table"], "index": w["index"], "rows": count, "staged": uri, **seconds}
            )
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
    return f"{signal_folder(staging, signal_id)}/{table.database}.{table.table}{part}"
