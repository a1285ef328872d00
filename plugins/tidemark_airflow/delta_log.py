"""The last commit of a Delta table, read straight from its `_delta_log` (no Spark): what
the status page and the Asset events show about each table's last merge."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any


def last_commit(table: str | Path) -> dict[str, Any] | None:
    """Version, time, operation, row metrics and the source position the merge recorded
    (its user metadata) of the table's newest commit; None for a missing table."""
    log = Path(table) / "_delta_log"
    commits = sorted(log.glob("[0-9]*.json")) if log.is_dir() else []
    if not commits:
        return None
    newest = commits[-1]
    info: dict[str, Any] = {}
    for line in newest.read_text().splitlines():
        entry = json.loads(line)
        if "commitInfo" in entry:
            info = entry["commitInfo"]
            break
    metadata = info.get("userMetadata")
    with contextlib.suppress(ValueError):
        metadata = json.loads(metadata) if metadata else None
    metrics = info.get("operationMetrics") or {}
    return {
        "version": int(newest.stem),
        "timestamp_ms": info.get("timestamp"),
        "operation": info.get("operation"),
        "rows_inserted": metrics.get("numTargetRowsInserted"),
        "rows_updated": metrics.get("numTargetRowsUpdated"),
        "source_position": metadata,
    }
