"""What landing each table of a parsed batch takes (`TablePlan`), all of it settled and
checked before any table is merged: its rows (change events, released snapshot rows
under the key they were read by, change-only patches rebuilt, promoted fields), its key
or keys, the schema check, the commit's metadata, its truncates and drops, and the
defaults of columns it adds. A refused change then applies nothing of the batch."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdc_core.errors import TidemarkError
from cdc_core.filters import configured_key
from spark_jobs.merge import added_columns, document_ids, evolution, patches, promoted, truncation
from spark_jobs.merge.batches import boundary_topics
from spark_jobs.merge.changes import PATCH, merge_keys, table_changes
from spark_jobs.merge.delta_apply import table_exists
from spark_jobs.merge.dropped_tables import Drops, with_drops
from spark_jobs.merge.landing import TablePlan, ending_plan
from spark_jobs.merge.options import MergeOptions, session_broadcast_mb
from spark_jobs.merge.records import Shapes
from spark_jobs.merge.releases import release_rows, releases_by_table
from spark_jobs.merge.segments import with_windows


def table_plans(
    spark: SparkSession,
    parsed: DataFrame,
    topics: set[str],
    shapes: Shapes,
    root: str,
    prefix: str,
    reached: dict[str, Any],
    positions: dict[str, Any] | None = None,
    options: MergeOptions | None = None,
    drops: Drops | None = None,
) -> list[TablePlan]:
    """One plan per table among `topics` with events or released rows, and per stored
    table that `drops` ends."""
    # What the batch's census told spares a look through the batch for its releases and
    # truncates.
    releasing = f"{prefix}.snapshot_releases" in shapes.records or not shapes.records
    released = releases_by_table(parsed, prefix) if releasing else {}
    tables = topics - boundary_topics(prefix)
    events = {c.topic[len(prefix) + 1 :]: c for c in table_changes(parsed, tables, shapes)}
    truncating = tables if shapes.truncating is None else tables & shapes.truncating
    marks = with_drops(truncation.batch_marks(parsed, truncating), drops or {}, prefix)
    plans: list[TablePlan] = []
    broadcast_mb = session_broadcast_mb(spark)
    for name in sorted(set(events) | set(released) | set(drops or ())):
        path = f"{root.rstrip('/')}/{name}"
        changes = events.get(name)
        rows = changes.rows if changes else None
        stored = table_schema(spark, path)
        table = (options or MergeOptions()).for_table(name, broadcast_mb)
        topic = f"{prefix}.{name}"
        if changes is None and name not in released:  # dropped, no event since: its rows end
            plans += [ending_plan(spark, name, path, table, stored, topic, marks[topic])] if stored else []
            continue
        documents = (changes is not None and changes.documents) or (
            name in released and released[name][0].documents
        )
        if documents:
            document_ids.check_stored(name, stored)
        configured = configured_key(options.key_columns if options else None, name)
        keys = merge_keys(changes, released[name][0].key_columns if name in released else None, configured)
        like = rows.schema if rows is not None else stored
        key_sets = changes.key_sets if changes else ()
        if name in released:  # the snapshot rows, under the key they were read by
            windows = release_rows(spark, released[name], like)
            rows, key_sets = with_windows(changes, windows, released[name][0].key_columns)
        assert rows is not None
        ids = options.document_ids if options is not None else None
        if documents and ids is not None:
            rows = document_ids.landed(rows, ids)
        patcher = options.patches if options is not None else None
        if PATCH in rows.columns and patcher is None:
            rows = rows.drop(PATCH)  # (merged without the connector's settings: `configured`)
        elif PATCH in rows.columns:
            current = spark.read.format("delta").load(path) if stored is not None else None
            rows = patches.rebuilt(spark, rows, keys, promoted.DOCUMENT_COLUMN, current, patcher)
        if table.promoted:
            if promoted.DOCUMENT_COLUMN not in rows.columns:
                raise TidemarkError(f"{promoted.PROPERTY} names {name}, whose events carry no document")
            rows = promoted.with_columns(rows, table.promoted)
        # Every table is checked before any is merged: a refused change applies nothing.
        widen = stored is not None and evolution.check(name, stored, rows.schema)
        metadata: dict[str, Any] = {"topic": topic, "reached": reached.get(topic)}
        if positions is not None:  # order keys (epoch, rank): see spark_jobs.merge.positions
            metadata["upto"] = positions["upto"]
            metadata["first"], metadata["last"] = positions["merged"].get(name, (None, None))
        # At most one row per event of the table (and per released row, counted apart).
        events_in_batch = shapes.records.get(topic, 0) + sum(r.rows for r in released.get(name, []))
        truncated = tuple(marks.get(topic, ()))  # oldest first
        fills = added_columns.stored_fills(stored, rows.schema, shapes.of(topic))
        plan = TablePlan(
            name, path, rows, keys, table, stored, widen, events_in_batch, metadata, truncated, fills
        )
        plans.append(
            replace(plan, key_sets=key_sets, documents=(document_ids.DOCUMENT,) if documents else ())
        )
    return plans


def table_schema(spark: SparkSession, path: str) -> Any:
    return spark.read.format("delta").load(path).schema if table_exists(spark, path) else None
