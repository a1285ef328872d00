"""The value of a lakehouse release record (`<prefix>.snapshot_releases`), which the Delta
merge reads (`spark_jobs/merge/releases.py`)."""

from __future__ import annotations

from typing import Any

from cdc_core.source import SnapshotRelease, TypeMapper


def release_payload(item: SnapshotRelease, types: TypeMapper, block: dict[str, Any]) -> dict[str, Any]:
    """The staged file, the keys to leave out (in event form, with their fields' schemas),
    and the order key (`block`, the transaction block) it takes."""
    schema = item.table
    mappings = []
    for name in item.key_columns:
        position = schema.position(name)
        assert position is not None
        column = schema.columns[position]
        mappings.append((name, types.map_column(column, optional=False), types.key_event_value(column)))
    excluded = [
        {name: event_value(v) for (name, _, event_value), v in zip(mappings, key, strict=True)}
        for key in item.excluded_keys
    ]
    return {
        "snapshot": item.snapshot,
        "window": item.window,
        "data_collection": str(schema.id),
        "staged": item.staged,
        "rows": item.rows,
        "key_columns": list(item.key_columns),
        # The key fields' Connect schemas: the merge turns the excluded keys (event
        # values) into the staged columns' types with them, as it does an event's row.
        "key_schema": [mapping.schema for _, mapping, _ in mappings],
        # A document collection's staged document is its JSON text; Delta holds a VARIANT.
        "documents": schema.documents,
        "excluded_keys": excluded,
        "source": item.source,
        "ts_ms": item.ts_ms,
        "transaction": block,
    }
