"""One table's part of a batch, planned before any table is merged and landed on its own
(`spark_jobs.merge.table_pool` runs several at once, each in a session of its own)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.merge import promoted
from spark_jobs.merge.changes import estimated_bytes, newest_per_key
from spark_jobs.merge.delta_apply import (
    enable_name_mapping,
    enable_type_widening,
    merge_changes,
    needs_name_mapping,
)
from spark_jobs.merge.options import TableOptions
from spark_jobs.merge.scd2 import merge_history


@dataclass(frozen=True)
class TablePlan:
    """What landing a table needs, all of it settled (and checked) while planning."""

    name: str
    path: str
    rows: DataFrame
    keys: tuple[str, ...]
    table: TableOptions
    stored: Any  # the Delta table's schema, None before its first merge
    widen: bool  # a column's type widens: type widening is turned on first
    events: int  # at most this many rows in the batch (events and released rows)
    metadata: dict[str, Any] = field(default_factory=dict)  # the commit's `tidemark` metadata


def land(session: SparkSession, plan: TablePlan, phase: Any) -> None:
    """MERGE the plan's rows into its table; `phase(name, started, message, *args)` logs
    the time taken."""
    started = time.monotonic()
    table = plan.table
    if plan.stored is not None and table.promoted:
        promoted.fill_new(session, plan.path, plan.stored, table.promoted)
    if plan.widen:
        enable_type_widening(session, plan.path)
    if plan.stored is not None and needs_name_mapping(plan.rows.schema, plan.stored):
        enable_name_mapping(session, plan.path)
    layout = {"partition_by": table.partition_by, "cluster_by": table.cluster_by}
    commit = {"tidemark": plan.metadata}
    if table.scd2:
        merge_history(session, plan.path, plan.rows, plan.keys, commit, **layout)
    else:
        merge_changes(
            session,
            plan.path,
            newest_per_key(plan.rows, plan.keys),
            plan.keys,
            commit,
            **layout,
            broadcast=estimated_bytes(plan.rows.schema, plan.events) <= table.broadcast_bytes,
            derived={p.field: promoted.DOCUMENT_COLUMN for p in table.promoted},
        )
    phase("merge", started, "%s merged", plan.name)
