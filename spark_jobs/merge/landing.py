"""One table's part of a batch, planned before any table is merged and landed on its own
(`spark_jobs.merge.table_pool` runs several at once, each in a session of its own)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_jobs.merge import added_columns, promoted, rekeying, truncation
from spark_jobs.merge.changes import estimated_bytes, newest_per_key
from spark_jobs.merge.delta_apply import (
    commit_settings,
    create_table,
    enable_name_mapping,
    enable_type_widening,
    live_rows,
    merge_changes,
    needs_name_mapping,
    stored_properties,
)
from spark_jobs.merge.options import TableOptions
from spark_jobs.merge.scd2 import merge_history, versioned
from spark_jobs.merge.segments import Segment, first_order, segments


@dataclass(frozen=True)
class TablePlan:
    """What landing a table needs, all of it settled (and checked) while planning."""

    name: str
    path: str
    rows: DataFrame
    keys: tuple[str, ...]  # empty: the batch holds truncates of the table and no row
    table: TableOptions
    stored: Any  # the Delta table's schema, None before its first merge
    widen: bool  # a column's type widens: type widening is turned on first
    events: int  # at most this many rows in the batch (events and released rows)
    metadata: dict[str, Any] = field(default_factory=dict)  # the commit's `tidemark` metadata
    truncated: tuple[truncation.Mark, ...] = ()  # the batch's truncates of the table, oldest first
    fills: dict[str, Any] = field(default_factory=dict)  # columns the batch adds, with their defaults
    # More than one: the table's key changed within the batch; rows carry `key_sets.KEY_SET`
    key_sets: tuple[tuple[str, ...], ...] = ()
    documents: tuple[str, ...] = ()  # a document source's document column (`records.DOCUMENT_FIELDS`)


def ending_plan(
    session: SparkSession,
    name: str,
    path: str,
    table: TableOptions,
    stored: Any,
    topic: str,
    marks: list[truncation.Mark],
) -> TablePlan:
    """A stored table with no event in the batch, whose rows `marks` end (a drop's:
    `spark_jobs.merge.dropped_tables`), as a batch of truncates alone lands them."""
    empty = session.read.format("delta").load(path).limit(0)
    return TablePlan(name, path, empty, (), table, stored, False, 0, {"topic": topic}, tuple(marks))


def land(session: SparkSession, plan: TablePlan, phase: Any) -> None:
    """MERGE the plan's rows into its table, by each of its keys in turn when the key
    changed within the batch (`segments`); `phase(name, started, message, *args)` logs
    the time taken. Only the batch's last commit carries its metadata."""
    started = time.monotonic()
    table = plan.table
    if plan.stored is not None and table.promoted:
        promoted.fill_new(session, plan.path, plan.stored, table.promoted)
    if plan.widen:
        enable_type_widening(session, plan.path)
    if plan.stored is not None and needs_name_mapping(plan.rows.schema, plan.stored):
        enable_name_mapping(session, plan.path)
    if plan.fills:  # the rows before an ADD COLUMN ... DEFAULT: see spark_jobs.merge.added_columns
        added_columns.fill_stored(session, plan.path, plan.fills)
    layout = {"partition_by": table.partition_by, "cluster_by": table.cluster_by}
    commit = {"tidemark": plan.metadata}
    properties = stored_properties(session, plan.path) if plan.stored is not None else {}
    if not plan.keys:  # truncates alone: landed by `_truncated`
        _truncated(session, plan, commit, layout, properties)
        phase("merge", started, "%s truncated", plan.name)
        return
    parts = segments(plan.rows, plan.key_sets) if plan.key_sets else [Segment(plan.keys, plan.rows)]
    key = None if table.scd2 else rekeying.stored_key(properties)
    for n, part in enumerate(parts):
        if n:
            properties = stored_properties(session, plan.path)
            plan = replace(plan, stored=session.read.format("delta").load(plan.path).schema)
        this = replace(plan, rows=part.rows, keys=part.keys)
        key = _merged(
            session, this, key, part.start, commit if n == len(parts) - 1 else None, layout, properties
        )
    phase("merge", started, "%s merged", plan.name)


def _merged(
    session: SparkSession,
    plan: TablePlan,
    key: rekeying.TableKey | None,
    start: tuple[int, ...] | None,
    commit: dict[str, Any] | None,
    layout: dict[str, Any],
    properties: dict[str, str],
) -> rekeying.TableKey | None:
    """One segment MERGEd by its key (`plan.keys`) into a table MERGEd by `key` so far
    (None: not known, or an SCD2 table, which keeps every version and needs no key of its
    own); returns the table's key after it. A segment older than the table's key (`late`:
    see `rekeying`) inserts no tombstone."""
    table = plan.table
    late, kept = False, None
    if not table.scd2 and key is None:
        kept = rekeying.TableKey(plan.keys)
    elif key is not None:
        if start is None and (key.since is not None or not key.same(plan.keys)):
            start = first_order(plan.rows)
        late = _before(start, key.since)
        if not late and not key.same(plan.keys):
            rekeying.single_under(session, plan.path, key.columns, plan.keys)
            kept = rekeying.TableKey(plan.keys, start)
    if kept is not None and plan.stored is not None:
        rekeying.keep(session, plan.path, kept)
    rows, whole = _truncated(session, plan, commit, layout, properties)
    if table.scd2:
        merge_history(session, plan.path, rows, plan.keys, commit, **layout)
    else:
        merge_changes(
            session,
            plan.path,
            newest_per_key(rows, plan.keys),
            plan.keys,
            commit,
            **layout,
            broadcast=not whole and estimated_bytes(plan.rows.schema, plan.events) <= table.broadcast_bytes,
            documents=plan.documents,
            derived={p.field: promoted.DOCUMENT_COLUMN for p in table.promoted},
            tombstones=not late,
        )
    if kept is not None and plan.stored is None:  # created by this MERGE
        with commit_settings(session, commit):
            rekeying.keep(session, plan.path, kept)
    return kept or key


def _before(start: tuple[int, ...] | None, since: tuple[int, ...] | None) -> bool:
    """Whether rows from `start` are older than a key that holds from `since`."""
    if start is None or since is None or None in start or None in since:
        return False
    return start < since


def _truncated(
    session: SparkSession,
    plan: TablePlan,
    commit: dict[str, Any] | None,
    layout: dict[str, Any],
    properties: dict[str, str],
) -> tuple[DataFrame, bool]:
    """The plan's rows with the ends of its table's truncates (`spark_jobs.merge.truncation`),
    the table's mark kept first; and whether they hold the table's live rows (a truncate new
    to the table ends them in the batch's MERGE). A batch of truncates alone, which has no
    key to MERGE by, ends the stored rows in commits of their own, the last carrying the
    batch's metadata."""
    stored = truncation.stored_mark(properties)
    new = [m for m in plan.truncated if stored is None or m > stored]
    if new and plan.stored is None:
        empty = plan.rows.limit(0)
        create_table(session, plan.path, versioned(empty) if plan.table.scd2 else empty, **layout)
    if new:
        truncation.keep_mark(session, plan.path, new[-1])
    if not plan.keys:
        for n, mark in enumerate(new if plan.stored is not None else ()):
            with commit_settings(session, commit if n == len(new) - 1 else None):
                truncation.end_stored(session, plan.path, mark, plan.table.scd2)
        return plan.rows, False
    marks = sorted({*plan.truncated, *([stored] if stored else [])})
    if not marks:
        return plan.rows, False
    live = live_rows(session, plan.path, bookkeeping=True) if new and plan.stored is not None else None
    return truncation.with_ends(plan.rows, marks, plan.keys, live), live is not None
